// Tests of the bundle file: round trip and every load error.
#include "runtime/bundle.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/lower_precision.h"
#include "graph/text_format.h"
#include "gtest/gtest.h"
#include "compiler/compiler.h"
#include "runtime/cpu_executor.h"
#include "runtime/tensor_map.h"

namespace kiln {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kGraph[] = R"(graph @g {
  input %x : f32[2,3]
  const %w : f32[3,4] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
  const %b : f32[4] = splat(0.5)
  const %shape : i64[2] = [4, 2]
  %y : f32[2,4] = MatMul(%x, %w) @mm
  %z : f32[2,4] = Add(%y, %b) @add
  %r : f32[2,4] = Relu(%z) @relu
  %v : f32[4,2] = Reshape(%r, %shape) @reshape
  output %v
}
)";

std::string TempPath(const std::string& name) {
  const std::string dir = ::testing::TempDir();
  return (std::filesystem::path(dir) / absl::StrCat(name, "_", ::getpid(), ".kiln")).string();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAllBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Writes the test graph's bundle (with one fake kernel) to a fresh file.
// The format tests compile without fusion (one step per node); FusedBundle* below
// covers fusion.
std::string WriteTestBundle(const std::string& name, const std::string& arch = "sm_90a",
                            const std::string& precision = "fp16", bool fuse = false) {
  auto graph = ParseGraph(kGraph);
  EXPECT_TRUE(graph.ok()) << graph.status();
  CompileOptions options;
  options.arch = arch;
  options.precision = precision;
  options.fuse = fuse;
  auto contents = BuildBundle(**graph, options, "test.onnx", "fake onnx bytes");
  EXPECT_TRUE(contents.ok()) << contents.status();
  contents->kernels.push_back({"k0", arch, "not really a cubin"});
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteBundle(*std::move(contents), path).ok());
  return path;
}

// With fusion, MatMul + bias Add + Relu become one FusedGroup step, the report
// records it, and the CPU backend computes what the unfused graph computes.
TEST(BundleTest, FusedBundleRecordsGroupsAndRunsOnTheCpu) {
  const std::string path = WriteTestBundle("fused", "sm_90a", "fp32", /*fuse=*/true);
  auto b = Bundle::Load(path);
  ASSERT_TRUE(b.ok()) << b.status();
  const bundle::Manifest& m = (*b)->manifest();
  ASSERT_TRUE(m.fusion().enabled());
  ASSERT_EQ(m.fusion().groups_size(), 1);
  EXPECT_EQ(m.fusion().groups(0).pattern(), "matmul+epilogue");
  EXPECT_THAT(m.fusion().groups(0).members(), ::testing::ElementsAre("mm", "add", "relu"));
  EXPECT_EQ(m.fusion().nodes_before(), 4);
  EXPECT_EQ(m.fusion().nodes_fused(), 2);
  ASSERT_EQ(m.steps_size(), m.fusion().nodes_after());
  if (m.fusion().groups(0).note().empty()) {  // a fused kernel exists: one step
    EXPECT_EQ(m.steps(0).op_type(), "FusedGroup");
  }
  auto ex = CpuExecutor::Create(**b);
  ASSERT_TRUE(ex.ok()) << ex.status();
  auto graph = ParseGraph(kGraph);
  ASSERT_TRUE(graph.ok());
  TensorMap feeds{{"x", Tensor::FromFloat(DType::kFloat32, {2, 3}, {1, -2, 3, -4, 5, -6})}};
  auto want = EvaluateGraph(**graph, feeds);
  auto got = (*ex)->Run(feeds);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  EXPECT_EQ((*got)[0].ToFloat(), (*want)[0].ToFloat());
}

