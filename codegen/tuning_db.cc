// The GEMM tuning database: keys, the tab-separated file, merges and atomic rewrites.
#include "codegen/tuning_db.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "codegen/kernel_cache.h"
#include "codegen/ops/kernel_util.h"

namespace kiln::codegen {
namespace {

constexpr char kHeader[] =
    "# kiln tuning database v1 (kiln compile --tune); one entry per line, tab-separated:\n"
    "# arch\tdtype\tM\tN\tK\tbatch\tlayout\tsignature\tconfig\ttuned_ms\theuristic_config\theuristic_ms\tdevice"
    "\tlibrary_ms\n";
// The 14th field (library_ms) came later: lines of 13 are read as not measured.
constexpr int kFields = 14;
constexpr int kFieldsWithoutLibrary = 13;

// A field may hold neither tabs nor line breaks.
std::string Clean(absl::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

std::string Ms(double ms) { return absl::StrFormat("%.6g", ms); }

// An advisory lock on `path` (flock), released on destruction; a no-op when the lock
// file cannot be opened (a read-only directory: Save fails later with the reason).
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }

 private:
  int fd_ = -1;
};

}  // namespace

bool LibraryMeasuredFaster(const TuningEntry& e) {
  return e.library_ms > 0 && e.tuned_ms > 0 && e.library_ms < 0.99 * e.tuned_ms;
}

std::string TuningKey::ToString() const {
  return absl::StrCat(arch, "\t", dtype, "\t", m, "\t", n, "\t", k, "\t", batch, "\t", layout, "\t", signature);
}

std::string TuningKey::ShapeText() const {
  std::string s = absl::StrCat(m, "x", n, "x", k, " ", dtype, " ", layout);
  if (batch > 1) absl::StrAppend(&s, " batch ", batch);
  return s;
}

TuningKey GemmTuningKey(absl::string_view arch, const ops::GemmProblem& p) {
  TuningKey key;
  key.arch = std::string(arch);
  key.dtype = std::string(DTypeName(p.dtype));
  key.m = p.m;
  key.n = p.n;
  key.k = absl::StrJoin(p.k, "+");
  key.batch = p.batch;
  key.layout = Clean(p.layout);
  key.signature = Clean(p.signature);
  return key;
}

std::string DefaultTuningDbPath(const std::string& kernel_cache_dir) {
  if (const char* env = std::getenv("KILN_TUNING_DB"); env != nullptr && env[0] != '\0') return env;
  const std::string dir = kernel_cache_dir.empty() ? DefaultKernelCacheDir() : kernel_cache_dir;
  if (dir.empty()) return "";
  return (std::filesystem::path(dir) / "tuning.tsv").string();
}

absl::StatusOr<TuningEntry> TuningDb::ParseLine(absl::string_view line) {
  std::vector<absl::string_view> f = absl::StrSplit(line, '\t');
  if (f.size() != kFields && f.size() != kFieldsWithoutLibrary) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.size(), " tab-separated fields, expected ", kFields, " (or ", kFieldsWithoutLibrary, ")"));
  }
  TuningEntry e;
  TuningKey& k = e.key;
  k.arch = std::string(f[0]);
  k.dtype = std::string(f[1]);
  if (k.arch.empty() || k.dtype.empty() || f[6].empty() || f[7].empty()) {
    return absl::InvalidArgumentError("an empty arch, dtype, layout or signature");
  }
  if (!absl::SimpleAtoi(f[2], &k.m) || !absl::SimpleAtoi(f[3], &k.n) || !absl::SimpleAtoi(f[5], &k.batch) ||
      k.m <= 0 || k.n <= 0 || k.batch <= 0) {
    return absl::InvalidArgumentError("M, N and batch must be positive integers");
  }
  for (absl::string_view part : absl::StrSplit(f[4], '+')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) return absl::InvalidArgumentError(absl::StrCat("bad K '", f[4], "'"));
  }
  k.k = std::string(f[4]);
  k.layout = std::string(f[6]);
  k.signature = std::string(f[7]);
  absl::StatusOr<GemmTileConfig> config = GemmTileConfig::Parse(f[8]);
  if (!config.ok()) return config.status();
  e.config = *config;
  absl::StatusOr<GemmTileConfig> heuristic = GemmTileConfig::Parse(f[10]);
  if (!heuristic.ok()) return heuristic.status();
  if (heuristic->sm90 != config->sm90) {
    return absl::InvalidArgumentError("the config and the heuristic's config are of different GEMM families");
  }
  e.heuristic = *heuristic;
  if (!absl::SimpleAtod(f[9], &e.tuned_ms) || !absl::SimpleAtod(f[11], &e.heuristic_ms) ||
      !std::isfinite(e.tuned_ms) || !std::isfinite(e.heuristic_ms) || e.tuned_ms < 0 || e.heuristic_ms < 0) {
    return absl::InvalidArgumentError("times must be non-negative numbers (milliseconds)");
  }
  e.device = std::string(f[12]);
  if (f.size() == kFields &&
      (!absl::SimpleAtod(f[13], &e.library_ms) || !std::isfinite(e.library_ms) || e.library_ms < 0)) {
    return absl::InvalidArgumentError("library_ms must be a non-negative number (milliseconds; 0: not measured)");
  }
  return e;
}

