// Conformance runner over the ONNX backend test data.
#include "tests/conformance/conformance.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx_importer.h"
#include "frontend/tensor_file.h"
#include "graph/evaluate.h"
#include "runtime/bundle.h"
#include "compiler/compiler.h"
#include "runtime/gpu_executor.h"

namespace kiln::conformance {
namespace fs = std::filesystem;

Tolerance ToleranceFor(const std::string& suite, bool low_precision) {
  if (low_precision) return {1e-2, 1e-3};
  if (suite == "light") return {1e-3, 1e-4};
  return {1e-3, 1e-5};
}

namespace {

std::vector<std::string> OpsOf(const onnx::ModelProto& model) {
  std::set<std::string> ops;
  for (const auto& n : model.graph().node()) ops.insert(n.op_type());
  return {ops.begin(), ops.end()};
}

// Empty string when `actual` matches `expected` within tolerance.
std::string Compare(const std::string& what, const Tensor& actual, const Tensor& expected, Tolerance tol) {
  if (actual.shape() != expected.shape()) {
    return absl::StrCat(what, ": shape ", ShapeToString(actual.shape()), " != expected ", ShapeToString(expected.shape()));
  }
  const bool exact = !IsFloating(expected.dtype()) && expected.dtype() != actual.dtype() ? false : !IsFloating(expected.dtype());
  if (exact) {
    const std::vector<int64_t> a = actual.ToInt64(), e = expected.ToInt64();
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != e[i]) return absl::StrCat(what, "[", i, "] = ", a[i], ", expected ", e[i]);
    }
    return "";
  }
  const std::vector<float> a = actual.ToFloat(), e = expected.ToFloat();
  size_t worst = 0;
  double worst_excess = 0;
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(e[i]) || std::isnan(a[i])) {
      if (std::isnan(e[i]) != std::isnan(a[i])) {
        ++bad;
        worst = i;
        worst_excess = INFINITY;
      }
      continue;
    }
    if (std::isinf(e[i]) || std::isinf(a[i])) {
      if (a[i] != e[i]) {
        ++bad;
        worst = i;
        worst_excess = INFINITY;
      }
      continue;
    }
    const double err = std::fabs(static_cast<double>(a[i]) - e[i]);
    const double allowed = tol.atol + tol.rtol * std::fabs(e[i]);
    if (err > allowed) {
      ++bad;
      if (err - allowed > worst_excess) {
        worst_excess = err - allowed;
        worst = i;
      }
    }
  }
  if (bad == 0) return "";
  return absl::StrFormat("%s: %d of %d elements off (worst [%d] = %g, expected %g; rtol %g atol %g)", what, bad,
                         a.size(), worst, a[worst], e[worst], tol.rtol, tol.atol);
}

// Input files follow the model's declared inputs, skipping initializers.
std::vector<std::string> InputNames(const onnx::ModelProto& model) {
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<std::string> names;
  for (const auto& in : model.graph().input()) {
    if (!initializers.count(in.name())) names.push_back(in.name());
  }
  return names;
}

bool HasDynamicDims(const onnx::ModelProto& model, const std::string& input) {
  for (const auto& in : model.graph().input()) {
    if (in.name() != input) continue;
    const auto& tt = in.type().tensor_type();
    if (!tt.has_shape()) return true;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value()) return true;
    }
  }
  return false;
}

bool IsUnsupported(const absl::Status& s) { return s.code() == absl::StatusCode::kUnimplemented; }

