// Example of the kiln C++ API: load a bundle, print its signature, run it once on
// deterministic inputs and print per-output stats.
// Usage: run_bundle MODEL.kiln [cpu|gpu]   (default: cpu)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kiln/kiln.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && std::string(argv[2]) != "cpu" && std::string(argv[2]) != "gpu")) {
    std::fprintf(stderr, "usage: %s MODEL.kiln [cpu|gpu]\n", argv[0]);
    return 2;
  }
  const kiln::Device device = argc == 3 && std::string(argv[2]) == "gpu" ? kiln::Device::kGpu : kiln::Device::kCpu;
  // A Model is immutable and may be shared by many sessions (one per thread).
  absl::StatusOr<std::shared_ptr<const kiln::Model>> model = kiln::Model::Load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  std::printf("%s: %s, %s, %d steps, weights %lld bytes, arena %lld bytes\n", argv[1],
              (*model)->target_arch().c_str(), (*model)->precision().c_str(), (*model)->num_steps(),
              static_cast<long long>((*model)->weight_bytes()), static_cast<long long>((*model)->arena_bytes()));
  for (const kiln::TensorInfo& in : (*model)->inputs()) std::printf("  input  %s\n", in.ToString().c_str());
  for (const kiln::TensorInfo& out : (*model)->outputs()) std::printf("  output %s\n", out.ToString().c_str());

  absl::StatusOr<std::unique_ptr<kiln::Session>> session =
      kiln::Session::Create(*model, kiln::SessionOptions{.device = device});
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }

  // Deterministic inputs: arange(n)/n for floating inputs, i % 7 for integer ones.
  std::map<std::string, kiln::HostTensor> inputs;
  for (const kiln::TensorInfo& in : (*model)->inputs()) {
    const int64_t n = in.numel();
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) {
      values[i] = kiln::IsFloating(in.dtype) ? static_cast<float>(i) / n : static_cast<float>(i % 7);
    }
    inputs[in.name] = *kiln::HostTensor::FromFloat(in.dtype, in.shape, values);
  }

  absl::StatusOr<std::map<std::string, kiln::HostTensor>> outputs = (*session)->Run(inputs);
  if (!outputs.ok()) {
    std::fprintf(stderr, "%s\n", outputs.status().ToString().c_str());
    return 1;
  }
  for (const auto& [name, tensor] : *outputs) {
    const std::vector<float> v = tensor.ToFloat();
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (float x : v) {
      lo = std::min<double>(lo, x);
      hi = std::max<double>(hi, x);
      sum += x;
    }
    std::printf("  %s %s: min %.6g max %.6g mean %.6g\n", name.c_str(), tensor.TypeString().c_str(), lo, hi,
                v.empty() ? 0.0 : sum / v.size());
  }
  return 0;
}
