// Runs the ONNX backend test data suites through the conformance runner (one test
// per suite) and fails on any case that imports but errors or gives wrong numbers.
// Needs KILN_ONNX_DATA (e.g. ../shared/data/onnx); skips with a message without it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/conformance/conformance.h"

namespace kiln::conformance {
namespace {

void RunSuiteTest(const std::string& suite) {
  const char* data = std::getenv("KILN_ONNX_DATA");
  if (data == nullptr || *data == '\0') {
    GTEST_SKIP() << "KILN_ONNX_DATA is not set; set it to the ONNX backend test data folder "
                    "(e.g. KILN_ONNX_DATA=../shared/data/onnx) to run the '"
                 << suite << "' conformance suite";
  }
  const std::filesystem::path root = std::filesystem::path(data) / suite;
  if (!std::filesystem::is_directory(root)) {
    GTEST_SKIP() << "suite folder " << root.string() << " does not exist (KILN_ONNX_DATA=" << data << ")";
  }
  const std::vector<CaseResult> results = RunSuite(data, suite);
  std::cout << FormatReport(results, /*per_op=*/true);
  int failed = 0, unsupported = 0;
  for (const CaseResult& r : results) {
    if (r.outcome == Outcome::kUnsupported) ++unsupported;
    if (r.outcome != Outcome::kFailed) continue;
    ++failed;
    std::cout << "FAILED " << suite << "/" << r.name << (r.bound_inputs ? " (bound)" : "") << ": " << r.detail
              << "\n";
  }
  std::cout << suite << ": " << results.size() << " cases, " << failed << " failed, " << unsupported
            << " unsupported\n";
  EXPECT_GT(results.size(), 0u) << "no test cases found under " << root.string();
  EXPECT_EQ(failed, 0) << failed << " of " << results.size() << " '" << suite
                       << "' cases failed (listed above with their details)";
}

TEST(ConformanceTest, Node) { RunSuiteTest("node"); }
TEST(ConformanceTest, Light) { RunSuiteTest("light"); }
TEST(ConformanceTest, PytorchConverted) { RunSuiteTest("pytorch-converted"); }
TEST(ConformanceTest, PytorchOperator) { RunSuiteTest("pytorch-operator"); }
TEST(ConformanceTest, Simple) { RunSuiteTest("simple"); }

}  // namespace
}  // namespace kiln::conformance
