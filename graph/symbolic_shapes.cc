// Symbolic shape rules: each output dim of a node as an expression over the dim
// symbols (graph/symbolic_shapes.h). The fold of shape arithmetic is in
// symbolic_fold.cc.
#include <algorithm>
#include "graph/symbolic_shapes.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "graph/fused_group.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

using Dims = std::vector<DimExpr>;

// Ops whose outputs have their input 0's rank and whose every output dim is
// either input 0's dim at that position, unchanged, or a size fixed by
// attributes and constant inputs (kernel, pads, reduced axis kept as 1, a split
// of a static axis). A dynamic dim they would change is an error.
const absl::flat_hash_set<std::string>& PositionalOps() {
  // clang-format off
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "Softmax", "LogSoftmax", "Hardmax", "LayerNormalization", "RMSNormalization",
      "SimplifiedLayerNormalization", "BatchNormalization", "InstanceNormalization", "GroupNormalization",
      "LpNormalization", "LRN", "Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool",
      "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "Pad", "Split", "CumSum", "Trilu", "Dropout",
      "Resize", "Upsample", "TopK", "ReverseSequence"};
  // clang-format on
  return *ops;
}

bool IsReduce(const std::string& op) { return op.rfind("Reduce", 0) == 0 || op == "ArgMax" || op == "ArgMin"; }

absl::Status CannotExpress(const Node& node, int output, int axis, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat(node.Describe(), ": output ", output, " dim ", axis,
                                               " cannot be expressed in the dynamic dims: ", why,
                                               "; compile with fixed sizes (--dim NAME=N) instead of a range"));
}

std::string Describe(const Value* v, absl::Span<const DimSymbol> symbols) {
  return absl::StrCat("'", v->name(), "' ", DimsToString(SymbolicShape(*v), symbols));
}

absl::StatusOr<Dims> Broadcast(const Node& node, const Dims& a, const Dims& b, absl::Span<const DimSymbol> symbols) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const DimExpr* x = i + a.size() >= rank ? &a[i + a.size() - rank] : nullptr;
    const DimExpr* y = i + b.size() >= rank ? &b[i + b.size() - rank] : nullptr;
    const DimExpr one = DimExpr::Constant(1);
    if (x == nullptr || *x == one) {
      out[i] = y ? *y : one;
    } else if (y == nullptr || *y == one || *x == *y) {
      out[i] = *x;
    } else {
      return CannotExpress(node, 0, static_cast<int>(i),
                           absl::StrCat("it broadcasts ", x->ToString(symbols), " against ", y->ToString(symbols),
                                        ", which are equal only for some sizes"));
    }
  }
  return out;
}

absl::StatusOr<DimExpr> Product(const Dims& dims, size_t begin, size_t end) {
  end = std::min(end, dims.size());
  return DimExpr::Product(absl::MakeConstSpan(dims).subspan(begin, end > begin ? end - begin : 0));
}

absl::StatusOr<int64_t> Axis(const Node& node, const std::string& attr, int64_t dflt, int64_t rank) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, node.GetInt(attr, dflt));
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return node.Error(absl::StrCat(attr, " ", axis, " out of range for rank ", rank));
  return axis;
}

// A constant integer list input (axes), or the attribute of that name in older
// opsets.
absl::StatusOr<std::optional<std::vector<int64_t>>> IntsInputOrAttr(const Node& node, int input,
                                                                    const std::string& attr) {
  if (node.has_input(input)) {
    const Value* v = node.input(input);
    if (!v->is_constant() || v->has_symbolic_data()) {
      return node.Unsupported(absl::StrCat("input ", input, " ('", v->name(), "') must be a constant"));
    }
    return v->constant().ToInt64();
  }
  if (node.has_attr(attr)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, node.GetInts(attr));
    return v;
  }
  return std::nullopt;
}

absl::StatusOr<Dims> SymbolicInput(const Node& node, int input, const char* what) {
  std::optional<Dims> v = SymbolicValues(node.input(input));
  if (!v) {
    return absl::UnimplementedError(absl::StrCat(node.Describe(), ": input '", what,
                                                 "' is computed at run time from the dynamic dims in a way "
                                                 "kiln does not fold; compile with fixed sizes (--dim NAME=N)"));
  }
  return *v;
}

