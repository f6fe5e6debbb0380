// kiln_conformance: runs the CPU reference (or, with --device gpu, bundles compiled
// for the local GPU) over the ONNX backend test data.
//   kiln_conformance [--data DIR] [--suite node|light|...] [--filter SUBSTR] [--device reference|gpu]
//                    [--per-op] [--verbose] [--failures]
// DIR defaults to $KILN_ONNX_DATA. Exit status 1 if any supported case fails.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tests/conformance/conformance.h"

int main(int argc, char** argv) {
  using namespace kiln::conformance;
  std::string data = std::getenv("KILN_ONNX_DATA") ? std::getenv("KILN_ONNX_DATA") : "";
  std::vector<std::string> suites;
  std::string filter;
  bool per_op = false, verbose = false, failures = false;
  Device device = Device::kReference;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--data") data = next();
    else if (a == "--suite") suites.push_back(next());
    else if (a == "--filter") filter = next();
    else if (a == "--device") {
      const std::string d = next();
      if (d != "reference" && d != "gpu") {
        std::cerr << "--device takes reference or gpu, not " << d << "\n";
        return 2;
      }
      device = d == "gpu" ? Device::kGpu : Device::kReference;
    }
    else if (a == "--per-op") per_op = true;
    else if (a == "--verbose" || a == "-v") verbose = true;
    else if (a == "--failures") failures = true;
    else {
      std::cerr << "usage: kiln_conformance [--data DIR] [--suite NAME]... [--filter SUBSTR] [--device reference|gpu] "
                   "[--per-op] [--verbose] [--failures]\n";
      return 2;
    }
  }
  if (data.empty()) {
    std::cerr << "kiln_conformance: no data directory; pass --data DIR or set KILN_ONNX_DATA\n";
    return 2;
  }
  if (suites.empty()) suites = {"node", "light", "pytorch-converted", "pytorch-operator", "simple"};
  std::vector<CaseResult> all;
  for (const auto& s : suites) {
    auto r = RunSuite(data, s, filter, verbose, device);
    all.insert(all.end(), r.begin(), r.end());
  }
  if (failures) {
    for (const auto& r : all) {
      if (r.outcome == Outcome::kFailed) std::cout << "FAIL " << r.suite << "/" << r.name << ": " << r.detail << "\n";
    }
  }
  std::cout << FormatReport(all, per_op);
  for (const auto& r : all) {
    if (r.outcome == Outcome::kFailed) return 1;
  }
  return 0;
}
