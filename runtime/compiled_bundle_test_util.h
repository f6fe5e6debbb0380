// For the runtime's tests: a graph compiled into a bundle file in the test's temp
// directory, loaded, with its host program (runtime/gpu_dynamic_test.cc,
// runtime/size_only_steps_test.cc).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/compiler.h"
#include "gtest/gtest.h"
#include "runtime/bundle.h"
#include "runtime/cpu_executor.h"

namespace kiln::test {

// `graph` compiled for `arch` into a bundle file named after `name`, loaded into
// `*bundle`, and its host program; a test failure and null when a step fails.
inline std::shared_ptr<const CpuProgram> CompileAndLoad(const Graph& graph, const std::string& arch,
                                                        const std::string& name, std::unique_ptr<Bundle>* bundle) {
  CompileOptions options;
  options.arch = arch;
  auto contents = BuildBundle(graph, options, name + ".onnx", "bytes");
  EXPECT_TRUE(contents.ok()) << contents.status();
  if (!contents.ok()) return nullptr;
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / absl::StrCat(name, "_", ::getpid(), ".kiln")).string();
  EXPECT_TRUE(WriteBundle(*std::move(contents), path).ok());
  auto loaded = Bundle::Load(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return nullptr;
  *bundle = *std::move(loaded);
  auto program = CpuProgram::Create(**bundle);
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? *std::move(program) : nullptr;
}

}  // namespace kiln::test