absl::StatusOr<Dims> ReshapeDims(const Node& node, absl::Span<const DimSymbol> symbols) {
  const Dims in = SymbolicShape(*node.input(0));
  KILN_ASSIGN_OR_RETURN(Dims target, SymbolicInput(node, 1, "shape"));
  KILN_ASSIGN_OR_RETURN(int64_t allowzero, node.GetInt("allowzero", 0));
  int infer = -1;
  DimExpr known = DimExpr::Constant(1);
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == DimExpr::Constant(0) && !allowzero) {
      if (i >= in.size()) return node.Error(absl::StrCat("shape[", i, "] = 0 copies a dim the input lacks"));
      target[i] = in[i];
    }
    if (target[i] == DimExpr::Constant(-1)) {
      infer = static_cast<int>(i);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(known, DimExpr::Mul(known, target[i]));
  }
  if (infer >= 0) {
    KILN_ASSIGN_OR_RETURN(DimExpr total, Product(in, 0, in.size()));
    std::optional<DimExpr> q = DimExpr::DivideExactly(total, known);
    if (!q) {
      return CannotExpress(node, 0, infer,
                           absl::StrCat("the -1 dim is ", total.ToString(symbols), " / ", known.ToString(symbols),
                                        ", not an exact division"));
    }
    target[infer] = *q;
  }
  return target;
}

absl::StatusOr<Dims> MatMulDims(const Node& node, absl::Span<const DimSymbol> symbols) {
  Dims a = SymbolicShape(*node.input(0)), b = SymbolicShape(*node.input(1));
  KILN_ASSIGN_OR_RETURN(int64_t ta, node.GetInt("trans_a", 0));
  KILN_ASSIGN_OR_RETURN(int64_t tb, node.GetInt("trans_b", 0));
  if (a.size() >= 2 && ta) std::swap(a[a.size() - 1], a[a.size() - 2]);
  if (b.size() >= 2 && tb) std::swap(b[b.size() - 1], b[b.size() - 2]);
  const bool vec_a = a.size() == 1, vec_b = b.size() == 1;
  if (vec_a) a.insert(a.begin(), DimExpr::Constant(1));
  if (vec_b) b.push_back(DimExpr::Constant(1));
  KILN_ASSIGN_OR_RETURN(Dims out, Broadcast(node, Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2), symbols));
  if (!vec_a) out.push_back(a[a.size() - 2]);
  if (!vec_b) out.push_back(b.back());
  return out;
}