TEST(Fnv1a64Test, KnownValues) {
  EXPECT_EQ(Fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar", 6), 0x85944171f73967e8ull);
  // In pieces equals at once.
  EXPECT_EQ(Fnv1a64("bar", 3, Fnv1a64("foo", 3)), Fnv1a64("foobar", 6));
}

// fp32: the bundle's graph is the source graph itself.
TEST(BundleTest, RoundTrip) {
  const std::string path = WriteTestBundle("roundtrip", "sm_90a", "fp32");
  auto b = Bundle::Load(path, {"sm_90a"});
  ASSERT_TRUE(b.ok()) << b.status();
  const bundle::Manifest& m = (*b)->manifest();
  EXPECT_EQ(m.format_version(), kBundleFormatVersion);
  EXPECT_EQ(m.target_arch(), "sm_90a");
  EXPECT_EQ(m.precision(), "fp32");
  EXPECT_EQ(m.source().path(), "test.onnx");
  EXPECT_EQ(m.source().fnv1a64().size(), 16u);
  ASSERT_EQ(m.inputs_size(), 1);
  EXPECT_EQ(m.inputs(0).name(), "x");
  EXPECT_EQ(m.inputs(0).dtype(), "f32");
  EXPECT_THAT(ShapeFromProto(m.inputs(0).shape()), ::testing::ElementsAre(2, 3));
  ASSERT_EQ(m.outputs_size(), 1);
  EXPECT_EQ(m.outputs(0).name(), "v");
  ASSERT_EQ(m.steps_size(), 4);
  EXPECT_FALSE(m.fusion().enabled());
  EXPECT_TRUE(m.compile_options().no_fuse());
  EXPECT_EQ(m.steps(0).kernel(), "cublaslt:MatMul");
  EXPECT_EQ(m.steps(0).onnx_nodes(0), "mm");
  EXPECT_EQ(m.steps(0).inputs(0).kind(), bundle::Binding::ARENA);
  EXPECT_EQ(m.steps(0).inputs(1).kind(), bundle::Binding::WEIGHT);
  EXPECT_EQ(m.steps(3).op_type(), "Reshape");
  EXPECT_GT(m.memory_plan().arena_bytes(), 0);
  EXPECT_GE(m.memory_plan().arena_bytes(), m.memory_plan().lower_bound_bytes());
  // Sections and weights are 256-aligned in the file.
  EXPECT_EQ((*b)->kernel_section_offset() % 256, 0u);
  EXPECT_EQ((*b)->weight_section_offset() % 256, 0u);
  ASSERT_EQ(m.weights_size(), 3);
  for (int i = 0; i < m.weights_size(); ++i) {
    EXPECT_EQ(m.weights(i).offset() % 256, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*b)->weight_bytes(i).data()) % 256, 0u);
  }
  // One NVRTC module per distinct generated kernel (kKernelsPerModule), then the
  // test's extra image.
  ASSERT_GE(m.kernels_size(), 2);
  for (int i = 0; i + 1 < m.kernels_size(); ++i) {
    EXPECT_EQ(m.kernels(i).name(), absl::StrCat("module", i));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>((*b)->kernel_bytes(i).data()), 4), "\x7f" "ELF");
  }
  auto k = (*b)->kernel_bytes(m.kernels_size() - 1);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(k.data()), k.size()), "not really a cubin");
  // The graph comes back with its weights.
  auto g = (*b)->BuildGraph();
  ASSERT_TRUE(g.ok()) << g.status();
  auto original = ParseGraph(kGraph);
  EXPECT_EQ(PrintGraph(**g), PrintGraph(**original));
  std::remove(path.c_str());
}

