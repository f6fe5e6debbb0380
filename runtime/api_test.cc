// Tests of the public C++ API (include/kiln/): Model/Session against EvaluateGraph,
// weight sharing, concurrent sessions, errors, and the per-step profile.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "frontend/onnx_importer.h"
#include "gmock/gmock.h"
#include "graph/evaluate.h"
#include "gtest/gtest.h"
#include "kiln/kiln.h"
#include "models/architectures.h"
#include "compiler/compiler.h"
#include "runtime/cuda_util.h"
#include "tools/commands.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// A generated model compiled into a bundle on disk, with its imported graph.
struct CompiledModel {
  std::unique_ptr<Graph> graph;
  std::string path;
  ~CompiledModel() {
    if (!path.empty()) std::remove(path.c_str());
  }
};

std::unique_ptr<CompiledModel> CompileGenerated(const std::string& name, const std::string& arch = "sm_90a",
                                                const std::string& precision = "fp16") {
  models::ModelOptions options;
  if (name == "bert_layer") {
    options.seq = 16;
    options.hidden = 64;
    options.heads = 4;
    options.ffn = 128;
  }
  auto model = models::MakeModel(name, options);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  auto graph = ImportOnnxModel(*std::move(model), ".");
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return nullptr;
  auto out = std::make_unique<CompiledModel>();
  out->graph = *std::move(graph);
  CompileOptions compile;
  compile.arch = arch;
  compile.precision = precision;
  auto contents = BuildBundle(*out->graph, compile, name, "bytes");
  EXPECT_TRUE(contents.ok()) << contents.status();
  if (!contents.ok()) return nullptr;
  out->path = (std::filesystem::path(::testing::TempDir()) /
               absl::StrCat("api_", name, "_", arch, "_", precision, "_", ::getpid(), ".kiln")).string();
  const absl::Status written = WriteBundle(*std::move(contents), out->path);
  EXPECT_TRUE(written.ok()) << written;
  return out;
}

// Deterministic inputs, different per `seed`.
std::map<std::string, HostTensor> MakeInputs(const Model& model, int seed) {
  std::map<std::string, HostTensor> inputs;
  for (const TensorInfo& info : model.inputs()) {
    std::vector<float> v(info.numel());
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = IsFloating(info.dtype) ? std::sin(0.37f * static_cast<float>(i) + 1.3f * seed)
                                    : static_cast<float>((i + seed) % 7);
    }
    auto t = HostTensor::FromFloat(info.dtype, info.shape, v);
    EXPECT_TRUE(t.ok()) << t.status();
    inputs[info.name] = *std::move(t);
  }
  return inputs;
}

TensorMap ToFeeds(const std::map<std::string, HostTensor>& inputs) {
  TensorMap feeds;
  for (const auto& [name, h] : inputs) {
    Tensor t(h.dtype(), h.shape());
    std::memcpy(t.mutable_raw_data(), h.data(), h.nbytes());
    feeds[name] = std::move(t);
  }
  return feeds;
}

