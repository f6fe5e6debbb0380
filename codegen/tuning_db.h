// The GEMM tuning database: tile configs that `kiln compile --tune` measured to be
// the fastest on a GPU, so that later compiles (on any machine, no GPU needed) use
// them instead of the shape heuristic (ops::PickGemmConfig).
//
// An entry is keyed by (arch, dtype, M, N, K, batch, layout, group signature): the
// fields of ops::GemmProblem, so a GEMM with another epilogue, prologue, layout or
// dtype tunes separately. Its value: the winning config, its measured time, the
// heuristic's config and time, the GPU that measured them, and cuBLASLt's time for
// the whole group where cuBLASLt can run it in one call (0: not measured). On sm_90a,
// `--matmul-groups auto` gives a group to cuBLASLt when that time is the faster one
// (LibraryMeasuredFaster); every other mode ignores it.
//
// File: one text file, `tuning.tsv`, next to the kernel cache (DefaultTuningDbPath).
// Lines starting with '#' are comments; every other line is one entry of 14
// tab-separated fields (13, without library_ms, in files written before it):
//   arch dtype M N K batch layout signature config tuned_ms heuristic_config heuristic_ms device library_ms
// e.g. "sm_90a f16 128 768 768 1 NN matmul+epilogue[MatMul,Add,Add]#5f1c... 64x32x32 w2x1 s4 0.0061
//       64x64x32 w2x2 s4 0.0083 NVIDIA H100 80GB HBM3 0" (K of a dual-matmul: "768+3072"; a
// split-K config ends in " kS": "64x64x32 w2x2 s4 k5", ops::GemmConfigString).
// A line that does not parse is skipped with a warning naming the file and line (the
// rest of the file is used). Save() rewrites the file atomically (temporary file in
// the same directory, then rename) under an advisory lock (flock on `<path>.lock`)
// and merges: it re-reads the file first, so entries other processes stored since
// Load() are kept; this process's Put() entries win for the same key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/op_kernels.h"
#include "codegen/ops/families.h"
#include "codegen/ops/gemm_sm90.h"

