/* The kiln C API: compile ONNX models into bundles, load bundles, run them on the GPU
 * or the CPU backend. Exported from the shared library libkiln (CMake target kiln_c,
 * build/capi/libkiln.so); every other language's binding (python/kiln/) sits on it.
 *
 *   kiln_model* model = NULL;
 *   if (kiln_model_load("model.kiln", &model) != KILN_OK) {
 *     fprintf(stderr, "%s\n", kiln_last_error());
 *     return 1;
 *   }
 *   kiln_session* session = NULL;
 *   kiln_session_create(model, KILN_DEVICE_GPU, NULL, 0, &session);
 *   kiln_tensor in = {"x", x_data, KILN_F32, 4, x_shape, KILN_DEVICE_CPU};
 *   kiln_tensor out = {"logits", y_data, KILN_F32, 2, y_shape, KILN_DEVICE_CPU};
 *   kiln_session_run(session, &in, 1, &out, 1);
 *   kiln_session_free(session);
 *   kiln_model_free(model);
 *
 * Conventions
 * - Every function that can fail returns a kiln_status; KILN_OK (0) is success. On
 *   failure kiln_last_error() returns the message (it names the file, input or option
 *   at fault) until the calling thread's next failing call; out-parameters are left
 *   untouched.
 * - Handles are opaque. A model is immutable and may be shared by threads and
 *   sessions; a session runs one call at a time (calls on one session from several
 *   threads are serialised). A session keeps its model alive: kiln_model_free may come
 *   before kiln_session_free.
 * - Strings and shape arrays returned by the API belong to the handle they came from
 *   and live as long as it does.
 * - The ABI is stable within a KILN_C_API_VERSION: functions and enum values are only
 *   added, never changed or removed.
 */
#ifndef KILN_KILN_C_H_
#define KILN_KILN_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_C_API_VERSION 1

/* Status codes; the numbers are absl::StatusCode's (and gRPC's). */
typedef enum kiln_status {
  KILN_OK = 0,
  KILN_CANCELLED = 1,
  KILN_UNKNOWN = 2,
  KILN_INVALID_ARGUMENT = 3, /* bad input: a path, an option, a tensor's name, dtype or shape */
  KILN_DEADLINE_EXCEEDED = 4,
  KILN_NOT_FOUND = 5, /* no such file */
  KILN_ALREADY_EXISTS = 6,
  KILN_PERMISSION_DENIED = 7,
  KILN_RESOURCE_EXHAUSTED = 8, /* out of (GPU) memory */
  KILN_FAILED_PRECONDITION = 9, /* no GPU, a bundle for another arch, an op without a GPU kernel */
  KILN_ABORTED = 10,
  KILN_OUT_OF_RANGE = 11,
  KILN_UNIMPLEMENTED = 12, /* an ONNX op or attribute kiln does not support */
  KILN_INTERNAL = 13,      /* a bug in kiln: please report it with the message */
  KILN_UNAVAILABLE = 14,
  KILN_DATA_LOSS = 15
} kiln_status;

/* Element types; the numbers are fixed. */
typedef enum kiln_dtype {
  KILN_F32 = 0,
  KILN_F16 = 1,
  KILN_BF16 = 2,
  KILN_I64 = 3,
  KILN_I32 = 4,
  KILN_I8 = 5,
  KILN_U8 = 6,
  KILN_BOOL = 7 /* one byte, 0 or 1 */
} kiln_dtype;

/* Where a session runs, and where a tensor's memory lives. */
typedef enum kiln_device { KILN_DEVICE_CPU = 0, KILN_DEVICE_GPU = 1 } kiln_device;

typedef struct kiln_model kiln_model;
typedef struct kiln_session kiln_session;

/* One entry of a model's signature. `name` and `shape` belong to the model. */
typedef struct kiln_tensor_info {
  const char* name;
  kiln_dtype dtype;
  int32_t ndim;
  const int64_t* shape;
} kiln_tensor_info;

/* A dense, row-major tensor the caller owns, in host (KILN_DEVICE_CPU) or GPU memory
 * (KILN_DEVICE_GPU: a pointer on the current CUDA device). */
typedef struct kiln_tensor {
  const char* name;
  void* data;
  kiln_dtype dtype;
  int32_t ndim;
  const int64_t* shape;
  kiln_device device;
} kiln_tensor;

/* ---- library ---------------------------------------------------------------- */

/* KILN_C_API_VERSION of the loaded library. */
int32_t kiln_api_version(void);
/* The message of the calling thread's last failed call ("" when none). */
const char* kiln_last_error(void);
/* "OK", "INVALID_ARGUMENT", ... ("UNKNOWN" for a number that is no code). */
const char* kiln_status_name(kiln_status status);
/* "f32", "f16", "bf16", "i64", "i32", "i8", "u8", "bool" ("?" for no dtype). */
const char* kiln_dtype_name(kiln_dtype dtype);
/* Bytes per element (0 for no dtype). */
size_t kiln_dtype_size(kiln_dtype dtype);

/* ---- compile ---------------------------------------------------------------- */

/* Compiles the ONNX model at `onnx_path` into a bundle at `bundle_path`. `options`
 * are `kiln compile`'s options as on its command line (docs/cli.md), one per string:
 * "--precision=fp32", "--no-fuse", "--dim=batch=8", "--input-shape=x=1x3x224x224",
 * "--arch=sm_80", ... (-o, --report, --dump-after and --time-passes are the
 * command's and not taken here). Prints nothing. Needs no GPU. The bundle is written
 * whole or not at all. */
kiln_status kiln_compile(const char* onnx_path, const char* bundle_path, const char* const* options,
                         size_t num_options);

