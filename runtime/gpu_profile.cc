// GpuExecutor::Profile: per-step times of a bundle's run on the GPU (kiln run
// --profile), each step between two events with the stream held until all are enqueued.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/cuda_util.h"
#include "runtime/gpu_executor.h"

namespace kiln {
namespace {

// Holds a stream while the host enqueues a profiled run. Without it the GPU starts on
// the first step while the host still launches the others, and an event-to-event time
// takes in the host's time to launch the next step whenever the GPU catches up (a
// cuDNN or cuBLASLt call costs tens of microseconds on the host): the steps' times
// summed to several times the run's. A host function on the stream waits until
// Release(), so the steps then run back to back. It gives up after a second, in case an
// enqueue blocks on the held stream (a full launch queue, a synchronous call): the
// profile is less exact then, but never stuck.
class StreamHold {
 public:
  static void CUDART_CB Wait(void* self) {
    auto* hold = static_cast<StreamHold*>(self);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!hold->released_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }
  void Release() { released_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> released_{false};
};

}  // namespace

absl::StatusOr<ProfileReport> GpuExecutor::Profile(const TensorMap& feeds, int iterations) {
  if (iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("profile: iterations must be >= 1, got ", iterations));
  }
  KILN_RETURN_IF_ERROR(Run(feeds).status());  // warm-up (and graph capture)
  auto stream = static_cast<cudaStream_t>(stream_);
  const int n = static_cast<int>(steps_.size());
  std::vector<cudaEvent_t> events(n + 1);
  for (auto& e : events) KILN_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&e), "cudaEventCreate"));
  auto destroy = [&] {
    for (auto& e : events) cudaEventDestroy(e);
  };
  std::vector<std::vector<double>> per_step(n);
  std::vector<double> run_ms;
  absl::Status status;
  for (int it = 0; it < iterations && status.ok(); ++it) {
    // Whole run as a user sees it (graph replay when enabled).
    cudaEventRecord(events[0], stream);
    status = Enqueue();
    cudaEventRecord(events[n], stream);
    if (status.ok()) status = Synchronize("profiling");
    float ms = 0;
    if (status.ok()) cudaEventElapsedTime(&ms, events[0], events[n]);
    run_ms.push_back(ms);
    // Step by step, an event between steps, with the stream held until all are
    // enqueued (StreamHold). The stream is synchronised even after an error: the host
    // function reads `hold`.
    StreamHold hold;
    const absl::Status held = CudaStatus(cudaLaunchHostFunc(stream, StreamHold::Wait, &hold), "cudaLaunchHostFunc");
    if (status.ok()) status = held;
    cudaEventRecord(events[0], stream);
    for (int s = 0; s < n && status.ok(); ++s) {
      bool after_kernel = false;  // an event between steps: no launch overlaps the one before
      status = EnqueueStep(s, &after_kernel);
      cudaEventRecord(events[s + 1], stream);
    }
    hold.Release();
    const absl::Status synced = Synchronize("profiling");
    if (status.ok()) status = synced;
    for (int s = 0; s < n && status.ok(); ++s) {
      float step_ms = 0;
      cudaEventElapsedTime(&step_ms, events[s], events[s + 1]);
      per_step[s].push_back(step_ms);
    }
  }
  destroy();
  KILN_RETURN_IF_ERROR(status);
  return MakeProfileReport(program_->bundle(), "gpu", run_ms, per_step);
}

}  // namespace kiln