namespace kiln::codegen {

struct TuningKey {
  std::string arch;   // "sm_90a"
  std::string dtype;  // "f16", "bf16"
  int64_t m = 0, n = 0;
  std::string k;  // "768", or "768+3072" (dual-matmul)
  int64_t batch = 1;
  std::string layout;     // ops::GemmProblem::layout
  std::string signature;  // ops::GemmProblem::signature
  // The first 8 fields of the entry's line, tab-separated (the map key).
  std::string ToString() const;
  // "128x768x768 f16 NN" (+ " batch 3" when batched).
  std::string ShapeText() const;
};
TuningKey GemmTuningKey(absl::string_view arch, const ops::GemmProblem& problem);

// A tile config of the GEMM family that runs the problem: the sm_80 template's
// (ops::GemmConfig) or, on sm_90a for Sm90Eligible groups, the sm90 family's.
// Text: ops::GemmConfigString's ("64x64x32 w2x2 s4"), or "sm90 " and
// ops::Sm90GemmConfigString's ("sm90 128x128 p2x2 s5").
struct GemmTileConfig {
  bool sm90 = false;
  ops::GemmConfig sm80_config;
  ops::Sm90GemmConfig sm90_config;
  GemmTileConfig() = default;
  GemmTileConfig(const ops::GemmConfig& c) : sm80_config(c) {}  // NOLINT: implicit, the sm_80 template's
  GemmTileConfig(const ops::Sm90GemmConfig& c) : sm90(true), sm90_config(c) {}  // NOLINT
  std::string ToString() const;
  // Either text form; InvalidArgument naming both forms otherwise.
  static absl::StatusOr<GemmTileConfig> Parse(absl::string_view text);
};
bool operator==(const GemmTileConfig& a, const GemmTileConfig& b);

// Whether kiln's generated GEMM of `node` on `arch` is the sm90 family's
// (IsHopperArch and ops::Sm90Eligible), else the sm_80 template's.
bool UsesSm90Gemm(const Node& node, absl::string_view arch);

struct TuningEntry {
  TuningKey key;
  GemmTileConfig config;
  double tuned_ms = 0;
  GemmTileConfig heuristic;
  double heuristic_ms = 0;
  std::string device;  // "NVIDIA H100 80GB HBM3"
  double library_ms = 0;  // cuBLASLt's call for the whole group; 0: not measured
};

// Whether cuBLASLt measured faster than the generated kernel's best: library_ms under
// 0.99 x tuned_ms (the tuner's noise guard, as for configs).
bool LibraryMeasuredFaster(const TuningEntry& entry);

// The database file when none is named: $KILN_TUNING_DB, else `kernel_cache_dir`/
// tuning.tsv (kernel_cache_dir: the kernel cache's, codegen::DefaultKernelCacheDir()
// when ""), else "" (no database).
std::string DefaultTuningDbPath(const std::string& kernel_cache_dir = "");

class TuningDb {
 public:
  explicit TuningDb(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // Reads the file; a missing file is an empty database. Lines that do not parse
  // become warnings(). Errors: the file exists but cannot be read.
  absl::Status Load();
  // nullptr when there is no entry for `key`.
  const TuningEntry* Find(const TuningKey& key) const;
  // Adds or replaces the entry of entry.key (written by the next Save()).
  void Put(TuningEntry entry);
  // Merges with the file's current entries (ours win for keys we Put) and rewrites it
  // atomically, creating its directory. Errors name the path and the reason.
  absl::Status Save();

  size_t size() const { return entries_.size(); }
  const std::map<std::string, TuningEntry>& entries() const { return entries_; }
  // One sentence per skipped line: "tuning database PATH line N: <why>; skipped".
  const std::vector<std::string>& warnings() const { return warnings_; }

  // The text of entries (the file's exact contents, header included), and the
  // parse of one line (InvalidArgument saying what is wrong).
  static std::string Format(const std::map<std::string, TuningEntry>& entries);
  static absl::StatusOr<TuningEntry> ParseLine(absl::string_view line);

 private:
  // Parses `text` into `out`, appending warnings for bad lines.
  void Parse(absl::string_view text, std::map<std::string, TuningEntry>& out);

  std::string path_;
  std::map<std::string, TuningEntry> entries_;  // by TuningKey::ToString()
  std::vector<std::string> put_;                // keys Put since Load/Save
  std::vector<std::string> warnings_;
};

// The tile config of a MatMul group's GEMM and where it came from: what the kernel
// selector (codegen/kernel_choice.h) decides for a kGemm step, and generation takes.
struct GemmChoice {
  GemmTileConfig config;
  bool from_db = false;
  std::string key;  // TuningKey::ToString()
  // Where the config came from, as the launch says it: "tuning database",
  // "heuristic", or the sm90 family's "heuristic, epilogue work: light".
  std::string source = "heuristic";
  // "128x128x32 w2x2 s3 (tuning database)", "sm90 128x128 p2x2 s5 (heuristic,
  // epilogue work: light)": the launch's config (bundle::Launch.config).
  std::string Describe() const;
};
// The config kiln's GEMM takes for `node` on `arch`: the one `db` holds for it when
// that entry is of the family UsesSm90Gemm names and the family takes it for this
// node (VerifyGemmConfig, ops::Sm90ConfigFits with `sm_count`), else the family's
// heuristic. `db` may be nullptr. Errors: the node is no GEMM the generator takes
// (DescribeMatMulGroup's, HeuristicSm90GemmConfig's); Unimplemented when the sm_80
// template's heuristic tile does not fit the group's form (no kernel).
absl::StatusOr<GemmChoice> ChooseGemmConfig(const Node& node, absl::string_view arch, const TuningDb* db,
                                            int sm_count = 0);
// The launches of `node`'s GEMM with `choice`'s config (from ChooseGemmConfig for the
// same node), each launch's config set to choice.Describe(); the generator's errors.
absl::StatusOr<std::vector<KernelLaunch>> GenerateChosenGemm(const Node& node, const GemmChoice& choice,
                                                             int sm_count = 0);

}  // namespace kiln::codegen
