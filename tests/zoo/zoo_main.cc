// kiln_zoo: compiles every case of a model zoo (shared/zoo/export_zoo.py's layout) and
// runs it on the CPU backend or the GPU against onnxruntime's outputs.
//   kiln_zoo [--data DIR] [--device cpu|gpu] [--filter SUBSTR] [--arch ARCH] [--precision P]
//            [--matmul-groups library|generated|auto]
// DIR defaults to $KILN_ZOO_DATA. Prints one line per case as it finishes, then the
// table. Exit status 1 if any case does not compile, keeps a step on the CPU backend,
// or disagrees with the expected outputs.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/zoo/zoo_runner.h"

int main(int argc, char** argv) {
  using namespace kiln::zoo;
  const char* env = std::getenv("KILN_ZOO_DATA");
  std::string data = env != nullptr ? env : "";
  std::string filter;
  ZooOptions options;
  const char* usage =
      "usage: kiln_zoo [--data DIR] [--device cpu|gpu] [--filter SUBSTR] [--arch sm_90a|...] "
      "[--precision fp16|bf16|fp32|tf32] [--matmul-groups library|generated|auto]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return 0;
    }
    if (i + 1 >= argc) {
      std::cerr << "kiln_zoo: " << a << " needs a value\n" << usage;
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--data") {
      data = v;
    } else if (a == "--filter") {
      filter = v;
    } else if (a == "--arch") {
      options.arch = v;
    } else if (a == "--precision") {
      options.precision = v;
    } else if (a == "--matmul-groups") {
      absl::StatusOr<kiln::codegen::MatMulGroups> mode = kiln::codegen::ParseMatMulGroups(v);
      if (!mode.ok()) {
        std::cerr << "kiln_zoo: " << mode.status().message() << "\n" << usage;
        return 2;
      }
      options.matmul_groups = *mode;
    } else if (a == "--device" && (v == "cpu" || v == "gpu")) {
      options.device = v == "gpu" ? ZooDevice::kGpu : ZooDevice::kCpu;
    } else {
      std::cerr << "kiln_zoo: unknown argument " << a << " " << v << "\n" << usage;
      return 2;
    }
  }
  if (data.empty()) {
    std::cerr << "kiln_zoo: no zoo folder; pass --data DIR or set KILN_ZOO_DATA\n";
    return 2;
  }
  std::vector<ZooResult> results;
  for (const std::string& name : ListZooCases(data)) {
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    results.push_back(RunZooCase(data, name, options));
    const ZooResult& r = results.back();
    std::cerr << absl::StrFormat("kiln_zoo: %s: %s (%.1f s compile)\n", name,
                                 r.correct ? "ok" : r.detail, r.compile_seconds);
  }
  if (results.empty()) {
    std::cerr << "kiln_zoo: no cases (folders holding a model.onnx) under " << data << "\n";
    return 2;
  }
  std::cout << FormatZooTable(results, options.device);
  for (const ZooResult& r : results) {
    if (!r.compiled || !r.gpu_runnable || !r.correct) return 1;
  }
  return 0;
}
