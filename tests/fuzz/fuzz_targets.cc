// The fuzz targets' bodies (tests/fuzz/fuzz_targets.h).
#include "tests/fuzz/fuzz_targets.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_choice.h"
#include "codegen/op_kernels.h"
#include "codegen/tuning_db.h"
#include "common/status_macros.h"
#include "common/write_file.h"
#include "compiler/compile_options.h"
#include "compiler/memory_planner.h"
#include "compiler/pipeline.h"
#include "frontend/onnx_importer.h"
#include "frontend/tensor_file.h"
#include "graph/evaluate.h"
#include "onnx/onnx_pb.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"

namespace kiln::fuzz {
namespace {

constexpr int64_t kMaxEvaluatedElements = 1'000'000;
// The compile target's limit: its pipeline folds constants but runs no graph (the zoo's
// exports hold 1 to 8 million elements, weights included).
constexpr int64_t kMaxCompiledElements = int64_t{1} << 24;
constexpr int64_t kMaxRunBytes = int64_t{64} << 20;

// An empty folder of this process, for external data and the files written here.
const std::string& ScratchDir() {
  static const std::string* dir = [] {
    char pattern[] = "/tmp/kiln_fuzz_XXXXXX";
    const char* made = mkdtemp(pattern);
    return new std::string(made != nullptr ? made : "/nonexistent/kiln_fuzz");
  }();
  return *dir;
}

std::string WriteScratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = ScratchDir() + "/" + name;
  if (!WriteFile(path, std::string(reinterpret_cast<const char*>(data), size), "fuzz").ok()) return "";
  return path;
}

bool SmallEnough(const Graph& graph, int64_t max_elements = kMaxEvaluatedElements) {
  int64_t total = 0;
  for (const Value* v : graph.values()) {
    absl::StatusOr<int64_t> n = CheckedNumElements(v->shape());
    if (!n.ok() || *n > max_elements - total) return false;
    total += *n;
  }
  return true;
}

// A bundle whose manifest is `manifest` (bytes as they come), with zero-filled
// sections of the sizes it names and a correct checksum, so that fuzzed manifests
// reach the validator rather than stopping at the checksum. "" when the sections
// would be over 64 MiB.
std::string WrapManifest(const uint8_t* manifest, size_t size) {
  bundle::Manifest m;
  if (!m.ParseFromArray(manifest, static_cast<int>(size))) return "";
  const uint64_t sections = m.kernel_section_bytes() + m.weight_section_bytes();
  if (m.kernel_section_bytes() > kMaxRunBytes || m.weight_section_bytes() > kMaxRunBytes) return "";
  std::string b(kBundleMagic, sizeof(kBundleMagic));
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(kBundleFormatVersion, 4);
  put(size, 8);
  b.append(reinterpret_cast<const char*>(manifest), size);
  b.resize((b.size() + kBundleAlignment - 1) / kBundleAlignment * kBundleAlignment, '\0');
  b.resize(b.size() + sections, '\0');
  put(Fnv1a64(b.data(), b.size()), 8);
  return b;
}

}  // namespace

absl::Status ImportOnnx(const uint8_t* data, size_t size, bool skip_onnx_checker) {
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return absl::OkStatus();
  onnx::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size))) return absl::OkStatus();
  ImportOptions options;
  options.run_onnx_checker = !skip_onnx_checker;
  auto graph = ImportOnnxModel(std::move(model), ScratchDir(), options);
  if (!graph.ok()) return graph.status();
  if (!SmallEnough(**graph)) return absl::OkStatus();
  TensorMap feeds;
  for (const Value* in : (*graph)->inputs()) feeds[in->name()] = Tensor(in->dtype(), in->shape());
  return EvaluateGraph(**graph, feeds).status();
}

