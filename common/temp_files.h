// Temporary files that a signal must not leave behind: while registered, a path is
// removed if SIGINT, SIGTERM or SIGHUP ends the process (the handler unlinks every
// registered path, then lets the signal end the process as it would have). Writers
// of files that appear atomically (bundles, outputs) register their temporary name
// between creating and renaming it.
#pragma once

#include <string>

namespace kiln {

// Registers `path` (at most kMaxTempFiles at once, each under 4096 bytes; beyond
// that the path is simply not cleaned up on a signal) and installs the handlers on
// first use. Returns a slot for Unregister.
int RegisterTempFile(const std::string& path);
void UnregisterTempFile(int slot);

inline constexpr int kMaxTempFiles = 64;

// Registers a path for the lifetime of the object.
class ScopedTempFile {
 public:
  explicit ScopedTempFile(const std::string& path) : slot_(RegisterTempFile(path)) {}
  ~ScopedTempFile() { UnregisterTempFile(slot_); }
  ScopedTempFile(const ScopedTempFile&) = delete;
  ScopedTempFile& operator=(const ScopedTempFile&) = delete;

 private:
  int slot_;
};

}  // namespace kiln
