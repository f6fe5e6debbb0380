// The model zoo runner: compile each real export, run it, compare with onnxruntime.
#include "tests/zoo/zoo_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontend/tensor_file.h"
#include "runtime/bundle.h"
#include "compiler/compiler.h"
#include "runtime/cpu_executor.h"
#include "runtime/gpu_executor.h"

namespace kiln::zoo {
namespace fs = std::filesystem;

std::vector<std::string> ListZooCases(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (fs::is_regular_file(e.path() / "model.onnx")) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::vector<Named>> ReadDataSet(const std::string& set_dir, const std::string& prefix) {
  const fs::path dir(set_dir);
  std::vector<Named> out;
  for (int k = 0;; ++k) {
    const fs::path p = dir / absl::StrCat(prefix, k, ".pb");
    if (!fs::exists(p)) break;
    std::string name;
    absl::StatusOr<Tensor> t = ReadTensorProtoFile(p.string(), &name);
    if (!t.ok()) return t.status();
    out.push_back({std::move(name), *std::move(t)});
  }
  if (out.empty()) return absl::NotFoundError(absl::StrCat("no ", prefix, "0.pb in ", dir.string()));
  return out;
}

Comparison Compare(const Tensor& got, const Tensor& want) {
  const std::vector<float> g = got.ToFloat(), w = want.ToFloat();
  double diff = 0, scale = 0, dot = 0, gg = 0, ww = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i]) && g[i] != w[i]) return {INFINITY, 0};
    if (!std::isfinite(w[i])) continue;
    diff = std::max(diff, std::fabs(static_cast<double>(g[i]) - w[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(w[i])));
    dot += static_cast<double>(g[i]) * w[i];
    gg += static_cast<double>(g[i]) * g[i];
    ww += static_cast<double>(w[i]) * w[i];
  }
  Comparison c;
  c.rel_diff = scale > 0 ? diff / scale : diff;
  c.cosine = gg > 0 && ww > 0 ? dot / std::sqrt(gg * ww) : (gg == ww ? 1.0 : 0.0);
  return c;
}

namespace {

std::string WorkDir(const ZooOptions& options) {
  if (!options.work_dir.empty()) return options.work_dir;
  return (fs::temp_directory_path() / absl::StrCat("kiln_zoo_", ::getpid())).string();
}

}  // namespace

ZooResult RunZooCase(const std::string& dir, const std::string& name, const ZooOptions& options) {
  ZooResult r;
  r.name = name;
  const fs::path case_dir = fs::path(dir) / name;
  const fs::path set_dir = case_dir / "test_data_set_0";
  absl::StatusOr<std::vector<Named>> inputs = ReadDataSet(set_dir.string(), "input_");
  absl::StatusOr<std::vector<Named>> expected = ReadDataSet(set_dir.string(), "output_");
  if (!inputs.ok() || !expected.ok()) {
    r.detail = std::string((inputs.ok() ? expected.status() : inputs.status()).message());
    return r;
  }

  CompileOptions copts;
  copts.arch = options.arch;
  copts.precision = options.precision;
  copts.matmul_groups = options.matmul_groups;
  for (const Named& in : *inputs) copts.input_shapes[in.name] = in.tensor.shape();
  const std::string work = WorkDir(options);
  std::error_code ec;
  fs::create_directories(work, ec);
  const std::string bundle_path = (fs::path(work) / absl::StrCat(name, ".kiln")).string();
  const auto start = std::chrono::steady_clock::now();
  absl::Status compiled = CompileToFile((case_dir / "model.onnx").string(), bundle_path, copts);
  r.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!compiled.ok()) {
    r.detail = absl::StrCat("compile: ", compiled.message());
    return r;
  }
  r.compiled = true;
  absl::StatusOr<std::unique_ptr<Bundle>> bundle = Bundle::Load(bundle_path);
  if (!bundle.ok()) {
    r.detail = absl::StrCat("load: ", bundle.status().message());
    return r;
  }
  const bundle::Manifest& m = (*bundle)->manifest();
  r.kernels_unfused = m.fusion().nodes_before();
  std::vector<std::string> cpu_only;
  for (const bundle::Step& step : m.steps()) {
    if (step.kernel() != "view") ++r.kernels_fused;
    if (absl::StartsWith(step.kernel(), "cpu_ref:")) cpu_only.push_back(step.op_type());
    for (const bundle::Launch& l : step.launches()) r.launches_without_wait += l.grid_dependency_wait() ? 0 : 1;
  }
  r.gpu_runnable = cpu_only.empty();
  for (const bundle::FusionGroup& g : m.fusion().groups()) {
    if (g.note().empty()) ++r.groups[g.pattern()];
  }

  TensorMap feeds;
  for (Named& in : *inputs) feeds[in.name] = std::move(in.tensor);
  absl::StatusOr<std::shared_ptr<const CpuProgram>> host = CpuProgram::Create(**bundle);
  absl::StatusOr<std::vector<Tensor>> got = absl::UnknownError("not run");
  if (!host.ok()) {
    got = host.status();
  } else if (options.device == ZooDevice::kCpu) {
    absl::StatusOr<std::unique_ptr<CpuExecutor>> cpu = CpuExecutor::Create(*host);
    got = cpu.ok() ? (*cpu)->Run(feeds) : cpu.status();
  } else {
    absl::StatusOr<std::shared_ptr<const GpuProgram>> program = GpuProgram::Create(*host);
    absl::StatusOr<std::unique_ptr<GpuExecutor>> gpu =
        program.ok() ? GpuExecutor::Create(*program) : absl::StatusOr<std::unique_ptr<GpuExecutor>>(program.status());
    got = gpu.ok() ? (*gpu)->Run(feeds) : gpu.status();
  }
  std::error_code rm;
  fs::remove(bundle_path, rm);
  if (!got.ok()) {
    r.detail = absl::StrCat("run: ", got.status().message());
    return r;
  }
  r.ran = true;

  r.correct = true;
  std::string worst;
  for (const Named& want : *expected) {
    int index = -1;
    for (int i = 0; i < m.outputs_size(); ++i) {
      if (m.outputs(i).name() == want.name) index = i;
    }
    if (index < 0 || index >= static_cast<int>(got->size())) {
      r.correct = false;
      r.detail = absl::StrCat("no output '", want.name, "' in the bundle");
      return r;
    }
    const Tensor& t = (*got)[index];
    if (t.shape() != want.tensor.shape()) {
      r.correct = false;
      r.detail = absl::StrCat("output '", want.name, "': shape ", ShapeToString(t.shape()), ", expected ",
                              ShapeToString(want.tensor.shape()));
      return r;
    }
    const Comparison c = Compare(t, want.tensor);
    if (c.rel_diff > r.max_rel_diff || worst.empty()) worst = want.name;
    r.max_rel_diff = std::max(r.max_rel_diff, c.rel_diff);
    r.min_cosine = std::min(r.min_cosine, c.cosine);
  }
  r.correct = r.max_rel_diff <= kZooMaxRelDiff && r.min_cosine >= kZooMinCosine;
  r.detail = absl::StrFormat("worst output '%s'", worst);
  if (!r.gpu_runnable) absl::StrAppend(&r.detail, "; no GPU kernel for ", absl::StrJoin(cpu_only, ", "));
  return r;
}

