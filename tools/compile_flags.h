// The options of `kiln compile` that turn into CompileOptions, shared by the command
// and the C API's kiln_compile (capi/), so both take the same flags with the same
// checks and messages.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/compile_options.h"
#include "tools/args.h"

namespace kiln::cli {

// The flags that take a value (--arch, --precision, --dim, ...) and the boolean ones
// (--no-fuse, --tune, ...), without the command's own (-o, --report, --dump-after,
// --time-passes, --help).
const std::set<std::string>& CompileValueFlags();
const std::set<std::string>& CompileBoolFlags();

// CompileOptions from parsed flags: arch (default: DefaultArch()), precision, shapes,
// fusion, kernel modes, layout, kernel cache, kernel dump, tuning, calibration. Errors
// name the flag. `notes` (optional) receives remarks for the user, such as a flag that
// does not apply.
absl::StatusOr<CompileOptions> CompileOptionsFromArgs(const Args& args, std::vector<std::string>* notes = nullptr);

// --tuning-db FILE / --no-tuning-db into `options` (kiln compile and kiln bench);
// InvalidArgument when both are given.
absl::Status ReadTuningDbFlags(const Args& args, CompileOptions& options);

}  // namespace kiln::cli
