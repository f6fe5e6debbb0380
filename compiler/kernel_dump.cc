// Kernel dumps: per generated step a folder with source, PTX, SASS, launch
// configuration, resource use and subgraph; an index of every step and file.
#include "compiler/kernel_dump.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/write_file.h"
#include "graph/fused_group.h"
#include "graph/text_format.h"
#include "tbb/parallel_for.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr char kIndexTitle[] = "# kiln kernel dump";

absl::Status WriteFile(const fs::path& path, absl::string_view data) {
  return kiln::WriteFile(path.string(), data, "--dump-kernels");
}

std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// `cuobjdump -sass CUBIN`, or the reason it failed.
std::string Disassemble(const std::string& tool, const fs::path& cubin) {
  const std::string command = absl::StrCat(ShellQuote(tool), " -sass ", ShellQuote(cubin.string()), " 2>&1");
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::StrCat("// could not run ", command, "\n");
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int rc = pclose(pipe);
  if (rc != 0) absl::StrAppend(&out, "\n// ", command, " exited with status ", rc, "\n");
  return out;
}

// "%x : f16[128,768]" (the step's binding: value, storage dtype, shape).
std::string BindingText(const bundle::Binding& b) {
  if (b.kind() == bundle::Binding::ABSENT) return "(absent)";
  return absl::StrCat(FormatValueName(b.value()), " : ", b.dtype(), "[", absl::StrJoin(b.shape(), ","), "]",
                      b.kind() == bundle::Binding::WEIGHT ? " (weight)" : "");
}

std::string Dims(const google::protobuf::RepeatedField<uint32_t>& d) {
  return absl::StrCat("(", absl::StrJoin(d, ", "), ")");
}

// The tile configuration and problem constants a GEMM launch's source defines.
void GemmDefines(absl::string_view source, std::vector<std::string>* tile, std::vector<std::string>* problem) {
  static const char* const kTile[] = {"BM", "BN", "BK", "WARPS_M", "WARPS_N", "STAGES", "SPLIT_K"};
  for (absl::string_view line : absl::StrSplit(source, '\n')) {
    if (!absl::ConsumePrefix(&line, "#define ")) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() != 2 || absl::StrContains(words[0], "(")) continue;
    const std::string entry = absl::StrCat(words[0], "=", words[1]);
    if (std::find(std::begin(kTile), std::end(kTile), words[0]) != std::end(kTile)) {
      tile->push_back(entry);
    } else if (absl::StartsWith(words[0], "GEMM_")) {
      problem->push_back(entry);
    }
  }
}

std::string ResourceText(const codegen::KernelResources& r) {
  auto bytes = [](int64_t n) { return n < 0 ? std::string("?") : absl::StrCat(n, " bytes"); };
  return absl::StrCat(r.registers < 0 ? "?" : absl::StrCat(r.registers), " registers per thread, static shared memory ",
                      bytes(r.shared_bytes), ", spill stores ", bytes(r.spill_store_bytes), ", spill loads ",
                      bytes(r.spill_load_bytes), ", stack frame ", bytes(r.stack_bytes), ", barriers ",
                      r.barriers < 0 ? "?" : absl::StrCat(r.barriers), ", cmem[0] ", bytes(r.constant_bytes));
}

