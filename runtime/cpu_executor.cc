// CPU backend: the bundle's steps on the reference evaluators, in one host arena.
#include "runtime/cpu_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/specialize.h"

namespace kiln {

void CpuExecutor::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

absl::StatusOr<std::shared_ptr<const CpuProgram>> CpuProgram::Create(const Bundle& bundle) {
  std::shared_ptr<CpuProgram> p(new CpuProgram());
  p->bundle_ = &bundle;
  const bundle::Manifest& m = bundle.manifest();
  KILN_ASSIGN_OR_RETURN(p->graph_, bundle.BuildGraph());
  const std::vector<Node*> nodes = p->graph_->nodes();
  if (static_cast<int>(nodes.size()) != m.steps_size()) {
    return absl::InvalidArgumentError(absl::StrCat(bundle.path(), ": ", m.steps_size(), " steps but ",
                                                   nodes.size(), " graph nodes (one step per node expected)"));
  }
  for (int s = 0; s < m.steps_size(); ++s) {
    const bundle::Step& step = m.steps(s);
    const Node* n = nodes[s];
    if (step.index() != s || n->name() != step.node() || n->op_type() != step.op_type() ||
        n->num_inputs() != step.inputs_size() || n->num_outputs() != step.outputs_size()) {
      return absl::InvalidArgumentError(absl::StrCat(bundle.path(), ": step ", s, " (", step.kernel(), ", node '",
                                                     step.node(), "') does not match graph node ", s, ", ",
                                                     n->Describe()));
    }
    p->step_nodes_.push_back(n);
  }
  // The weights share storage with the graph's constants (BuildGraph copied them out
  // of the mapping once).
  for (int i = 0; i < m.weights_size(); ++i) {
    const Value* v = p->graph_->FindValue(m.weights(i).name());
    if (v == nullptr || !v->is_constant()) {
      return absl::InvalidArgumentError(
          absl::StrCat(bundle.path(), ": weight '", m.weights(i).name(), "' is not a constant of the graph"));
    }
    p->weights_.push_back(v->constant());
  }
  return std::shared_ptr<const CpuProgram>(std::move(p));
}

int64_t CpuProgram::weight_bytes() const {
  int64_t total = 0;
  for (const Tensor& w : weights_) total += static_cast<int64_t>(w.nbytes());
  return total;
}

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(const Bundle& bundle) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const CpuProgram> program, CpuProgram::Create(bundle));
  return Create(std::move(program));
}

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(std::shared_ptr<const CpuProgram> program) {
  if (program == nullptr) return absl::InvalidArgumentError("CpuExecutor::Create: null program");
  std::unique_ptr<CpuExecutor> ex(new CpuExecutor());
  ex->program_ = std::move(program);
  const Bundle& bundle = ex->program_->bundle();
  ex->arena_size_ = static_cast<size_t>(bundle.manifest().memory_plan().arena_bytes());
  const size_t alloc = std::max<size_t>(256, (ex->arena_size_ + 255) / 256 * 256);
  ex->arena_.reset(static_cast<uint8_t*>(std::aligned_alloc(256, alloc)));
  if (ex->arena_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat(bundle.path(), ": cannot allocate the ", ex->arena_size_, "-byte arena"));
  }
  return ex;
}

absl::StatusOr<Tensor> CpuExecutor::Read(const bundle::Binding& b, const Shape* shape) const {
  switch (b.kind()) {
    case bundle::Binding::WEIGHT:
      if (b.weight_index() < 0 || b.weight_index() >= static_cast<int>(program_->weights().size())) {
        return absl::InvalidArgumentError(absl::StrCat("weight index ", b.weight_index(), " out of range"));
      }
      return program_->weights()[b.weight_index()];
    case bundle::Binding::ARENA: {
      KILN_ASSIGN_OR_RETURN(DType dtype, DTypeFromBinding(b));
      Tensor t(dtype, shape != nullptr ? *shape : ShapeFromProto(b.shape()));
      const bool fits = shape != nullptr ? static_cast<int64_t>(t.nbytes()) <= b.bytes()
                                         : static_cast<int64_t>(t.nbytes()) == b.bytes();
      if (!fits || b.offset() < 0 || static_cast<size_t>(b.offset()) + t.nbytes() > arena_size_) {
        return absl::InvalidArgumentError(absl::StrCat("arena binding of '", b.value(), "' (offset ", b.offset(),
                                                       ", ", b.bytes(), " bytes) does not fit the ", arena_size_,
                                                       "-byte arena or its type"));
      }
      if (t.nbytes() > 0) std::memcpy(t.mutable_raw_data(), arena_.get() + b.offset(), t.nbytes());
      return t;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("binding of '", b.value(), "' has no data"));
  }
}

