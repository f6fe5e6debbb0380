// The kiln subcommands. Each takes its arguments (after the subcommand name),
// prints to stdout, and returns an error for main() to print.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kiln::cli {

absl::Status InspectCommand(const std::vector<std::string>& args);
absl::Status RunCommand(const std::vector<std::string>& args);

}  // namespace kiln::cli