// fp16/bf16: the bundle carries the lowered graph (LowerPrecision): half-size
// weights, storage-typed steps and plan, f32 at the signature.
TEST(BundleTest, LoweredPrecision) {
  const std::string f32_path = WriteTestBundle("lowered_fp32", "sm_90a", "fp32");
  auto f32 = Bundle::Load(f32_path, {"sm_90a"});
  ASSERT_TRUE(f32.ok()) << f32.status();
  for (const auto& [precision, storage] :
       std::vector<std::pair<std::string, DType>>{{"fp16", DType::kFloat16}, {"bf16", DType::kBFloat16}}) {
    SCOPED_TRACE(precision);
    const std::string path = WriteTestBundle("lowered_" + precision, "sm_90a", precision);
    auto b = Bundle::Load(path, {"sm_90a"});
    ASSERT_TRUE(b.ok()) << b.status();
    const bundle::Manifest& m = (*b)->manifest();
    EXPECT_EQ(m.precision(), precision);
    ASSERT_EQ(m.inputs_size(), 1);
    EXPECT_EQ(m.inputs(0).dtype(), "f32");
    ASSERT_EQ(m.outputs_size(), 1);
    EXPECT_EQ(m.outputs(0).name(), "v");
    EXPECT_EQ(m.outputs(0).dtype(), "f32");
    // Cast in, MatMul, Add, Relu, Reshape, Cast out.
    ASSERT_EQ(m.steps_size(), 6);
    EXPECT_EQ(m.steps(0).op_type(), "Cast");
    EXPECT_EQ(m.steps(0).outputs(0).dtype(), DTypeName(storage));
    EXPECT_EQ(m.steps(1).op_type(), "MatMul");
    EXPECT_EQ(m.steps(1).inputs(1).dtype(), DTypeName(storage));
    EXPECT_EQ(m.steps(5).op_type(), "Cast");
    EXPECT_EQ(m.steps(5).outputs(0).value(), "v");
    // Float weights take half the bytes; the i64 shape is unchanged.
    ASSERT_EQ(m.weights_size(), 3);
    ASSERT_EQ((*f32)->manifest().weights_size(), 3);
    EXPECT_EQ((*b)->weight_bytes(0).size() * 2, (*f32)->weight_bytes(0).size());
    EXPECT_EQ((*b)->weight_bytes(1).size() * 2, (*f32)->weight_bytes(1).size());
    EXPECT_EQ((*b)->weight_bytes(2).size(), (*f32)->weight_bytes(2).size());
    // The graph that comes back is the lowered one.
    auto g = (*b)->BuildGraph();
    ASSERT_TRUE(g.ok()) << g.status();
    auto expected = ParseGraph(kGraph);
    ASSERT_TRUE(expected.ok());
    ASSERT_TRUE(LowerPrecision(storage).Run(**expected).ok());
    EXPECT_EQ(PrintGraph(**g), PrintGraph(**expected));
    std::remove(path.c_str());
  }
  std::remove(f32_path.c_str());
}

TEST(BundleTest, NoTemporaryFileLeftBehind) {
  const std::string path = WriteTestBundle("atomic");
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr("atomic_" + std::to_string(::getpid()) +
                                                                      ".kiln.tmp")));
  }
  std::remove(path.c_str());
}

TEST(BundleLoadErrorTest, MissingFile) {
  auto b = Bundle::Load("/nonexistent/dir/model.kiln");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(b.status().message(), HasSubstr("/nonexistent/dir/model.kiln"));
}

TEST(BundleLoadErrorTest, BadMagic) {
  const std::string path = TempPath("badmagic");
  WriteAllBytes(path, "ir_version: 8, this is an ONNX model, not a bundle");
  auto b = Bundle::Load(path);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr("not a kiln bundle"));
  WriteAllBytes(path, "");
  EXPECT_THAT(Bundle::Load(path).status().message(), HasSubstr("not a kiln bundle"));
  std::remove(path.c_str());
}

TEST(BundleLoadErrorTest, Truncated) {
  const std::string path = WriteTestBundle("truncated");
  const std::string bytes = ReadAll(path);
  for (size_t keep : {size_t{4}, size_t{15}, size_t{40}, bytes.size() / 2, bytes.size() - 1}) {
    WriteAllBytes(path, bytes.substr(0, keep));
    auto b = Bundle::Load(path);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << keep;
    EXPECT_THAT(b.status().message(), HasSubstr("truncated")) << keep;
    EXPECT_THAT(b.status().message(), HasSubstr(path)) << keep;
  }
  std::remove(path.c_str());
}

TEST(BundleLoadErrorTest, ChecksumMismatch) {
  const std::string path = WriteTestBundle("corrupt");
  std::string bytes = ReadAll(path);
  auto b0 = Bundle::Load(path);
  ASSERT_TRUE(b0.ok());
  // Flip one byte of the first weight (inside the weight section).
  const size_t pos = (*b0)->weight_section_offset() + 1;
  b0->reset();
  bytes[pos] ^= 0x40;
  WriteAllBytes(path, bytes);
  auto b = Bundle::Load(path);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr("checksum mismatch"));
  std::remove(path.c_str());
}

