// The compiler driver: the pass pipeline, tuning, memory plan, kernels, manifest.
#include "compiler/compiler.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/kernel_cache.h"
#include "codegen/kernel_choice.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"
#include "codegen/ops/kernel_util.h"
#include "codegen/tuning_db.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "compiler/assign_kernels.h"
#include "compiler/expand_groups.h"
#include "compiler/memory_planner.h"
#include "compiler/pipeline.h"
#include "frontend/onnx_importer.h"
#include "graph/specialize.h"
#include "graph/text_format.h"

namespace kiln {
namespace {

void SetTypeFields(const Value* v, bundle::Binding* b) {
  b->set_value(v->name());
  b->set_dtype(std::string(DTypeName(v->dtype())));
  for (int64_t d : v->shape()) b->add_shape(d);
  b->set_bytes(v->numel() * static_cast<int64_t>(DTypeSize(v->dtype())));
}

// The graph text with each constant's data replaced by a zero placeholder (the bytes
// live in the weight section). Printing zeros: a splat, so the text stays small.
std::string GraphTextWithoutWeights(const Graph& graph) {
  std::unique_ptr<Graph> copy = graph.Clone();
  for (Value* v : copy->constants()) {
    // An undefined-looking zero tensor: printed as splat(0) (or [0] for one element).
    std::vector<DimExpr> symbolic = v->symbolic_data();  // a dynamic graph's shape constants keep theirs
    copy->SetConstant(v, Tensor(v->dtype(), v->shape()));
    v->SetSymbolicData(std::move(symbolic));
  }
  return PrintGraph(*copy);
}

// The tuning database a compile reads and --tune fills: none with --no-tuning-db or
// without a place for it; one that does not load is a warning in `report` (an
// error with --tune).
absl::Status OpenTuningDb(const CompileOptions& options, std::optional<codegen::TuningDb>* db,
                          GemmTuneReport* report) {
  if (!options.tuning_db) return absl::OkStatus();
  const std::string path =
      options.tuning_db_path.empty() ? codegen::DefaultTuningDbPath(options.kernel_cache_dir) : options.tuning_db_path;
  if (path.empty() && options.tune) {
    return absl::FailedPreconditionError(
        "--tune: no place for the tuning database (set KILN_TUNING_DB, KILN_CACHE_DIR or HOME)");
  }
  if (path.empty()) return absl::OkStatus();
  report->db_path = path;
  if (absl::Status st = db->emplace(path).Load(); !st.ok()) {
    if (options.tune) return st;
    report->warnings.push_back(absl::StrCat(st.message(), "; compiling with the heuristic's configs"));
    db->reset();
  }
  return absl::OkStatus();
}

// Dynamic graphs: per group on the run-time-row GEMM, the config the tuning database
// holds for its problem at the opt sizes (`at_opt`: the graph specialised there, node
// for node) and the rows those sizes give.
std::map<std::string, codegen::KernelOptions::TunedRows> TunedDynamicGemms(
    const Graph& graph, const Graph& at_opt, const codegen::KernelOptions& kernel_options) {
  std::map<std::string, codegen::KernelOptions::TunedRows> out;
  const std::vector<Node*> nodes = graph.nodes(), opt_nodes = at_opt.nodes();
  for (size_t i = 0; i < nodes.size() && i < opt_nodes.size(); ++i) {
    if (!codegen::RunsOnRunTimeRowGemm(*nodes[i], kernel_options)) continue;
    absl::StatusOr<codegen::GemmChoice> choice = codegen::ChooseGemmConfig(
        *opt_nodes[i], kernel_options.TargetArch(), kernel_options.tuning_db, kernel_options.sm_count);
    absl::StatusOr<codegen::ops::GemmProblem> problem = codegen::ops::DescribeMatMulGroup(*opt_nodes[i]);
    if (!choice.ok() || !choice->from_db || !choice->config.sm90 || !problem.ok()) continue;
    out[nodes[i]->name()] = {problem->m, codegen::ops::Sm90GemmConfigString(choice->config.sm90_config)};
  }
  return out;
}

// --tune: measures the generated GEMM's candidate configs (and cuBLASLt, where auto
// mode on sm_90a could give it a group) for every MatMul group that gets a generated
// GEMM, whatever the database said before, and stores the results. The new entries
// may move groups between the Hopper family and cuBLASLt: their report notes follow.
// A dynamic graph's groups on the run-time-row GEMM are measured as `at_opt`'s (the
// graph at the opt sizes), without cuBLASLt.
absl::Status TuneGemms(const Graph& graph, const Graph* at_opt, const CompileOptions& options,
                       const codegen::KernelOptions& kernel_options, codegen::TuningDb& db,
                       const codegen::KernelCache* cache, FusionReport* fusion, GemmTuneReport* report) {
  if (!kernel_options.GeneratesGemms()) {
    report->tuned = true;
    report->note = "nothing to tune: MatMul groups run on cuBLASLt (--matmul-groups library)";
    return absl::OkStatus();
  }
  GemmTuneOptions tune_options;
  tune_options.arch = options.arch;
  tune_options.budget_seconds = options.tune_budget_seconds;
  tune_options.cache = cache;
  tune_options.library = kernel_options.HopperGemmsOnly();
  codegen::KernelOptions without_db = kernel_options;
  without_db.tuning_db = nullptr;
  without_db.untuned_library_rules = false;  // measure the groups those rules give cuBLASLt too
  std::vector<Node*> generated;  // the MatMul groups that get a generated GEMM
  std::vector<Node*> measured;   // ... and those on the run-time-row GEMM, at the opt sizes
  const std::vector<Node*> nodes = graph.nodes();
  const std::vector<Node*> opt_nodes = at_opt != nullptr ? at_opt->nodes() : std::vector<Node*>{};
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (codegen::ops::HasDynamicValues(*nodes[i])) {
      if (i < opt_nodes.size() && codegen::RunsOnRunTimeRowGemm(*nodes[i], kernel_options)) measured.push_back(opt_nodes[i]);
    } else if (codegen::ChooseKernel(*nodes[i], without_db).kind == codegen::KernelKind::kGemm) {
      generated.push_back(nodes[i]);
    }
  }
  tune_options.without_library.assign(measured.begin(), measured.end());
  measured.insert(measured.begin(), generated.begin(), generated.end());
  KILN_ASSIGN_OR_RETURN(GemmTuneReport tuned, TuneGemmGroups(measured, db, tune_options));
  if (at_opt != nullptr) {
    const std::string sizes = BindingToString(graph, OptValues(graph.dim_symbols()));
    absl::StrAppend(&tuned.note, tuned.note.empty() ? "" : "; ", "GEMMs with run-time rows measured at ", sizes,
                    std::any_of(graph.dim_symbols().begin(), graph.dim_symbols().end(),
                                [](const DimSymbol& s) { return s.opt == 0; })
                        ? " (the largest size where a dim has no :opt; --dim NAME=LO..HI:OPT sets it)"
                        : " (the dims' opt sizes)");
  }
  tuned.warnings = std::move(report->warnings);
  *report = std::move(tuned);
  for (Node* n : generated) NoteLibraryGroup(*n, codegen::ChooseKernel(*n, kernel_options), fusion);
  return absl::OkStatus();
}

// The manifest's header: producer, target, compile options, fusion report, source.
void SetCompileInfo(const CompileOptions& options, const codegen::KernelOptions& kernel_options,
                    const PassContext& context, const std::string& source_path, const std::string& source_bytes,
                    bundle::Manifest& m) {
  m.set_producer("kiln");
  m.set_target_arch(options.arch);
  m.set_precision(options.precision);
  m.mutable_compile_options()->set_arch(options.arch);
  m.mutable_compile_options()->set_precision(options.precision);
  for (const auto& [name, shape] : options.input_shapes) {
    bundle::InputShape* s = m.mutable_compile_options()->add_input_shapes();
    s->set_name(name);
    for (int64_t d : shape) s->add_shape(d);
  }
  std::vector<std::string> kept(context.float32_nodes.begin(), context.float32_nodes.end());
  std::sort(kept.begin(), kept.end());  // a stable manifest
  for (const std::string& name : kept) m.mutable_compile_options()->add_float32_nodes(name);
  m.mutable_compile_options()->set_no_fuse(!options.fuse);
  m.mutable_compile_options()->set_matmul_groups(!kernel_options.GeneratesGemms()   ? "library"
                                                 : kernel_options.HopperGemmsOnly() ? "sm90+library"
                                                                                    : "generated");
  const FusionReport& report = context.report;
  bundle::FusionReport* fr = m.mutable_fusion();
  fr->set_enabled(options.fuse);
  fr->set_nodes_before(report.nodes_before);
  fr->set_nodes_after(report.nodes_after);
  fr->set_nodes_fused(report.nodes_fused);
  for (const FusionReport::Group& g : report.groups) {
    bundle::FusionGroup* pg = fr->add_groups();
    pg->set_pass(g.pass);
    pg->set_name(g.name);
    pg->set_pattern(g.pattern);
    for (const std::string& member : g.members) pg->add_members(member);
    pg->set_note(g.note);
  }
  for (const FusionReport::Rejection& r : report.rejections) {
    bundle::FusionRejection* pr = fr->add_rejections();
    pr->set_pass(r.pass);
    for (const std::string& n : r.nodes) pr->add_nodes(n);
    pr->set_reason(r.reason);
  }
  m.mutable_source()->set_path(source_path);
  m.mutable_source()->set_fnv1a64(absl::StrFormat("%016x", Fnv1a64(source_bytes.data(), source_bytes.size())));
  m.mutable_source()->set_bytes(source_bytes.size());
}

// Weights (every constant, in creation order), the signature and one step per node,
// each value bound to a weight, an arena offset or nothing.
absl::Status SetStepsAndBindings(const Graph& graph, const GraphMemoryPlan& gp, const std::string& source_path,
                                 BundleContents& out) {
  bundle::Manifest& m = out.manifest;
  absl::flat_hash_map<const Value*, int> weight_of;
  for (const Value* v : graph.constants()) {
    weight_of[v] = static_cast<int>(out.weights.size());
    out.weight_names.push_back(v->name());
    out.weights.push_back(v->constant());
  }
  auto bind = [&](const Value* v, bundle::Binding* b) -> absl::Status {
    if (v == nullptr) {
      b->set_kind(bundle::Binding::ABSENT);
      return absl::OkStatus();
    }
    SetTypeFields(v, b);
    if (v->is_constant()) {
      b->set_kind(bundle::Binding::WEIGHT);
      b->set_weight_index(weight_of.at(v));
      return absl::OkStatus();
    }
    const int64_t offset = gp.OffsetOf(v);
    if (offset < 0) {
      return absl::InternalError(absl::StrCat(source_path, ": value '", v->name(), "' has no planned buffer"));
    }
    b->set_kind(bundle::Binding::ARENA);
    b->set_offset(offset);
    return absl::OkStatus();
  };
  auto signature = [&](const Value* v, bundle::TensorSignature* s) -> absl::Status {
    s->set_name(v->name());
    s->set_dtype(std::string(DTypeName(v->dtype())));
    for (int64_t d : v->shape()) s->add_shape(d);
    for (const DimExpr& d : v->dims()) s->add_dims(d.ToString(graph.dim_symbols()));
    return bind(v, s->mutable_binding());
  };
  for (const DimSymbol& d : graph.dim_symbols()) {
    bundle::DimSymbol* s = m.add_dim_symbols();
    s->set_name(d.name);
    s->set_min(d.min);
    s->set_max(d.max);
    s->set_opt(d.opt);
  }
  for (const Value* v : graph.inputs()) KILN_RETURN_IF_ERROR(signature(v, m.add_inputs()));
  for (const Value* v : graph.outputs()) KILN_RETURN_IF_ERROR(signature(v, m.add_outputs()));
  const std::vector<Node*> nodes = graph.nodes();
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    const Node* node = nodes[i];
    bundle::Step* step = m.add_steps();
    step->set_index(i);
    step->set_op_type(node->op_type());
    step->set_kernel(absl::StrCat("cpu_ref:", node->op_type()));
    step->set_node(node->name());
    step->add_onnx_nodes(node->name());
    for (const Value* in : node->inputs()) KILN_RETURN_IF_ERROR(bind(in, step->add_inputs()));
    for (const Value* o : node->outputs()) KILN_RETURN_IF_ERROR(bind(o, step->add_outputs()));
  }
  return absl::OkStatus();
}

