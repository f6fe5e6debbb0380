// NVRTC driver: module text assembly and compilation to cubin.
#include "codegen/nvrtc_module.h"

#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "codegen/templates.h"
#include "common/status_macros.h"
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

size_t KernelBodyStart(absl::string_view source) {
  constexpr absl::string_view kName = "KILN_KERNEL(";
  size_t found = absl::string_view::npos;
  for (size_t at = source.find(kName); at != absl::string_view::npos; at = source.find(kName, at + 1)) {
    const size_t line_start = source.rfind('\n', at) + 1;  // npos + 1 == 0: the first line
    if (absl::StrContains(source.substr(line_start, at - line_start), "//")) continue;  // a comment
    if (found != absl::string_view::npos) return absl::string_view::npos;  // two entries
    found = at;
  }
  if (found == absl::string_view::npos) return found;
  int depth = 0;
  size_t i = found + kName.size() - 1;
  for (; i < source.size(); ++i) {
    if (source[i] == '(') ++depth;
    if (source[i] == ')' && --depth == 0) break;
  }
  for (++i; i < source.size() && absl::ascii_isspace(static_cast<unsigned char>(source[i])); ++i) {
  }
  return i < source.size() && source[i] == '{' ? i + 1 : absl::string_view::npos;
}

std::string ModuleSource(const std::vector<ModuleKernel>& kernels) {
  std::string out = absl::StrCat("// kiln NVRTC module: ", kernels.size(), " kernel(s)\n",
                                 TemplateSource("prelude.cuh"), "\n");
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string source = kernels[i].source;
    const size_t body = KernelBodyStart(source);
    if (body != std::string::npos) source.insert(body, " KILN_GRID_DEPENDENCY_WAIT();");
    absl::StrAppend(&out, "namespace kiln_k", i, " {\n#define KILN_KERNEL ", kernels[i].function, "\n", source,
                    "\n#undef KILN_KERNEL\n}  // namespace kiln_k", i, "\n");
  }
  return out;
}

namespace {

// Compiles one module's text; `inspect` adds ptxas' report and keeps the PTX.
absl::StatusOr<ModuleInspection> CompileSource(std::string source, size_t num_kernels, absl::string_view arch,
                                              bool inspect) {
  static const char* const kArchs[] = {"sm_90a", "sm_89", "sm_86", "sm_80"};
  if (std::find(std::begin(kArchs), std::end(kArchs), arch) == std::end(kArchs)) {
    return absl::InvalidArgumentError(absl::StrCat("NVRTC: unsupported arch '", arch, "'"));
  }
  ModuleInspection out;
  out.source = std::move(source);
  out.options = NvrtcOptions(arch);
  if (inspect) out.options.push_back("--ptxas-options=-v");
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, out.source.c_str(), "kiln_module.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "create program");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });

  std::vector<const char*> options;
  for (const std::string& o : out.options) options.push_back(o.c_str());
  r = nvrtcCompileProgram(prog, static_cast<int>(options.size()), options.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (r != NVRTC_SUCCESS) {
    if (log.size() > 4000) log = absl::StrCat(log.substr(0, 4000), "\n... (log truncated)");
    return absl::InternalError(absl::StrCat("NVRTC failed to compile a module of ", num_kernels, " kernel(s) for ",
                                            arch, ":\n", log, QuoteLogLines(log, out.source)));
  }
  out.log = std::move(log);
  size_t cubin_size = 0;
  r = nvrtcGetCUBINSize(prog, &cubin_size);
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "get cubin size");
  out.cubin.assign(cubin_size, '\0');
  r = nvrtcGetCUBIN(prog, out.cubin.data());
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "get cubin");
  if (inspect) {
    size_t ptx_size = 0;
    r = nvrtcGetPTXSize(prog, &ptx_size);
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "get PTX size");
    out.ptx.assign(ptx_size, '\0');
    r = nvrtcGetPTX(prog, out.ptx.data());
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "get PTX");
    while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  }
  return out;
}

}  // namespace

std::vector<std::string> NvrtcOptions(absl::string_view arch) {
  return {absl::StrCat("--gpu-architecture=", arch), "--std=c++17", "-default-device", "-lineinfo"};
}

absl::StatusOr<std::string> CompileModule(const std::vector<ModuleKernel>& kernels, absl::string_view arch) {
  KILN_ASSIGN_OR_RETURN(ModuleInspection m, CompileSource(ModuleSource(kernels), kernels.size(), arch, false));
  return std::move(m.cubin);
}

absl::StatusOr<ModuleInspection> InspectModule(const std::vector<ModuleKernel>& kernels, absl::string_view arch) {
  return CompileSource(ModuleSource(kernels), kernels.size(), arch, true);
}

absl::StatusOr<std::vector<std::string>> CompileModules(const std::vector<ModuleKernel>& kernels,
                                                        absl::string_view arch, int max_per_module) {
  CompileModulesOptions options;
  options.max_per_module = max_per_module;
  return CompileModules(kernels, arch, options);
}

