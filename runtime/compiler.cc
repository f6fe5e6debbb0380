// The compiler driver: import, one step per node, memory plan, bundle contents.
#include "runtime/compiler.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "frontend/onnx_importer.h"
#include "graph/lower_precision.h"
#include "graph/pad_conv_channels.h"
#include "graph/pad_matmul_width.h"
#include "graph/to_channels_last.h"
#include "graph/text_format.h"
#include "codegen/kernel_cache.h"
#include "codegen/tuning_db.h"
#include "codegen/library_kernels.h"
#include "codegen/op_kernels.h"
#include "fusion/fuse_pointwise.h"
#include "fusion/pipeline.h"
#include "graph/fused_group.h"
#include "runtime/assign_kernels.h"
#include "runtime/cuda_util.h"
#include "runtime/memory_planner.h"

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
    copy->SetConstant(v, Tensor(v->dtype(), v->shape()));
  }
  return PrintGraph(*copy);
}

Node* FindNodeNamed(Graph& graph, const std::string& name) {
  for (Node* n : graph.nodes()) {
    if (n->name() == name) return n;
  }
  return nullptr;
}

// After a MatMul group was expanded: the longest chain from the MatMul through
// members (each the only reader of the previous one's output) that a library call
// takes fused (cuBLASLt: the bias add and a Relu / tanh-Gelu after it) becomes a
// group again, so the expansion gives up only what the library cannot do. Returns
// what it kept, for the report ("" when nothing).
absl::StatusOr<std::string> RegroupLibraryPrefix(Graph& graph, const std::string& anchor,
                                                 const std::vector<std::string>& members,
                                                 const codegen::KernelOptions& kernel_options) {
  Node* matmul = FindNodeNamed(graph, anchor);
  if (matmul == nullptr || matmul->op_type() != "MatMul") return std::string();
  std::vector<Node*> chain = {matmul};
  while (chain.size() < 3) {
    const Value* out = chain.back()->output(0);
    if (out == nullptr || out->uses().size() != 1 || graph.IsGraphOutput(out)) break;
    Node* next = out->uses()[0].node;
    if (std::find(members.begin(), members.end(), next->name()) == members.end()) break;
    chain.push_back(next);
  }
  std::vector<std::string> names;
  for (const Node* m : chain) names.push_back(m->name());
  for (size_t len = names.size(); len >= 2; --len) {
    std::vector<Node*> part;
    for (size_t i = 0; i < len; ++i) part.push_back(FindNodeNamed(graph, names[i]));
    if (std::find(part.begin(), part.end(), nullptr) != part.end()) break;
    absl::StatusOr<Node*> group = FormFusedGroup(graph, part, "matmul+epilogue", part[0]);
    if (!group.ok()) continue;
    if (UsesLibraryKernel(**group, kernel_options)) {
      return absl::StrCat("kept [", absl::StrJoin(names.begin(), names.begin() + len, ", "), "] as one ",
                          codegen::LibraryKernelName(**group), " call");
    }
    KILN_RETURN_IF_ERROR(InlineFusedGroup(graph, *group));
  }
  return std::string();
}

// Sets the report note of the fused group named `group`.
void NoteGroup(FusionReport* report, const std::string& group, const std::string& text) {
  for (FusionReport::Group& g : report->groups) {
    if (g.name == group) g.note = text;
  }
}

// Auto mode on sm_90a: notes why a group the library takes whole is not on the
// Hopper family (the family refused it, or --tune measured cuBLASLt faster); clears
// that note where the group is on the family (after --tune).
void NoteLibraryGroup(const Node& n, const codegen::KernelOptions& kernel_options, FusionReport* report) {
  if (!UsesLibraryKernel(n, kernel_options)) {
    if (codegen::GeneratesMatMulGroup(n, kernel_options)) NoteGroup(report, n.name(), "");
    return;
  }
  if (std::string refusal = codegen::Sm90OnlyRefusal(n, kernel_options); !refusal.empty()) {
    NoteGroup(report, n.name(),
              absl::StrCat("on ", codegen::LibraryKernelName(n), " (--matmul-groups auto on sm_90a): ", refusal));
  }
}