absl::Status CompileOnnx(const uint8_t* data, size_t size) {
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return absl::OkStatus();
  onnx::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size))) return absl::OkStatus();
  // Named or unknown input dims fixed at 2, as `--dim NAME=2` would (real exports name
  // their batch and sequence dims).
  for (onnx::ValueInfoProto& in : *model.mutable_graph()->mutable_input()) {
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    for (onnx::TensorShapeProto::Dimension& d :
         *in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
      if (!d.has_dim_value()) d.set_dim_value(2);
    }
  }
  auto imported = ImportOnnxModel(std::move(model), ScratchDir(), ImportOptions{});
  if (!imported.ok()) return imported.status();
  if (!SmallEnough(**imported, kMaxCompiledElements)) return absl::OkStatus();
  for (const bool fp32 : {false, true}) {
    CompileOptions options;
    options.verify_passes = true;
    options.kernel_cache = false;
    options.tuning_db = false;
    if (fp32) {
      options.precision = "fp32";
      options.matmul_groups = codegen::MatMulGroups::kGenerated;
      options.conv_groups = codegen::ConvGroups::kGenerated;
    }
    // compiler/compiler.cc's BuildBundle up to the NVRTC compile.
    const codegen::KernelOptions kernel_options = KernelOptionsFor(options);
    std::unique_ptr<Graph> graph = (*imported)->Clone();
    PassContext context(options, kernel_options);
    KILN_RETURN_IF_ERROR(RunPipeline(*graph, context));
    KILN_RETURN_IF_ERROR(PlanGraphMemory(*graph).status());
    for (const Node* node : graph->nodes()) {
      const codegen::KernelChoice choice = codegen::ChooseKernel(*node, kernel_options);
      if (choice.kind == codegen::KernelKind::kLibrary) continue;
      if (choice.kind == codegen::KernelKind::kGemm && !choice.gemm.ok()) continue;
      absl::StatusOr<std::vector<codegen::KernelLaunch>> launches =
          choice.kind == codegen::KernelKind::kGemm
              ? codegen::GenerateChosenGemm(*node, *choice.gemm, kernel_options.sm_count)
              : codegen::GenerateNodeKernels(*node, kernel_options);
      if (!launches.ok() && launches.status().code() != absl::StatusCode::kUnimplemented) return launches.status();
    }
  }
  return absl::OkStatus();
}

absl::Status LoadBundle(const uint8_t* data, size_t size) {
  // Input starting with the magic: a whole bundle file; else: a manifest to wrap.
  std::string path;
  if (size >= sizeof(kBundleMagic) && std::memcmp(data, kBundleMagic, sizeof(kBundleMagic)) == 0) {
    path = WriteScratch("fuzz.kiln", data, size);
  } else if (size <= static_cast<size_t>(std::numeric_limits<int>::max())) {
    const std::string wrapped = WrapManifest(data, size);
    if (wrapped.empty()) return absl::OkStatus();
    path = WriteScratch("fuzz.kiln", reinterpret_cast<const uint8_t*>(wrapped.data()), wrapped.size());
  }
  if (path.empty()) return absl::OkStatus();
  auto bundle = Bundle::Load(path);
  if (!bundle.ok()) return bundle.status();
  const bundle::Manifest& m = (*bundle)->manifest();
  int64_t input_bytes = 0;
  for (const auto& in : m.inputs()) input_bytes += in.binding().bytes();
  auto program = CpuProgram::Create(**bundle);
  if (!program.ok()) return program.status();
  if (m.memory_plan().arena_bytes() > kMaxRunBytes || input_bytes > kMaxRunBytes) return absl::OkStatus();
  auto executor = CpuExecutor::Create(*program);
  if (!executor.ok()) return executor.status();
  TensorMap feeds;
  for (const auto& in : m.inputs()) {
    auto dtype = ParseDType(in.dtype());
    if (!dtype.ok()) return dtype.status();
    feeds[in.name()] = Tensor(*dtype, ShapeFromProto(in.shape()));
  }
  return (*executor)->Run(feeds).status();
}

absl::Status ReadTensorFiles(const uint8_t* data, size_t size) {
  absl::Status last;
  for (const char* name : {"fuzz.npy", "fuzz.pb"}) {
    const std::string path = WriteScratch(name, data, size);
    if (!path.empty()) last = ReadTensorFile(path).status();
  }
  return last;
}

}  // namespace kiln::fuzz