absl::StatusOr<std::vector<std::string>> CompileModules(const std::vector<ModuleKernel>& kernels,
                                                        absl::string_view arch, const CompileModulesOptions& options,
                                                        ModuleCompileStats* stats_out) {
  const auto start = std::chrono::steady_clock::now();
  const size_t per_module = std::max(1, options.max_per_module);
  const size_t chunks = (kernels.size() + per_module - 1) / per_module;
  ModuleCompileStats stats;
  stats.modules = static_cast<int>(chunks);
  stats.cache_enabled = options.cache != nullptr;
  std::vector<std::string> sources(chunks);
  std::vector<size_t> sizes(chunks);
  std::vector<absl::StatusOr<std::string>> results(chunks, absl::UnknownError("not compiled"));
  std::vector<KernelCacheKey> keys(chunks);
  std::vector<KernelCache::Lookup> lookups(chunks, KernelCache::Lookup::kMiss);
  const std::string version = NvrtcVersion();
  tbb::parallel_for(size_t{0}, chunks, [&](size_t c) {
    const size_t begin = c * per_module;
    const size_t end = std::min(kernels.size(), begin + per_module);
    sources[c] = ModuleSource(std::vector<ModuleKernel>(kernels.begin() + begin, kernels.begin() + end));
    sizes[c] = end - begin;
    if (options.cache == nullptr) return;
    keys[c] = KernelCacheKey{Sha256Hex(sources[c]), std::string(arch), version, NvrtcOptions(arch)};
    std::string cubin;
    lookups[c] = options.cache->Load(keys[c], &cubin);
    if (lookups[c] == KernelCache::Lookup::kHit) results[c] = std::move(cubin);
  });
  std::vector<size_t> misses;
  for (size_t c = 0; c < chunks; ++c) {
    if (lookups[c] == KernelCache::Lookup::kHit) {
      ++stats.cache_hits;
    } else {
      stats.cache_corrupt += lookups[c] == KernelCache::Lookup::kCorrupt ? 1 : 0;
      misses.push_back(c);
    }
  }
  if (options.progress != nullptr) options.progress->Begin(static_cast<int>(misses.size()), stats.cache_hits);

  std::mutex mutex;  // guards stats, store_error and the progress calls
  absl::Status store_error;
  tbb::parallel_for(size_t{0}, misses.size(), [&](size_t i) {
    const size_t c = misses[i];
    absl::StatusOr<ModuleInspection> m = CompileSource(std::move(sources[c]), sizes[c], arch, false);
    absl::Status stored;
    if (m.ok() && options.cache != nullptr) stored = options.cache->Store(keys[c], m->cubin);
    std::lock_guard<std::mutex> lock(mutex);
    if (!m.ok()) {
      results[c] = m.status();
      return;
    }
    results[c] = std::move(m->cubin);
    if (!stored.ok() && store_error.ok()) store_error = stored;
    ++stats.compiled;
    if (options.progress != nullptr) options.progress->Advance(stats.compiled, static_cast<int>(misses.size()));
  });
  if (!store_error.ok()) {
    stats.warnings.push_back(absl::StrCat(store_error.message(),
                                          "; compiled kernels are not cached (set KILN_CACHE_DIR to a writable "
                                          "directory, or turn the cache off with --no-kernel-cache)"));
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  absl::Status failure;
  std::vector<std::string> cubins;
  for (auto& r : results) {
    if (!r.ok()) {
      failure = r.status();
      break;
    }
    cubins.push_back(*std::move(r));
  }
  if (options.progress != nullptr) options.progress->End(stats, failure.ok());
  if (stats_out != nullptr) *stats_out = stats;
  if (!failure.ok()) return failure;
  return cubins;
}

std::vector<KernelResources> ParsePtxasResources(absl::string_view log) {
  std::vector<KernelResources> out;
  // "N bytes <what>" pairs of a comma-separated list.
  auto amounts = [](absl::string_view text, auto&& take) {
    for (absl::string_view part : absl::StrSplit(text, ',')) {
      part = absl::StripAsciiWhitespace(part);
      const size_t space = part.find(' ');
      if (space == absl::string_view::npos) continue;
      int64_t n = 0;
      if (!absl::SimpleAtoi(part.substr(0, space), &n)) continue;
      take(n, part.substr(space + 1));
    }
  };
  auto quoted = [](absl::string_view line, absl::string_view after) -> std::string {
    size_t at = line.find(after);
    if (at == absl::string_view::npos) return "";
    const size_t open = line.find('\'', at + after.size());
    const size_t close = open == absl::string_view::npos ? open : line.find('\'', open + 1);
    if (close == absl::string_view::npos) return "";
    return std::string(line.substr(open + 1, close - open - 1));
  };
  KernelResources* current = nullptr;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (std::string f = quoted(line, "Compiling entry function"); !f.empty()) {
      out.push_back(KernelResources{f});
      current = &out.back();
      continue;
    }
    if (current == nullptr) continue;
    if (size_t at = line.find("Used "); at != absl::string_view::npos) {
      // "Used 32 registers, used 1 barriers, 256 bytes smem, 360 bytes cmem[0]"
      for (absl::string_view part : absl::StrSplit(line.substr(at), ',')) {
        part = absl::StripAsciiWhitespace(part);
        std::vector<absl::string_view> words = absl::StrSplit(part, ' ', absl::SkipEmpty());
        if (words.size() < 3) continue;
        int64_t n = 0;
        if ((words[0] == "Used" || words[0] == "used") && absl::SimpleAtoi(words[1], &n)) {
          if (words[2] == "registers") current->registers = static_cast<int>(n);
          if (words[2] == "barriers") current->barriers = static_cast<int>(n);
        } else if (absl::SimpleAtoi(words[0], &n) && words[1] == "bytes") {
          if (words[2] == "smem") current->shared_bytes = n;
          if (words[2] == "cmem[0]") current->constant_bytes = n;
        }
      }
    } else if (line.find("stack frame") != absl::string_view::npos) {
      // "400 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
      const size_t dot = line.find('.');
      amounts(dot == absl::string_view::npos ? line : line.substr(dot + 1), [&](int64_t n, absl::string_view what) {
        if (what == "bytes stack frame") current->stack_bytes = n;
        if (what == "bytes spill stores") current->spill_store_bytes = n;
        if (what == "bytes spill loads") current->spill_load_bytes = n;
      });
    }
  }
  return out;
}

std::string NvrtcVersion() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return absl::StrCat(major, ".", minor);
}

}  // namespace kiln::codegen