// Expands every fused group that has no GPU kernel yet back into its members, and
// notes why in the report: a bundle must run on the GPU whatever fusion formed.
// Returns how many it expanded.
absl::StatusOr<int> ExpandGroupsWithoutKernels(Graph& graph, const codegen::KernelOptions& kernel_options,
                                               FusionReport* report) {
  int expanded = 0;
  for (Node* n : graph.nodes()) {
    if (!IsFusedGroup(*n)) continue;
    if (UsesLibraryKernel(*n, kernel_options)) {
      NoteLibraryGroup(*n, kernel_options, report);
      continue;
    }
    absl::StatusOr<std::vector<codegen::KernelLaunch>> kernels = codegen::GenerateNodeKernels(*n, kernel_options);
    if (kernels.ok()) continue;
    if (kernels.status().code() != absl::StatusCode::kUnimplemented) return kernels.status();
    const std::string name = n->name();
    const std::string anchor = n->GetString("anchor", "").value_or("");
    const std::vector<std::string> members = FusedGroupMembers(*n);
    KILN_RETURN_IF_ERROR(InlineFusedGroup(graph, n));
    ++expanded;
    std::string kept;
    if (!anchor.empty()) {
      KILN_ASSIGN_OR_RETURN(kept, RegroupLibraryPrefix(graph, anchor, members, kernel_options));
    }
    NoteGroup(report, name, absl::StrCat("expanded: ", kernels.status().message(), kept.empty() ? "" : "; ", kept));
  }
  return expanded;
}

}  // namespace

codegen::KernelOptions KernelOptionsFor(const CompileOptions& options) {
  codegen::KernelOptions k;
  // auto: generated; on sm_90a only for the groups the Hopper family takes (the
  // library for the others: gemm_template_sm90_only).
  k.gemm_template = options.matmul_groups == "generated" || options.matmul_groups == "auto";
  k.gemm_template_sm90_only = options.matmul_groups == "auto" && codegen::IsHopperArch(options.arch);
  k.cudnn_fused_conv = options.conv_groups == "cudnn" || options.conv_groups == "auto";
  k.conv_template = options.conv_groups == "generated";
  k.conv_template_auto = options.conv_groups == "auto";
  // sm_90a: the Hopper GEMM family (TMA + wgmma) for the MatMul groups it takes.
  // Its persistent grid is sized for the local GPU's multiprocessors when that GPU is
  // of the target arch (an H100 PCIe has 114, where 132 CTAs would leave 18 for a
  // second wave), else for an H100 SXM's 132 (sm_count 0).
  k.hopper = codegen::IsHopperArch(options.arch);
  if (k.hopper) {
    absl::StatusOr<GpuInfo> gpu = LocalGpu();
    if (gpu.ok() && gpu->arch == options.arch) k.sm_count = gpu->sm_count;
  }
  return k;
}

const std::vector<std::string>& SupportedArchs() {
  static const auto* archs = new std::vector<std::string>{"sm_90a", "sm_89", "sm_86", "sm_80"};
  return *archs;
}

const std::vector<std::string>& SupportedPrecisions() {
  static const auto* precisions = new std::vector<std::string>{"fp16", "bf16", "fp32"};
  return *precisions;
}

std::string DefaultArch() {
  absl::StatusOr<GpuInfo> gpu = LocalGpu();
  if (gpu.ok() && !gpu->arch.empty()) return gpu->arch;
  return "sm_90a";
}