bool BitwiseEqual(const HostTensor& a, const HostTensor& b) {
  return a.TypeString() == b.TypeString() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// A model compiled for a range of batch sizes (docs/dynamic_shapes.md): its signature
// gives the dims and the ranges, and a CPU session runs it at any size inside them.
TEST(ApiTest, DynamicModelRunsAtSizesInItsRange) {
  auto proto = models::MakeModel("mlp", {});
  ASSERT_TRUE(proto.ok()) << proto.status();
  onnx::GraphProto* g = proto->mutable_graph();
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  g->clear_value_info();
  ImportOptions import;
  import.dim_ranges = {{ "batch", 1, 8, 9 }};
  auto opt_outside = ImportOnnxModel(*proto, ".", import);
  ASSERT_FALSE(opt_outside.ok());
  EXPECT_NE(opt_outside.status().message().find("batch=1..8:9: the opt size must lie in the range"), std::string::npos)
      << opt_outside.status();
  import.dim_ranges = {{ "batch", 1, 8, 4 }};
  auto graph = ImportOnnxModel(*proto, ".", import);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto contents = BuildBundle(**graph, CompileOptions(), "mlp", "bytes");
  ASSERT_TRUE(contents.ok()) << contents.status();
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / absl::StrCat("api_dynamic_", ::getpid(), ".kiln")).string();
  ASSERT_TRUE(WriteBundle(*std::move(contents), path).ok());
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->dim_ranges().size(), 1u);
  EXPECT_EQ((*model)->dim_ranges()[0].name, "batch");
  EXPECT_EQ((*model)->dim_ranges()[0].max, 8);
  EXPECT_EQ((*model)->dim_ranges()[0].opt, 4);
  const TensorInfo& in = (*model)->inputs()[0];
  EXPECT_EQ(in.dims, (std::vector<std::string>{"batch", "256"}));
  EXPECT_EQ(in.shape, (Shape{8, 256}));
  EXPECT_EQ(in.min_shape, (Shape{1, 256}));
  EXPECT_EQ(in.ToString(), "x: f32[batch,256]");
  auto session = Session::Create(*model);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int64_t batch : {1, 3, 8}) {
    std::vector<float> x(batch * 256);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
    auto host = HostTensor::FromFloat(DType::kFloat32, {batch, 256}, x);
    ASSERT_TRUE(host.ok());
    auto out = (*session)->Run({{"x", *host}});
    ASSERT_TRUE(out.ok()) << out.status();
    const HostTensor& got = out->at((*model)->outputs()[0].name);
    EXPECT_EQ(got.shape(), (Shape{batch, 10}));
    ImportOptions fixed;
    fixed.dims = {{"batch", batch}};
    auto ref_graph = ImportOnnxModel(*proto, ".", fixed);
    ASSERT_TRUE(ref_graph.ok()) << ref_graph.status();
    auto ref = EvaluateGraph(**ref_graph, {{"x", Tensor::FromFloat(DType::kFloat32, {batch, 256}, x)}});
    ASSERT_TRUE(ref.ok()) << ref.status();
    const std::vector<float> got_v = got.ToFloat(), want = (*ref)[0].ToFloat();
    ASSERT_EQ(got_v.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got_v[i], want[i], 1e-2f * (1 + std::abs(want[i])));
  }
  std::vector<float> x9(9 * 256, 0.5f);
  auto big = HostTensor::FromFloat(DType::kFloat32, {9, 256}, x9);
  ASSERT_TRUE(big.ok());
  auto outside = (*session)->Run({{"x", *big}});
  ASSERT_FALSE(outside.ok());
  EXPECT_THAT(outside.status().message(), HasSubstr("input 'x' dim 0 (batch) is 9, outside the range 1..8"));
  // An output buffer of another batch size than the run's is refused.
  std::vector<float> x2(2 * 256, 0.5f), y(8 * 10);
  const ConstTensorRef in_ref{x2.data(), DType::kFloat32, {2, 256}, Device::kCpu};
  const TensorRef out_ref{y.data(), DType::kFloat32, {8, 10}, Device::kCpu};
  absl::Status into = (*session)->RunInto({{"x", in_ref}}, {{(*model)->outputs()[0].name, out_ref}});
  EXPECT_THAT(into.message(), HasSubstr("but this run's output is f32[2,10]"));
  std::remove(path.c_str());
}

