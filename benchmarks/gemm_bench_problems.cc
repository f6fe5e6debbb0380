// The workload of kiln_gemm_bench (gemm_bench_problems.h): idiom names, problem sets
// and the graphs of kiln's groups and of the peers' separate kernels.
#include "benchmarks/gemm_bench_problems.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "graph/fused_group.h"
#include "graph/infer_shapes.h"
#include "graph/tf32_math.h"

namespace kiln::gemm_bench {

const char* IdiomName(Idiom i) {
  switch (i) {
    case Idiom::kGemm: return "gemm";
    case Idiom::kBiasRelu: return "bias_relu";
    case Idiom::kBiasGelu: return "bias_gelu";
    case Idiom::kReluGemm: return "relu_gemm";
    case Idiom::kDualGemm: return "dual_gemm";
    case Idiom::kBiasGeluErf: return "bias_gelu_erf";
    case Idiom::kBiasResidual: return "bias_residual";
  }
  return "?";
}

const char* PeerA(Idiom i) {
  switch (i) {
    case Idiom::kGemm: return "cublasGemmEx";
    case Idiom::kBiasRelu: return "cublasLt_RELU_BIAS";
    case Idiom::kBiasGelu: return "cublasLt_GELU_BIAS";
    case Idiom::kReluGemm: return "relu_kernel+cublas";
    case Idiom::kDualGemm: return "cublas+cublas_beta1";
    case Idiom::kBiasGeluErf: return "cublas+bias_gelu_erf_kernel";
    case Idiom::kBiasResidual: return "cublasLt_BIAS_beta1";
  }
  return "?";
}

const char* PeerB(Idiom i) {
  switch (i) {
    case Idiom::kGemm: return "cublasLt";
    case Idiom::kBiasRelu: return "cublas+bias_relu_kernel";
    case Idiom::kBiasGelu: return "cublas+bias_gelu_kernel";
    case Idiom::kReluGemm: return "";
    case Idiom::kDualGemm: return "2xcublas+add_kernel";
    case Idiom::kBiasGeluErf: return "";
    case Idiom::kBiasResidual: return "cublas+bias_residual_kernel";
  }
  return "?";
}

std::vector<Problem> Squares() {
  std::vector<Problem> p;
  for (int64_t s : {1024, 2048, 4096, 8192}) p.push_back({"squares", s, s, s});
  return p;
}

std::vector<Problem> Transformer() {
  std::vector<Problem> p;
  for (int64_t tokens : {128, 512, 2048, 8192, 16384}) {
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{
             {768, 768}, {3072, 768}, {768, 3072}, {1024, 1024}, {4096, 1024}, {1024, 4096}}) {
      p.push_back({"transformer", tokens, n, k});
    }
  }
  return p;
}

std::vector<Problem> SmallM() {
  std::vector<Problem> p;
  for (int64_t m : {1, 8, 16, 32, 64}) {
    for (int64_t n : {768, 3072, 4096}) {
      for (int64_t k : {768, 3072, 4096}) p.push_back({"small_m", m, n, k});
    }
  }
  return p;
}

std::vector<Problem> Random(uint64_t seed, int count) {
  std::mt19937_64 gen(seed);
  std::vector<Problem> p;
  for (int i = 0; i < count; ++i) {
    const int64_t m = 128 * (1 + static_cast<int64_t>(gen() % 32));
    const int64_t n = 128 * (1 + static_cast<int64_t>(gen() % 32));
    const int64_t k = 128 * (1 + static_cast<int64_t>(gen() % 32));
    p.push_back({"random", m, n, k});
  }
  return p;
}

std::vector<Problem> Smoke() { return {{"smoke", 512, 512, 512}, {"smoke", 1024, 768, 768}, {"smoke", 1000, 776, 520}}; }

namespace {

Value* Input(Graph& g, const std::string& name, Shape shape, DType dt) {
  Value* v = g.AddValue(name);
  v->SetType(dt, std::move(shape));
  g.AddInput(v);
  return v;
}

// Types the graph and, when `pattern` is not empty, replaces `members` by one
// FusedGroup (as the fusion passes would); `node` is the group or the single member.
absl::StatusOr<Built> Finish(Built b, const std::vector<Node*>& members, const std::string& pattern,
                             const Node* anchor, Value* out) {
  b.graph->AddOutput(out);
  InferShapesOptions options;
  options.fold_constants = false;
  if (absl::Status s = InferShapes(*b.graph, options); !s.ok()) return s;
  if (pattern.empty()) {
    b.node = members[0];
    return b;
  }
  absl::StatusOr<Node*> group = FormFusedGroup(*b.graph, members, pattern, anchor);
  if (!group.ok()) return group.status();
  b.node = *group;
  return b;
}

// Appends `op` reading `ins` and returns its output (named `out_name`).
Node* Op(Graph& g, const std::string& op, const std::vector<Value*>& ins, const std::string& out_name) {
  return g.AddNode(op, ins, {g.AddValue(out_name)}, absl::StrCat(op, "_", out_name));
}

}  // namespace

