// kiln_memory_plan_bench: memory-plan quality and planning time over ONNX models.
//
// Usage: kiln_memory_plan_bench [--precision fp16|bf16|fp32] [DATA_DIR] [MODEL.onnx ...]
//   DATA_DIR: the ONNX backend test data (its light/*.onnx are planned) or a folder
//   of .onnx files; every further argument ending in .onnx is planned too.
//   --precision: plan the graph lowered to that storage, as kiln compile does
//   (default fp32: the imported graph as is).
// Prints one row per model: buffers, arena, lower bound, their ratio, the no-reuse
// total, the winning ordering and the best planning time over 5 runs. Exit status 1
// if a model fails to import or plan.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "frontend/onnx_importer.h"
#include "graph/lower_precision.h"
#include "compiler/memory_planner.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<std::string> models;
  std::string precision = "fp32";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--precision" && i + 1 < argc) {
      precision = argv[++i];
      if (precision != "fp16" && precision != "bf16" && precision != "fp32") {
        std::fprintf(stderr, "--precision must be fp16, bf16 or fp32\n");
        return 2;
      }
      continue;
    }
    const fs::path arg = argv[i];
    if (fs::is_directory(arg)) {
      const fs::path dir = fs::is_directory(arg / "light") ? arg / "light" : arg;
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() == ".onnx") found.push_back(entry.path().string());
      }
      std::sort(found.begin(), found.end());
      models.insert(models.end(), found.begin(), found.end());
    } else if (arg.extension() == ".onnx") {
      models.push_back(arg.string());
    } else {
      std::fprintf(stderr, "usage: kiln_memory_plan_bench [--precision fp16|bf16|fp32] [DATA_DIR] [MODEL.onnx ...]\n");
      return 2;
    }
  }
  if (models.empty()) {
    std::fprintf(stderr, "usage: kiln_memory_plan_bench [--precision fp16|bf16|fp32] [DATA_DIR] [MODEL.onnx ...] (no models found)\n");
    return 2;
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  std::printf("storage precision: %s\n", precision.c_str());
  std::printf("%-24s %8s %11s %11s %7s %12s %14s %10s\n", "model", "buffers", "arena MiB", "bound MiB",
              "ratio", "no-reuse MiB", "ordering", "plan ms");
  int failures = 0;
  for (const std::string& path : models) {
    const std::string name = fs::path(path).stem().string();
    auto graph = kiln::ImportOnnxFile(path);
    if (!graph.ok()) {
      std::fprintf(stderr, "%s\n", std::string(graph.status().message()).c_str());
      ++failures;
      continue;
    }
    if (precision != "fp32") {
      const kiln::DType storage = precision == "bf16" ? kiln::DType::kBFloat16 : kiln::DType::kFloat16;
      if (auto st = kiln::LowerPrecision(storage).Run(**graph); !st.ok()) {
        std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(st.status().message()).c_str());
        ++failures;
        continue;
      }
    }
    double best_ms = 1e30;
    absl::StatusOr<kiln::GraphMemoryPlan> gp;
    for (int run = 0; run < 5; ++run) {
      const auto start = std::chrono::steady_clock::now();
      gp = kiln::PlanGraphMemory(**graph);
      const auto end = std::chrono::steady_clock::now();
      best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(end - start).count());
      if (!gp.ok()) break;
    }
    if (!gp.ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(gp.status().message()).c_str());
      ++failures;
      continue;
    }
    const kiln::MemoryPlan& p = gp->plan;
    const double ratio = p.lower_bound_bytes > 0 ? static_cast<double>(p.arena_bytes) / p.lower_bound_bytes : 1.0;
    std::printf("%-24s %8zu %11.3f %11.3f %7.4f %12.3f %14s %10.3f\n", name.c_str(), gp->buffers.size(),
                p.arena_bytes / kMiB, p.lower_bound_bytes / kMiB, ratio, p.no_reuse_bytes / kMiB,
                kiln::PlanOrderingName(p.ordering), best_ms);
  }
  return failures > 0 ? 1 : 0;
}
