// `kiln inspect model.kiln [--json]`: a bundle's signature, steps and memory plan.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "fusion/fusion_report.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/bundle.h"
#include "tools/commands.h"

namespace kiln::cli {
namespace {

std::string ShapeText(const google::protobuf::RepeatedField<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// "[2,64]", or a dynamic signature's "[batch, seq] (largest [4,64])".
std::string SignatureText(const bundle::TensorSignature& s) {
  if (s.dims_size() == 0) return ShapeText(s.shape());
  return absl::StrCat("[", absl::StrJoin(s.dims(), ", "), "] (largest ", ShapeText(s.shape()), ")");
}

std::string BindingText(const bundle::Binding& b) {
  switch (b.kind()) {
    case bundle::Binding::ARENA:
      return absl::StrCat("arena@", b.offset(), "+", b.bytes());
    case bundle::Binding::WEIGHT:
      return absl::StrCat("weight#", b.weight_index());
    default:
      return "_";
  }
}

// JSON string escaping for the few strings we print ourselves.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string FusionReportText(const bundle::FusionReport& fr) {
  FusionReport report;
  report.nodes_before = fr.nodes_before();
  report.nodes_after = fr.nodes_after();
  report.nodes_fused = fr.nodes_fused();
  for (const auto& g : fr.groups()) {
    report.groups.push_back({g.pass(), g.name(), g.pattern(), {g.members().begin(), g.members().end()}, g.note()});
  }
  for (const auto& r : fr.rejections()) report.rejections.push_back({r.pass(), {r.nodes().begin(), r.nodes().end()}, r.reason()});
  return report.ToString();
}

absl::Status InspectBundle(const std::string& path, bool json) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Bundle> bundle, Bundle::Load(path));
  const bundle::Manifest& m = bundle->manifest();
  const uint64_t kernel_bytes = m.kernel_section_bytes();
  const uint64_t weight_bytes = m.weight_section_bytes();
  if (json) {
    // The manifest (without the graph text) plus the section layout.
    bundle::Manifest copy = m;
    copy.clear_graph_text();
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    std::string manifest_json;
    auto st = google::protobuf::util::MessageToJsonString(copy, &manifest_json, options);
    if (!st.ok()) return absl::InternalError(absl::StrCat(path, ": cannot print the manifest as JSON"));
    std::cout << "{\n  \"path\": " << JsonString(path) << ",\n  \"file_bytes\": " << bundle->file_bytes()
              << ",\n  \"manifest_bytes\": " << bundle->manifest_bytes()
              << ",\n  \"kernel_section\": {\"offset\": " << bundle->kernel_section_offset()
              << ", \"bytes\": " << kernel_bytes << "},\n  \"weight_section\": {\"offset\": "
              << bundle->weight_section_offset() << ", \"bytes\": " << weight_bytes
              << "},\n  \"checksum_fnv1a64\": \"" << absl::StrFormat("%016x", bundle->checksum())
              << "\",\n  \"manifest\": " << manifest_json << "}\n";
    return absl::OkStatus();
  }
  std::cout << "bundle:    " << path << " (format version " << m.format_version() << ", " << bundle->file_bytes()
            << " bytes)\n";
  std::cout << "target:    " << m.target_arch() << ", precision " << m.precision() << "\n";
  std::cout << "source:    " << m.source().path() << " (" << m.source().bytes() << " bytes, fnv1a64 "
            << m.source().fnv1a64() << ")\n";
  std::cout << absl::StrFormat("sections:  manifest %d bytes, kernels %d bytes (%d), weights %d bytes (%d), checksum %016x\n",
                               bundle->manifest_bytes(), kernel_bytes, m.kernels_size(), weight_bytes,
                               m.weights_size(), bundle->checksum());
  if (m.dim_symbols_size() > 0) {
    std::vector<std::string> ranges;
    for (const auto& d : m.dim_symbols()) {
      ranges.push_back(absl::StrCat(d.name(), " in ", d.min(), "..", d.max(),
                                    d.opt() > 0 ? absl::StrCat(" (tuned for ", d.opt(), ")") : ""));
    }
    std::cout << "dynamic:   " << absl::StrJoin(ranges, ", ")
              << " (runs at any sizes in the ranges; arena planned for the largest)\n";
  }
  std::cout << "inputs:\n";
  for (const auto& s : m.inputs()) {
    std::cout << absl::StrFormat("  %-28s %s%s  %s\n", s.name(), s.dtype(), SignatureText(s), BindingText(s.binding()));
  }
  std::cout << "outputs:\n";
  for (const auto& s : m.outputs()) {
    std::cout << absl::StrFormat("  %-28s %s%s  %s\n", s.name(), s.dtype(), SignatureText(s), BindingText(s.binding()));
  }
  const auto& mp = m.memory_plan();
  std::cout << absl::StrFormat("memory:    arena %d bytes, lower bound %d, no-reuse %d (%d buffers, ordering %s)\n",
                               mp.arena_bytes(), mp.lower_bound_bytes(), mp.no_reuse_bytes(), mp.buffers_size(),
                               mp.ordering());
  std::cout << "steps:     " << m.steps_size() << "\n";
  std::cout << absl::StrFormat("  %5s  %-34s %-24s %12s  %s\n", "step", "kernel", "op", "out bytes", "onnx nodes");
  for (const auto& step : m.steps()) {
    int64_t out_bytes = 0;
    for (const auto& o : step.outputs()) out_bytes += o.bytes();
    std::cout << absl::StrFormat("  %5d  %-34s %-24s %12d  %s\n", step.index(), step.kernel(), step.op_type(),
                                 out_bytes, absl::StrJoin(step.onnx_nodes(), ","));
    for (const auto& l : step.launches()) {
      std::cout << absl::StrFormat("         launch %s (module %d) grid %dx%dx%d block %dx%dx%d smem %d", l.function(),
                                   l.module(), l.grid(0), l.grid(1), l.grid(2), l.block(0), l.block(1), l.block(2),
                                   l.shared_bytes());
      if (l.semaphores() > 0 || l.scratch_bytes() > 0) {
        std::cout << absl::StrFormat(" workspace %d semaphores + %d scratch bytes", l.semaphores(), l.scratch_bytes());
      }
      std::cout << "\n";
      if (IsSizeVariant(l)) std::cout << "           runs at " << SizeVariantText(m, l) << "\n";
      if (!l.family().empty() || !l.config().empty()) {
        std::cout << "           family " << (l.family().empty() ? "-" : l.family())
                  << (l.config().empty() ? "" : ", config " + l.config()) << "\n";
      }
      for (const auto& t : l.tensor_maps()) {
        std::cout << absl::StrFormat("           tensor map: arg %d %s dims [%s] strides [%s] bytes box [%s] swizzle %dB\n",
                                     t.tensor(), t.dtype(), absl::StrJoin(t.dims(), ","),
                                     absl::StrJoin(t.strides_bytes(), ","), absl::StrJoin(t.box(), ","),
                                     t.swizzle_bytes());
      }
    }
    if (!step.choice().empty()) std::cout << "         chosen: " << step.choice() << "\n";
    if (!step.gpu_unsupported().empty()) std::cout << "         no GPU kernel: " << step.gpu_unsupported() << "\n";
  }
  std::cout << (m.fusion().enabled() ? FusionReportText(m.fusion()) : "fusion: off (--no-fuse)\n");
  std::cout << "kernel modules: " << m.kernels_size() << "\n";
  for (const auto& k : m.kernels()) {
    std::cout << absl::StrFormat("  %-12s %-7s %10d bytes\n", k.name(), k.arch(), k.bytes());
  }
  return absl::OkStatus();
}

}  // namespace kiln::cli
