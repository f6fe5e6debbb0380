// The model generators behind kiln_make_model: mlp, tiny_cnn, bert_layer, bert_base,
// gpt2_block, distilbert, gpt2, vit_b16, resnet50 and mobilenet_v2, each in the op
// pattern documented in models/README.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "onnx/onnx_pb.h"

namespace kiln::models {

// Size options; an unset field takes the model's default (see ModelDefaults). Setting
// one that a model does not use is an error, so a typo does not go unnoticed.
struct ModelOptions {
  std::optional<int64_t> batch;
  std::optional<int64_t> seq;
  std::optional<int64_t> hidden;
  std::optional<int64_t> heads;
  std::optional<int64_t> ffn;
  std::optional<int64_t> layers;
  std::optional<int64_t> vocab;
  std::optional<int64_t> image;      // input height = width (vision models)
  std::optional<int64_t> classes;    // classifier outputs (vision models)
  std::optional<int64_t> width;      // resnet50: the stem width (64); stages use 1, 2, 4, 8 x it
  std::optional<int64_t> batchnorm;  // CNNs: 1 keeps BatchNormalization nodes, 0 (default) folds them
  int64_t opset = 17;
  uint64_t seed = 0;
};

inline constexpr int64_t kMinModelOpset = 11;
inline constexpr int64_t kMaxModelOpset = 21;

// The generator names, in the order the usage text lists them.
std::vector<std::string> ModelNames();

// `options` with every field the model uses filled in (defaults where unset), after
// validation: unknown model, a flag the model does not take, non-positive sizes,
// hidden not divisible by heads, opset outside [kMinModelOpset, kMaxModelOpset],
// --seq beyond the model's position table, an image size the patch does not divide,
// --batchnorm other than 0 or 1.
absl::StatusOr<ModelOptions> ResolveOptions(absl::string_view name, const ModelOptions& options);

// Builds the model and runs the ONNX checker on it (when the linked ONNX library
// knows the opset; `checked` says whether it ran).
absl::StatusOr<onnx::ModelProto> MakeModel(absl::string_view name, const ModelOptions& options,
                                           bool* checked = nullptr);

// Serialises `model` to `path`; errors name the file.
absl::Status WriteModel(const onnx::ModelProto& model, const std::string& path);

}  // namespace kiln::models