absl::StatusOr<Dims> SliceDims(const Node& node, absl::Span<const DimSymbol> symbols) {
  Dims out = SymbolicShape(*node.input(0));
  const int64_t rank = static_cast<int64_t>(out.size());
  KILN_ASSIGN_OR_RETURN(Dims starts, SymbolicInput(node, 1, "starts"));
  KILN_ASSIGN_OR_RETURN(Dims ends, SymbolicInput(node, 2, "ends"));
  KILN_ASSIGN_OR_RETURN(auto axes, IntsInputOrAttr(node, 3, "axes"));
  KILN_ASSIGN_OR_RETURN(auto steps, IntsInputOrAttr(node, 4, "steps"));
  const Shape& static_out = node.output(0)->shape();
  for (size_t j = 0; j < starts.size() && j < ends.size(); ++j) {
    int64_t axis = axes ? (*axes)[j] : static_cast<int64_t>(j);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return node.Error(absl::StrCat("axis ", axis, " out of range"));
    const DimExpr dim = out[axis];
    if (dim.IsConstant() && starts[j].IsConstant() && ends[j].IsConstant()) {
      out[axis] = DimExpr::Constant(static_out[axis]);
      continue;
    }
    if (steps && (*steps)[j] != 1)
      return CannotExpress(node, 0, static_cast<int>(axis), "a strided slice of a dynamic dim");
    // Negative constants count from the end; a huge end means "to the end".
    auto resolve = [&](const DimExpr& e) -> absl::StatusOr<DimExpr> {
      std::optional<int64_t> c = e.constant();
      if (c && *c >= (int64_t{1} << 30)) return dim;
      if (c && *c < 0) return DimExpr::Add(dim, e);
      return e;
    };
    KILN_ASSIGN_OR_RETURN(DimExpr s, resolve(starts[j]));
    KILN_ASSIGN_OR_RETURN(DimExpr e, resolve(ends[j]));
    // Without clamping at the bounds, the size is e - s: it must be that 0 <= s
    // <= e <= dim for every size in the ranges.
    KILN_ASSIGN_OR_RETURN(DimExpr len, DimExpr::Sub(e, s));
    KILN_ASSIGN_OR_RETURN(DimExpr room, DimExpr::Sub(dim, e));
    KILN_ASSIGN_OR_RETURN(auto s_bounds, s.Bounds(symbols));
    KILN_ASSIGN_OR_RETURN(auto len_bounds, len.Bounds(symbols));
    KILN_ASSIGN_OR_RETURN(auto room_bounds, room.Bounds(symbols));
    if (s_bounds.first < 0 || len_bounds.first < 0 || room_bounds.first < 0) {
      // Which bound the ranges cross, with its extreme: what a narrower range must avoid.
      std::string why = absl::StrCat(" (its start reaches ", s_bounds.first, ")");
      if (room_bounds.first < 0) {
        why = absl::StrCat(" (its end passes the dim by up to ", -room_bounds.first, ")");
      } else if (len_bounds.first < 0) {
        why = absl::StrCat(" (its end falls before its start by up to ", -len_bounds.first, ")");
      }
      return CannotExpress(node, 0, static_cast<int>(axis),
                           absl::StrCat("slicing [", s.ToString(symbols), ", ", e.ToString(symbols), ") of ",
                                        dim.ToString(symbols), " is clamped for some sizes", why));
    }
    out[axis] = len;
  }
  return out;
}

absl::StatusOr<Dims> RangeDims(const Node& node, absl::Span<const DimSymbol> symbols) {
  KILN_ASSIGN_OR_RETURN(Dims start, SymbolicInput(node, 0, "start"));
  KILN_ASSIGN_OR_RETURN(Dims limit, SymbolicInput(node, 1, "limit"));
  KILN_ASSIGN_OR_RETURN(Dims delta, SymbolicInput(node, 2, "delta"));
  if (start.size() != 1 || limit.size() != 1 || delta.size() != 1)
    return node.Error("start, limit, delta must be scalars");
  std::optional<int64_t> d = delta[0].constant();
  if (!d || (*d != 1 && *d != -1)) {
    return CannotExpress(node, 0, 0, "a range over dynamic bounds with a step other than 1 or -1");
  }
  KILN_ASSIGN_OR_RETURN(DimExpr n, *d == 1 ? DimExpr::Sub(limit[0], start[0]) : DimExpr::Sub(start[0], limit[0]));
  KILN_ASSIGN_OR_RETURN(auto bounds, n.Bounds(symbols));
  if (bounds.first < 0) {
    return CannotExpress(node, 0, 0, absl::StrCat("its length ", n.ToString(symbols), " is negative for some sizes"));
  }
  return Dims{n};
}

// Output `o` of a rank-preserving op against input 0 (PositionalOps()).
absl::StatusOr<Dims> PositionalDims(const Node& node, int o, absl::Span<const DimSymbol> symbols) {
  const Value* in = node.input(0);
  const Dims dims = SymbolicShape(*in);
  const Shape& out = node.output(o)->shape();
  if (out.size() != dims.size() && in->is_dynamic()) {
    return CannotExpress(node, o, 0, absl::StrCat("its rank differs from its dynamic input ", Describe(in, symbols)));
  }
  Dims result;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < dims.size() && !dims[i].IsConstant()) {
      if (out[i] != in->shape()[i]) {
        return CannotExpress(node, o, static_cast<int>(i),
                             absl::StrCat(node.op_type(), " changes the dynamic dim ", dims[i].ToString(symbols),
                                          " of its input ", Describe(in, symbols)));
      }
      result.push_back(dims[i]);
    } else {
      result.push_back(DimExpr::Constant(out[i]));
    }
  }
  return result;
}

