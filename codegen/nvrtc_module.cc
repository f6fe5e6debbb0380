// NVRTC driver: module text assembly and compilation to cubin.
#include "codegen/nvrtc_module.h"

#include <nvrtc.h>

#include <algorithm>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codegen/templates.h"
#include "tbb/parallel_for.h"

namespace kiln::codegen {
namespace {

absl::Status NvrtcError(nvrtcResult r, absl::string_view what) {
  return absl::InternalError(absl::StrCat("NVRTC ", what, ": ", nvrtcGetErrorString(r)));
}

// The source lines a compile log points at ("kiln_module.cu(123): error ..."), so
// that an error in generated code can be read without dumping the whole module.
std::string QuoteLogLines(const std::string& log, const std::string& source) {
  std::vector<std::string> lines = absl::StrSplit(source, '\n');
  std::string out;
  int quoted = 0;
  for (absl::string_view entry : absl::StrSplit(log, '\n')) {
    size_t open = entry.find('(');
    size_t close = entry.find(')');
    if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) continue;
    int line = 0;
    if (!absl::SimpleAtoi(entry.substr(open + 1, close - open - 1), &line)) continue;
    if (line < 1 || line > static_cast<int>(lines.size()) || ++quoted > 8) continue;
    absl::StrAppend(&out, "\n  line ", line, ": ", lines[line - 1]);
  }
  return out;
}

}  // namespace

std::string ModuleSource(const std::vector<ModuleKernel>& kernels) {
  std::string out = absl::StrCat("// kiln NVRTC module: ", kernels.size(), " kernel(s)\n",
                                 TemplateSource("prelude.cuh"), "\n");
  for (size_t i = 0; i < kernels.size(); ++i) {
    absl::StrAppend(&out, "namespace kiln_k", i, " {\n#define KILN_KERNEL ", kernels[i].function, "\n",
                    kernels[i].source, "\n#undef KILN_KERNEL\n}  // namespace kiln_k", i, "\n");
  }
  return out;
}

absl::StatusOr<std::string> CompileModule(const std::vector<ModuleKernel>& kernels, absl::string_view arch) {
  static const char* const kArchs[] = {"sm_90a", "sm_89", "sm_86", "sm_80"};
  if (std::find(std::begin(kArchs), std::end(kArchs), arch) == std::end(kArchs)) {
    return absl::InvalidArgumentError(absl::StrCat("NVRTC: unsupported arch '", arch, "'"));
  }
  const std::string source = ModuleSource(kernels);
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), "kiln_module.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "create program");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });

  const std::string arch_flag = absl::StrCat("--gpu-architecture=", arch);
  const char* options[] = {arch_flag.c_str(), "--std=c++17", "-default-device",
                           "-lineinfo"};
  r = nvrtcCompileProgram(prog, sizeof(options) / sizeof(options[0]), options);
  if (r != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    if (log_size > 0) nvrtcGetProgramLog(prog, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    if (log.size() > 4000) log = absl::StrCat(log.substr(0, 4000), "\n... (log truncated)");
    return absl::InternalError(absl::StrCat("NVRTC failed to compile a module of ", kernels.size(),
                                            " kernel(s) for ", arch, ":\n", log, QuoteLogLines(log, source)));
  }
  size_t cubin_size = 0;
  r = nvrtcGetCUBINSize(prog, &cubin_size);
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "get cubin size");
  std::string cubin(cubin_size, '\0');
  r = nvrtcGetCUBIN(prog, cubin.data());
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "get cubin");
  return cubin;
}

absl::StatusOr<std::vector<std::string>> CompileModules(const std::vector<ModuleKernel>& kernels,
                                                        absl::string_view arch, int max_per_module) {
  max_per_module = std::max(1, max_per_module);
  const size_t chunks = (kernels.size() + max_per_module - 1) / max_per_module;
  std::vector<absl::StatusOr<std::string>> results(chunks, absl::UnknownError("not compiled"));
  tbb::parallel_for(size_t{0}, chunks, [&](size_t c) {
    const size_t begin = c * max_per_module;
    const size_t end = std::min(kernels.size(), begin + max_per_module);
    results[c] = CompileModule(std::vector<ModuleKernel>(kernels.begin() + begin, kernels.begin() + end), arch);
  });
  std::vector<std::string> cubins;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    cubins.push_back(*std::move(r));
  }
  return cubins;
}

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return absl::StrCat(major, ".", minor);
}

}  // namespace kiln::codegen
