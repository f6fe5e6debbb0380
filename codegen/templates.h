// The kernel templates under codegen/templates/*.cuh, embedded into the binary at
// build time (codegen/CMakeLists.txt generates their definitions).
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kiln::codegen {

// The text of codegen/templates/<name> (e.g. "prelude.cuh"); an empty view for an
// unknown name.
absl::string_view TemplateSource(absl::string_view name);
// Every embedded template's name.
std::vector<std::string> TemplateNames();

}  // namespace kiln::codegen
