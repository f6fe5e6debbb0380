// Tf32Math: see tf32_math.h.
#include "graph/tf32_math.h"

#include <cstring>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

bool IsMarkedOp(const Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  const std::string& op = node.op_type();
  if (op != "MatMul" && op != "Gemm" && op != "Conv") return false;
  return node.num_outputs() == 1 && node.output(0) != nullptr && node.output(0)->has_type() &&
         node.output(0)->dtype() == DType::kFloat32;
}

// `t` ([..., R, C]) with its last two dims swapped, element by element.
Tensor SwapLastTwo(const Tensor& t) {
  Shape shape = t.shape();
  const int64_t r = shape[shape.size() - 2], c = shape.back();
  std::swap(shape[shape.size() - 2], shape.back());
  Tensor out(t.dtype(), shape);
  const size_t es = DTypeSize(t.dtype());
  const int64_t batches = r * c == 0 ? 0 : t.numel() / (r * c);
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.mutable_raw_data());
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < r; ++i) {
      for (int64_t j = 0; j < c; ++j) {
        std::memcpy(dst + ((b * c + j) * r + i) * es, src + ((b * r + i) * c + j) * es, es);
      }
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<bool> Tf32Math::Run(Graph& graph) {
  bool changed = false;
  absl::flat_hash_map<const Value*, Value*> k_major;  // constant B -> its [..., N, K] copy
  for (Node* node : graph.nodes()) {
    if (!IsMarkedOp(*node)) continue;
    if (node->GetInt("tf32", 0).value_or(0) != 1) {
      node->SetAttr("tf32", int64_t{1});
      changed = true;
    }
    if (node->op_type() != "MatMul" || node->num_inputs() != 2) continue;
    Value* b = node->input(1);
    if (b == nullptr || !b->is_constant() || b->rank() < 2) continue;
    KILN_ASSIGN_OR_RETURN(int64_t tb, node->GetInt("trans_b", 0));
    if (tb != 0) continue;
    Value*& copy = k_major[b];
    if (copy == nullptr) copy = graph.AddConstant(absl::StrCat(b->name(), "/k_major"), SwapLastTwo(b->constant()));
    node->SetInput(1, copy);
    node->SetAttr("trans_b", int64_t{1});
    KILN_RETURN_IF_ERROR(InferNode(*node));
    changed = true;
  }
  if (!k_major.empty()) graph.RemoveUnusedValues();
  return changed;
}

}  // namespace kiln
