// The measurement of one problem of kiln_gemm_bench (gemm_bench_measure.h).
#include "benchmarks/gemm_bench_measure.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::gemm_bench {
namespace {

void RequireOk(const absl::StatusOr<Generated>& g, const char* what) {
  if (!g.ok()) {
    std::fprintf(stderr, "cannot generate the peers' %s kernel: %s\n", what, std::string(g.status().message()).c_str());
    std::exit(1);
  }
}

// One idiom of a problem: its row, its peers' runs and kiln's.
struct IdiomRun {
  Row r;
  std::function<void()> peer_a, peer_b;
  std::unique_ptr<LtPlan> lt_epi;
  std::unique_ptr<Bound> separate, kiln;
};

// One problem: fill the inputs, run and check every peer and kiln once, then time
// them all together. The runs outlive the steps that make them, so they capture
// `this` (and their IdiomRun), never a step's locals.
class ProblemBench {
 public:
  ProblemBench(const Bench& bench, size_t index, const Problem& p, const ProblemKernels& pk)
      : o_(bench.o), table_(bench.table), buf_(bench.buf), stream_(bench.stream), blas_(bench.blas),
        timer_(bench.timer), dev_(bench.dev), index_(index), p_(p), pk_(pk), m_(p.m), n_(p.n), k_(p.k) {}
  ProblemBench(const ProblemBench&) = delete;
  ProblemBench& operator=(const ProblemBench&) = delete;

  // Measures the problem, prints its rows and appends them to `rows`. False after the
  // message of a harness failure (the bench's exit status is then 1).
  bool Run(std::vector<Row>& rows);

 private:
  void FillInputs();
  // The plain GEMM of both APIs first (a probe, back to back): composite peers use
  // the faster one. The rows report both from the timed rounds (Time).
  void ProbePlainGemm();
  // The "cublas" of the composite peers: the faster API of the probe.
  void Cublas(const void* a, const void* b, void* c, float beta) const;
  // Peers: A's output is the reference (written to "ref"); B's goes to "other".
  void SetPeers(IdiomRun* x);
  // Checks the peers against each other and kiln against peer A, and sets the row's
  // status. `self_test`: first check the validator itself; false when that fails.
  bool Check(IdiomRun* x, bool self_test);
  // Adds the runs of `x` to time: its peers, and kiln's kernels when they passed.
  void AddTimed(IdiomRun* x);
  // Times every run added, all together (Timer::MedianMs); false on a harness bug.
  bool Time();