// The step's node as text: a fused group's body with its members, or a graph of the
// one node (large constant inputs shown as typed inputs).
std::string SubgraphText(const Node& node) {
  PrintOptions print;
  print.max_constant_elements = 16;
  if (IsFusedGroup(node)) {
    std::string out =
        absl::StrCat("# fused group ", node.name(), ": pattern ", node.GetString("pattern", "").value_or(""),
                     ", anchor ", node.GetString("anchor", "").value_or(""), "\n");
    if (const std::vector<std::string> members = FusedGroupMembers(node); !members.empty()) {
      absl::StrAppend(&out, "# ONNX nodes (members, in order): ", absl::StrJoin(members, ", "), "\n");
    }
    absl::StrAppend(&out, "# body input i is the group's input i, body output i its output i\n");
    absl::StatusOr<std::shared_ptr<const Graph>> body = FusedGroupBody(node);
    if (body.ok()) return absl::StrCat(out, PrintGraph(**body, print));
    return absl::StrCat(out, "# (no body: ", body.status().message(), ")\n");
  }
  Graph g;
  g.set_name(SafeFileName(node.name()));
  std::vector<Value*> inputs, outputs;
  for (const Value* v : node.inputs()) {
    if (v == nullptr) {
      inputs.push_back(nullptr);
      continue;
    }
    if (Value* seen = g.FindValue(v->name()); seen != nullptr) {
      inputs.push_back(seen);
      continue;
    }
    Value* copy = nullptr;
    if (v->is_constant() && v->numel() <= print.max_constant_elements) {
      copy = g.AddConstant(v->name(), v->constant());
    } else {
      copy = g.AddValue(v->name());
      copy->SetType(v->dtype(), v->shape());
      g.AddInput(copy);
    }
    inputs.push_back(copy);
  }
  for (const Value* v : node.outputs()) {
    Value* copy = g.AddValue(v->name());
    copy->SetType(v->dtype(), v->shape());
    outputs.push_back(copy);
  }
  Node* n = g.AddNode(node.op_type(), inputs, outputs, node.name());
  n->set_domain(node.domain());
  for (const auto& [name, attr] : node.attributes()) n->SetAttr(name, attr);
  for (Value* v : outputs) g.AddOutput(v);
  return absl::StrCat("# node ", node.name(), " (", node.op_type(), "); inputs that are weights are shown as inputs\n",
                      PrintGraph(g, print));
}

// One line on what a step without a folder does.
std::string WhatItRuns(const bundle::Step& step, const Node& node, const codegen::KernelChoice& choice) {
  std::vector<std::string> ins, outs;
  for (const bundle::Binding& b : step.inputs()) ins.push_back(BindingText(b));
  for (const bundle::Binding& b : step.outputs()) outs.push_back(BindingText(b));
  const std::string io = absl::StrCat(absl::StrJoin(ins, ", "), " -> ", absl::StrJoin(outs, ", "));
  std::string group;
  if (IsFusedGroup(node)) {
    group = absl::StrCat(" (fused group, pattern ", node.GetString("pattern", "").value_or(""), ")");
  }
  if (step.kernel() == "view") {
    return absl::StrCat("view: the output aliases the input's bytes, nothing runs; ", io);
  }
  // Why a MatMul group is on cuBLASLt rather than kiln's GEMM, where the selector says.
  const std::string why = choice.reason.empty() ? "" : absl::StrCat(" (", choice.reason, ")");
  if (absl::StartsWith(step.kernel(), "cublaslt:")) {
    return absl::StrCat("cuBLASLt matmul", group, why, ", planned when a GPU session starts: ", io);
  }
  if (absl::StartsWith(step.kernel(), "cudnn:")) {
    return absl::StrCat("cuDNN convolution", group, ", planned when a GPU session starts: ", io);
  }
  if (absl::StartsWith(step.kernel(), "cpu_ref:")) {
    return absl::StrCat("no GPU kernel (", step.gpu_unsupported(), "): ", io);
  }
  return absl::StrCat(step.kernel(), ": ", io);
}

std::string Cell(absl::string_view s) { return absl::StrReplaceAll(s, {{"|", "\\|"}, {"\n", " "}}); }

// Compiled artefacts of one kernel.
struct Compiled {
  absl::StatusOr<codegen::ModuleInspection> module = absl::UnknownError("not compiled");
  std::string sass;  // "" without cuobjdump
  codegen::KernelResources resources;
  bool has_resources = false;
};