absl::Status CpuExecutor::Write(const bundle::Binding& b, const Tensor& t, const std::string& what) {
  if (b.kind() != bundle::Binding::ARENA) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", b.value(), "' is not bound to the arena"));
  }
  // A dynamic bundle's binding is sized for the largest values.
  const bool dynamic = program_->graph().is_dynamic();
  const bool fits =
      dynamic ? static_cast<int64_t>(t.nbytes()) <= b.bytes() : static_cast<int64_t>(t.nbytes()) == b.bytes();
  if (!fits || b.offset() < 0 || static_cast<size_t>(b.offset()) + t.nbytes() > arena_size_) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", b.value(), "' is ", t.TypeString(), " (", t.nbytes(),
                                                   " bytes) but its binding holds ", b.bytes(), " bytes at offset ",
                                                   b.offset(), " of a ", arena_size_, "-byte arena"));
  }
  if (t.nbytes() > 0) std::memcpy(arena_.get() + b.offset(), t.raw_data(), t.nbytes());
  return absl::OkStatus();
}

absl::StatusOr<const Graph*> CpuExecutor::Specialization(const TensorMap& feeds) {
  const Graph& graph = program_->graph();
  if (!graph.is_dynamic()) return nullptr;
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : feeds) shapes[name] = t.shape();
  absl::StatusOr<std::vector<int64_t>> values = BindDims(graph, shapes);
  if (!values.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(program_->bundle().path(), ": ", values.status().message()));
  }
  for (const auto& [key, g] : specializations_) {
    if (key == *values) return g.get();
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Specialize(graph, *values));
  if (static_cast<int>(g->nodes().size()) != program_->bundle().manifest().steps_size()) {
    return absl::InternalError(absl::StrCat(program_->bundle().path(), ": the graph specialised to ",
                                            BindingToString(graph, *values), " has ", g->nodes().size(),
                                            " nodes, not one per step"));
  }
  if (static_cast<int>(specializations_.size()) >= kMaxSpecializations) {
    specializations_.erase(specializations_.begin());  // the oldest
  }
  specializations_.emplace_back(*values, std::move(g));
  return specializations_.back().second.get();
}