absl::StatusOr<Dims> ReduceDims(const Node& node, absl::Span<const DimSymbol> symbols) {
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, node.GetInt("keepdims", 1));
  if (keepdims) return PositionalDims(node, 0, symbols);
  const Dims in = SymbolicShape(*node.input(0));
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> reduced(rank, false);
  if (node.op_type() == "ArgMax" || node.op_type() == "ArgMin") {
    KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(node, "axis", 0, rank));
    reduced[axis] = true;
  } else {
    KILN_ASSIGN_OR_RETURN(auto axes, IntsInputOrAttr(node, 1, "axes"));
    KILN_ASSIGN_OR_RETURN(int64_t noop, node.GetInt("noop_with_empty_axes", 0));
    if (!axes || axes->empty()) {
      if (noop) return in;
      reduced.assign(rank, true);
    } else {
      for (int64_t a : *axes) reduced[a < 0 ? a + rank : a] = true;
    }
  }
  Dims out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i]) out.push_back(in[i]);
  }
  return out;
}

absl::StatusOr<Dims> UnsqueezeDims(const Node& node) {
  const Dims in = SymbolicShape(*node.input(0));
  KILN_ASSIGN_OR_RETURN(auto axes, IntsInputOrAttr(node, 1, "axes"));
  if (!axes) return node.Error("no axes");
  const int64_t rank = static_cast<int64_t>(in.size() + axes->size());
  std::vector<bool> inserted(rank, false);
  for (int64_t a : *axes) inserted[a < 0 ? a + rank : a] = true;
  Dims out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(inserted[i] ? DimExpr::Constant(1) : in[next++]);
  return out;
}

absl::StatusOr<Dims> SqueezeDims(const Node& node, absl::Span<const DimSymbol> symbols) {
  const Dims in = SymbolicShape(*node.input(0));
  KILN_ASSIGN_OR_RETURN(auto axes, IntsInputOrAttr(node, 1, "axes"));
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> removed(rank, false);
  if (axes && !axes->empty()) {
    for (int64_t a : *axes) removed[a < 0 ? a + rank : a] = true;
  } else {
    for (int64_t i = 0; i < rank; ++i) removed[i] = node.input(0)->shape()[i] == 1;
  }
  Dims out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!removed[i]) {
      out.push_back(in[i]);
    } else if (in[i] != DimExpr::Constant(1)) {
      return CannotExpress(node, 0, static_cast<int>(i),
                           absl::StrCat("it squeezes the dynamic dim ", in[i].ToString(symbols)));
    }
  }
  return out;
}

absl::StatusOr<Dims> ConcatDims(const Node& node, absl::Span<const DimSymbol> symbols) {
  const int64_t rank = node.output(0)->rank();
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(node, "axis", 0, rank));
  Dims out = SymbolicShape(*node.input(0));
  DimExpr total;
  for (const Value* in : node.inputs()) {
    const Dims d = SymbolicShape(*in);
    KILN_ASSIGN_OR_RETURN(total, DimExpr::Add(total, d[axis]));
    for (int64_t i = 0; i < rank; ++i) {
      if (i != axis && out[i].IsConstant() && !d[i].IsConstant()) out[i] = d[i];
      if (i != axis && out[i] != d[i] && !d[i].IsConstant()) {
        return CannotExpress(node, 0, static_cast<int>(i),
                             absl::StrCat("its inputs' dims ", out[i].ToString(symbols), " and ",
                                          d[i].ToString(symbols), " are equal only for some sizes"));
      }
    }
  }
  out[axis] = total;
  return out;
}