void SetMemoryPlan(const GraphMemoryPlan& gp, bundle::MemoryPlan* mp) {
  mp->set_arena_bytes(gp.plan.arena_bytes);
  mp->set_lower_bound_bytes(gp.plan.lower_bound_bytes);
  mp->set_no_reuse_bytes(gp.plan.no_reuse_bytes);
  mp->set_ordering(PlanOrderingName(gp.plan.ordering));
  mp->set_orderings_tried(gp.plan.orderings_tried);
  for (size_t i = 0; i < gp.buffers.size(); ++i) {
    const BufferRequest& r = gp.buffers[i];
    bundle::PlannedBuffer* pb = mp->add_buffers();
    pb->set_value(gp.values[i]->name());
    pb->set_offset(gp.plan.offsets[i]);
    pb->set_bytes(r.size_bytes);
    pb->set_first_step(r.first_step);
    pb->set_last_step(r.last_step);
    if (r.alias_of >= 0) pb->set_alias_of(gp.values[r.alias_of]->name());
    pb->set_in_place(i < gp.plan.in_place.size() && gp.plan.in_place[i]);
  }
}

// Times the driver's stages after the pipeline for --time-passes.
class StageTimer {
 public:
  explicit StageTimer(std::vector<PassTiming>* timings) : timings_(timings) {}
  void Done(const std::string& stage, const Graph& graph) {
    const auto now = std::chrono::steady_clock::now();
    if (timings_ != nullptr) {
      timings_->push_back(
          {stage, 1, false, std::chrono::duration<double>(now - start_).count(), graph.num_nodes()});
    }
    start_ = now;
  }

