// FusePrologue: element-wise chains on MatMul inputs -> "prologue+matmul" groups.
#include "fusion/fuse_prologue.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fusion/group_util.h"
#include "graph/fused_group.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

// The prologue walked up from one MatMul input.
struct Chain {
  std::vector<Node*> nodes;  // nearest the MatMul first
  bool all_constant = true;  // the loaded operand and every side operand are constants
};

// A node whose output an epilogue can transform: MatMul/Gemm/Conv, or a group
// anchored at one.
bool IsAnchor(const Node& n) {
  if (n.op_type() == "MatMul" || n.op_type() == "Gemm" || n.op_type() == "Conv") return true;
  return IsFusedGroup(n) && !n.GetString("anchor", "").value_or("").empty();
}

// Whether side input `in` of a prologue member writing `x` is one value per row
// group: broadcast along x's rows (dim -2 of size 1 against more than one row), as
// squeeze-excitation's [N, 1, 1, C] scale is against the [N, H, W, C] activations.
bool SharedByRows(const Value& in, const Value& x) {
  if (in.rank() < 2 || x.rank() < 2) return false;
  return in.shape()[in.rank() - 2] == 1 && x.shape()[x.rank() - 2] > 1;
}

}  // namespace

absl::StatusOr<bool> FusePrologue::Run(Graph& graph) {
  std::vector<Node*> matmuls;
  for (Node* n : graph.nodes()) {
    if (n->op_type() == "MatMul") matmuls.push_back(n);
  }
  bool changed = false;
  for (Node* mm : matmuls) {
    std::vector<Node*> members;
    for (int i = 0; i < 2 && i < mm->num_inputs(); ++i) {
      Chain chain;
      Node* reader = mm;
      Value* x = mm->input(i);
      while (x != nullptr && x->producer() != nullptr) {
        Node* p = x->producer();
        const OpDef* def = OpRegistry::Global().Find(p->op_type());
        if (IsFusedGroup(*p) || def == nullptr || !def->is_elementwise || p->num_outputs() != 1) break;
        auto reject = [&](std::string reason) {
          ReportRejection(report_, name(), {mm->name(), p->name()}, std::move(reason));
        };
        bool only_reader = !graph.IsGraphOutput(x);
        for (const Use& u : x->uses()) only_reader &= u.node == reader;
        if (!only_reader) {
          reject(absl::StrCat("other consumers: ", Quote(x->name()), " is also read outside ", Quote(reader->name()),
                              "; a prologue keeps its values in registers only"));
          break;
        }
        if (!IsFloating(x->dtype())) {
          reject(absl::StrCat("dtype: ", Quote(p->name()), " writes ", DTypeName(x->dtype())));
          break;
        }
        // The loaded operand: the one input of P with P's output shape.
        Value* loaded = nullptr;
        bool ok = true;
        for (Value* in : p->inputs()) {
          if (in == nullptr) continue;
          if (in->shape() == x->shape()) {
            if (loaded != nullptr && loaded != in) ok = false;
            loaded = in;
          } else if (!BroadcastsInto(in->shape(), x->shape())) {
            ok = false;
          }
        }
        if (!ok || loaded == nullptr) {
          reject(absl::StrCat("shape: ", Quote(p->name()), " (", p->op_type(),
                              ") does not transform one operand of shape ", ShapeToString(x->shape()),
                              " with broadcast side inputs"));
          break;
        }
        const Value* computed_scale = nullptr;
        for (Value* in : p->inputs()) {
          if (in == nullptr || in == loaded || in->is_constant()) continue;
          chain.all_constant = false;
          if (SharedByRows(*in, *x)) computed_scale = in;
        }
        if (computed_scale != nullptr) {
          reject(absl::StrCat("computed scale: ", Quote(computed_scale->name()), " is computed at run time and ",
                              "shared by the rows of ", Quote(x->name()),
                              " (a squeeze-excitation scale); a separate kernel and the GEMM's TMA-loaded A "
                              "ran faster than the register-A prologue"));
          break;
        }
        chain.nodes.push_back(p);
        reader = p;
        x = loaded;
      }
      if (chain.nodes.empty()) continue;
      if (x == nullptr || !x->is_constant()) chain.all_constant = false;
      // A chain on another anchor's output is that anchor's epilogue: applied once
      // per element there, while a prologue recomputes it for every tile of this
      // MatMul that loads the element (and the stored tensor is as big either way).
      if (const Node* src = x == nullptr ? nullptr : x->producer(); src != nullptr && IsAnchor(*src)) {
        std::vector<std::string> names = {mm->name()};
        for (const Node* n : chain.nodes) names.push_back(n->name());
        ReportRejection(report_, name(), names,
                        absl::StrCat("epilogue: the chain starts at the output of ", Quote(src->name()),
                                     ", whose epilogue applies it once instead of once per tile"));
        continue;
      }
      if (chain.all_constant) {
        std::vector<std::string> names = {mm->name()};
        for (const Node* n : chain.nodes) names.push_back(n->name());
        ReportRejection(report_, name(), names, "constant: folded at compile time");
        continue;
      }
      members.insert(members.end(), chain.nodes.begin(), chain.nodes.end());
    }
    if (members.empty()) continue;
    members.push_back(mm);
    changed |= FormAndReportGroup(graph, report_, name(), members, "prologue+matmul", mm);
  }
  return changed;
}

}  // namespace kiln