// The graph's outputs for `feeds`: the CPU reference, or the graph compiled for the
// local GPU and run there (a step without a GPU kernel fails the case). A form the
// reference does not evaluate (Unimplemented: training-mode Dropout, say) is
// unsupported on both.
absl::StatusOr<std::vector<Tensor>> Execute(const Graph& g, const TensorMap& feeds, Device device,
                                            const std::string& name) {
  absl::StatusOr<std::vector<Tensor>> reference = EvaluateGraph(g, feeds);
  if (device == Device::kReference || (!reference.ok() && IsUnsupported(reference.status()))) return reference;
  CompileOptions options;
  options.arch = DefaultArch();
  options.precision = "fp32";
  absl::StatusOr<BundleContents> contents = BuildBundle(g, options, name, "");
  if (!contents.ok()) return contents.status();
  const fs::path path = fs::temp_directory_path() / absl::StrCat("kiln_conformance_", ::getpid(), ".kiln");
  if (absl::Status s = WriteBundle(*std::move(contents), path.string()); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Bundle>> bundle = Bundle::Load(path.string());
  std::error_code ec;
  fs::remove(path, ec);
  if (!bundle.ok()) return bundle.status();
  absl::StatusOr<std::shared_ptr<const CpuProgram>> host = CpuProgram::Create(**bundle);
  if (!host.ok()) return host.status();
  absl::StatusOr<std::shared_ptr<const GpuProgram>> program = GpuProgram::Create(*host);
  if (!program.ok()) return program.status();
  absl::StatusOr<std::unique_ptr<GpuExecutor>> gpu = GpuExecutor::Create(*program);
  if (!gpu.ok()) return gpu.status();
  return (*gpu)->Run(feeds);
}

CaseResult RunCase(const std::string& suite, const fs::path& model_path,
                   const std::vector<std::pair<std::vector<fs::path>, std::vector<fs::path>>>& data_sets,
                   bool arange_input, const fs::path& light_expected, Device device) {
  CaseResult r;
  r.suite = suite;
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&](Outcome o, std::string detail) {
    r.outcome = o;
    r.detail = std::move(detail);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  auto model = ReadOnnxModel(model_path.string());
  if (!model.ok()) return finish(Outcome::kFailed, std::string(model.status().message()));
  r.ops = OpsOf(*model);
  // Inputs with dynamic dims take the shapes of the first data set's inputs.
  ImportOptions options;
  if (!data_sets.empty()) {
    const std::vector<std::string> names = InputNames(*model);
    const auto& inputs = data_sets[0].first;
    for (size_t i = 0; i < inputs.size() && i < names.size(); ++i) {
      if (!HasDynamicDims(*model, names[i])) continue;
      auto t = ReadTensorFile(inputs[i].string());
      if (t.ok()) options.input_shapes[names[i]] = t->shape();
    }
  }
  auto graph = ImportOnnxModel(*model, model_path.parent_path().string(), options);
  // Shape arguments fed as graph inputs: kiln compiles static shapes, so bind
  // every input of the first data set as a compile-time constant and retry.
  if (graph.status().code() == absl::StatusCode::kFailedPrecondition && !data_sets.empty()) {
    ImportOptions bound = options;
    std::vector<std::string> names = InputNames(*model);
    const auto& inputs = data_sets[0].first;
    for (size_t i = 0; i < inputs.size() && i < names.size(); ++i) {
      auto t = ReadTensorFile(inputs[i].string());
      if (t.ok()) bound.constant_inputs[names[i]] = *std::move(t);
    }
    r.bound_inputs = true;
    graph = ImportOnnxModel(*model, model_path.parent_path().string(), bound);
  }
  if (!graph.ok()) {
    return finish(IsUnsupported(graph.status()) ? Outcome::kUnsupported : Outcome::kFailed,
                  std::string(graph.status().message()));
  }
  const Graph& g = **graph;
  // Finishes the case unless every output matches; an expected output kiln cannot
  // read (an unsupported dtype) makes the case unsupported.
  auto check_outputs = [&](const std::vector<Tensor>& outputs, const std::vector<fs::path>& expected_files,
                           const std::string& set_name) -> std::optional<CaseResult> {
    if (outputs.size() < expected_files.size()) {
      return finish(Outcome::kFailed, absl::StrCat(set_name, ": graph has ", outputs.size(),
                                                   " outputs, test expects ", expected_files.size()));
    }
    for (size_t i = 0; i < expected_files.size(); ++i) {
      auto expected = ReadTensorFile(expected_files[i].string());
      if (!expected.ok()) {
        return finish(IsUnsupported(expected.status()) ? Outcome::kUnsupported : Outcome::kFailed,
                      std::string(expected.status().message()));
      }
      const bool low = outputs[i].dtype() == DType::kFloat16 || outputs[i].dtype() == DType::kBFloat16;
      std::string diff = Compare(absl::StrCat(set_name, " output ", i, " '", g.outputs()[i]->name(), "'"), outputs[i],
                                 *expected, ToleranceFor(suite, low));
      if (!diff.empty()) return finish(Outcome::kFailed, diff);
    }
    return std::nullopt;
  };
  if (arange_input) {
    TensorMap feeds;
    for (const Value* in : g.inputs()) {
      const int64_t n = in->numel();
      std::vector<float> values(n);
      for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) / static_cast<float>(n);
      feeds[in->name()] = Tensor::FromFloat(in->dtype(), in->shape(), values);
    }
    auto outputs = Execute(g, feeds, device, model_path.string());
    if (!outputs.ok()) return finish(Outcome::kFailed, std::string(outputs.status().message()));
    if (auto done = check_outputs(*outputs, {light_expected}, "arange")) return *done;
    return finish(Outcome::kPassed, "");
  }
  const std::vector<std::string> input_names = InputNames(*model);
  for (const auto& [inputs, expected] : data_sets) {
    const std::string set_name = inputs.empty() ? "data set" : inputs[0].parent_path().filename().string();
    TensorMap feeds;
    for (size_t i = 0; i < inputs.size() && i < input_names.size(); ++i) {
      auto t = ReadTensorFile(inputs[i].string());
      if (!t.ok()) {
        return finish(IsUnsupported(t.status()) ? Outcome::kUnsupported : Outcome::kFailed,
                      std::string(t.status().message()));
      }
      const Value* v = g.FindValue(input_names[i]);
      if (v != nullptr && g.IsGraphInput(v)) feeds[input_names[i]] = *std::move(t);
    }
    auto outputs = Execute(g, feeds, device, model_path.string());
    if (!outputs.ok()) {
      return finish(IsUnsupported(outputs.status()) ? Outcome::kUnsupported : Outcome::kFailed,
                    std::string(outputs.status().message()));
    }
    if (auto done = check_outputs(*outputs, expected, set_name)) return *done;
  }
  return finish(Outcome::kPassed, "");
}

