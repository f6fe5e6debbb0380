// kiln_make_model: writes a test/benchmark ONNX model with seeded random weights.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "models/architectures.h"
#include "models/model_builder.h"

namespace kiln::models {
namespace {

std::string Usage() {
  return absl::StrCat(
      "usage: kiln_make_model NAME -o OUT.onnx [--batch B] [--seq S] [--opset N] [--seed N]\n"
      "                       [--layers L] [--hidden H] [--heads A] [--ffn F] [--vocab V]\n"
      "NAME: ",
      absl::StrJoin(ModelNames(), ", "),
      "\n"
      "Writes the model with random weights from --seed (default 0); see models/README.md\n"
      "for the op pattern of each model and the options it takes. --opset: ",
      kMinModelOpset, "..", kMaxModelOpset, " (default 17; 20 uses the Gelu op).");
}

absl::StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", text, "' is not an integer"));
  }
  return v;
}

absl::Status Main(const std::vector<std::string>& args) {
  std::string name, out;
  ModelOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("-", 0) != 0) {
      if (!name.empty()) return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
      name = arg;
      continue;
    }
    std::string flag = arg.substr(arg.rfind("--", 0) == 0 ? 2 : 1);
    std::string value;
    const size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      value = args[++i];
    }
    if (flag == "o" || flag == "output") {
      out = value;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(const int64_t v, ParseInt(flag, value));
    if (flag == "batch") {
      options.batch = v;
    } else if (flag == "seq") {
      options.seq = v;
    } else if (flag == "hidden") {
      options.hidden = v;
    } else if (flag == "heads") {
      options.heads = v;
    } else if (flag == "ffn") {
      options.ffn = v;
    } else if (flag == "layers") {
      options.layers = v;
    } else if (flag == "vocab") {
      options.vocab = v;
    } else if (flag == "opset") {
      options.opset = v;
    } else if (flag == "seed") {
      if (v < 0) return absl::InvalidArgumentError("--seed must be non-negative");
      options.seed = static_cast<uint64_t>(v);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "'"));
    }
  }
  if (name.empty()) return absl::InvalidArgumentError("missing the model NAME");
  if (out.empty()) return absl::InvalidArgumentError("missing -o OUT.onnx");

  bool checked = false;
  KILN_ASSIGN_OR_RETURN(const onnx::ModelProto model, MakeModel(name, options, &checked));
  KILN_RETURN_IF_ERROR(WriteModel(model, out));
  std::cout << out << ": " << name << ", opset " << options.opset << ", " << model.graph().node_size() << " nodes, "
            << model.graph().initializer_size() << " initializers, " << model.ByteSizeLong() << " bytes";
  if (!checked) {
    std::cout << " (ONNX checker skipped: the linked ONNX library knows opsets up to " << OnnxLibraryMaxOpset() << ")";
  }
  std::cout << "\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::models

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "-h" || a == "--help") {
      std::cout << kiln::models::Usage() << "\n";
      return 0;
    }
  }
  const absl::Status status = kiln::models::Main(args);
  if (!status.ok()) {
    std::cerr << "kiln_make_model: " << status.message() << "\n";
    if (status.code() == absl::StatusCode::kInvalidArgument) std::cerr << kiln::models::Usage() << "\n";
    return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
