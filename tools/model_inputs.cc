// Input specifications for the kiln command.
#include "tools/model_inputs.h"

#include <cctype>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "frontend/onnx_importer.h"
#include "frontend/tensor_file.h"

namespace kiln::cli {

absl::StatusOr<std::pair<std::string, std::string>> SplitAssignment(const std::string& spec, const char* flag) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", spec, ": expected NAME=VALUE"));
  }
  return std::make_pair(spec.substr(0, eq), spec.substr(eq + 1));
}

namespace {

// "LO..HI" or "LO..HI:OPT" with 1 <= LO <= HI and LO <= OPT <= HI.
bool ParseSizeRange(absl::string_view text, SizeRange* r) {
  const size_t dots = text.find("..");
  if (dots == absl::string_view::npos) return false;
  absl::string_view hi = text.substr(dots + 2);
  r->opt = 0;
  const size_t colon = hi.find(':');
  if (colon != absl::string_view::npos) {
    if (!absl::SimpleAtoi(hi.substr(colon + 1), &r->opt)) return false;
    hi = hi.substr(0, colon);
  }
  if (!absl::SimpleAtoi(text.substr(0, dots), &r->min) || !absl::SimpleAtoi(hi, &r->max)) return false;
  return r->min >= 1 && r->max >= r->min &&
         (colon == absl::string_view::npos || (r->opt >= r->min && r->opt <= r->max));
}

}  // namespace

absl::StatusOr<std::map<std::string, Shape>> ParseInputShapes(const std::vector<std::string>& specs,
                                                              std::map<std::string, std::vector<SizeRange>>* ranges) {
  std::map<std::string, Shape> shapes;
  for (const std::string& spec : specs) {
    KILN_ASSIGN_OR_RETURN(auto kv, SplitAssignment(spec, "input-shape"));
    if (kv.second.find("..") != std::string::npos) {
      if (ranges == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--input-shape ", spec, ": a range is for kiln compile (a bundle for a range of sizes); give one shape here"));
      }
      std::vector<SizeRange> dims;
      for (absl::string_view part : absl::StrSplit(kv.second, 'x')) {
        SizeRange r;
        bool ok = false;
        if (part.find("..") == absl::string_view::npos) {
          ok = absl::SimpleAtoi(part, &r.min) && r.min >= 0;
          r.max = r.min;
        } else {
          ok = ParseSizeRange(part, &r);
        }
        if (!ok) {
          return absl::InvalidArgumentError(
              absl::StrCat("--input-shape ", spec,
                           ": expected dims like 1..32x1..512:128 (N, or LO..HI with 1 <= LO <= HI and an optional "
                           ":OPT in the range to tune for)"));
        }
        dims.push_back(r);
      }
      if (shapes.count(kv.first) || !ranges->emplace(kv.first, std::move(dims)).second) {
        return absl::InvalidArgumentError(absl::StrCat("--input-shape ", kv.first, " is given twice"));
      }
      continue;
    }
    auto shape = ParseShapeSpec(kv.second);
    if (!shape.ok()) return absl::InvalidArgumentError(absl::StrCat("--input-shape ", spec, ": ", shape.status().message()));
    if ((ranges != nullptr && ranges->count(kv.first)) || !shapes.emplace(kv.first, *shape).second) {
      return absl::InvalidArgumentError(absl::StrCat("--input-shape ", kv.first, " is given twice"));
    }
  }
  return shapes;
}

