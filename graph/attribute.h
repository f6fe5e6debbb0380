// Typed node attributes (the ONNX attribute kinds kiln uses).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "graph/tensor.h"

namespace kiln {

class Graph;

// kGraph: a graph-valued attribute (a FusedGroup's body, graph/fused_group.h). The
// graph is immutable once set and shared by the copies of the attribute (Graph::Clone,
// a pass's saved attributes); a pass that wants another body sets a new one.
enum class AttrKind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph };

absl::string_view AttrKindName(AttrKind kind);  // "int", "float", "string", "ints", ..., "graph"

class Attribute {
 public:
  Attribute() : value_(int64_t{0}) {}
  Attribute(int64_t v) : value_(v) {}  // NOLINT: implicit by design, as literals read naturally
  Attribute(int v) : value_(static_cast<int64_t>(v)) {}  // NOLINT
  Attribute(float v) : value_(v) {}    // NOLINT
  Attribute(std::string v) : value_(std::move(v)) {}  // NOLINT
  Attribute(const char* v) : value_(std::string(v)) {}  // NOLINT
  Attribute(std::vector<int64_t> v) : value_(std::move(v)) {}  // NOLINT
  Attribute(std::vector<float> v) : value_(std::move(v)) {}    // NOLINT
  Attribute(std::vector<std::string> v) : value_(std::move(v)) {}  // NOLINT
  Attribute(Tensor v) : value_(std::move(v)) {}  // NOLINT
  Attribute(std::shared_ptr<const Graph> v) : value_(std::move(v)) {}  // NOLINT

  AttrKind kind() const { return static_cast<AttrKind>(value_.index()); }
  int64_t i() const { return std::get<int64_t>(value_); }
  float f() const { return std::get<float>(value_); }
  const std::string& s() const { return std::get<std::string>(value_); }
  const std::vector<int64_t>& ints() const { return std::get<std::vector<int64_t>>(value_); }
  const std::vector<float>& floats() const { return std::get<std::vector<float>>(value_); }
  const std::vector<std::string>& strings() const { return std::get<std::vector<std::string>>(value_); }
  const Tensor& t() const { return std::get<Tensor>(value_); }
  const std::shared_ptr<const Graph>& g() const { return std::get<std::shared_ptr<const Graph>>(value_); }

 private:
  // Order must match AttrKind.
  std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
               std::vector<std::string>, Tensor, std::shared_ptr<const Graph>>
      value_;
};

}  // namespace kiln