std::vector<fs::path> SortedMatching(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, prefix) && absl::EndsWith(name, ".pb")) out.push_back(e.path());
  }
  // input_10 must follow input_9.
  std::sort(out.begin(), out.end(), [&](const fs::path& a, const fs::path& b) {
    auto num = [&](const fs::path& p) { return std::stoi(p.stem().string().substr(prefix.size())); };
    return num(a) < num(b);
  });
  return out;
}

}  // namespace

std::vector<CaseResult> RunSuite(const std::string& data_dir, const std::string& suite, const std::string& filter,
                                 bool verbose, Device device) {
  std::vector<CaseResult> results;
  const fs::path root = fs::path(data_dir) / suite;
  if (!fs::is_directory(root)) return results;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(root)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& entry : entries) {
    const std::string name = entry.filename().string();
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    CaseResult r;
    if (suite == "light") {
      if (entry.extension() != ".onnx") continue;
      fs::path expected = entry;
      expected.replace_filename(entry.stem().string() + "_output_0.pb");
      r = RunCase(suite, entry, {}, /*arange_input=*/true, expected, device);
      r.name = entry.stem().string();
    } else {
      if (!fs::is_directory(entry) || !fs::exists(entry / "model.onnx")) continue;
      std::vector<std::pair<std::vector<fs::path>, std::vector<fs::path>>> sets;
      std::vector<fs::path> set_dirs;
      for (const auto& d : fs::directory_iterator(entry)) {
        if (d.is_directory() && absl::StartsWith(d.path().filename().string(), "test_data_set_")) {
          set_dirs.push_back(d.path());
        }
      }
      std::sort(set_dirs.begin(), set_dirs.end());
      for (const auto& d : set_dirs) sets.push_back({SortedMatching(d, "input_"), SortedMatching(d, "output_")});
      r = RunCase(suite, entry / "model.onnx", sets, false, {}, device);
      r.name = name;
    }
    if (verbose) {
      const char* tag = r.outcome == Outcome::kPassed ? "PASS" : r.outcome == Outcome::kFailed ? "FAIL" : "UNSUP";
      std::cout << absl::StrFormat("%-5s %s/%s%s (%.2fs)%s%s\n", tag, suite, r.name, r.bound_inputs ? " (bound)" : "", r.seconds,
                                   r.detail.empty() ? "" : ": ", r.detail)
                << std::flush;
    }
    results.push_back(std::move(r));
  }
  return results;
}

std::string FormatReport(const std::vector<CaseResult>& results, bool per_op) {
  std::map<std::string, Counts> by_suite, by_op;
  for (const auto& r : results) {
    auto bump = [&](Counts& c) {
      if (r.outcome == Outcome::kPassed) ++c.passed;
      if (r.outcome == Outcome::kFailed) ++c.failed;
      if (r.outcome == Outcome::kUnsupported) ++c.unsupported;
    };
    bump(by_suite[r.suite]);
    bump(by_suite["TOTAL"]);
    if (per_op) {
      for (const auto& op : r.ops) bump(by_op[op]);
    }
  }
  std::string out = absl::StrFormat("%-20s %6s %6s %6s %11s\n", "suite", "cases", "passed", "failed", "unsupported");
  for (const auto& [name, c] : by_suite) {
    if (name == "TOTAL") continue;
    absl::StrAppend(&out, absl::StrFormat("%-20s %6d %6d %6d %11d\n", name, c.total(), c.passed, c.failed, c.unsupported));
  }
  const Counts& t = by_suite["TOTAL"];
  absl::StrAppend(&out, absl::StrFormat("%-20s %6d %6d %6d %11d\n", "TOTAL", t.total(), t.passed, t.failed, t.unsupported));
  if (per_op) {
    absl::StrAppend(&out, absl::StrFormat("\n%-28s %6s %6s %6s %11s\n", "op (cases using it)", "cases", "passed", "failed",
                                          "unsupported"));
    for (const auto& [name, c] : by_op) {
      absl::StrAppend(&out, absl::StrFormat("%-28s %6d %6d %6d %11d\n", name, c.total(), c.passed, c.failed, c.unsupported));
    }
  }
  return out;
}

}  // namespace kiln::conformance