TEST(BundleLoadErrorTest, WrongFormatVersion) {
  const std::string path = WriteTestBundle("version");
  std::string bytes = ReadAll(path);
  bytes[8] = 7;  // u32 little-endian version at offset 8
  WriteAllBytes(path, bytes);
  auto b = Bundle::Load(path);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(b.status().message(), HasSubstr("format version 7"));
  EXPECT_THAT(b.status().message(), HasSubstr("versions 1 and 2"));
  std::remove(path.c_str());
}

// A bundle compiled for dim ranges is format version 2 (a reader of version 1 alone
// would run all of a step's size variants), in the header and the manifest; a static
// bundle stays version 1. This reader loads both.
TEST(BundleTest, DynamicBundlesAreFormatVersionTwo) {
  auto graph = ParseGraph(R"(graph @main {
  dim batch in [1, 4]
  input %x : f32[4,8] dims "batch, 8"
  %y = Relu(%x)
  output %y
})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  CompileOptions options;
  options.arch = "sm_90a";
  auto contents = BuildBundle(**graph, options, "dynamic.onnx", "fake onnx bytes");
  ASSERT_TRUE(contents.ok()) << contents.status();
  const std::string path = TempPath("dynamic_version");
  ASSERT_TRUE(WriteBundle(*std::move(contents), path).ok());
  EXPECT_EQ(ReadAll(path)[8], 2);
  auto b = Bundle::Load(path);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->manifest().format_version(), kDynamicBundleFormatVersion);
  std::remove(path.c_str());
  const std::string fixed = WriteTestBundle("static_version");
  EXPECT_EQ(ReadAll(fixed)[8], 1);
  EXPECT_TRUE(Bundle::Load(fixed).ok());
  std::remove(fixed.c_str());
}

TEST(BundleLoadErrorTest, WrongArch) {
  const std::string path = WriteTestBundle("arch", "sm_90a");
  auto b = Bundle::Load(path, {"sm_80"});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(b.status().message(), HasSubstr("sm_90a"));
  EXPECT_THAT(b.status().message(), HasSubstr("sm_80"));
  EXPECT_TRUE(Bundle::Load(path).ok());  // no arch asked: the CPU backend takes any
  std::remove(path.c_str());
}

// The test graph's bundle with `edit` applied to its manifest before writing.
template <typename Edit>
std::string WriteEditedBundle(const std::string& name, Edit edit) {
  auto graph = ParseGraph(kGraph);
  EXPECT_TRUE(graph.ok()) << graph.status();
  CompileOptions options;
  options.arch = "sm_80";
  options.fuse = false;
  auto contents = BuildBundle(**graph, options, "test.onnx", "fake onnx bytes");
  EXPECT_TRUE(contents.ok()) << contents.status();
  edit(contents->manifest);
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteBundle(*std::move(contents), path).ok());
  return path;
}

// The first generated launch of a manifest.
bundle::Launch* FirstLaunch(bundle::Manifest& m) {
  for (bundle::Step& step : *m.mutable_steps()) {
    if (step.launches_size() > 0) return step.mutable_launches(0);
  }
  return nullptr;
}