std::string FormatZooTable(const std::vector<ZooResult>& results, ZooDevice device) {
  std::string out = absl::StrFormat("%-26s %-8s %-7s %-7s %9s %9s %15s  %s\n", "case", "compiled", "gpu-ok",
                                    device == ZooDevice::kGpu ? "gpu" : "cpu", "max-diff", "cosine",
                                    "kernels unf->fu", "groups");
  int compiled = 0, runnable = 0, correct = 0;
  for (const ZooResult& r : results) {
    compiled += r.compiled;
    runnable += r.gpu_runnable;
    correct += r.correct;
    std::vector<std::string> groups;
    for (const auto& [kind, n] : r.groups) groups.push_back(absl::StrCat(kind, " x", n));
    absl::StrAppend(&out, absl::StrFormat("%-26s %-8s %-7s %-7s %9.2e %9.6f %7d -> %-5d  %s\n", r.name,
                                          r.compiled ? "yes" : "NO", r.gpu_runnable ? "yes" : "NO",
                                          r.correct ? "ok" : (r.ran ? "WRONG" : "FAILED"), r.max_rel_diff,
                                          r.min_cosine, r.kernels_unfused, r.kernels_fused,
                                          absl::StrJoin(groups, ", ")));
    if (!r.correct) absl::StrAppend(&out, "    ", r.detail, "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("%d cases: %d compiled, %d GPU-runnable, %d correct on the %s "
                                        "(max |diff| <= %.0e of max |ref|, cosine >= %.4f)\n",
                                        results.size(), compiled, runnable, correct,
                                        device == ZooDevice::kGpu ? "GPU" : "CPU backend", kZooMaxRelDiff,
                                        kZooMinCosine));
  return out;
}

Tensor ResizeByRepeating(const Tensor& data, const Shape& shape) {
  const Shape& from = data.shape();
  const std::vector<int64_t> values = data.ToInt64();
  const std::vector<float> floats = data.ToFloat();
  std::vector<int64_t> ints(NumElements(shape));
  std::vector<float> fl(ints.size());
  for (int64_t flat = 0; flat < static_cast<int64_t>(ints.size()); ++flat) {
    int64_t rest = flat, src = 0, stride = 1;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      const int64_t i = rest % shape[d];
      rest /= shape[d];
      src += (i % from[d]) * stride;
      stride *= from[d];
    }
    ints[flat] = values[src];
    fl[flat] = floats[src];
  }
  return IsFloating(data.dtype()) ? Tensor::FromFloat(data.dtype(), shape, fl)
                                  : Tensor::FromInt64(data.dtype(), shape, ints);
}

}  // namespace kiln::zoo