/* ---- model ------------------------------------------------------------------ */

/* Loads and checks the bundle at `path`. KILN_NOT_FOUND (no file), KILN_INVALID_ARGUMENT
 * (not a bundle, truncated, corrupt), KILN_FAILED_PRECONDITION (another format). */
kiln_status kiln_model_load(const char* path, kiln_model** model);
/* Releases the caller's reference (sessions keep theirs). NULL is allowed. */
void kiln_model_free(kiln_model* model);

size_t kiln_model_num_inputs(const kiln_model* model);
size_t kiln_model_num_outputs(const kiln_model* model);
/* The signature entry at `index` (KILN_OUT_OF_RANGE past the end). */
kiln_status kiln_model_input(const kiln_model* model, size_t index, kiln_tensor_info* info);
kiln_status kiln_model_output(const kiln_model* model, size_t index, kiln_tensor_info* info);
const char* kiln_model_path(const kiln_model* model);
const char* kiln_model_arch(const kiln_model* model);      /* "sm_90a", ... */
const char* kiln_model_precision(const kiln_model* model); /* "fp16", "bf16", "fp32" */
int64_t kiln_model_weight_bytes(const kiln_model* model);
int64_t kiln_model_arena_bytes(const kiln_model* model);

/* Dynamic models (compiled for dim ranges, `kiln compile --dim seq=1..512`; docs/
 * dynamic_shapes.md) take inputs of any sizes inside the ranges. The number of named
 * dims with a range (0 for a static model), and dim `index`'s name and range
 * (KILN_OUT_OF_RANGE past the end; `name` belongs to the model). */
size_t kiln_model_num_dims(const kiln_model* model);
kiln_status kiln_model_dim(const kiln_model* model, size_t index, const char** name, int64_t* min, int64_t* max);
/* The size dim `index` was tuned for (`--dim seq=1..512:128` gives 128), 0 where the
 * compile named none. */
kiln_status kiln_model_dim_opt(const kiln_model* model, size_t index, int64_t* opt);
/* Of the input or output at `index`: each dim as an expression over the named dims
 * ("batch", "seq", "768", "batch*seq"; `ndim` strings) and the smallest shape (the
 * kiln_tensor_info shape is the largest). For a static model `dims` is NULL and
 * `min_shape` equals the shape. Both belong to the model; either pointer may be NULL. */
kiln_status kiln_model_input_dims(const kiln_model* model, size_t index, const char* const** dims,
                                  const int64_t** min_shape);
kiln_status kiln_model_output_dims(const kiln_model* model, size_t index, const char* const** dims,
                                   const int64_t** min_shape);

/* ---- session ---------------------------------------------------------------- */

/* Flags of kiln_session_create. */
#define KILN_SESSION_NO_CUDA_GRAPH 1u /* GPU: launch kernels one by one, no CUDA graph */
/* GPU: no programmatic dependent launch (each kernel starts after the one before ends) */
#define KILN_SESSION_NO_PROGRAMMATIC_LAUNCH 2u

/* Creates a session on `device`. `stream` (GPU only, else NULL) is the cudaStream_t to
 * launch on; NULL: a stream of the session's own. KILN_FAILED_PRECONDITION when there
 * is no GPU, the bundle's arch does not run on it, or a step has no GPU kernel. */
kiln_status kiln_session_create(kiln_model* model, kiln_device device, void* stream, uint32_t flags,
                                kiln_session** session);
void kiln_session_free(kiln_session* session);
kiln_device kiln_session_device(const kiln_session* session);
/* The cudaStream_t a GPU session launches on (NULL for a CPU session). A caller that
 * hands over GPU memory written on another stream makes this one wait for it. */
void* kiln_session_stream(const kiln_session* session);

/* Runs the model. `inputs` name every model input once, with its exact dtype and
 * shape; `outputs` are buffers for any of the outputs (those left out are not written).
 * A CPU session takes host memory. A GPU session takes all buffers in host memory or
 * all in GPU memory (copied device to device into and out of its arena); it returns
 * after its stream has finished. */
kiln_status kiln_session_run(kiln_session* session, const kiln_tensor* inputs, size_t num_inputs,
                             const kiln_tensor* outputs, size_t num_outputs);

/* ---- GPU memory (for callers without a CUDA runtime of their own) ------------ */

/* 1 when a CUDA GPU is usable (and kiln can run on it), else 0. */
int32_t kiln_gpu_available(void);
/* The current CUDA device's ordinal (KILN_FAILED_PRECONDITION without a GPU). */
kiln_status kiln_gpu_device(int32_t* device);
kiln_status kiln_gpu_alloc(size_t bytes, void** ptr);
void kiln_gpu_free(void* ptr);
/* Copies `bytes` between host and GPU memory in any direction, synchronously. */
kiln_status kiln_gpu_copy(void* dst, kiln_device dst_device, const void* src, kiln_device src_device, size_t bytes);

/* DLPack (https://dmlc.github.io/dlpack/): hands a kiln_gpu_alloc buffer to a framework
 * without a copy. Wraps `ptr` (taking ownership) with its dtype and shape into a
 * DLManagedTensor of DLPack 0.8 on the current CUDA device, returned as `*managed`;
 * its deleter frees the buffer. A consumer (torch.from_dlpack, ...) calls the deleter;
 * kiln_dlpack_delete calls it for a tensor no consumer took. On failure the caller
 * still owns `ptr`. */
kiln_status kiln_dlpack_from_gpu(void* ptr, kiln_dtype dtype, int32_t ndim, const int64_t* shape, void** managed);
void kiln_dlpack_delete(void* managed);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* KILN_KILN_C_H_ */
