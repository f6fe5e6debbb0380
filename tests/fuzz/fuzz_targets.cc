// The fuzz targets' bodies (tests/fuzz/fuzz_targets.h).
#include "tests/fuzz/fuzz_targets.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <string>

#include "common/write_file.h"
#include "frontend/onnx_importer.h"
#include "frontend/tensor_file.h"
#include "graph/evaluate.h"
#include "onnx/onnx_pb.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"

namespace kiln::fuzz {
namespace {

constexpr int64_t kMaxEvaluatedElements = 1'000'000;
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

bool SmallEnoughToEvaluate(const Graph& graph) {
  int64_t total = 0;
  for (const Value* v : graph.values()) {
    absl::StatusOr<int64_t> n = CheckedNumElements(v->shape());
    if (!n.ok() || *n > kMaxEvaluatedElements - total) return false;
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
  if (!SmallEnoughToEvaluate(**graph)) return absl::OkStatus();
  TensorMap feeds;
  for (const Value* in : (*graph)->inputs()) feeds[in->name()] = Tensor(in->dtype(), in->shape());
  return EvaluateGraph(**graph, feeds).status();
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