namespace {

bool IsDimName(absl::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::map<std::string, int64_t>> ParseDims(const std::vector<std::string>& specs,
                                                         std::vector<DimSymbol>* ranges) {
  std::map<std::string, int64_t> dims;
  for (const std::string& spec : specs) {
    KILN_ASSIGN_OR_RETURN(auto kv, SplitAssignment(spec, "dim"));
    if (kv.second.find("..") != std::string::npos) {
      if (ranges == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("--dim ", spec,
                         ": a range is for kiln compile (a bundle for a range of sizes); here give one value, NAME=N"));
      }
      DimSymbol s{.name = kv.first};
      if (!IsDimName(s.name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--dim ", spec, ": a dim compiled for a range needs a name of letters, digits and _"));
      }
      SizeRange range;
      if (!ParseSizeRange(kv.second, &range)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--dim ", spec,
                         ": expected NAME=LO..HI with 1 <= LO <= HI, or NAME=LO..HI:OPT with OPT in the range (the "
                         "size to tune for)"));
      }
      s.min = range.min;
      s.max = range.max;
      s.opt = range.opt;
      for (const DimSymbol& r : *ranges) {
        if (r.name == s.name) return absl::InvalidArgumentError(absl::StrCat("--dim ", s.name, " is given twice"));
      }
      if (dims.count(s.name)) return absl::InvalidArgumentError(absl::StrCat("--dim ", s.name, " is given twice"));
      ranges->push_back(std::move(s));
      continue;
    }
    if (ranges != nullptr) {
      for (const DimSymbol& r : *ranges) {
        if (r.name == kv.first) return absl::InvalidArgumentError(absl::StrCat("--dim ", r.name, " is given twice"));
      }
    }
    int64_t v;
    if (!absl::SimpleAtoi(kv.second, &v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--dim ", spec, ": expected NAME=N with N >= 0"));
    }
    if (!dims.emplace(kv.first, v).second) {
      return absl::InvalidArgumentError(absl::StrCat("--dim ", kv.first, " is given twice"));
    }
  }
  return dims;
}

bool IsInputGenerator(const std::string& source) {
  return source == "arange" || source == "zeros" || source == "ones" || source == "random" ||
         source.rfind("random:", 0) == 0;
}

absl::StatusOr<Tensor> ConformInput(const std::string& name, const std::string& source, Tensor t, DType dtype,
                                    const Shape& shape) {
  // A float64 file arrives as f32; convert float data to the input's float dtype.
  if (t.dtype() != dtype && IsFloating(t.dtype()) && IsFloating(dtype) && t.shape() == shape) {
    t = Tensor::FromFloat(dtype, shape, t.ToFloat());
  }
  if (t.dtype() != dtype || t.shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' from ", source, " is ", t.TypeString(),
                                                   ", but the model expects ", DTypeName(dtype), ShapeToString(shape)));
  }
  return t;
}

absl::StatusOr<Tensor> MakeInput(const std::string& name, const std::string& source, DType dtype, const Shape& shape) {
  const int64_t n = NumElements(shape);
  std::vector<float> values(n, 0.f);
  if (source == "arange") {
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) / static_cast<float>(n);
  } else if (source == "zeros") {
  } else if (source == "ones") {
    std::fill(values.begin(), values.end(), 1.f);
  } else if (source == "random" || source.rfind("random:", 0) == 0) {
    uint32_t seed = 0;
    if (source.size() > 7 && !absl::SimpleAtoi(source.substr(7), &seed)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "': bad seed in '", source, "'"));
    }
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(0.f, 1.f);
    for (float& v : values) v = dist(rng);
  } else {
    KILN_ASSIGN_OR_RETURN(Tensor t, ReadTensorFile(source));
    return ConformInput(name, source, std::move(t), dtype, shape);
  }
  return Tensor::FromFloat(dtype, shape, values);
}

std::function<absl::StatusOr<TensorMap>(const Graph&)> CalibrationInputs(std::map<std::string, std::string> sources) {
  return [sources = std::move(sources)](const Graph& graph) -> absl::StatusOr<TensorMap> {
    std::string inputs;
    for (const Value* in : graph.inputs()) absl::StrAppend(&inputs, inputs.empty() ? "" : ", ", in->name());
    for (const auto& [name, source] : sources) {
      const Value* v = graph.FindValue(name);
      if (v == nullptr || !graph.IsGraphInput(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--calibrate ", name, ": the model has no such input (inputs: ", inputs, ")"));
      }
    }
    TensorMap feeds;
    for (const Value* in : graph.inputs()) {
      auto it = sources.find(in->name());
      if (it == sources.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--calibrate needs every input; missing ", in->name(), " (", in->TypeString(), ")"));
      }
      KILN_ASSIGN_OR_RETURN(feeds[in->name()], MakeInput(in->name(), it->second, in->dtype(), in->shape()));
    }
    return feeds;
  };
}

}  // namespace kiln::cli