absl::StatusOr<std::vector<Tensor>> CpuExecutor::Run(const TensorMap& feeds, std::vector<double>* step_ms) {
  const bundle::Manifest& m = program_->bundle().manifest();
  const std::string& path = program_->bundle().path();
  if (step_ms != nullptr) step_ms->assign(m.steps_size(), 0.0);
  KILN_RETURN_IF_ERROR(CheckFeeds(program_->bundle(), feeds));
  // A dynamic bundle runs the nodes, types and shape constants of its graph
  // specialised to the feeds' sizes.
  KILN_ASSIGN_OR_RETURN(const Graph* special, Specialization(feeds));
  const std::vector<Node*> special_nodes = special != nullptr ? special->nodes() : std::vector<Node*>();
  for (const bundle::TensorSignature& in : m.inputs()) {
    const Tensor& t = feeds.at(in.name());
    KILN_RETURN_IF_ERROR(Write(in.binding(), t, absl::StrCat(path, ": input")));
  }
  for (int s = 0; s < m.steps_size(); ++s) {
    const auto step_start = std::chrono::steady_clock::now();
    const bundle::Step& step = m.steps(s);
    const std::string where = absl::StrCat(path, ": step ", step.index(), " (", step.kernel(), ", node '",
                                           step.node(), "')");
    std::vector<Tensor> inputs(step.inputs_size());
    std::vector<const Tensor*> ptrs(step.inputs_size(), nullptr);
    const Node* node = special != nullptr ? special_nodes[s] : &program_->step_node(s);
    for (int i = 0; i < step.inputs_size(); ++i) {
      if (step.inputs(i).kind() == bundle::Binding::ABSENT) continue;
      const Value* in = special != nullptr ? node->input(i) : nullptr;
      auto t = in == nullptr       ? Read(step.inputs(i))
               : in->is_constant() ? in->constant()
                                   : Read(step.inputs(i), &in->shape());
      if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": input ", i, ": ", t.status().message()));
      inputs[i] = *std::move(t);
      ptrs[i] = &inputs[i];
    }
    auto outputs = EvaluateNode(*node, ptrs);
    if (!outputs.ok()) return absl::Status(outputs.status().code(), absl::StrCat(where, ": ", outputs.status().message()));
    if (static_cast<int>(outputs->size()) != step.outputs_size()) {
      return absl::InternalError(absl::StrCat(where, ": ", outputs->size(), " outputs, the step binds ",
                                              step.outputs_size()));
    }
    for (int o = 0; o < step.outputs_size(); ++o) {
      KILN_RETURN_IF_ERROR(Write(step.outputs(o), (*outputs)[o], absl::StrCat(where, ": output ", o)));
    }
    if (step_ms != nullptr) {
      (*step_ms)[s] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_start).count();
    }
  }
  std::vector<Tensor> results;
  for (int o = 0; o < m.outputs_size(); ++o) {
    const bundle::TensorSignature& out = m.outputs(o);
    auto t = special != nullptr ? Read(out.binding(), &special->outputs()[o]->shape()) : Read(out.binding());
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": output '", out.name(), "': ", t.status().message()));
    results.push_back(*std::move(t));
  }
  return results;
}

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

ProfileReport MakeProfileReport(const Bundle& bundle, const std::string& device, const std::vector<double>& run_ms,
                                const std::vector<std::vector<double>>& per_step_ms) {
  const bundle::Manifest& m = bundle.manifest();
  ProfileReport report;
  report.model_path = bundle.path();
  report.device = device;
  report.iterations = static_cast<int>(run_ms.size());
  report.run_median_ms = Median(run_ms);
  for (int s = 0; s < m.steps_size(); ++s) {
    const bundle::Step& step = m.steps(s);
    StepProfile p;
    p.index = step.index();
    p.kernel = step.kernel();
    p.op_type = step.op_type();
    p.onnx_nodes.assign(step.onnx_nodes().begin(), step.onnx_nodes().end());
    p.median_ms = s < static_cast<int>(per_step_ms.size()) ? Median(per_step_ms[s]) : 0;
    report.steps_total_ms += p.median_ms;
    report.steps.push_back(std::move(p));
  }
  for (StepProfile& p : report.steps) p.share = report.steps_total_ms > 0 ? p.median_ms / report.steps_total_ms : 0;
  return report;
}

absl::StatusOr<ProfileReport> ProfileCpuExecutor(CpuExecutor& executor, const TensorMap& feeds, int iterations) {
  if (iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("profile: iterations must be >= 1, got ", iterations));
  }
  const bundle::Manifest& m = executor.program().bundle().manifest();
  std::vector<std::vector<double>> per_step(m.steps_size());
  std::vector<double> run_ms, step_ms;
  KILN_RETURN_IF_ERROR(executor.Run(feeds).status());  // warm-up
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    KILN_RETURN_IF_ERROR(executor.Run(feeds, &step_ms).status());
    run_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    for (int s = 0; s < m.steps_size(); ++s) per_step[s].push_back(step_ms[s]);
  }
  return MakeProfileReport(executor.program().bundle(), "cpu", run_ms, per_step);
}

}  // namespace kiln