absl::Status ValidateCompileOptions(const CompileOptions& options) {
  const auto& archs = SupportedArchs();
  if (std::find(archs.begin(), archs.end(), options.arch) == archs.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported --arch '", options.arch,
                                                   "': kiln compiles for ", absl::StrJoin(archs, ", ")));
  }
  if (options.matmul_groups != "auto" && options.matmul_groups != "library" && options.matmul_groups != "generated") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported --matmul-groups '", options.matmul_groups,
                                                   "': choose auto, library or generated"));
  }
  if (options.conv_groups != "auto" && options.conv_groups != "expand" && options.conv_groups != "cudnn" &&
      options.conv_groups != "generated") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported --conv-groups '", options.conv_groups,
                                                   "': choose auto, expand, cudnn or generated"));
  }
  if (options.layout != "auto" && options.layout != "nchw" && options.layout != "nhwc") {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported --layout '", options.layout, "': choose auto, nchw or nhwc"));
  }
  if (options.tune && !options.tuning_db) {
    return absl::InvalidArgumentError("--tune stores its results in the tuning database: drop --no-tuning-db");
  }
  if (options.tune && !(options.tune_budget_seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tune-budget must be a positive number of seconds, got ", options.tune_budget_seconds));
  }
  const auto& precisions = SupportedPrecisions();
  if (std::find(precisions.begin(), precisions.end(), options.precision) == precisions.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported --precision '", options.precision,
                                                   "': choose one of ", absl::StrJoin(precisions, ", ")));
  }
  return absl::OkStatus();
}

