// Writes a whole file so that it appears complete or not at all: into a temporary
// file beside the destination (removed on error and on SIGINT/SIGTERM,
// common/temp_files.h), every write, fsync and close checked, then renamed over the
// destination. A symlink at the destination is replaced, never followed.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln {

// `data` into `path`. Errors start with `what` (the option or command that asked for
// the file), name the path and give errno in words: PermissionDenied when the
// temporary file cannot be created or renamed, DataLoss when a write fails (a full
// disk, say).
absl::Status WriteFile(const std::string& path, absl::string_view data, absl::string_view what);

}  // namespace kiln