// fp32 bundles match the reference to float noise; fp16 bundles store every
// intermediate in f16 (math in fp32), see docs/runtime.md "Precision".
TEST(ApiTest, RunMatchesEvaluateGraph) {
  for (const std::string name : {"mlp", "tiny_cnn", "bert_layer"}) {
    for (const std::string precision : {"fp32", "fp16"}) {
      SCOPED_TRACE(absl::StrCat(name, " --precision ", precision));
      const float tol = precision == "fp32" ? 1e-5f : 1e-2f;
      auto compiled = CompileGenerated(name, "sm_90a", precision);
      ASSERT_NE(compiled, nullptr);
      auto model = Model::Load(compiled->path);
      ASSERT_TRUE(model.ok()) << model.status();
      ASSERT_EQ((*model)->inputs().size(), compiled->graph->inputs().size());
      ASSERT_EQ((*model)->outputs().size(), compiled->graph->outputs().size());
      for (size_t i = 0; i < (*model)->inputs().size(); ++i) {
        EXPECT_EQ((*model)->inputs()[i].name, compiled->graph->inputs()[i]->name());
        EXPECT_EQ((*model)->inputs()[i].shape, compiled->graph->inputs()[i]->shape());
      }
      auto session = Session::Create(*model);
      ASSERT_TRUE(session.ok()) << session.status();
      const auto inputs = MakeInputs(**model, 0);
      auto outputs = (*session)->Run(inputs);
      ASSERT_TRUE(outputs.ok()) << outputs.status();
      auto expected = EvaluateGraph(*compiled->graph, ToFeeds(inputs));
      ASSERT_TRUE(expected.ok()) << expected.status();
      ASSERT_EQ(outputs->size(), expected->size());
      for (size_t i = 0; i < expected->size(); ++i) {
        const std::string& out_name = compiled->graph->outputs()[i]->name();
        ASSERT_TRUE(outputs->count(out_name)) << out_name;
        const HostTensor& got = outputs->at(out_name);
        EXPECT_EQ(got.TypeString(), (*expected)[i].TypeString());
        const std::vector<float> g = got.ToFloat(), e = (*expected)[i].ToFloat();
        ASSERT_EQ(g.size(), e.size());
        int bad = 0;
        for (size_t k = 0; k < g.size(); ++k) bad += !(std::abs(g[k] - e[k]) <= tol * (1.0f + std::abs(e[k])));
        EXPECT_EQ(bad, 0) << name << " output " << out_name;
      }

      // RunInto writes the same numbers into caller buffers.
      std::map<std::string, HostTensor> buffers;
      std::map<std::string, TensorRef> refs;
      for (const TensorInfo& info : (*model)->outputs()) {
        buffers[info.name] = HostTensor(info.dtype, info.shape);
        refs[info.name] = buffers[info.name].ref();
      }
      std::map<std::string, ConstTensorRef> in_refs;
      for (const auto& [n, t] : inputs) in_refs.emplace(n, t.ref());
      ASSERT_TRUE((*session)->RunInto(in_refs, refs).ok());
      for (const auto& [n, t] : buffers) EXPECT_TRUE(BitwiseEqual(t, outputs->at(n))) << name << " " << n;
    }
  }
}

TEST(ApiTest, SessionsShareTheModelsWeights) {
  auto compiled = CompileGenerated("bert_layer");
  ASSERT_NE(compiled, nullptr);
  auto model_or = Model::Load(compiled->path);
  ASSERT_TRUE(model_or.ok()) << model_or.status();
  std::shared_ptr<const Model> model = *std::move(model_or);
  EXPECT_EQ(model.use_count(), 1);
  auto a = Session::Create(model);
  auto b = Session::Create(model);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(model.use_count(), 3);  // the sessions hold the model, not copies of it
  ASSERT_NE(model->weight_storage(), nullptr);
  EXPECT_EQ((*a)->weight_storage(), model->weight_storage());
  EXPECT_EQ((*b)->weight_storage(), model->weight_storage());
  EXPECT_GT(model->weight_bytes(), 64 * 64 * 2);  // at least one 64x64 f16 matrix
  EXPECT_EQ((*a)->arena_bytes(), model->arena_bytes());
  // The model outlives its last user handle while sessions run.
  const auto inputs = MakeInputs(*model, 1);
  auto ra = (*a)->Run(inputs);
  model.reset();
  auto rb = (*b)->Run(inputs);
  ASSERT_TRUE(ra.ok() && rb.ok());
  for (const auto& [n, t] : *ra) EXPECT_TRUE(BitwiseEqual(t, rb->at(n))) << n;
}

