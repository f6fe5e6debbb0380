// Writes a whole file in one call, with an error a user can act on (the path, and the
// option or command that asked for it).
#pragma once

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kiln {

// `data` into `path` (binary, truncated first). PermissionDenied "WHAT: cannot write
// PATH" when the file cannot be opened or written.
inline absl::Status WriteFile(const std::string& path, absl::string_view data, absl::string_view what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat(what, ": cannot write ", path));
  return absl::OkStatus();
}

}  // namespace kiln
