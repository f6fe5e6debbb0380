// On-disk cache of compiled kernel modules (cubins), so that recompiling a model whose
// kernels did not change skips NVRTC. An entry is keyed by everything that decides
// the cubin: the SHA-256 of the module's full source (prelude included), the target
// arch, the NVRTC version (nvrtcVersion) and NVRTC's options.
//
// Layout: DIR/kernels-v1/<2 hex>/<64 hex>.cubin, the name being the SHA-256 of the key.
// An entry is a text header, a blank line, then the cubin:
//   kiln-kernel-cache 1
//   key <64 hex>          (the file's own name: a misplaced file is not trusted)
//   arch sm_90a
//   nvrtc 13.0
//   bytes <cubin size>
//   sha256 <64 hex of the cubin>
// Writes go to a temporary file in the same directory, then rename() it into place,
// so readers (other kiln processes included) see a whole entry or none. Load checks
// the header, the size and the checksum; an entry that fails any check (truncated,
// corrupt, another version) is reported corrupt and never used: the caller compiles
// again and Store replaces it. There is no eviction: delete the directory to reclaim
// the space.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln::codegen {

// The directory kiln caches kernels in when none is named: $KILN_CACHE_DIR, else
// $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln ("" when none of them is set).
std::string DefaultKernelCacheDir();

// SHA-256 of `data`, 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view data);

struct KernelCacheKey {
  std::string source_sha256;         // Sha256Hex of the module source
  std::string arch;                  // "sm_90a"
  std::string nvrtc_version;         // "13.0"
  std::vector<std::string> options;  // NVRTC's options, in order
  // The entry's name: SHA-256 over all the fields above.
  std::string Digest() const;
};

class KernelCache {
 public:
  enum class Lookup { kHit, kMiss, kCorrupt };

  explicit KernelCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // kHit and the cubin in *cubin; kMiss when there is no entry (or it cannot be read);
  // kCorrupt when an entry exists but fails a check.
  Lookup Load(const KernelCacheKey& key, std::string* cubin) const;
  // Stores `cubin` under `key` atomically, creating the directories. Errors name the
  // path and the reason; callers report them as warnings, not failures.
  absl::Status Store(const KernelCacheKey& key, absl::string_view cubin) const;
  std::string EntryPath(const KernelCacheKey& key) const;

 private:
  std::string dir_;
};

}  // namespace kiln::codegen
