// The kiln subcommands. Each takes its arguments (after the subcommand name),
// prints to stdout, and returns an error for main() to print.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/bundle.pb.h"

namespace kiln::cli {

absl::Status BenchCommand(const std::vector<std::string>& args);
absl::Status CompileCommand(const std::vector<std::string>& args);
absl::Status InspectCommand(const std::vector<std::string>& args);
// `kiln inspect MODEL.kiln [--json]` (tools/inspect_bundle.cc).
absl::Status InspectBundle(const std::string& path, bool json);
absl::Status RunCommand(const std::vector<std::string>& args);
// The fusion report stored in a bundle's manifest, as text (tools/inspect_bundle.cc).
std::string FusionReportText(const bundle::FusionReport& report);

}  // namespace kiln::cli
