// The model generators behind kiln_make_model: mlp, tiny_cnn, bert_layer,
// bert_base and gpt2_block, each in the op pattern documented in models/README.md.
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
  int64_t opset = 17;
  uint64_t seed = 0;
};

inline constexpr int64_t kMinModelOpset = 11;
inline constexpr int64_t kMaxModelOpset = 21;

// The generator names, in the order the usage text lists them.
std::vector<std::string> ModelNames();

// `options` with every field the model uses filled in (defaults where unset), after
// validation: unknown model, a flag the model does not take, non-positive sizes,
// hidden not divisible by heads, opset outside [kMinModelOpset, kMaxModelOpset].
absl::StatusOr<ModelOptions> ResolveOptions(absl::string_view name, const ModelOptions& options);

// Builds the model and runs the ONNX checker on it (when the linked ONNX library
// knows the opset; `checked` says whether it ran).
absl::StatusOr<onnx::ModelProto> MakeModel(absl::string_view name, const ModelOptions& options,
                                           bool* checked = nullptr);

// Serialises `model` to `path`; errors name the file.
absl::Status WriteModel(const onnx::ModelProto& model, const std::string& path);

}  // namespace kiln::models