std::string TuningDb::Format(const std::map<std::string, TuningEntry>& entries) {
  std::string out = kHeader;
  for (const auto& [key, e] : entries) {
    absl::StrAppend(&out, e.key.ToString(), "\t", e.config.ToString(), "\t", Ms(e.tuned_ms), "\t",
                    e.heuristic.ToString(), "\t", Ms(e.heuristic_ms), "\t", Clean(e.device), "\t",
                    Ms(e.library_ms), "\n");
  }
  return out;
}

void TuningDb::Parse(absl::string_view text, std::map<std::string, TuningEntry>& out) {
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line[0] == '#') continue;
    absl::StatusOr<TuningEntry> e = ParseLine(line);
    if (!e.ok()) {
      std::string w =
          absl::StrCat("tuning database ", path_, " line ", number, ": ", e.status().message(), "; skipped");
      if (std::find(warnings_.begin(), warnings_.end(), w) == warnings_.end()) warnings_.push_back(std::move(w));
      continue;
    }
    std::string key = e->key.ToString();
    out[key] = *std::move(e);
  }
}

absl::Status TuningDb::Load() {
  entries_.clear();
  put_.clear();
  warnings_.clear();
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path_, ec)) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("tuning database ", path_, ": cannot read it: ", std::strerror(errno)));
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::UnavailableError(absl::StrCat("tuning database ", path_, ": read error"));
  Parse(text, entries_);
  return absl::OkStatus();
}

const TuningEntry* TuningDb::Find(const TuningKey& key) const {
  auto it = entries_.find(key.ToString());
  return it == entries_.end() ? nullptr : &it->second;
}

void TuningDb::Put(TuningEntry entry) {
  entry.key.layout = Clean(entry.key.layout);
  entry.key.signature = Clean(entry.key.signature);
  std::string key = entry.key.ToString();
  entries_[key] = std::move(entry);
  put_.push_back(std::move(key));
}

absl::Status TuningDb::Save() {
  namespace fs = std::filesystem;
  const fs::path path(path_);
  std::error_code ec;
  if (path.has_parent_path()) {
    fs::create_directories(path.parent_path(), ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("tuning database: cannot create ", path.parent_path().string(), ": ", ec.message()));
    }
  }
  FileLock lock(path_ + ".lock");
  // Merge: what is on disk now (other processes' entries), then ours on top.
  std::map<std::string, TuningEntry> merged;
  {
    std::ifstream in(path_, std::ios::binary);
    if (in) {
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      Parse(text, merged);
    }
  }
  for (const std::string& key : put_) merged[key] = entries_.at(key);
  const std::string text = Format(merged);

  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path_, ".tmp.", getpid(), ".", counter.fetch_add(1));
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrCat("tuning database: cannot write ", tmp, ": ", std::strerror(errno)));
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int saved_errno = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) saved_errno = errno != 0 ? errno : saved_errno;
  if (ok && std::rename(tmp.c_str(), path_.c_str()) != 0) {
    ok = false;
    saved_errno = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("tuning database: cannot write ", path_, ": ", std::strerror(saved_errno)));
  }
  entries_ = std::move(merged);
  put_.clear();
  return absl::OkStatus();
}