TEST(ApiTest, ConcurrentSessionsGiveIdenticalResults) {
  auto compiled = CompileGenerated("bert_layer");
  ASSERT_NE(compiled, nullptr);
  auto model = Model::Load(compiled->path);
  ASSERT_TRUE(model.ok()) << model.status();
  constexpr int kThreads = 4;
  constexpr int kRuns = 20;
  // Expected outputs per thread (each thread feeds its own inputs, so a session that
  // read another's arena or inputs would be caught), computed serially first.
  std::vector<std::map<std::string, HostTensor>> inputs(kThreads), expected(kThreads);
  {
    auto session = Session::Create(*model);
    ASSERT_TRUE(session.ok());
    for (int t = 0; t < kThreads; ++t) {
      inputs[t] = MakeInputs(**model, t);
      auto r = (*session)->Run(inputs[t]);
      ASSERT_TRUE(r.ok()) << r.status();
      expected[t] = *std::move(r);
    }
  }
  std::vector<std::unique_ptr<Session>> sessions;
  for (int t = 0; t < kThreads; ++t) {
    auto s = Session::Create(*model);
    ASSERT_TRUE(s.ok());
    sessions.push_back(*std::move(s));
  }
  std::atomic<int> ready{0}, in_flight{0}, max_in_flight{0}, mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      for (int i = 0; i < kRuns; ++i) {
        const int now = in_flight.fetch_add(1) + 1;
        int prev = max_in_flight.load();
        while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
        }
        auto r = sessions[t]->Run(inputs[t]);
        in_flight.fetch_sub(1);
        if (!r.ok()) {
          errors.fetch_add(1);
          continue;
        }
        for (const auto& [n, v] : *r) mismatches += !BitwiseEqual(v, expected[t].at(n));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GE(max_in_flight.load(), 2) << "the runs never overlapped";
}

