// libFuzzer target for the ONNX importer: bytes -> ModelProto -> ImportOnnxModel,
// and for graphs that import and are small, a CPU reference run on zero inputs.
// KILN_FUZZ_SKIP_ONNX_CHECKER=1 imports without ONNX's checker and shape inference
// (as models newer than the installed ONNX library are imported), so that kiln's
// own validation is what stands between the bytes and the op code.
// Build and run: docs/fuzzing.md.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "frontend/onnx_importer.h"
#include "graph/evaluate.h"
#include "graph/graph.h"
#include "onnx/onnx_pb.h"

namespace {

// Graphs whose values hold more elements than this in total are imported but not
// evaluated, to keep each input fast.
constexpr int64_t kMaxEvaluatedElements = 1'000'000;

// An empty folder, so that external-data references resolve to missing files
// (and never to files of the machine running the fuzzer).
const std::string& BaseDir() {
  static const std::string* dir = [] {
    char pattern[] = "/tmp/kiln_onnx_fuzz_XXXXXX";
    const char* made = mkdtemp(pattern);
    return new std::string(made != nullptr ? made : "/nonexistent/kiln_onnx_fuzz");
  }();
  return *dir;
}

bool SkipOnnxChecker() {
  static const bool skip = [] {
    const char* v = getenv("KILN_FUZZ_SKIP_ONNX_CHECKER");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return skip;
}

bool SmallEnoughToEvaluate(const kiln::Graph& graph) {
  int64_t total = 0;
  for (const kiln::Value* v : graph.values()) {
    int64_t n = 1;
    for (int64_t d : v->shape()) {
      if (d < 0 || (d > 0 && n > kMaxEvaluatedElements / d)) return false;
      n *= d;
    }
    total += n;
    if (total > kMaxEvaluatedElements) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return 0;
  onnx::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size))) return 0;
  kiln::ImportOptions options;
  options.run_onnx_checker = !SkipOnnxChecker();
  auto graph = kiln::ImportOnnxModel(std::move(model), BaseDir(), options);
  if (!graph.ok() || !SmallEnoughToEvaluate(**graph)) return 0;
  kiln::TensorMap feeds;
  for (const kiln::Value* in : (*graph)->inputs()) feeds[in->name()] = kiln::Tensor(in->dtype(), in->shape());
  // Errors are fine; crashes, sanitizer reports and hangs are what the fuzzer looks for.
  (void)kiln::EvaluateGraph(**graph, feeds);
  return 0;
}