absl::StatusOr<Dims> GatherDims(const Node& node) {
  const Dims data = SymbolicShape(*node.input(0)), indices = SymbolicShape(*node.input(1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(node, "axis", 0, static_cast<int64_t>(data.size())));
  Dims out(data.begin(), data.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  return out;
}

// GatherND: the indices' dims but the last, then the data's dims after the
// batch dims and the ones each index tuple addresses.
absl::StatusOr<Dims> GatherNDDims(const Node& node) {
  const Dims data = SymbolicShape(*node.input(0)), indices = SymbolicShape(*node.input(1));
  KILN_ASSIGN_OR_RETURN(int64_t batch_dims, node.GetInt("batch_dims", 0));
  std::optional<int64_t> k = indices.empty() ? std::nullopt : indices.back().constant();
  if (!k) return node.Error("the indices' last dim must be fixed");
  if (batch_dims < 0 || batch_dims + *k > static_cast<int64_t>(data.size())) {
    return node.Error(absl::StrCat("batch_dims ", batch_dims, " + index length ", *k, " exceed the data's rank"));
  }
  Dims out(indices.begin(), indices.end() - 1);
  out.insert(out.end(), data.begin() + batch_dims + *k, data.end());
  return out;
}

absl::StatusOr<Dims> TransposeDims(const Node& node) {
  const Dims in = SymbolicShape(*node.input(0));
  std::vector<int64_t> dflt;
  for (int64_t i = static_cast<int64_t>(in.size()) - 1; i >= 0; --i) dflt.push_back(i);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> perm, node.GetInts("perm", dflt));
  Dims out;
  for (int64_t p : perm) out.push_back(in[p]);
  return out;
}

absl::StatusOr<Dims> FlattenDims(const Node& node) {
  const Dims in = SymbolicShape(*node.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(node, "axis", 1, static_cast<int64_t>(in.size())));
  KILN_ASSIGN_OR_RETURN(DimExpr outer, Product(in, 0, axis));
  KILN_ASSIGN_OR_RETURN(DimExpr inner, Product(in, axis, in.size()));
  return Dims{outer, inner};
}

absl::StatusOr<Dims> GemmDims(const Node& node) {
  const Dims a = SymbolicShape(*node.input(0)), b = SymbolicShape(*node.input(1));
  KILN_ASSIGN_OR_RETURN(int64_t ta, node.GetInt("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t tb, node.GetInt("transB", 0));
  return Dims{ta ? a[1] : a[0], tb ? b[0] : b[1]};
}

// The dims of output `o`, by op.
absl::StatusOr<Dims> OutputDims(const Node& node, int o, absl::Span<const DimSymbol> symbols) {
  const std::string& op = node.op_type();
  const OpDef* def = OpRegistry::Global().Find(op);
  if (op == "Shape" || op == "Size") {
    const Shape& shape = node.output(o)->shape();  // the rank, or a scalar
    return Dims(shape.size(), DimExpr::Constant(shape.empty() ? 0 : shape[0]));
  }
  if (op == "Reshape") return ReshapeDims(node, symbols);
  if (IsFusedGroup(node)) {
    // The body was formed with the graph's dims (graph/fused_group.h).
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Graph> body, FusedGroupBody(node));
    if (o >= static_cast<int>(body->outputs().size())) return node.Error("more outputs than its body");
    return SymbolicShape(*body->outputs()[o]);
  }
  if (op == "MatMul") return MatMulDims(node, symbols);
  if (op == "Gemm") return GemmDims(node);
  if (op == "Slice") return SliceDims(node, symbols);
  if (op == "Range") return RangeDims(node, symbols);
  if (op == "Gather") return GatherDims(node);
  if (op == "GatherND") return GatherNDDims(node);
  if (op == "GatherElements") return SymbolicShape(*node.input(1));
  if (op == "ScatterND" || op == "ScatterElements" || op == "Identity") return SymbolicShape(*node.input(0));
  if (op == "Unsqueeze") return UnsqueezeDims(node);
  if (op == "Squeeze") return SqueezeDims(node, symbols);
  if (op == "Concat") return ConcatDims(node, symbols);
  if (op == "Transpose") return TransposeDims(node);
  if (op == "Flatten") return FlattenDims(node);
  if (op == "ConstantOfShape") return SymbolicInput(node, 0, "input");
  if (op == "Expand") {
    KILN_ASSIGN_OR_RETURN(Dims shape, SymbolicInput(node, 1, "shape"));
    return Broadcast(node, SymbolicShape(*node.input(0)), shape, symbols);
  }
  if (IsReduce(op)) return ReduceDims(node, symbols);
  if (PositionalOps().contains(op)) return PositionalDims(node, o, symbols);
  if (def != nullptr && def->is_elementwise) {
    Dims out;
    for (const Value* in : node.inputs()) {
      if (in != nullptr) {
        KILN_ASSIGN_OR_RETURN(out, Broadcast(node, out, SymbolicShape(*in), symbols));
      }
    }
    return out;
  }
  std::vector<std::string> dynamic;
  for (const Value* in : node.inputs()) {
    if (in != nullptr && (in->is_dynamic() || in->has_symbolic_data())) dynamic.push_back(Describe(in, symbols));
  }
  return absl::UnimplementedError(absl::StrCat(node.Describe(), ": kiln has no dynamic-shape rule for ", op,
                                               ", and it reads the dynamic dims (", absl::StrJoin(dynamic, ", "),
                                               "); compile with fixed sizes (--dim NAME=N) instead of a range"));
}

}  // namespace

std::vector<DimExpr> SymbolicShape(const Value& v) {
  if (v.is_dynamic()) return v.dims();
  std::vector<DimExpr> out;
  for (int64_t d : v.shape()) out.push_back(DimExpr::Constant(d));
  return out;
}

absl::StatusOr<Shape> EvaluateDims(const std::vector<DimExpr>& dims, absl::Span<const int64_t> values) {
  Shape out;
  for (const DimExpr& d : dims) {
    KILN_ASSIGN_OR_RETURN(int64_t x, d.Evaluate(values));
    out.push_back(x);
  }
  return out;
}

std::optional<std::vector<DimExpr>> SymbolicValues(const Value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->has_symbolic_data()) return v->symbolic_data();
  if (!v->is_constant() || v->rank() > 1) return std::nullopt;
  const DType t = v->dtype();
  if (t != DType::kInt64 && t != DType::kInt32) return std::nullopt;
  std::vector<DimExpr> out;
  for (int64_t x : v->constant().ToInt64()) out.push_back(DimExpr::Constant(x));
  return out;
}