 private:
  std::vector<PassTiming>* timings_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

absl::StatusOr<BundleContents> BuildBundle(const Graph& source_graph, const CompileOptions& options,
                                           const std::string& source_path, const std::string& source_bytes) {
  KILN_RETURN_IF_ERROR(ValidateCompileOptions(options));
  if (options.tune) KILN_RETURN_IF_ERROR(CheckTuningDevice(options.arch));  // before the work
  auto where = [&](absl::string_view stage, const absl::Status& st) {
    return absl::Status(st.code(), absl::StrCat(source_path, ": ", stage, st.message()));
  };
  codegen::KernelOptions kernel_options = KernelOptionsFor(options);
  // GEMM tile configs, and in auto mode on sm_90a cuBLASLt where it measured faster:
  // the tuning database (filled after fusion with --tune), else the heuristic.
  GemmTuneReport tune_report;
  std::optional<codegen::TuningDb> tuning_db;
  KILN_RETURN_IF_ERROR(OpenTuningDb(options, &tuning_db, &tune_report));
  if (tuning_db.has_value()) kernel_options.tuning_db = &*tuning_db;
  const std::string cache_dir =
      options.kernel_cache_dir.empty() ? codegen::DefaultKernelCacheDir() : options.kernel_cache_dir;
  std::optional<codegen::KernelCache> cache;
  const codegen::KernelCache* kernel_cache =
      options.kernel_cache && !cache_dir.empty() ? &cache.emplace(cache_dir) : nullptr;

  // The pass pipeline (compiler/pipeline.h): canonicalisation, layout, precision,
  // fusion, expansion of the groups no GPU kernel takes.
  std::unique_ptr<Graph> working = source_graph.Clone();
  Graph& graph = *working;
  PassContext context(options, kernel_options);
  if (absl::Status st = RunPipeline(graph, context); !st.ok()) return where("", st);
  if (graph.is_dynamic()) {
    if (absl::Status st = CheckSpecializations(graph); !st.ok()) return where("dynamic shapes: ", st);
  }
  FusionReport& report = context.report;
  report.nodes_after = graph.num_nodes();
  if (!options.fuse) report.nodes_before = report.nodes_fused = report.nodes_after;

  StageTimer timer(options.pass_timings);
  // A dynamic graph's run-time-row GEMMs are tuned, and read from the tuning database,
  // at the dims' opt sizes: the graph specialised there, node for node.
  std::unique_ptr<Graph> at_opt;
  if (graph.is_dynamic() && tuning_db.has_value() && (options.tune || tuning_db->size() > 0) &&
      kernel_options.DynamicGemmsOnHopper()) {
    absl::StatusOr<std::unique_ptr<Graph>> s = Specialize(graph, OptValues(graph.dim_symbols()));
    if (s.ok()) {
      at_opt = *std::move(s);
    } else if (options.tune) {
      return where("tuning: the graph at the opt sizes: ", s.status());
    } else {  // the heuristic's tiles, as without a database
      tune_report.warnings.push_back(absl::StrCat("the graph at the opt sizes (", s.status().message(),
                                                  "): GEMMs with run-time rows take the heuristic's tiles"));
    }
  }
  if (options.tune) {
    absl::Status st =
        TuneGemms(graph, at_opt.get(), options, kernel_options, *tuning_db, kernel_cache, &report, &tune_report);
    if (!st.ok()) return where("tuning: ", st);
    timer.Done("tune-gemms", graph);
  }
  if (at_opt != nullptr) kernel_options.tuned_dynamic_gemms = TunedDynamicGemms(graph, *at_opt, kernel_options);
  if (tuning_db.has_value()) {
    for (const std::string& w : tuning_db->warnings()) {
      if (std::find(tune_report.warnings.begin(), tune_report.warnings.end(), w) == tune_report.warnings.end()) {
        tune_report.warnings.push_back(w);
      }
    }
  }
  if (options.tuning_report != nullptr) *options.tuning_report = tune_report;

  absl::StatusOr<GraphMemoryPlan> plan = PlanGraphMemory(graph);
  if (!plan.ok()) return where("memory planning failed: ", plan.status());
  timer.Done("plan-memory", graph);

  BundleContents out;
  SetCompileInfo(options, kernel_options, context, source_path, source_bytes, out.manifest);
  KILN_RETURN_IF_ERROR(SetStepsAndBindings(graph, *plan, source_path, out));
  // Who runs each step, decided once for the final graph (after --tune's entries).
  {
    const std::vector<Node*> nodes = graph.nodes();
    std::vector<codegen::KernelChoice> choices;
    for (const Node* n : nodes) choices.push_back(codegen::ChooseKernel(*n, kernel_options));
    KernelCompileOptions compile_options;
    compile_options.cache = kernel_cache;
    compile_options.progress = options.progress;
    compile_options.dump_dir = options.dump_kernels_dir;
    if (absl::Status st = AssignKernels(nodes, choices, options.arch, kernel_options, &out, compile_options).status();
        !st.ok()) {
      return where("", st);
    }
  }
  timer.Done("assign-kernels", graph);
  SetMemoryPlan(*plan, out.manifest.mutable_memory_plan());
  out.manifest.set_graph_text(GraphTextWithoutWeights(graph));
  return out;
}

absl::StatusOr<BundleContents> Compile(const std::string& onnx_path, const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(ValidateCompileOptions(options));
  KILN_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(onnx_path));
  ImportOptions import_options;
  import_options.input_shapes = options.input_shapes;
  import_options.dims = options.dims;
  import_options.dim_ranges = options.dim_ranges;
  import_options.input_shape_ranges = options.input_shape_ranges;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, ImportOnnxFile(onnx_path, import_options));
  return BuildBundle(*graph, options, onnx_path, bytes);
}

absl::Status CompileToFile(const std::string& onnx_path, const std::string& output_path,
                           const CompileOptions& options) {
  KILN_ASSIGN_OR_RETURN(BundleContents contents, Compile(onnx_path, options));
  return WriteBundle(std::move(contents), output_path);
}

}  // namespace kiln
