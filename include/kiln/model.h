// kiln::Model: a compiled bundle (.kiln) loaded once, immutable, shared by sessions.
//
// Thread-safety: a Model is immutable after Load and safe to share across threads
// (hold it by std::shared_ptr<const Model>). It owns the one copy of the weights that
// all of its Sessions read; each Session owns only its activation arena.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/types.h"

namespace kiln {

struct LoadOptions {
  // When set, the bundle must have been compiled for this arch (e.g. "sm_90a"), else
  // Load fails with FailedPrecondition naming both. Empty: any arch (the CPU backend
  // runs a bundle compiled for any arch).
  std::string expected_arch;
};

class Model {
 public:
  // Maps and checks the bundle at `path` and prepares its weights. Errors name the
  // file: NotFound (no file), InvalidArgument (not a bundle, truncated, corrupt),
  // FailedPrecondition (other format version, other arch than expected_arch).
  static absl::StatusOr<std::shared_ptr<const Model>> Load(const std::string& path, const LoadOptions& options = {});

  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& path() const;
  // The signature at the API boundary, in the model's order.
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // The dims a dynamic model takes a range of (TensorInfo::dims names them); empty for
  // a static model. A dynamic model runs at any sizes in the ranges, on either backend.
  const std::vector<DimRange>& dim_ranges() const;
  // nullptr when there is no input / output of that name.
  const TensorInfo* FindInput(const std::string& name) const;
  const TensorInfo* FindOutput(const std::string& name) const;

  const std::string& target_arch() const;  // "sm_90a", ...
  const std::string& precision() const;    // "fp16", "bf16", "fp32"
  int num_steps() const;
  // Bytes of weights the Model holds (once, however many sessions there are).
  int64_t weight_bytes() const;
  // Bytes of the activation arena that each Session allocates.
  int64_t arena_bytes() const;
  // Address of the weight storage all sessions read (nullptr for a model without
  // weights); lets callers and tests check that sessions share it.
  const void* weight_storage() const;

  struct Impl;  // internal (runtime/api.cc)

 private:
  friend class Session;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
