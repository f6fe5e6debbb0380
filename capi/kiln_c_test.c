/* The C API from a C program: kiln_c_api_test MODEL.onnx WORKDIR [--gpu]
 *
 * Compiles MODEL (a generated MLP: x f32[1,256] -> probs f32[1,10]) fused and unfused
 * in fp32, loads both, checks their signatures, runs them on the CPU backend and checks
 * that they agree and that probs is a distribution; then every error path a caller can
 * reach (python/tests/test_kiln.py reads a dynamic model's ranges and opt sizes). With
 * --gpu: a GPU session with host and with device buffers against the CPU result, and a
 * DLPack wrap; exit 77 (skipped) without a GPU. Exit 1 on any failure, naming the
 * check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kiln/kiln_c.h"

static int failures = 0;

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

/* A call that must succeed; on failure prints kiln's message and stops. */
#define REQUIRE_OK(call)                                                                     \
  do {                                                                                       \
    kiln_status s_ = (call);                                                                 \
    if (s_ != KILN_OK) {                                                                     \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, kiln_status_name(s_), \
              kiln_last_error());                                                            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

/* A call that must fail with `code` and a message containing `text`. */
static void ExpectError(kiln_status got, kiln_status code, const char* text, const char* what, int line) {
  if (got != code) {
    fprintf(stderr, "line %d: %s: expected %s, got %s (%s)\n", line, what, kiln_status_name(code),
            kiln_status_name(got), kiln_last_error());
    ++failures;
  } else if (strstr(kiln_last_error(), text) == NULL) {
    fprintf(stderr, "line %d: %s: message '%s' lacks '%s'\n", line, what, kiln_last_error(), text);
    ++failures;
  }
}
#define EXPECT_ERROR(call, code, text) ExpectError((call), (code), (text), #call, __LINE__)

static int FileExists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

enum { kIn = 256, kOut = 10 };
static const int64_t kInShape[2] = {1, kIn};
static const int64_t kOutShape[2] = {1, kOut};

static void RunCpu(kiln_model* model, const float* x, float* probs) {
  kiln_session* session = NULL;
  REQUIRE_OK(kiln_session_create(model, KILN_DEVICE_CPU, NULL, 0, &session));
  CHECK(kiln_session_device(session) == KILN_DEVICE_CPU);
  CHECK(kiln_session_stream(session) == NULL);
  kiln_tensor in = {"x", (void*)x, KILN_F32, 2, kInShape, KILN_DEVICE_CPU};
  kiln_tensor out = {"probs", probs, KILN_F32, 2, kOutShape, KILN_DEVICE_CPU};
  REQUIRE_OK(kiln_session_run(session, &in, 1, &out, 1));
  kiln_session_free(session);
}

static float MaxAbsDiff(const float* a, const float* b, int n) {
  float m = 0.f;
  for (int i = 0; i < n; ++i) m = fmaxf(m, fabsf(a[i] - b[i]));
  return m;
}

static void CheckSignature(const kiln_model* model) {
  CHECK(kiln_model_num_inputs(model) == 1);
  CHECK(kiln_model_num_outputs(model) == 1);
  kiln_tensor_info info;
  REQUIRE_OK(kiln_model_input(model, 0, &info));
  CHECK(strcmp(info.name, "x") == 0);
  CHECK(info.dtype == KILN_F32 && info.ndim == 2 && info.shape[0] == 1 && info.shape[1] == kIn);
  REQUIRE_OK(kiln_model_output(model, 0, &info));
  CHECK(strcmp(info.name, "probs") == 0);
  CHECK(info.dtype == KILN_F32 && info.ndim == 2 && info.shape[0] == 1 && info.shape[1] == kOut);
  EXPECT_ERROR(kiln_model_input(model, 1, &info), KILN_OUT_OF_RANGE, "has 1 inputs");
  EXPECT_ERROR(kiln_model_output(model, 7, &info), KILN_OUT_OF_RANGE, "index 7");
  CHECK(strcmp(kiln_model_precision(model), "fp32") == 0);
  CHECK(kiln_model_weight_bytes(model) > (int64_t)(kIn * 4));
  CHECK(kiln_model_arena_bytes(model) > 0);
  CHECK(strlen(kiln_model_arch(model)) > 0);
  /* A static model: no dim ranges, no dims, the smallest shape is the shape. */
  CHECK(kiln_model_num_dims(model) == 0);
  EXPECT_ERROR(kiln_model_dim(model, 0, NULL, NULL, NULL), KILN_OUT_OF_RANGE, "0 dims with a range");
  int64_t opt = -1;
  EXPECT_ERROR(kiln_model_dim_opt(model, 0, &opt), KILN_OUT_OF_RANGE, "0 dims with a range");
  EXPECT_ERROR(kiln_model_dim_opt(model, 0, NULL), KILN_INVALID_ARGUMENT, "opt is NULL");
  CHECK(opt == -1);
  const char* const* dims = (const char* const*)1;
  const int64_t* min_shape = NULL;
  REQUIRE_OK(kiln_model_input_dims(model, 0, &dims, &min_shape));
  CHECK(dims == NULL && min_shape != NULL && min_shape[0] == 1 && min_shape[1] == kIn);
  EXPECT_ERROR(kiln_model_output_dims(model, 1, &dims, &min_shape), KILN_OUT_OF_RANGE, "has 1 outputs");
}

static void CheckRunErrors(kiln_model* model, const float* x, float* probs) {
  kiln_session* session = NULL;
  REQUIRE_OK(kiln_session_create(model, KILN_DEVICE_CPU, NULL, 0, &session));
  const int64_t bad_shape[2] = {2, kIn};
  kiln_tensor in = {"x", (void*)x, KILN_F32, 2, kInShape, KILN_DEVICE_CPU};
  kiln_tensor out = {"probs", probs, KILN_F32, 2, kOutShape, KILN_DEVICE_CPU};
  kiln_tensor wrong = in;
  wrong.name = "y";
  EXPECT_ERROR(kiln_session_run(session, &wrong, 1, &out, 1), KILN_INVALID_ARGUMENT, "unknown input 'y'");
  EXPECT_ERROR(kiln_session_run(session, NULL, 0, &out, 1), KILN_INVALID_ARGUMENT, "missing input 'x'");
  wrong = in;
  wrong.shape = bad_shape;
  EXPECT_ERROR(kiln_session_run(session, &wrong, 1, &out, 1), KILN_INVALID_ARGUMENT, "must be f32[1,256]");
  wrong = in;
  wrong.dtype = KILN_F16;
  EXPECT_ERROR(kiln_session_run(session, &wrong, 1, &out, 1), KILN_INVALID_ARGUMENT, "got f16[1,256]");
  wrong = in;
  wrong.dtype = (kiln_dtype)42;
  EXPECT_ERROR(kiln_session_run(session, &wrong, 1, &out, 1), KILN_INVALID_ARGUMENT, "no dtype numbered 42");
  wrong = in;
  wrong.name = NULL;
  EXPECT_ERROR(kiln_session_run(session, &wrong, 1, &out, 1), KILN_INVALID_ARGUMENT, "has no name");
  wrong = in;
  wrong.shape = NULL;
  EXPECT_ERROR(kiln_session_run(session, &wrong, 1, &out, 1), KILN_INVALID_ARGUMENT, "no shape");
  kiln_tensor twice[2] = {in, in};
  EXPECT_ERROR(kiln_session_run(session, twice, 2, &out, 1), KILN_INVALID_ARGUMENT, "given twice");
  kiln_tensor bad_out = out;
  bad_out.name = "logits";
  EXPECT_ERROR(kiln_session_run(session, &in, 1, &bad_out, 1), KILN_INVALID_ARGUMENT, "unknown output 'logits'");
  bad_out = out;
  bad_out.device = KILN_DEVICE_GPU;
  EXPECT_ERROR(kiln_session_run(session, &in, 1, &bad_out, 1), KILN_INVALID_ARGUMENT, "writes host memory");
  EXPECT_ERROR(kiln_session_run(NULL, &in, 1, &out, 1), KILN_INVALID_ARGUMENT, "session is NULL");
  /* An error message stays until the thread's next failure; a success leaves it. */
  REQUIRE_OK(kiln_session_run(session, &in, 1, &out, 1));
  CHECK(strstr(kiln_last_error(), "session is NULL") != NULL);
  kiln_session_free(session);

  kiln_session* not_made = NULL;
  int fake_stream = 0;
  EXPECT_ERROR(kiln_session_create(model, KILN_DEVICE_CPU, &fake_stream, 0, &not_made), KILN_INVALID_ARGUMENT,
               "for Device::kGpu only");
  EXPECT_ERROR(kiln_session_create(model, (kiln_device)5, NULL, 0, &not_made), KILN_INVALID_ARGUMENT,
               "no device numbered 5");
  EXPECT_ERROR(kiln_session_create(model, KILN_DEVICE_CPU, NULL, 0x80, &not_made), KILN_INVALID_ARGUMENT,
               "unknown flags");
  CHECK(not_made == NULL);
}

static void CheckCompileErrors(const char* onnx, const char* dir) {
  char out[4096];
  snprintf(out, sizeof out, "%s/never.kiln", dir);
  const char* bogus[] = {"--bogus=1"};
  EXPECT_ERROR(kiln_compile(onnx, out, bogus, 1), KILN_INVALID_ARGUMENT, "bogus");
  const char* positional[] = {"fp32"};
  EXPECT_ERROR(kiln_compile(onnx, out, positional, 1), KILN_INVALID_ARGUMENT, "is not a flag");
  const char* precision[] = {"--precision=fp8"};
  EXPECT_ERROR(kiln_compile(onnx, out, precision, 1), KILN_INVALID_ARGUMENT, "unsupported --precision 'fp8'");
  const char* arch[] = {"--arch=sm_70"};
  EXPECT_ERROR(kiln_compile(onnx, out, arch, 1), KILN_INVALID_ARGUMENT, "unsupported --arch 'sm_70'");
  EXPECT_ERROR(kiln_compile("/nonexistent/model.onnx", out, NULL, 0), KILN_NOT_FOUND, "/nonexistent/model.onnx");
  EXPECT_ERROR(kiln_compile(NULL, out, NULL, 0), KILN_INVALID_ARGUMENT, "onnx_path is NULL");
  /* A file that is not ONNX: an error naming it, and no bundle left behind. */
  char junk[4096];
  snprintf(junk, sizeof junk, "%s/junk.onnx", dir);
  FILE* f = fopen(junk, "wb");
  CHECK(f != NULL);
  if (f != NULL) {
    fputs("not a model", f);
    fclose(f);
  }
  EXPECT_ERROR(kiln_compile(junk, out, NULL, 0), KILN_INVALID_ARGUMENT, "junk.onnx");
  CHECK(!FileExists(out));

  kiln_model* model = NULL;
  EXPECT_ERROR(kiln_model_load("/nonexistent/model.kiln", &model), KILN_NOT_FOUND, "/nonexistent/model.kiln");
  EXPECT_ERROR(kiln_model_load(junk, &model), KILN_INVALID_ARGUMENT, "junk.onnx");
  EXPECT_ERROR(kiln_model_load(NULL, &model), KILN_INVALID_ARGUMENT, "path is NULL");
  CHECK(model == NULL);
}

static void CheckLibrary(void) {
  CHECK(kiln_api_version() == KILN_C_API_VERSION);
  CHECK(strcmp(kiln_status_name(KILN_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0);
  CHECK(strcmp(kiln_status_name((kiln_status)99), "UNKNOWN") == 0);
  CHECK(strcmp(kiln_dtype_name(KILN_BF16), "bf16") == 0);
  CHECK(kiln_dtype_size(KILN_I64) == 8 && kiln_dtype_size(KILN_BOOL) == 1 && kiln_dtype_size((kiln_dtype)9) == 0);
}

/* The GPU part: host buffers, device buffers, DLPack. */
static void CheckGpu(const char* onnx, const char* dir, const float* x, const float* cpu_probs) {
  int32_t device = -1;
  REQUIRE_OK(kiln_gpu_device(&device));
  CHECK(device >= 0);
  char bundle[4096];
  snprintf(bundle, sizeof bundle, "%s/mlp_gpu.kiln", dir);
  const char* options[] = {"--precision=fp32"}; /* for the local GPU's arch */
  REQUIRE_OK(kiln_compile(onnx, bundle, options, 1));
  kiln_model* model = NULL;
  REQUIRE_OK(kiln_model_load(bundle, &model));
  kiln_session* session = NULL;
  REQUIRE_OK(kiln_session_create(model, KILN_DEVICE_GPU, NULL, 0, &session));
  kiln_model_free(model); /* the session keeps it */
  CHECK(kiln_session_device(session) == KILN_DEVICE_GPU);
  CHECK(kiln_session_stream(session) != NULL);

  float host_probs[kOut] = {0};
  kiln_tensor in = {"x", (void*)x, KILN_F32, 2, kInShape, KILN_DEVICE_CPU};
  kiln_tensor out = {"probs", host_probs, KILN_F32, 2, kOutShape, KILN_DEVICE_CPU};
  REQUIRE_OK(kiln_session_run(session, &in, 1, &out, 1));
  printf("gpu (host buffers) vs cpu: max |diff| %g\n", MaxAbsDiff(host_probs, cpu_probs, kOut));
  CHECK(MaxAbsDiff(host_probs, cpu_probs, kOut) < 1e-4f);

  void* d_x = NULL;
  void* d_probs = NULL;
  REQUIRE_OK(kiln_gpu_alloc(sizeof(float) * kIn, &d_x));
  REQUIRE_OK(kiln_gpu_alloc(sizeof(float) * kOut, &d_probs));
  REQUIRE_OK(kiln_gpu_copy(d_x, KILN_DEVICE_GPU, x, KILN_DEVICE_CPU, sizeof(float) * kIn));
  kiln_tensor d_in = {"x", d_x, KILN_F32, 2, kInShape, KILN_DEVICE_GPU};
  kiln_tensor d_out = {"probs", d_probs, KILN_F32, 2, kOutShape, KILN_DEVICE_GPU};
  for (int i = 0; i < 3; ++i) REQUIRE_OK(kiln_session_run(session, &d_in, 1, &d_out, 1)); /* graph replays */
  float device_probs[kOut] = {0};
  REQUIRE_OK(kiln_gpu_copy(device_probs, KILN_DEVICE_CPU, d_probs, KILN_DEVICE_GPU, sizeof(float) * kOut));
  printf("gpu (device buffers) vs cpu: max |diff| %g\n", MaxAbsDiff(device_probs, cpu_probs, kOut));
  CHECK(MaxAbsDiff(device_probs, cpu_probs, kOut) < 1e-4f);
  /* Host input with a device output: one call takes one kind of memory. */
  EXPECT_ERROR(kiln_session_run(session, &in, 1, &d_out, 1), KILN_INVALID_ARGUMENT, "all in host memory");

  void* managed = NULL;
  REQUIRE_OK(kiln_dlpack_from_gpu(d_probs, KILN_F32, 2, kOutShape, &managed));
  CHECK(managed != NULL);
  kiln_dlpack_delete(managed); /* frees d_probs */
  EXPECT_ERROR(kiln_dlpack_from_gpu(d_x, (kiln_dtype)11, 2, kOutShape, &managed), KILN_INVALID_ARGUMENT, "dtype");
  kiln_gpu_free(d_x);
  kiln_session_free(session);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: kiln_c_api_test MODEL.onnx WORKDIR [--gpu]\n");
    return 2;
  }
  const char* onnx = argv[1];
  const char* dir = argv[2];
  const int gpu = argc > 3 && strcmp(argv[3], "--gpu") == 0;
  if (gpu && !kiln_gpu_available()) {
    printf("skipped: no CUDA GPU\n");
    return 77;
  }
  CheckLibrary();

  float x[kIn];
  for (int i = 0; i < kIn; ++i) x[i] = (float)sin(0.37 * i) * 2.f;
  char fused[4096], unfused[4096];
  snprintf(fused, sizeof fused, "%s/mlp_fused.kiln", dir);
  snprintf(unfused, sizeof unfused, "%s/mlp_unfused.kiln", dir);
  const char* fused_options[] = {"--precision=fp32", "--arch=sm_80"};
  const char* unfused_options[] = {"--precision=fp32", "--no-fuse"};
  REQUIRE_OK(kiln_compile(onnx, fused, fused_options, 2));
  REQUIRE_OK(kiln_compile(onnx, unfused, unfused_options, 2));

  kiln_model* a = NULL;
  kiln_model* b = NULL;
  REQUIRE_OK(kiln_model_load(fused, &a));
  REQUIRE_OK(kiln_model_load(unfused, &b));
  CheckSignature(a);
  CheckSignature(b);
  CHECK(strcmp(kiln_model_arch(a), "sm_80") == 0);
  CHECK(strstr(kiln_model_path(a), "mlp_fused.kiln") != NULL);
  float pa[kOut] = {0}, pb[kOut] = {0};
  RunCpu(a, x, pa);
  RunCpu(b, x, pb);
  float sum = 0.f;
  for (int i = 0; i < kOut; ++i) {
    CHECK(pa[i] >= 0.f && pa[i] <= 1.f);
    sum += pa[i];
  }
  printf("fused vs unfused (CPU backend): max |diff| %g; sum of probs %g\n", MaxAbsDiff(pa, pb, kOut), sum);
  CHECK(fabsf(sum - 1.f) < 1e-4f);
  CHECK(MaxAbsDiff(pa, pb, kOut) < 1e-5f);
  CheckRunErrors(a, x, pa);
  kiln_model_free(a);
  kiln_model_free(b);
  kiln_model_free(NULL);
  kiln_session_free(NULL);
  CheckCompileErrors(onnx, dir);

  if (gpu) CheckGpu(onnx, dir, x, pb);
  if (failures > 0) {
    fprintf(stderr, "%d check%s failed\n", failures, failures == 1 ? "" : "s");
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