  const Options& o_;
  const KernelTable& table_;
  std::map<std::string, void*>& buf_;
  cudaStream_t stream_;
  const Blas& blas_;
  Timer& timer_;
  Device& dev_;
  const size_t index_;  // in the problem list (its inputs' seed)
  const Problem& p_;
  const ProblemKernels& pk_;
  const int64_t m_, n_, k_;
  std::unique_ptr<LtPlan> lt_plain_;
  std::function<void()> gemm_ex_, gemm_lt_;
  bool use_lt_ = false;
  std::vector<std::unique_ptr<IdiomRun>> runs_;
  std::vector<std::function<void()>> timed_;  // the runs to time, and where each median goes
  std::vector<double*> medians_;
  std::vector<Sustained*> sustained_;  // --sustain: where each timed run's measurement goes
};

bool ProblemBench::Run(std::vector<Row>& rows) {
  FillInputs();
  ProbePlainGemm();
  // Per idiom: its peers and kiln's kernels, checked once each; what passed is timed
  // afterwards, all of this problem's runs together (Timer::MedianMs).
  for (Idiom idiom : o_.idioms) {
    runs_.push_back(std::make_unique<IdiomRun>(IdiomRun{Row{p_, idiom}}));
    IdiomRun* const x = runs_.back().get();
    SetPeers(x);
    // The validator's self-test goes with the first idiom of the first problem.
    if (!Check(x, rows.empty() && runs_.size() == 1)) return false;
    AddTimed(x);
  }
  if (!Time()) return false;
  for (auto& x : runs_) {
    PrintRow(x->r);
    if (o_.sustain_ms > 0) PrintSustained(x->r);
    rows.push_back(std::move(x->r));
  }
  return true;
}

void ProblemBench::FillInputs() {
  const bool dual = Has(o_, Idiom::kDualGemm), residual = Has(o_, Idiom::kBiasResidual);
  const float b_scale = 3.f / std::sqrt(static_cast<float>(k_));  // |out| ~ 1
  const uint64_t seed = o_.seed * 1000003 + index_ * 16;
  dev_.Fill(buf_["a"], m_ * k_, seed + 1, 1.f);
  dev_.Fill(buf_["b"], k_ * n_, seed + 2, b_scale);
  dev_.Fill(buf_["bias"], n_, seed + 3, 1.f);
  if (dual) {
    dev_.Fill(buf_["a2"], m_ * k_, seed + 4, 1.f);
    dev_.Fill(buf_["b2"], k_ * n_, seed + 5, b_scale);
  }
  if (residual) dev_.Fill(buf_["residual"], m_ * n_, seed + 6, 1.f);
}

void ProblemBench::ProbePlainGemm() {
  lt_plain_ = std::make_unique<LtPlan>(blas_, m_, n_, k_, CUBLASLT_EPILOGUE_DEFAULT, nullptr);
  gemm_ex_ = [this] { GemmEx(blas_, m_, n_, k_, buf_["a"], buf_["b"], buf_["ref"], 0.f); };
  gemm_lt_ = [this] { lt_plain_->Run(buf_["a"], buf_["b"], buf_["other"], 0.f); };
  use_lt_ = timer_.MedianMs(gemm_lt_) < timer_.MedianMs(gemm_ex_);
}

void ProblemBench::Cublas(const void* a, const void* b, void* c, float beta) const {
  if (use_lt_) {
    lt_plain_->Run(a, b, c, beta);
  } else {
    GemmEx(blas_, m_, n_, k_, a, b, c, beta);
  }
}

void ProblemBench::SetPeers(IdiomRun* x) {
  const Idiom idiom = x->r.idiom;
  switch (idiom) {
    case Idiom::kGemm:
      x->peer_a = gemm_ex_;
      x->peer_b = gemm_lt_;
      break;
    case Idiom::kBiasRelu:
    case Idiom::kBiasGelu: {
      const bool gelu = idiom == Idiom::kBiasGelu;
      x->lt_epi = std::make_unique<LtPlan>(blas_, m_, n_, k_,
                                           gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS,
                                           buf_["bias"]);
      const auto& g = gelu ? pk_.bias_gelu : pk_.bias_relu;
      RequireOk(g, gelu ? "bias+GELU" : "bias+ReLU");
      x->separate = std::make_unique<Bound>(*g, table_,
                                            std::map<std::string, void*>{{"y", buf_["tmp"]}, {"bias", buf_["bias"]},
                                                                         {"out", buf_["other"]}});
      x->peer_a = [this, x] { x->lt_epi->Run(buf_["a"], buf_["b"], buf_["ref"], 0.f); };
      x->peer_b = [this, x] {
        Cublas(buf_["a"], buf_["b"], buf_["tmp"], 0.f);
        x->separate->Run(stream_);
      };
      break;
    }
    case Idiom::kBiasGeluErf:
      RequireOk(pk_.bias_gelu_erf, "bias+GELU(erf)");
      x->separate = std::make_unique<Bound>(*pk_.bias_gelu_erf, table_,
                                            std::map<std::string, void*>{{"y", buf_["tmp"]}, {"bias", buf_["bias"]},
                                                                         {"out", buf_["ref"]}});
      x->peer_a = [this, x] {
        Cublas(buf_["a"], buf_["b"], buf_["tmp"], 0.f);
        x->separate->Run(stream_);
      };
      break;
    case Idiom::kBiasResidual:
      RequireOk(pk_.bias_residual, "bias+residual");
      x->lt_epi = std::make_unique<LtPlan>(blas_, m_, n_, k_, CUBLASLT_EPILOGUE_BIAS, buf_["bias"]);
      x->separate = std::make_unique<Bound>(*pk_.bias_residual, table_,
                                            std::map<std::string, void*>{{"y", buf_["tmp"]},
                                                                         {"bias", buf_["bias"]},
                                                                         {"residual", buf_["residual"]},
                                                                         {"out", buf_["other"]}});
      x->peer_a = [this, x] { x->lt_epi->Run(buf_["a"], buf_["b"], buf_["residual"], buf_["ref"], 1.f); };
      x->peer_b = [this, x] {
        Cublas(buf_["a"], buf_["b"], buf_["tmp"], 0.f);
        x->separate->Run(stream_);
      };
      break;
    case Idiom::kReluGemm:
      RequireOk(pk_.relu_a, "ReLU");
      x->separate = std::make_unique<Bound>(
          *pk_.relu_a, table_, std::map<std::string, void*>{{"a", buf_["a"]}, {"out", buf_["relu_a"]}});
      x->peer_a = [this, x] {
        x->separate->Run(stream_);
        Cublas(buf_["relu_a"], buf_["b"], buf_["ref"], 0.f);
      };
      break;
    case Idiom::kDualGemm:
      RequireOk(pk_.add, "add");
      x->separate = std::make_unique<Bound>(
          *pk_.add, table_,
          std::map<std::string, void*>{{"p", buf_["tmp"]}, {"q", buf_["tmp2"]}, {"out", buf_["other"]}});
      x->peer_a = [this] {
        Cublas(buf_["a"], buf_["b"], buf_["ref"], 0.f);
        Cublas(buf_["a2"], buf_["b2"], buf_["ref"], 1.f);
      };
      x->peer_b = [this, x] {
        Cublas(buf_["a"], buf_["b"], buf_["tmp"], 0.f);
        Cublas(buf_["a2"], buf_["b2"], buf_["tmp2"], 0.f);
        x->separate->Run(stream_);
      };
      break;
  }
}

bool ProblemBench::Check(IdiomRun* x, bool self_test) {
  Row& r = x->r;
  // Check the peers against each other.
  dev_.Poison(buf_["ref"], m_ * n_);
  x->peer_a();
  if (x->peer_b) {
    dev_.Poison(buf_["other"], m_ * n_);
    x->peer_b();
    r.peer_err = dev_.MaxRelError(buf_["other"], buf_["ref"], m_ * n_);
  }

  // Once: the validator must see a buffer nothing wrote (NaN) and a wrong result.
  if (self_test) {
    dev_.Poison(buf_["kiln"], m_ * n_);
    const float unwritten = dev_.MaxRelError(buf_["kiln"], buf_["ref"], m_ * n_);
    const float wrong = dev_.MaxRelError(buf_["bias"], buf_["ref"], std::min(m_ * n_, n_));
    if (!std::isinf(unwritten) || !(wrong > o_.tolerance)) {
      std::fprintf(stderr, "validator self-test failed (unwritten: %g, wrong: %g)\n", unwritten, wrong);
      return false;
    }
  }
  // kiln: check against peer A's output (in "ref" now).
  const absl::StatusOr<Generated>& g = pk_.kiln.at(r.idiom);
  if (!g.ok()) {
    r.status = g.status().code() == absl::StatusCode::kUnimplemented ? "n/a" : "FAIL";
    r.note = std::string(g.status().message());
    if (r.status == "n/a") r.note = "no kiln kernel yet";
  } else {
    r.config = g->config;
    x->kiln = std::make_unique<Bound>(*g, table_,
                                      std::map<std::string, void*>{{"a", buf_["a"]},
                                                                   {"b", buf_["b"]},
                                                                   {"a2", buf_["a2"]},
                                                                   {"b2", buf_["b2"]},
                                                                   {"bias", buf_["bias"]},
                                                                   {"residual", buf_["residual"]},
                                                                   {"out", buf_["kiln"]}});
    dev_.Poison(buf_["kiln"], m_ * n_);
    x->kiln->Run(stream_);
    r.err = dev_.MaxRelError(buf_["kiln"], buf_["ref"], m_ * n_);
    if (!(r.err <= o_.tolerance)) {
      r.status = "FAIL";
      r.note = "kiln's result differs from the peer's";
    } else if (!(std::isnan(r.peer_err) || r.peer_err <= o_.tolerance)) {
      r.status = "FAIL";
      r.note = absl::StrCat("the peers disagree (", Num(r.peer_err, 3), ")");
    } else {
      r.status = "OK";
    }
  }
  return true;
}

void ProblemBench::AddTimed(IdiomRun* x) {
  Row& r = x->r;
  timed_.push_back(x->peer_a);
  medians_.push_back(&r.a_ms);
  sustained_.push_back(&r.a_s);
  if (x->peer_b) {
    timed_.push_back(x->peer_b);
    medians_.push_back(&r.b_ms);
    sustained_.push_back(&r.b_s);
  }
  if (r.status == "OK") {
    timed_.push_back([this, x] { x->kiln->Run(stream_); });
    medians_.push_back(&r.kiln_ms);
    sustained_.push_back(&r.kiln_s);
  }
}

bool ProblemBench::Time() {
  const std::vector<double> ms = timer_.MedianMs(timed_);
  for (size_t i = 0; i < ms.size(); ++i) {
    if (!(ms[i] > 0)) {  // a harness bug, not a result
      std::fprintf(stderr, "timing %lldx%lldx%lld: run %zu of %zu has no time (%g ms)\n", (long long)m_,
                   (long long)n_, (long long)k_, i, ms.size(), ms[i]);
      return false;
    }
    *medians_[i] = ms[i];
    if (o_.sustain_ms > 0) *sustained_[i] = timer_.sustained()[i];
  }
  return true;
}

}  // namespace

bool MeasureProblem(const Bench& bench, size_t index, const Problem& p, const ProblemKernels& pk,
                    std::vector<Row>& rows) {
  ProblemBench problem(bench, index, p, pk);
  return problem.Run(rows);
}

}  // namespace kiln::gemm_bench