TEST(ApiTest, OneSessionFromTwoThreadsIsSerialised) {
  auto compiled = CompileGenerated("mlp");
  ASSERT_NE(compiled, nullptr);
  auto model = Model::Load(compiled->path);
  ASSERT_TRUE(model.ok());
  auto session = Session::Create(*model);
  ASSERT_TRUE(session.ok());
  const auto in0 = MakeInputs(**model, 0), in1 = MakeInputs(**model, 1);
  const auto e0 = (*session)->Run(in0), e1 = (*session)->Run(in1);
  ASSERT_TRUE(e0.ok() && e1.ok());
  std::atomic<int> mismatches{0};
  auto work = [&](const std::map<std::string, HostTensor>& in, const std::map<std::string, HostTensor>& want) {
    for (int i = 0; i < 30; ++i) {
      auto r = (*session)->Run(in);
      if (!r.ok()) {
        ++mismatches;
        continue;
      }
      for (const auto& [n, v] : *r) mismatches += !BitwiseEqual(v, want.at(n));
    }
  };
  std::thread a(work, std::cref(in0), std::cref(*e0)), b(work, std::cref(in1), std::cref(*e1));
  a.join();
  b.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ApiTest, Errors) {
  auto compiled = CompileGenerated("mlp");
  ASSERT_NE(compiled, nullptr);
  auto model = Model::Load(compiled->path);
  ASSERT_TRUE(model.ok());
  ASSERT_EQ((*model)->inputs().size(), 1u);
  const TensorInfo in = (*model)->inputs()[0];
  auto session = Session::Create(*model);
  ASSERT_TRUE(session.ok());
  const std::string type = absl::StrCat(DTypeName(in.dtype), ShapeToString(in.shape));

  auto missing = (*session)->Run({});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr(absl::StrCat("missing input '", in.name, "' (expected ", type)));

  Shape bad_shape = in.shape;
  bad_shape.back() += 1;
  auto misshaped = (*session)->Run({{in.name, HostTensor(in.dtype, bad_shape)}});
  EXPECT_EQ(misshaped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(misshaped.status().message(), HasSubstr(absl::StrCat("input '", in.name, "' must be ", type, ", got")));

  auto wrong_dtype = (*session)->Run({{in.name, HostTensor(DType::kInt64, in.shape)}});
  EXPECT_THAT(wrong_dtype.status().message(), HasSubstr(absl::StrCat("must be ", type, ", got i64")));

  auto unknown = (*session)->Run({{in.name, HostTensor(in.dtype, in.shape)}, {"nope", HostTensor(in.dtype, in.shape)}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown input 'nope'; the model's inputs are: " + in.name));

  // RunInto checks the caller's output buffers.
  HostTensor x(in.dtype, in.shape);
  HostTensor small(DType::kFloat32, {1});
  const std::string out_name = (*model)->outputs()[0].name;
  EXPECT_THAT((*session)->RunInto({{in.name, x.ref()}}, {{out_name, small.ref()}}).message(),
              HasSubstr(absl::StrCat("output buffer '", out_name, "' must be")));
  EXPECT_THAT((*session)->RunInto({{in.name, x.ref()}}, {{"zz", small.ref()}}).message(),
              HasSubstr("unknown output 'zz'"));
  ConstTensorRef on_gpu = x.ref();
  on_gpu.device = Device::kGpu;
  EXPECT_THAT((*session)->RunInto({{in.name, on_gpu}}, {}).message(), HasSubstr("is in GPU memory"));

  SessionOptions gpu;
  gpu.device = Device::kGpu;
  auto gpu_session = Session::Create(*model, gpu);
  if (!HasGpu()) {  // without a GPU the session is refused with the reason
    EXPECT_EQ(gpu_session.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(gpu_session.status().message(), HasSubstr("--device gpu needs a CUDA GPU: no CUDA GPU"));
  } else {
    EXPECT_TRUE(gpu_session.ok()) << gpu_session.status();
  }

  SessionOptions cpu_stream;
  int fake_stream = 0;
  cpu_stream.stream = &fake_stream;
  EXPECT_EQ(Session::Create(*model, cpu_stream).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Session::Create(nullptr).status().code(), absl::StatusCode::kInvalidArgument);

  auto wrong_arch = Model::Load(compiled->path, LoadOptions{"sm_80"});
  EXPECT_EQ(wrong_arch.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong_arch.status().message(), HasSubstr("sm_80"));
  EXPECT_THAT(wrong_arch.status().message(), HasSubstr("sm_90a"));
  EXPECT_TRUE(Model::Load(compiled->path, LoadOptions{"sm_90a"}).ok());

  auto no_file = Model::Load("/nonexistent/x.kiln");
  EXPECT_EQ(no_file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_file.status().message(), HasSubstr("/nonexistent/x.kiln"));
}

TEST(ApiTest, ProfileCoversEveryStep) {
  auto compiled = CompileGenerated("bert_layer");
  ASSERT_NE(compiled, nullptr);
  auto model = Model::Load(compiled->path);
  ASSERT_TRUE(model.ok());
  auto session = Session::Create(*model);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ((*session)->Profile(MakeInputs(**model, 0), 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*session)->Profile({}, 3).ok());
  auto report = (*session)->Profile(MakeInputs(**model, 0), 3);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->iterations, 3);
  EXPECT_EQ(report->device, "cpu");
  ASSERT_EQ(static_cast<int>(report->steps.size()), (*model)->num_steps());
  double share = 0, sum = 0;
  for (size_t i = 0; i < report->steps.size(); ++i) {
    const StepProfile& p = report->steps[i];
    EXPECT_EQ(p.index, static_cast<int>(i));
    // The GPU kernel the step was assigned (the CPU backend runs the reference).
    EXPECT_THAT(p.kernel, ::testing::AnyOf(::testing::StartsWith("nvrtc:k"), ::testing::StartsWith("cublaslt:"),
                                           ::testing::StartsWith("cudnn:"), "view"));
    EXPECT_FALSE(p.onnx_nodes.empty());
    EXPECT_GE(p.median_ms, 0.0);
    share += p.share;
    sum += p.median_ms;
  }
  EXPECT_NEAR(share, 1.0, 1e-9);
  EXPECT_NEAR(sum, report->steps_total_ms, 1e-9);
  EXPECT_GT(report->steps_total_ms, 0.0);
  EXPECT_GE(report->run_median_ms, 0.5 * report->steps_total_ms);

  // The table is sorted slowest first and ends with the total.
  const std::string table = FormatProfileTable(*report);
  const StepProfile* slowest = &report->steps[0];
  for (const StepProfile& p : report->steps) {
    if (p.median_ms > slowest->median_ms) slowest = &p;
  }
  const std::string first_row = table.substr(table.find('\n') + 1);
  EXPECT_EQ(first_row.rfind(absl::StrCat(slowest->index, " "), 0), 0u) << table;
  EXPECT_THAT(table, HasSubstr("\ntotal"));
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), static_cast<long>(report->steps.size()) + 2);

  const std::string json = ProfileToJson(*report);
  EXPECT_THAT(json, HasSubstr("\"iterations\": 3"));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"kernel\": \"", slowest->kernel, "\"")));
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), static_cast<long>(report->steps.size()) + 1);
  EXPECT_EQ(json.find("{\"index\": " + std::to_string(slowest->index)),
            json.find("{\"index\": "));  // slowest first
}