std::string GemmChoice::Describe() const { return absl::StrCat(config.ToString(), " (", source, ")"); }

absl::StatusOr<GemmChoice> ChooseGemmConfig(const Node& node, absl::string_view arch, const TuningDb* db,
                                            int sm_count) {
  absl::StatusOr<ops::GemmProblem> problem = ops::DescribeMatMulGroup(node);
  if (!problem.ok()) return problem.status();
  const TuningKey key = GemmTuningKey(arch, *problem);
  GemmChoice choice;
  choice.key = key.ToString();
  const TuningEntry* e = db != nullptr ? db->Find(key) : nullptr;
  if (UsesSm90Gemm(node, arch)) {
    absl::StatusOr<ops::Sm90GemmConfig> heuristic = ops::HeuristicSm90GemmConfig(node, sm_count, &choice.source);
    if (!heuristic.ok()) return heuristic.status();
    choice.config = *heuristic;
    // A stored config the family refuses now (a template change, another problem's
    // variant) leaves the heuristic's, as with the sm_80 template.
    if (e != nullptr && e->config.sm90 && ops::Sm90ConfigFits(node, e->config.sm90_config, sm_count).ok()) {
      choice.config = e->config;
      choice.from_db = true;
      choice.source = "tuning database";
    }
    return choice;
  }
  if (problem->gated || problem->rotary_half > 0) {
    return ops::NoKernel(node, std::string(ops::kPairedEpilogueRefusal));
  }
  // The sm_80 template's heuristic sizes its split-K for an H100 SXM's 132 SMs.
  choice.config = ops::HeuristicGemmConfig(*problem);
  if (e != nullptr && !e->config.sm90 && ops::VerifyGemmConfig(e->config.sm80_config, problem->variant).ok()) {
    choice.config = e->config;
    choice.from_db = true;
    choice.source = "tuning database";
  } else if (absl::Status fits = ops::VerifyGemmConfig(choice.config.sm80_config, problem->variant); !fits.ok()) {
    return ops::NoKernel(node, absl::StrCat("no tile config for this form: ", fits.message()));
  }
  return choice;
}

absl::StatusOr<std::vector<KernelLaunch>> GenerateChosenGemm(const Node& node, const GemmChoice& choice,
                                                             int sm_count) {
  absl::StatusOr<std::vector<KernelLaunch>> launches =
      choice.config.sm90 ? ops::GenerateMatMulGroupSm90(node, &choice.config.sm90_config, sm_count)
                         : ops::GenerateMatMulGroup(node, &choice.config.sm80_config);
  if (launches.ok()) {
    for (KernelLaunch& l : *launches) l.config = choice.Describe();
  }
  return launches;
}

std::string GemmTileConfig::ToString() const {
  return sm90 ? absl::StrCat("sm90 ", ops::Sm90GemmConfigString(sm90_config)) : ops::GemmConfigString(sm80_config);
}

absl::StatusOr<GemmTileConfig> GemmTileConfig::Parse(absl::string_view text) {
  if (absl::ConsumePrefix(&text, "sm90 ")) {
    absl::StatusOr<ops::Sm90GemmConfig> c = ops::ParseSm90GemmConfig(std::string(text));
    if (!c.ok()) return c.status();
    return GemmTileConfig(*c);
  }
  absl::StatusOr<ops::GemmConfig> c = ops::ParseGemmConfig(text);
  if (!c.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(c.status().message(), " (or \"sm90 \" and an sm90 config)"));
  }
  return GemmTileConfig(*c);
}

bool operator==(const GemmTileConfig& a, const GemmTileConfig& b) { return a.ToString() == b.ToString(); }

bool UsesSm90Gemm(const Node& node, absl::string_view arch) {
  return IsHopperArch(arch) && ops::Sm90Eligible(node).ok();
}

}  // namespace kiln::codegen
