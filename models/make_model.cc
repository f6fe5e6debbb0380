// kiln_make_model: writes a test/benchmark ONNX model with seeded random weights.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "frontend/tensor_file.h"
#include "graph/tensor.h"
#include "models/architectures.h"
#include "models/model_builder.h"

namespace kiln::models {
namespace {

std::string Usage() {
  return absl::StrCat(
      "usage: kiln_make_model NAME -o OUT.onnx [--batch B] [--opset N] [--seed N] [--inputs DIR]\n"
      "         transformers: [--seq S] [--layers L] [--hidden H] [--heads A] [--ffn F] [--vocab V]\n"
      "         vision:       [--image PIXELS] [--classes C] [--width W] [--batchnorm 0|1]\n"
      "NAME: ",
      absl::StrJoin(ModelNames(), ", "),
      "\n"
      "Writes the model with random weights from --seed (default 0); see models/README.md\n"
      "for the op pattern of each model and the options it takes (a flag a model does not\n"
      "take is an error). --opset: ",
      kMinModelOpset, "..", kMaxModelOpset,
      " (default 17; 20 uses the Gelu op for erf GELUs).\n"
      "--batchnorm 1 (resnet50, mobilenet_v2) keeps BatchNormalization nodes instead of\n"
      "folding them into the convs as torch.onnx's eval-mode export does.\n"
      "--inputs DIR writes one DIR/<input>.npy per model input, for kiln run --input NAME=FILE:\n"
      "token ids uniform in [0, vocab), attention masks that show every position, floats\n"
      "N(0, 1); seeded by --seed.");
}

// Sample inputs for `kiln run`: its own `random` source gives int64 inputs zeros only.
absl::Status WriteSampleInputs(const onnx::ModelProto& model, const ModelOptions& options, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot create the folder: ", ec.message()));
  std::mt19937_64 rng(options.seed);
  for (const onnx::ValueInfoProto& in : model.graph().input()) {
    Shape shape;
    for (const auto& dim : in.type().tensor_type().shape().dim()) shape.push_back(dim.dim_value());
    const int64_t n = NumElements(shape);
    const std::string& name = in.name();
    Tensor t;
    switch (in.type().tensor_type().elem_type()) {
      case onnx::TensorProto::INT64: {
        std::vector<int64_t> v(n, 1);  // attention_mask: 1 = attend
        if (name != "attention_mask") {
          const int64_t vocab = options.vocab.value_or(1);
          for (int64_t& id : v) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
        }
        t = Tensor::FromInt64(DType::kInt64, shape, v);
        break;
      }
      case onnx::TensorProto::FLOAT: {
        std::vector<float> v(n, 0.f);  // bert's additive attention_mask: 0 = visible
        if (name != "attention_mask") {
          std::normal_distribution<float> normal;
          for (float& x : v) x = normal(rng);
        }
        t = Tensor::FromFloat(DType::kFloat32, shape, v);
        break;
      }
      default:
        return absl::UnimplementedError(absl::StrCat("input '", name, "': no sample data for its element type"));
    }
    const std::string path = (std::filesystem::path(dir) / (name + ".npy")).string();
    KILN_RETURN_IF_ERROR(WriteNpy(path, t));
    std::cout << path << ": " << t.TypeString() << "\n";
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", text, "' is not an integer"));
  }
  return v;
}

absl::Status Main(const std::vector<std::string>& args) {
  std::string name, out, inputs_dir;
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
    if (flag == "inputs") {
      inputs_dir = value;
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
    } else if (flag == "image") {
      options.image = v;
    } else if (flag == "classes") {
      options.classes = v;
    } else if (flag == "width") {
      options.width = v;
    } else if (flag == "batchnorm") {
      options.batchnorm = v;
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
  if (!inputs_dir.empty()) {
    KILN_ASSIGN_OR_RETURN(const ModelOptions resolved, ResolveOptions(name, options));
    KILN_RETURN_IF_ERROR(WriteSampleInputs(model, resolved, inputs_dir));
  }
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
