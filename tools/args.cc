// Command-line parsing for kiln subcommands.
#include "tools/args.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln::cli {

absl::StatusOr<Args> Args::Parse(const std::vector<std::string>& argv, const std::set<std::string>& value_flags,
                                 const std::set<std::string>& bool_flags) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (!absl::StartsWith(a, "--") || a == "--") {
      args.positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    const bool has_inline = eq != std::string::npos;
    if (has_inline) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags.count(name)) {
      if (has_inline) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      args.values_[name].push_back("true");
    } else if (value_flags.count(name)) {
      if (!has_inline) {
        if (i + 1 >= argv.size()) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        value = argv[++i];
      }
      args.values_[name].push_back(value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
    }
  }
  return args;
}

std::string Args::Get(const std::string& flag, const std::string& dflt) const {
  auto it = values_.find(flag);
  return it == values_.end() ? dflt : it->second.back();
}

const std::vector<std::string>& Args::GetAll(const std::string& flag) const {
  static const std::vector<std::string> kEmpty;
  auto it = values_.find(flag);
  return it == values_.end() ? kEmpty : it->second;
}

}  // namespace kiln::cli