absl::StatusOr<BundleContents> BuildBundle(const Graph& source_graph, const CompileOptions& options,
                                           const std::string& source_path, const std::string& source_bytes) {
  KILN_RETURN_IF_ERROR(ValidateCompileOptions(options));
  if (options.tune) KILN_RETURN_IF_ERROR(CheckTuningDevice(options.arch));  // before the work
  auto where = [&](absl::string_view stage, const absl::Status& st) {
    return absl::Status(st.code(), absl::StrCat(source_path, ": ", stage, ": ", st.message()));
  };
  codegen::KernelOptions kernel_options = KernelOptionsFor(options);
  // GEMM tile configs, and in auto mode on sm_90a cuBLASLt where it measured faster:
  // the tuning database (filled after fusion with --tune), else the heuristic.
  GemmTuneReport tune_report;
  std::optional<codegen::TuningDb> tuning_db;
  if (options.tuning_db) {
    const std::string path = options.tuning_db_path.empty()
                                 ? codegen::DefaultTuningDbPath(options.kernel_cache_dir)
                                 : options.tuning_db_path;
    if (path.empty() && options.tune) {
      return absl::FailedPreconditionError(
          "--tune: no place for the tuning database (set KILN_TUNING_DB, KILN_CACHE_DIR or HOME)");
    }
    if (!path.empty()) {
      tune_report.db_path = path;
      if (absl::Status st = tuning_db.emplace(path).Load(); !st.ok()) {
        if (options.tune) return st;
        tune_report.warnings.push_back(absl::StrCat(st.message(), "; compiling with the heuristic's configs"));
        tuning_db.reset();
      }
    }
  }
  if (tuning_db.has_value()) kernel_options.tuning_db = &*tuning_db;
  const std::string cache_dir =
      options.kernel_cache_dir.empty() ? codegen::DefaultKernelCacheDir() : options.kernel_cache_dir;
  std::optional<codegen::KernelCache> cache;
  const codegen::KernelCache* kernel_cache =
      options.kernel_cache && !cache_dir.empty() ? &cache.emplace(cache_dir) : nullptr;
  std::unique_ptr<Graph> working = source_graph.Clone();
  Graph& graph = *working;
  PipelineOptions pipeline;
  pipeline.fuse = options.fuse;
  pipeline.after_pass = options.after_pass;
  // 1. Canonicalisation (fusion/pipeline.h).
  if (absl::Status st = RunCanonicalization(graph, pipeline); !st.ok()) return where("canonicalisation", st);
  if (absl::StatusOr<bool> padded = PadMatMulWidth().Run(graph); !padded.ok()) {
    return where("pad-matmul-width", padded.status());
  } else if (*padded && options.after_pass) {
    options.after_pass("pad-matmul-width", graph);
  }
  if (options.layout == "nhwc" || (options.layout == "auto" && HasConv2D(graph))) {
    if (absl::StatusOr<bool> moved = ToChannelsLast().Run(graph); !moved.ok()) {
      return where("to-channels-last", moved.status());
    } else if (*moved && options.after_pass) {
      options.after_pass("to-channels-last", graph);
    }
    // fp16/bf16 tensor-core convs want 16-byte channel vectors (the stem's C = 3 does
    // not have them; graph/pad_conv_channels.h).
    if (options.precision != "fp32") {
      if (absl::StatusOr<bool> padded = PadConvChannels().Run(graph); !padded.ok()) {
        return where("pad-conv-channels", padded.status());
      } else if (*padded && options.after_pass) {
        options.after_pass("pad-conv-channels", graph);
      }
    }
  }

  // 2. Precision: the bundle carries the graph lowered to its storage dtype (f32 stays
  // only at the API boundary; see graph/lower_precision.h), so the memory plan, the
  // weights, the steps and every backend see the same lowered graph. fp16 with
  // calibration keeps the nodes that see values beyond fp16's safe range in f32.
  absl::flat_hash_set<std::string> float32_nodes;
  if (options.precision == "fp16" && options.calibration) {
    auto feeds = options.calibration(graph);
    if (!feeds.ok()) return where("calibration inputs", feeds.status());
    auto outside = NodesOutsideRange(graph, *feeds, kFloat16SafeMagnitude);
    if (!outside.ok()) return where("calibration run", outside.status());
    float32_nodes = *std::move(outside);
  }
  if (options.precision != "fp32") {
    const DType storage = options.precision == "bf16" ? DType::kBFloat16 : DType::kFloat16;
    if (absl::StatusOr<bool> st = LowerPrecision(storage, float32_nodes).Run(graph); !st.ok()) {
      return where(absl::StrCat("lowering to --precision ", options.precision), st.status());
    }
    if (options.after_pass) options.after_pass("lower-precision", graph);
  }

  // 3. Fusion, then every group the GPU has no fused kernel for is expanded again
  // (the report says which and why), so that each bundle runs on the GPU.
  FusionReport report;
  const int nodes_before = graph.num_nodes();
  if (options.fuse) {
    auto fused = RunFusion(graph, pipeline);
    if (!fused.ok()) return where("fusion", fused.status());
    report = *std::move(fused);
    report.nodes_fused = graph.num_nodes();
    absl::StatusOr<int> expanded = ExpandGroupsWithoutKernels(graph, kernel_options, &report);
    if (!expanded.ok()) return where("fusion", expanded.status());
    if (*expanded > 0) {
      // What an expanded group leaves (e.g. a library MatMul and the element-wise
      // tail cuBLASLt cannot take: a residual add, erf-GELU, a scale and mask) is
      // fused again by fuse-pointwise: the tail becomes one pointwise kernel or joins
      // the LayerNorm / Softmax it feeds. Its groups always have kernels; the second
      // expansion is a safety net.
      if (absl::StatusOr<bool> again = FusePointwise(&report).Run(graph); !again.ok()) {
        return where("fusion (fuse-pointwise after expansion)", again.status());
      }
      expanded = ExpandGroupsWithoutKernels(graph, kernel_options, &report);
      if (!expanded.ok()) return where("fusion", expanded.status());
      report.groups = FinalGroups(report.groups);
    }
  }
  report.nodes_before = nodes_before;
  report.nodes_after = graph.num_nodes();
  if (!options.fuse) report.nodes_fused = report.nodes_after;

  // 4. --tune: measure the generated GEMM's candidate configs (and cuBLASLt, where auto
  // mode on sm_90a could give it a group) for every MatMul group that gets a generated
  // GEMM, whatever the database said before, and store the results.
  if (options.tune && kernel_options.gemm_template) {
    GemmTuneOptions tune_options;
    tune_options.arch = options.arch;
    tune_options.budget_seconds = options.tune_budget_seconds;
    tune_options.cache = kernel_cache;
    tune_options.library = kernel_options.gemm_template_sm90_only && kernel_options.hopper;
    codegen::KernelOptions without_db = kernel_options;
    without_db.tuning_db = nullptr;
    std::vector<Node*> generated;  // the MatMul groups that get a generated GEMM
    for (Node* n : graph.nodes()) {
      if (codegen::GeneratesMatMulGroup(*n, without_db)) generated.push_back(n);
    }
    absl::StatusOr<GemmTuneReport> tuned = TuneGemmGroups(generated, *tuning_db, tune_options);
    if (!tuned.ok()) return where("tuning", tuned.status());
    tuned->warnings = std::move(tune_report.warnings);
    tune_report = *std::move(tuned);
    // The new entries may move groups between the family and cuBLASLt.
    for (Node* n : generated) NoteLibraryGroup(*n, kernel_options, &report);
  } else if (options.tune) {
    tune_report.tuned = true;
    tune_report.note = "nothing to tune: MatMul groups run on cuBLASLt (--matmul-groups library)";
  }
  if (tuning_db.has_value()) {
    for (const std::string& w : tuning_db->warnings()) {
      if (std::find(tune_report.warnings.begin(), tune_report.warnings.end(), w) == tune_report.warnings.end()) {
        tune_report.warnings.push_back(w);
      }
    }
  }
  if (options.tuning_report != nullptr) *options.tuning_report = tune_report;

  auto plan_or = PlanGraphMemory(graph);
  if (!plan_or.ok()) {
    return absl::Status(plan_or.status().code(),
                        absl::StrCat(source_path, ": memory planning failed: ", plan_or.status().message()));
  }
  const GraphMemoryPlan& gp = *plan_or;

  BundleContents out;
  bundle::Manifest& m = out.manifest;
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
  std::vector<std::string> kept(float32_nodes.begin(), float32_nodes.end());
  std::sort(kept.begin(), kept.end());  // a stable manifest
  for (const std::string& name : kept) m.mutable_compile_options()->add_float32_nodes(name);
  m.mutable_compile_options()->set_no_fuse(!options.fuse);
  m.mutable_compile_options()->set_matmul_groups(!kernel_options.gemm_template           ? "library"
                                                 : kernel_options.gemm_template_sm90_only ? "sm90+library"
                                                                                          : "generated");
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

  // Weights: every constant, in creation order.
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
    return bind(v, s->mutable_binding());
  };
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
  KernelCompileOptions compile_options;
  compile_options.cache = kernel_cache;
  compile_options.progress = options.progress;
  compile_options.dump_dir = options.dump_kernels_dir;
  if (auto assigned = AssignKernels(nodes, options.arch, kernel_options, &out, compile_options); !assigned.ok()) {
    return absl::Status(assigned.status().code(), absl::StrCat(source_path, ": ", assigned.status().message()));
  }

  bundle::MemoryPlan* mp = m.mutable_memory_plan();
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

  m.set_graph_text(GraphTextWithoutWeights(graph));
  return out;
}

absl::StatusOr<BundleContents> Compile(const std::string& onnx_path, const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(ValidateCompileOptions(options));
  KILN_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(onnx_path));
  ImportOptions import_options;
  import_options.input_shapes = options.input_shapes;
  import_options.dims = options.dims;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, ImportOnnxFile(onnx_path, import_options));
  return BuildBundle(*graph, options, onnx_path, bytes);
}

absl::Status CompileToFile(const std::string& onnx_path, const std::string& output_path,
                           const CompileOptions& options) {
  KILN_ASSIGN_OR_RETURN(BundleContents contents, Compile(onnx_path, options));
  return WriteBundle(std::move(contents), output_path);
}

}  // namespace kiln