absl::StatusOr<Built> KilnGroup(Idiom idiom, int64_t m, int64_t n, int64_t k, bool b_nk, DType dt, bool tf32) {
  Built b;
  Graph& g = *b.graph;
  auto Input = [&](Graph& g, const std::string& name, Shape shape) { return gemm_bench::Input(g, name, shape, dt); };
  // MatMul(x, B) with B the input `name` in the chosen layout.
  auto matmul = [&](Value* x, const std::string& name, const std::string& out) {
    Node* mm = Op(g, "MatMul", {x, Input(g, name, b_nk ? Shape{n, k} : Shape{k, n})}, out);
    if (b_nk) mm->SetAttr("trans_b", int64_t{1});
    if (tf32) MarkForTf32(*mm);
    return mm;
  };
  switch (idiom) {
    case Idiom::kGemm: {
      Node* mm = matmul(Input(g, "a", {m, k}), "b", "out");
      return Finish(std::move(b), {mm}, "matmul", mm, mm->output(0));
    }
    case Idiom::kBiasRelu:
    case Idiom::kBiasGelu:
    case Idiom::kBiasGeluErf: {
      Node* mm = matmul(Input(g, "a", {m, k}), "b", "mm");
      Node* add = Op(g, "Add", {mm->output(0), Input(g, "bias", {n})}, "biased");
      Node* act = Op(g, idiom == Idiom::kBiasRelu ? "Relu" : "Gelu", {add->output(0)}, "out");
      if (idiom == Idiom::kBiasGelu) act->SetAttr("approximate", "tanh");
      return Finish(std::move(b), {mm, add, act}, "matmul+epilogue", mm, act->output(0));
    }
    case Idiom::kBiasResidual: {
      Node* mm = matmul(Input(g, "a", {m, k}), "b", "mm");
      Node* add = Op(g, "Add", {mm->output(0), Input(g, "bias", {n})}, "biased");
      Node* res = Op(g, "Add", {add->output(0), Input(g, "residual", {m, n})}, "out");
      return Finish(std::move(b), {mm, add, res}, "matmul+epilogue", mm, res->output(0));
    }
    case Idiom::kReluGemm: {
      Node* relu = Op(g, "Relu", {Input(g, "a", {m, k})}, "relu_a");
      Node* mm = matmul(relu->output(0), "b", "out");
      return Finish(std::move(b), {relu, mm}, "prologue+matmul", mm, mm->output(0));
    }
    case Idiom::kDualGemm: {
      Node* p = matmul(Input(g, "a", {m, k}), "b", "p");
      Node* q = matmul(Input(g, "a2", {m, k}), "b2", "q");
      Node* add = Op(g, "Add", {p->output(0), q->output(0)}, "out");
      return Finish(std::move(b), {p, q, add}, "dual-matmul", p, add->output(0));
    }
  }
  return absl::InvalidArgumentError("unknown idiom");
}

absl::StatusOr<Built> BiasActGroup(Idiom idiom, int64_t m, int64_t n, DType dt) {
  Built b;
  Graph& g = *b.graph;
  auto Input = [&](Graph& g, const std::string& name, Shape shape) { return gemm_bench::Input(g, name, shape, dt); };
  Node* add = Op(g, "Add", {Input(g, "y", {m, n}), Input(g, "bias", {n})}, "biased");
  Node* act = Op(g, idiom == Idiom::kBiasRelu ? "Relu" : "Gelu", {add->output(0)}, "out");
  if (idiom == Idiom::kBiasGelu) act->SetAttr("approximate", "tanh");
  return Finish(std::move(b), {add, act}, "pointwise", nullptr, act->output(0));
}

absl::StatusOr<Built> BiasResidualGroup(int64_t m, int64_t n, DType dt) {
  Built b;
  Graph& g = *b.graph;
  auto Input = [&](Graph& g, const std::string& name, Shape shape) { return gemm_bench::Input(g, name, shape, dt); };
  Node* add = Op(g, "Add", {Input(g, "y", {m, n}), Input(g, "bias", {n})}, "biased");
  Node* res = Op(g, "Add", {add->output(0), Input(g, "residual", {m, n})}, "out");
  return Finish(std::move(b), {add, res}, "pointwise", nullptr, res->output(0));
}

absl::StatusOr<Built> ReluNode(int64_t rows, int64_t cols, DType dt) {
  Built b;
  Node* relu = Op(*b.graph, "Relu", {Input(*b.graph, "a", {rows, cols}, dt)}, "out");
  return Finish(std::move(b), {relu}, "", nullptr, relu->output(0));
}

absl::StatusOr<Built> AddNode(int64_t rows, int64_t cols, DType dt) {
  Built b;
  Graph& g = *b.graph;
  Node* add = Op(g, "Add", {Input(g, "p", {rows, cols}, dt), Input(g, "q", {rows, cols}, dt)}, "out");
  return Finish(std::move(b), {add}, "", nullptr, add->output(0));
}

}  // namespace kiln::gemm_bench