// A launch's workspace (codegen::KernelLaunch::semaphores / scratch_bytes) is
// recorded by SetLaunchTensorMaps, survives the file, and is absent (0) in launches
// without one, as in every bundle written before the fields existed.
TEST(BundleTest, LaunchWorkspaceRoundTrip) {
  codegen::KernelLaunch kl;
  kl.family = "gemm_sm80";
  kl.semaphores = 24;
  kl.scratch_bytes = 24 * 5 * 64 * 64 * 4;
  bundle::Launch recorded;
  SetLaunchTensorMaps(kl, &recorded);
  EXPECT_EQ(recorded.semaphores(), 24u);
  EXPECT_EQ(recorded.scratch_bytes(), 24u * 5 * 64 * 64 * 4);

  int edited_step = -1;
  const std::string path = WriteEditedBundle("workspace", [&](bundle::Manifest& m) {
    bundle::Launch* l = FirstLaunch(m);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->semaphores(), 0u);  // a pointwise kernel has no workspace
    EXPECT_EQ(l->scratch_bytes(), 0u);
    l->set_semaphores(24);
    l->set_scratch_bytes(491520);
    for (const bundle::Step& s : m.steps()) {
      if (s.launches_size() > 0 && edited_step < 0) edited_step = s.index();
    }
  });
  auto b = Bundle::Load(path);
  ASSERT_TRUE(b.ok()) << b.status();
  int with_workspace = 0;
  for (const bundle::Step& s : (*b)->manifest().steps()) {
    for (const bundle::Launch& l : s.launches()) {
      if (s.index() == edited_step) {
        EXPECT_EQ(l.semaphores(), 24u);
        EXPECT_EQ(l.scratch_bytes(), 491520u);
        ++with_workspace;
      } else {
        EXPECT_EQ(l.semaphores(), 0u);
        EXPECT_EQ(l.scratch_bytes(), 0u);
      }
    }
  }
  EXPECT_EQ(with_workspace, 1);
  std::remove(path.c_str());
}

// Absurd workspace sizes (a corrupt or hostile manifest) are refused when loading,
// Checksum-valid bundles whose manifest lies (shared/data/hostile has one of each of
// the first three, made by editing real bundles): Load refuses each, naming the field.
TEST(BundleLoadErrorTest, ValidatorRefusesManifestsThatLie) {
  const std::vector<std::pair<std::string, std::function<void(bundle::Manifest&)>>> edits = {
      {"input 'x': its type: f32[1099511627776] is too large",
       [](bundle::Manifest& m) {
         m.mutable_inputs(0)->clear_shape();
         m.mutable_inputs(0)->add_shape(int64_t{1} << 40);
       }},
      {"grid and block need three dims each",
       [](bundle::Manifest& m) { FirstLaunch(m)->mutable_block()->RemoveLast(); }},
      {"binds weight",
       [](bundle::Manifest& m) {
         bundle::Binding* b = m.mutable_outputs(0)->mutable_binding();
         b->set_kind(bundle::Binding::WEIGHT);
         b->set_weight_index(0);
       }},
      {"lie outside the",
       [](bundle::Manifest& m) { m.mutable_steps(0)->mutable_outputs(0)->set_offset(int64_t{1} << 40); }},
      {"names no tensor of the step", [](bundle::Manifest& m) { FirstLaunch(m)->add_args(99); }},
      {"size variant boxes that do not give a range per dim symbol",
       [](bundle::Manifest& m) {  // a static bundle has no dim symbols to bound
         FirstLaunch(m)->add_size_boxes(1);
         FirstLaunch(m)->add_size_boxes(4);
       }},
      {"size variant ranges on a launch without run-time sizes",
       [](bundle::Manifest& m) {
         FirstLaunch(m)->set_size_select("1");
         FirstLaunch(m)->add_size_ranges(1);
         FirstLaunch(m)->add_size_ranges(4);
       }},
      {"size variant ranges without an expression",
       [](bundle::Manifest& m) {
         FirstLaunch(m)->set_dim_param(true);
         FirstLaunch(m)->add_size_ranges(1);
         FirstLaunch(m)->add_size_ranges(4);
       }},
      {"an expression without [lo, hi] pairs",
       [](bundle::Manifest& m) {
         FirstLaunch(m)->set_dim_param(true);
         FirstLaunch(m)->set_size_select("1");
         FirstLaunch(m)->add_size_ranges(1);
       }},
      {"weight index 7",
       [](bundle::Manifest& m) {
         for (bundle::Step& s : *m.mutable_steps()) {
           for (bundle::Binding& b : *s.mutable_inputs()) {
             if (b.kind() == bundle::Binding::WEIGHT) b.set_weight_index(7);
           }
         }
       }},
  };
  for (const auto& [want, edit] : edits) {
    const std::string path = WriteEditedBundle("lying_manifest", edit);
    auto b = Bundle::Load(path);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << want;
    EXPECT_THAT(b.status().message(), AllOf(HasSubstr("corrupt bundle"), HasSubstr(want)));
    std::remove(path.c_str());
  }
}