bool ReadsSymbols(const Node& node) {
  for (const Value* in : node.inputs()) {
    if (in != nullptr && (in->is_dynamic() || in->has_symbolic_data())) return true;
  }
  return false;
}

absl::Status InferNodeDims(Node& node, absl::Span<const DimSymbol> symbols) {
  if (!ReadsSymbols(node) && (symbols.empty() || !IsFusedGroup(node))) {
    for (Value* out : node.outputs()) out->SetDims({});
    return absl::OkStatus();
  }
  const std::vector<int64_t> largest = LargestValues(symbols);
  for (int o = 0; o < node.num_outputs(); ++o) {
    Value* out = node.output(o);
    KILN_ASSIGN_OR_RETURN(Dims dims, OutputDims(node, o, symbols));
    // The rules and the static inference at the largest sizes must agree, and
    // every dim must be largest there (the memory plan's case) and never
    // negative.
    const Shape& shape = out->shape();
    if (dims.size() != shape.size()) {
      return absl::InternalError(absl::StrCat(node.Describe(), ": output ", o, " is ", DimsToString(dims, symbols),
                                              " symbolically but has rank ", shape.size()));
    }
    for (size_t i = 0; i < dims.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int64_t at_max, dims[i].Evaluate(largest));
      KILN_ASSIGN_OR_RETURN(auto bounds, dims[i].Bounds(symbols));
      if (at_max != shape[i]) {
        return absl::InternalError(absl::StrCat(node.Describe(), ": output ", o, " dim ", i, " is ",
                                                dims[i].ToString(symbols), " = ", at_max,
                                                " at the largest sizes, but static inference gives ", shape[i]));
      }
      if (bounds.first < 0 || bounds.second > at_max) {
        return CannotExpress(node, o, static_cast<int>(i),
                             absl::StrCat(dims[i].ToString(symbols), " ranges over ", bounds.first, "..", bounds.second,
                                          ", not 0..", at_max));
      }
    }
    out->SetDims(std::move(dims));
  }
  return absl::OkStatus();
}

std::string DimsToString(absl::Span<const DimExpr> dims, absl::Span<const DimSymbol> symbols) {
  std::vector<std::string> parts;
  for (const DimExpr& d : dims) parts.push_back(d.ToString(symbols));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

}  // namespace kiln