// `kiln run MODEL.kiln --profile`: the JSON file lands in --output-dir by default, or
// at --profile-json, with one entry per step.
TEST(ApiTest, RunCommandProfileWritesJson) {
  auto compiled = CompileGenerated("tiny_cnn");
  ASSERT_NE(compiled, nullptr);
  auto model = Model::Load(compiled->path);
  ASSERT_TRUE(model.ok());
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("api_profile_", ::getpid());
  std::filesystem::remove_all(dir);
  const std::string input = absl::StrCat("--input=", (*model)->inputs()[0].name, "=arange");
  ASSERT_TRUE(cli::RunCommand({compiled->path, input, "--iterations=2", "--profile", "--output-dir=" + dir.string()})
                  .ok());
  const std::filesystem::path json_path =
      dir / (std::filesystem::path(compiled->path).stem().string() + ".profile.json");
  std::ifstream in(json_path);
  ASSERT_TRUE(in.good()) << json_path << " was not written";
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string json = buffer.str();
  EXPECT_THAT(json, HasSubstr("\"iterations\": 2"));
  EXPECT_EQ(static_cast<int>(std::count(json.begin(), json.end(), '{')), (*model)->num_steps() + 1);

  const std::string explicit_path = (dir / "p.json").string();
  ASSERT_TRUE(cli::RunCommand({compiled->path, input, "--profile-json=" + explicit_path}).ok());
  EXPECT_TRUE(std::filesystem::exists(explicit_path));
  EXPECT_FALSE(cli::RunCommand({"x.onnx", "--reference", "--profile"}).ok());
  std::filesystem::remove_all(dir);
}

TEST(ApiTest, ProfileJsonEscapes) {
  ProfileReport r;
  r.model_path = "a\"b\\c";
  r.steps.push_back(StepProfile{0, "k", "Op", {"n\n1"}, 1.0, 1.0});
  const std::string json = ProfileToJson(r);
  EXPECT_THAT(json, HasSubstr("\"model\": \"a\\\"b\\\\c\""));
  EXPECT_THAT(json, HasSubstr("[\"n\\n1\"]"));
}

}  // namespace
}  // namespace kiln
