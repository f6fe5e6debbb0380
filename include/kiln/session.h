// kiln::Session: runs a shared Model with its own activation arena.
//
// Thread-safety: a Session runs one call at a time. Run, RunInto and Profile take a
// per-session lock, so concurrent calls on one Session are safe but serialised (the
// second waits). For parallel inference create one Session per thread from the same
// Model: sessions share the Model's weights and run concurrently.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kiln/model.h"
#include "kiln/profile.h"
#include "kiln/types.h"

namespace kiln {

struct SessionOptions {
  // kCpu: the CPU backend (reference evaluators in the planned arena). kGpu: the
  // current CUDA device (weights uploaded once per Model, an arena per Session).
  Device device = Device::kCpu;
  // kGpu only: the cudaStream_t to launch on (nullptr: a stream of the session's own).
  // Must be nullptr for kCpu.
  void* stream = nullptr;
  // kGpu only: capture a CUDA graph on the first run and replay it afterwards.
  bool enable_cuda_graph = true;
  // kGpu on sm_90 and later: a generated kernel that follows another starts as that
  // one's CTAs exit and waits on the GPU for its writes (programmatic dependent
  // launch), instead of being launched once it has finished. False: the latter.
  bool enable_programmatic_launch = true;
};

class Session {
 public:
  // Allocates the session's arena. Errors: InvalidArgument (null model, a stream with
  // kCpu); for kGpu, FailedPrecondition when there is no GPU, when the bundle was
  // compiled for an arch this GPU cannot run, or when some step has no GPU kernel
  // (the message names the ops), and ResourceExhausted when GPU memory runs out.
  static absl::StatusOr<std::unique_ptr<Session>> Create(std::shared_ptr<const Model> model,
                                                         const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const { return *model_; }
  Device device() const { return options_.device; }
  // Bytes this session owns (its arena); the weights belong to the Model.
  int64_t arena_bytes() const;
  // The weight storage this session reads: Model::weight_storage() of its model.
  const void* weight_storage() const;
  // kGpu: the cudaStream_t the session launches on (SessionOptions::stream, else its
  // own); nullptr for kCpu.
  void* stream() const;

  // Runs the model on host tensors. `inputs` must name every model input exactly
  // once with its exact dtype and shape. Returns every output by name. Errors
  // (InvalidArgument) name the input and the expected type: unknown input (listing
  // the model's inputs), missing input, wrong dtype or shape.
  absl::StatusOr<std::map<std::string, HostTensor>> Run(const std::map<std::string, HostTensor>& inputs);

  // Runs the model reading `inputs` and writing into caller-provided `outputs`
  // (each must match the output's dtype and shape; outputs left out of the map are
  // not written). A kCpu session takes host (Device::kCpu) memory only. A kGpu
  // session takes either all buffers in host memory or all in GPU memory (device
  // pointers on the session's device; the call copies them into and out of the
  // arena on the session's stream and returns after synchronising it).
  absl::Status RunInto(const std::map<std::string, ConstTensorRef>& inputs,
                       const std::map<std::string, TensorRef>& outputs);

  // Runs `iterations` times (after one warm-up run) timing every step; the median
  // per step, its share and the kernel / ONNX nodes of each step.
  absl::StatusOr<ProfileReport> Profile(const std::map<std::string, HostTensor>& inputs, int iterations);

  struct Impl;

 private:
  Session(std::shared_ptr<const Model> model, const SessionOptions& options);
  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