// before a session would try to allocate them.
TEST(BundleLoadErrorTest, AbsurdLaunchWorkspace) {
  for (int which = 0; which < 2; ++which) {
    const std::string path = WriteEditedBundle("absurd_workspace", [&](bundle::Manifest& m) {
      bundle::Launch* l = FirstLaunch(m);
      ASSERT_NE(l, nullptr);
      if (which == 0) l->set_scratch_bytes(kMaxLaunchScratchBytes + 1);
      if (which == 1) l->set_semaphores(kMaxLaunchSemaphores + 1);
    });
    auto b = Bundle::Load(path);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << which;
    EXPECT_THAT(b.status().message(), HasSubstr("a workspace of"));
    EXPECT_THAT(b.status().message(), HasSubstr("corrupt bundle"));
    std::remove(path.c_str());
  }
}

// LaunchArgs (no GPU needed without tensor maps): the tensors' pointers, then the
// workspace's two when the launch has one; a runner's workspace smaller than the
// launch asks is refused with both sizes.
TEST(LaunchArgsTest, WorkspaceParameters) {
  int tensors[3];
  auto pointer_of = [&](int v) -> void* { return &tensors[v]; };
  codegen::KernelLaunch kl;
  kl.args = {0, 1, 2};
  uint32_t sems[4];
  float scratch[16];
  LaunchWorkspace ws{sems, 4, scratch, sizeof(scratch)};

  absl::StatusOr<LaunchArgs> plain = LaunchArgs::Build(kl, pointer_of, ws);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->pointers().size(), 3u);  // no workspace asked: none passed

  kl.semaphores = 4;
  kl.scratch_bytes = sizeof(scratch);
  absl::StatusOr<LaunchArgs> split = LaunchArgs::Build(kl, pointer_of, ws);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->pointers().size(), 5u);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(*static_cast<void**>(split->params()[j]), &tensors[j]);
  }
  EXPECT_EQ(*static_cast<void**>(split->params()[3]), static_cast<void*>(sems));
  EXPECT_EQ(*static_cast<void**>(split->params()[4]), static_cast<void*>(scratch));
  LaunchArgs moved = *std::move(split);  // params() stays valid across moves
  EXPECT_EQ(*static_cast<void**>(moved.params()[4]), static_cast<void*>(scratch));

  // Semaphores only: both parameters still come (the scratch pointer may be null).
  kl.scratch_bytes = 0;
  absl::StatusOr<LaunchArgs> sems_only = LaunchArgs::Build(kl, pointer_of, LaunchWorkspace{sems, 4, nullptr, 0});
  ASSERT_TRUE(sems_only.ok()) << sems_only.status();
  ASSERT_EQ(sems_only->pointers().size(), 5u);
  EXPECT_EQ(sems_only->pointers()[4], nullptr);

  kl.semaphores = 5;
  absl::StatusOr<LaunchArgs> small = LaunchArgs::Build(kl, pointer_of, ws);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(small.status().message(), HasSubstr("5 semaphores"));
  EXPECT_THAT(small.status().message(), HasSubstr("gave 4 semaphores"));
  kl.semaphores = 1;
  EXPECT_FALSE(LaunchArgs::Build(kl, pointer_of).ok());  // no workspace at all
}

TEST(CompileOptionsTest, Validation) {
  CompileOptions o;
  EXPECT_TRUE(ValidateCompileOptions(o).ok());
  o.arch = "sm_70";
  EXPECT_THAT(ValidateCompileOptions(o).message(), HasSubstr("sm_70"));
  o.arch = "sm_80";
  o.precision = "int8";
  EXPECT_THAT(ValidateCompileOptions(o).message(), HasSubstr("int8"));
}

TEST(CompileTest, MissingModel) {
  auto c = Compile("/nonexistent/model.onnx", {});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln
