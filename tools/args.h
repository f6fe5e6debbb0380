// A small command-line parser for kiln's subcommands: --flag, --flag=value,
// --flag value, repeated flags, and positional arguments.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::cli {

class Args {
 public:
  // `value_flags` take a value; `bool_flags` do not. Unknown flags are an error.
  static absl::StatusOr<Args> Parse(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
                                    const std::set<std::string>& bool_flags);

  bool Has(const std::string& flag) const { return values_.count(flag) > 0; }
  // Last value given for `flag`, or `dflt`.
  std::string Get(const std::string& flag, const std::string& dflt = "") const;
  const std::vector<std::string>& GetAll(const std::string& flag) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace kiln::cli