absl::Status PrepareDirectory(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("--dump-kernels ", dir.string(), ": not a directory"));
  }
  if (fs::is_directory(dir, ec) && !fs::is_empty(dir, ec)) {
    std::ifstream index(dir / "index.md");
    std::string first;
    std::getline(index, first);
    if (first != kIndexTitle) {
      return absl::FailedPreconditionError(
          absl::StrCat("--dump-kernels ", dir.string(),
                       ": the directory is not empty and holds no earlier kiln dump (index.md); name a new or empty "
                       "directory"));
    }
    fs::remove_all(dir / "steps", ec);
    fs::remove(dir / "index.md", ec);
  }
  fs::create_directories(dir / "steps", ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("--dump-kernels: cannot create ", (dir / "steps").string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string SafeFileName(absl::string_view name, size_t max_size) {
  std::string out;
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (ok) {
      out.push_back(c);
    } else if (out.empty() || out.back() != '_') {
      out.push_back('_');
    }
  }
  while (!out.empty() && (out[0] == '.' || out[0] == '-')) out.erase(0, 1);
  if (out.size() > max_size) out.resize(max_size);
  if (out.empty() || out == "." || out == "..") out = "_";
  return out;
}

std::string FindCuobjdump() {
  const char* path = std::getenv("PATH");
  std::vector<std::string> dirs = absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty());
  dirs.push_back("/usr/local/cuda/bin");
  for (const std::string& d : dirs) {
    const fs::path candidate = fs::path(d) / "cuobjdump";
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

namespace {

// Each kernel compiled alone, in parallel, with its ptxas resources and (when
// `cuobjdump` is not "") its SASS, disassembled from a temporary cubin in `dir`.
std::vector<Compiled> CompileEachAlone(const std::vector<const codegen::ModuleKernel*>& kernels,
                                       const std::string& arch, const std::string& cuobjdump, const fs::path& dir) {
  std::vector<Compiled> compiled(kernels.size());
  tbb::parallel_for(size_t{0}, kernels.size(), [&](size_t i) {
    Compiled& c = compiled[i];
    c.module = codegen::InspectModule({*kernels[i]}, arch);
    if (!c.module.ok()) return;
    for (const codegen::KernelResources& r : codegen::ParsePtxasResources(c.module->log)) {
      if (r.function == kernels[i]->function) {
        c.resources = r;
        c.has_resources = true;
      }
    }
    if (cuobjdump.empty()) return;
    const fs::path tmp = dir / absl::StrCat(".sass_", getpid(), "_", i, ".cubin");
    if (WriteFile(tmp, c.module->cubin).ok()) c.sass = Disassemble(cuobjdump, tmp);
    std::error_code ec;
    fs::remove(tmp, ec);
  });
  return compiled;
}

}  // namespace

absl::StatusOr<KernelDumpStats> WriteKernelDump(const std::string& dir_name, const std::vector<Node*>& nodes,
                                                const std::vector<codegen::KernelChoice>& choices,
                                                const bundle::Manifest& manifest,
                                                const std::vector<codegen::ModuleKernel>& kernels,
                                                const std::string& arch) {
  if (static_cast<int>(nodes.size()) != manifest.steps_size() || choices.size() != nodes.size()) {
    return absl::InternalError("WriteKernelDump: one node and one kernel choice per step expected");
  }
  const fs::path dir(dir_name);
  KILN_RETURN_IF_ERROR(PrepareDirectory(dir));
  KernelDumpStats stats;

  // Every kernel a launch names, compiled alone, in parallel.
  absl::flat_hash_map<std::string, const codegen::ModuleKernel*> by_function;
  for (const codegen::ModuleKernel& k : kernels) by_function[k.function] = &k;
  std::vector<const codegen::ModuleKernel*> used;
  absl::flat_hash_map<std::string, int> used_index;
  for (const bundle::Step& step : manifest.steps()) {
    for (const bundle::Launch& l : step.launches()) {
      auto it = by_function.find(l.function());
      if (it == by_function.end()) {
        return absl::InternalError(absl::StrCat("WriteKernelDump: no source for kernel ", l.function()));
      }
      if (used_index.try_emplace(l.function(), static_cast<int>(used.size())).second) used.push_back(it->second);
    }
  }
  const std::string cuobjdump = FindCuobjdump();
  stats.sass_note = cuobjdump.empty()
                        ? "no SASS: cuobjdump is neither in PATH nor in /usr/local/cuda/bin (install the CUDA "
                          "toolkit's cuobjdump, or run it on the .cubin files elsewhere)"
                        : absl::StrCat("SASS from ", cuobjdump, " -sass");
  const std::vector<Compiled> compiled = CompileEachAlone(used, arch, cuobjdump, dir);
  stats.kernels = static_cast<int>(used.size());
  for (const Compiled& c : compiled) stats.failed += c.module.ok() ? 0 : 1;

  std::vector<std::pair<std::string, uint64_t>> files;  // relative path, bytes
  auto write = [&](const fs::path& folder, const std::string& name, absl::string_view data) -> absl::Status {
    KILN_RETURN_IF_ERROR(WriteFile(dir / folder / name, data));
    files.emplace_back((folder / name).string(), data.size());
    return absl::OkStatus();
  };
  std::string options_text;
  std::string table;
  for (int s = 0; s < manifest.steps_size(); ++s) {
    const bundle::Step& step = manifest.steps(s);
    const Node& node = *nodes[s];
    const std::string what =
        step.launches_size() > 0
            ? absl::StrCat(step.launches_size() == 1 ? "kernel " : "kernels ",
                           absl::StrJoin(step.launches(), ", ",
                                         [](std::string* o, const bundle::Launch& l) { o->append(l.function()); }),
                           IsFusedGroup(node) ? absl::StrCat(" (fused group, pattern ",
                                                             node.GetString("pattern", "").value_or(""), ")")
                                              : "")
            : WhatItRuns(step, node, choices[s]);
    if (step.launches_size() == 0) {
      absl::StrAppend(&table, "| ", s, " | ", Cell(node.name()), " | ", Cell(node.op_type()), " | ", Cell(what),
                      " | |\n");
      continue;
    }
    ++stats.step_folders;
    const fs::path folder = fs::path("steps") / absl::StrFormat("%04d_%s", s, SafeFileName(node.name()));
    std::error_code ec;
    fs::create_directories(dir / folder, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat("--dump-kernels: cannot create ", (dir / folder).string()));
    absl::StrAppend(&table, "| ", s, " | ", Cell(node.name()), " | ", Cell(node.op_type()), " | ", Cell(what), " | ",
                    folder.string(), "/ |\n");
    KILN_RETURN_IF_ERROR(write(folder, "subgraph.txt", SubgraphText(node)));

    std::string launch_text = absl::StrCat("step ", s, ": node ", node.name(), " (", node.op_type(), ")\n",
                                           "kernel choice: ", choices[s].Describe(), "\n");
    std::vector<std::string> onnx_nodes(step.onnx_nodes().begin(), step.onnx_nodes().end());
    if (const std::vector<std::string> members = FusedGroupMembers(node); !members.empty()) onnx_nodes = members;
    if (!onnx_nodes.empty()) absl::StrAppend(&launch_text, "ONNX nodes: ", absl::StrJoin(onnx_nodes, ", "), "\n");
    for (int j = 0; j < step.launches_size(); ++j) {
      const bundle::Launch& l = step.launches(j);
      const int u = used_index.at(l.function());
      const Compiled& c = compiled[u];
      int64_t threads = 1;
      for (uint32_t b : l.block()) threads *= b;
      absl::StrAppend(&launch_text, "\nlaunch ", j, ": ", l.function(), " (bundle module ", l.module(), ")\n",
                      "  grid ", Dims(l.grid()), ", block ", Dims(l.block()), " = ", threads,
                      " threads, dynamic shared memory ", l.shared_bytes(), " bytes\n");
      if (IsSizeVariant(l)) {
        absl::StrAppend(&launch_text, "  a size variant: runs at ", SizeVariantText(manifest, l), "\n");
      }
      absl::StrAppend(&launch_text, "  parameters:\n");
      for (int p = 0; p < l.args_size(); ++p) {
        const int a = l.args(p);
        const bool out = a < step.outputs_size();
        const int idx = out ? a : a - step.outputs_size();
        const bundle::Binding* b = out ? &step.outputs(idx) : (idx < step.inputs_size() ? &step.inputs(idx) : nullptr);
        absl::StrAppend(&launch_text, "    ", p, ": ", out ? "output " : "input ", idx, " ",
                        b != nullptr ? BindingText(*b) : "?", "\n");
      }
      std::vector<std::string> tile, problem;
      GemmDefines(used[u]->source, &tile, &problem);
      if (!tile.empty()) absl::StrAppend(&launch_text, "  GEMM tile: ", absl::StrJoin(tile, " "), "\n");
      if (!l.config().empty()) absl::StrAppend(&launch_text, "  GEMM config: ", l.config(), "\n");
      if (!problem.empty()) absl::StrAppend(&launch_text, "  GEMM problem: ", absl::StrJoin(problem, " "), "\n");
      if (c.has_resources) {
        absl::StrAppend(&launch_text, "  resources (ptxas -v, ", arch, "): ", ResourceText(c.resources), "\n",
                        "  shared memory per block: ", c.resources.shared_bytes, " static + ", l.shared_bytes(),
                        " dynamic = ", c.resources.shared_bytes + l.shared_bytes(), " bytes\n");
      } else if (c.module.ok()) {
        absl::StrAppend(&launch_text, "  resources: ptxas reported none for ", l.function(), "\n");
      }
      const std::string fn = SafeFileName(l.function());
      if (!c.module.ok()) {
        absl::StrAppend(&launch_text, "  NVRTC FAILED: see ", fn, ".error.txt\n");
        KILN_RETURN_IF_ERROR(write(folder, fn + ".error.txt", c.module.status().message()));
        KILN_RETURN_IF_ERROR(write(folder, fn + ".cu", codegen::ModuleSource({*used[u]})));
        continue;
      }
      if (options_text.empty()) options_text = absl::StrJoin(c.module->options, " ");
      KILN_RETURN_IF_ERROR(write(folder, fn + ".cu", c.module->source));
      KILN_RETURN_IF_ERROR(write(folder, fn + ".ptx", c.module->ptx));
      KILN_RETURN_IF_ERROR(write(folder, fn + ".cubin", c.module->cubin));
      KILN_RETURN_IF_ERROR(write(folder, fn + ".ptxas.txt", c.module->log + "\n"));
      if (!cuobjdump.empty()) KILN_RETURN_IF_ERROR(write(folder, fn + ".sass", c.sass));
    }
    KILN_RETURN_IF_ERROR(write(folder, "launch.txt", launch_text));
  }

  const bundle::CompileOptions& co = manifest.compile_options();
  std::string index = absl::StrCat(
      kIndexTitle, "\n\n", "- model: ", manifest.source().path(), "\n- arch ", arch, ", precision ",
      manifest.precision(), ", fusion ", co.no_fuse() ? "off (--no-fuse)" : "on", ", matmul groups ",
      co.matmul_groups(), "\n- ", manifest.steps_size(), " steps; ", stats.step_folders,
      " run generated code (one folder each); ", stats.kernels, " distinct kernels",
      stats.failed > 0 ? absl::StrCat(", ", stats.failed, " rejected by NVRTC (see their .error.txt)") : "",
      "\n- NVRTC ", codegen::NvrtcVersion(), ", options: ",
      options_text.empty() ? absl::StrJoin(codegen::NvrtcOptions(arch), " ") + " --ptxas-options=-v" : options_text,
      "\n- .cu/.ptx/.cubin: per kernel, each compiled alone (the prelude, then the kernel); the bundle packs the "
      "same kernels into modules of up to 48\n- ",
      stats.sass_note, "\n\n## Steps\n\n| step | node | op | runs | folder |\n|---|---|---|---|---|\n", table,
      "\n## Files\n\n| file | bytes |\n|---|---|\n");
  for (const auto& [path, bytes] : files) absl::StrAppend(&index, "| ", Cell(path), " | ", bytes, " |\n");
  KILN_RETURN_IF_ERROR(WriteFile(dir / "index.md", index));
  return stats;
}

}  // namespace kiln
