// FuseRotaryMatMul: RoPE on the pieces of a merged Q/K/V product as one
// "rotary-matmul" group whose epilogue pairs each column with the one h away.
#include "fusion/fuse_rotary_matmul.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fusion/group_util.h"
#include "graph/op_registry.h"
#include "graph/ops/slice.h"
#include "graph/pattern_match.h"
#include "graph/strided_view.h"

namespace kiln {
namespace {

// The rotations the Hopper family's paired epilogue takes (GEMM_ROTARY): halves of a
// multiple of 8 columns (whole n8 blocks) whose heads divide its widest tile.
constexpr int64_t kMinHalf = 8;
constexpr int64_t kMaxTile = 256;

bool Is16Bit(const Value* v) { return v->dtype() == DType::kFloat16 || v->dtype() == DType::kBFloat16; }

// A Split of a plain MatMul's 16-bit product along its last axis, the Split its only
// reader: the product.
Value* SplitProduct(const Graph& graph, const Node& split) {
  if (split.op_type() != "Split" || !split.domain().empty() || !split.has_input(0)) return nullptr;
  Value* p = split.input(0);
  if (!IsPlainMatMul(p->producer()) || !p->has_type() || !Is16Bit(p) || p->rank() < 2 ||
      OnlyReader(graph, p) != &split) {
    return nullptr;
  }
  int64_t axis = split.GetInt("axis", 0).value_or(0);
  if (axis < 0) axis += p->rank();
  return axis == p->rank() - 1 ? p : nullptr;
}

// The constant [[-1], [1]] (rotate_half's signs over the two halves).
bool IsHalfSign(const Value* v) {
  if (v == nullptr || !v->is_constant() || v->shape() != Shape{2, 1}) return false;
  const std::vector<float> s = v->constant().ToFloat();
  return s[0] == -1.f && s[1] == 1.f;
}

// recognize-rope's rotation of one piece of the product.
struct Rotation {
  int piece = 0;
  std::vector<Node*> views;  // the piece's head-view chain, piece first
  Value* xh = nullptr;       // [..., 2, h]
  Value* y = nullptr;        // the rotation's result
  Value* cos = nullptr;
  Value* sin = nullptr;
  std::vector<Node*> nodes;  // the swap, sign, both products and the sum
};

bool IsTable(const Value* t, const Value* xh) {
  return t != nullptr && t->is_constant() && t->dtype() == xh->dtype() && BroadcastsInto(t->shape(), xh->shape());
}

std::optional<Rotation> MatchRotation(const Graph& graph, Value* piece, int index) {
  Rotation r;
  r.piece = index;
  Value* v = piece;
  for (Node* n = OnlyReader(graph, v);
       n != nullptr && (IsOp(n, "Reshape", 2) || IsOp(n, "Transpose", 1)) && IsViewNode(*n) && n->input(0) == v;
       n = OnlyReader(graph, v)) {
    r.views.push_back(n);
    v = n->output(0);
  }
  r.xh = v;
  if (r.xh->rank() < 2 || r.xh->shape()[r.xh->rank() - 2] != 2 || r.xh->uses().size() != 2 ||
      graph.IsGraphOutput(r.xh)) {
    return std::nullopt;
  }
  Node* swap = nullptr;
  Node* x_cos = nullptr;
  for (Node* c : Consumers(r.xh)) {
    if (IsOp(c, "Mul", 2)) x_cos = c;
    if (c->op_type() == "Slice") swap = c;
  }
  if (!SwapsHalves(swap) || x_cos == nullptr) return std::nullopt;
  Node* rotate = OnlyReader(graph, swap->output(0));
  if (!IsOp(rotate, "Mul", 2) || !IsHalfSign(OtherOperand(rotate, swap->output(0)))) return std::nullopt;
  Node* rot_sin = OnlyReader(graph, rotate->output(0));
  if (!IsOp(rot_sin, "Mul", 2)) return std::nullopt;
  Node* add = OnlyReader(graph, rot_sin->output(0));
  if (!IsOp(add, "Add", 2) || OnlyReader(graph, x_cos->output(0)) != add ||
      OtherOperand(add, rot_sin->output(0)) != x_cos->output(0) || graph.IsGraphOutput(add->output(0))) {
    return std::nullopt;
  }
  r.cos = OtherOperand(x_cos, r.xh);
  r.sin = OtherOperand(rot_sin, rotate->output(0));
  r.y = add->output(0);
  if (!IsTable(r.cos, r.xh) || !IsTable(r.sin, r.xh) || r.y->shape() != r.xh->shape()) return std::nullopt;
  r.nodes = {swap, rotate, x_cos, rot_sin, add};
  return r;
}

// Where the elements of dim `d` of `view` sit in the start tensor, from its offset.
std::vector<int64_t> DimOffsets(const StridedView& view, int d) {
  std::vector<int64_t> along = {0};
  for (const ViewFactor& f : view.factors(d)) {
    std::vector<int64_t> next;
    next.reserve(along.size() * f.size);
    for (int64_t a : along) {
      for (int64_t i = 0; i < f.size; ++i) next.push_back(a + i * f.stride);
    }
    along = std::move(next);
  }
  return along;
}

// The row-major index into `table` (broadcasting into `shape`) that each element of
// dim `d` of `shape` adds.
std::vector<int64_t> DimTableIndex(const Shape& table, const Shape& shape, size_t d) {
  const size_t lead = shape.size() - table.size();
  int64_t stride = 1;
  for (size_t t = d + 1; t < shape.size(); ++t) stride *= t < lead ? 1 : table[t - lead];
  const int64_t n = d < lead ? 1 : table[d - lead];
  std::vector<int64_t> out(shape[d]);
  for (int64_t i = 0; i < shape[d]; ++i) out[i] = n == 1 ? 0 : i * stride;
  return out;
}

// Calls visit(offset in the start tensor, cos index, sin index, first half) for every
// element of xh (of `view`), cos and sin broadcast into it: O(sum of dims) memory.
template <typename Visit>
void ForEachElement(const Rotation& r, const StridedView& view, const Visit& visit) {
  const Shape& xs = r.xh->shape();
  const size_t rank = xs.size();
  std::vector<std::vector<int64_t>> off(rank), ci(rank), si(rank);
  for (size_t d = 0; d < rank; ++d) {
    off[d] = DimOffsets(view, static_cast<int>(d));
    ci[d] = DimTableIndex(r.cos->shape(), xs, d);
    si[d] = DimTableIndex(r.sin->shape(), xs, d);
  }
  std::vector<int64_t> idx(rank, 0);
  while (true) {
    int64_t o = view.offset(), c = 0, s = 0;
    for (size_t d = 0; d < rank; ++d) o += off[d][idx[d]], c += ci[d][idx[d]], s += si[d][idx[d]];
    visit(o, c, s, idx[rank - 2] == 0);
    size_t d = rank;
    while (d > 0 && ++idx[d - 1] == xs[d - 1]) idx[--d] = 0;
    if (d == 0) return;
  }
}

// The rotation's half width h when its xh is, within the product `p` (its piece the
// `count` columns from `first`), h contiguous columns per half, the halves h apart,
// and the piece starts at a multiple of 2h; else 0. `view` becomes xh's view of `p`.
int64_t HalfWidth(const Rotation& r, const Value* p, int64_t first, int64_t count, StridedView& view) {
  const int last = p->rank() - 1;
  view = StridedView::Dense(p->shape());
  if (!view.Slice(last, first, 1, count)) return 0;
  for (const Node* n : r.views) {
    if (!view.Apply(*n)) return 0;
  }
  const int k = view.rank();
  const int64_t h = view.shape()[k - 1];
  const std::vector<ViewFactor> col = {{h, 1}}, half = {{2, h}};
  if (view.factors(k - 1) != col || view.factors(k - 2) != half || first % (2 * h) != 0) return 0;
  return h;
}

// Tables `c` and `s` (of `shape`) with each leading dim (all but the last) along
// which every slice of both is equal cut to size 1.
void Squeeze(Shape& shape, std::vector<float>& c, std::vector<float>& s) {
  for (size_t d = 0; d + 1 < shape.size(); ++d) {
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= shape[i];
    for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
    const int64_t n = shape[d];
    bool same = n > 1;
    for (int64_t o = 0; o < outer && same; ++o) {
      for (int64_t i = 1; i < n && same; ++i) {
        const int64_t a = o * n * inner, b = a + i * inner;
        same = std::equal(c.begin() + a, c.begin() + a + inner, c.begin() + b) &&
               std::equal(s.begin() + a, s.begin() + a + inner, s.begin() + b);
      }
    }
    if (!same) continue;
    std::vector<float> c1, s1;
    c1.reserve(outer * inner);
    s1.reserve(outer * inner);
    for (int64_t o = 0; o < outer; ++o) {
      c1.insert(c1.end(), c.begin() + o * n * inner, c.begin() + o * n * inner + inner);
      s1.insert(s1.end(), s.begin() + o * n * inner, s.begin() + o * n * inner + inner);
    }
    c = std::move(c1);
    s = std::move(s1);
    shape[d] = 1;
  }
}

struct Match {
  Node* split = nullptr;
  Value* product = nullptr;
  std::vector<Rotation> rotations;
  int64_t h = 0;
  Tensor cos, sin;  // the tables over the product's (squeezed) shape
};

// The tables of `m`'s rotations: cos and sign * sin at each rotated element of the
// product, 1 and 0 elsewhere, over the product's last two dims (a sequence's rows and
// the columns; leading dims 1) and cut further by Squeeze. False (no tables) when they
// differ between entries of the leading dims (a batch of different positions).
bool BuildTables(Match& m, const std::vector<StridedView>& views) {
  const Value* p = m.product;
  const Shape& ps = p->shape();
  const int64_t block = ps[ps.size() - 2] * ps.back();
  std::vector<float> c(block, 1.f), s(block, 0.f);
  std::vector<bool> set(block, false);
  bool consistent = true;
  for (size_t i = 0; i < m.rotations.size() && consistent; ++i) {
    const Rotation& r = m.rotations[i];
    const std::vector<float> cv = r.cos->constant().ToFloat(), sv = r.sin->constant().ToFloat();
    ForEachElement(r, views[i], [&](int64_t at, int64_t ci, int64_t si, bool first_half) {
      const int64_t e = at % block;
      const float cw = cv[ci], sw = first_half ? -sv[si] : sv[si];
      if (!set[e]) {
        c[e] = cw, s[e] = sw, set[e] = true;
      } else if (c[e] != cw || s[e] != sw) {
        consistent = false;
      }
    });
  }
  if (!consistent) return false;
  Shape shape(ps.size(), 1);
  shape[ps.size() - 2] = ps[ps.size() - 2];
  shape.back() = ps.back();
  Squeeze(shape, c, s);
  m.cos = Tensor::FromFloat(p->dtype(), shape, c);
  m.sin = Tensor::FromFloat(p->dtype(), shape, s);
  return true;
}

// A constant holding `t`: one of `cache` with equal contents, or a new one.
Value* SharedConstant(Graph& graph, std::vector<Value*>& cache, const std::string& name, Tensor t) {
  for (Value* v : cache) {
    const Tensor& c = v->constant();
    if (c.dtype() == t.dtype() && c.shape() == t.shape() && std::memcmp(c.raw_data(), t.raw_data(), c.nbytes()) == 0) {
      return v;
    }
  }
  cache.push_back(graph.AddConstant(name, std::move(t)));
  return cache.back();
}

// The rewrite: returns the group's members (the MatMul first).
absl::StatusOr<std::vector<Node*>> Rewrite(Graph& graph, Match& m, std::vector<Value*>& tables) {
  Value* p = m.product;
  Node* mm = p->producer();
  const std::string base = mm->name();
  const Shape shape = p->shape();
  const int64_t rank = p->rank(), h = m.h;
  std::vector<Value*> pieces;
  for (int i = 0; i < m.split->num_outputs(); ++i) pieces.push_back(m.split->output(i));
  graph.RemoveNode(m.split);
  for (const Rotation& r : m.rotations) {
    graph.ReplaceAllUsesWith(r.y, r.xh);
    for (Node* n : r.nodes) graph.RemoveNode(n);
  }
  std::vector<Node*> members = {mm};
  auto add = [&](const char* op, std::vector<Value*> inputs, const std::string& suffix) -> absl::StatusOr<Value*> {
    Value* out = graph.AddValue(absl::StrCat(base, "/", suffix));
    Node* n = graph.AddNode(op, inputs, {out}, absl::StrCat(base, "/", suffix));
    KILN_RETURN_IF_ERROR(InferNode(*n));
    members.push_back(n);
    return out;
  };
  std::vector<int64_t> pairs(shape.begin(), shape.end() - 1);
  pairs.insert(pairs.end(), {shape.back() / (2 * h), 2, h});
  KILN_ASSIGN_OR_RETURN(
      Value * paired,
      add("Reshape", {p, IntsConstant(graph, absl::StrCat(base, "/rotary_pairs_shape"), pairs)}, "rotary_pairs"));
  KILN_ASSIGN_OR_RETURN(
      Value * swapped,
      add("Slice",
          {paired, IntsConstant(graph, absl::StrCat(base, "/rotary_swap_starts"), {1}),
           IntsConstant(graph, absl::StrCat(base, "/rotary_swap_ends"), {std::numeric_limits<int64_t>::min()}),
           IntsConstant(graph, absl::StrCat(base, "/rotary_swap_axes"), {rank}),
           IntsConstant(graph, absl::StrCat(base, "/rotary_swap_steps"), {-1})},
          "rotary_swap"));
  KILN_ASSIGN_OR_RETURN(Value * partner, add("Reshape",
                                             {swapped, IntsConstant(graph, absl::StrCat(base, "/rotary_shape"),
                                                                    std::vector<int64_t>(shape.begin(), shape.end()))},
                                             "rotary_partner"));
  Value* cos = SharedConstant(graph, tables, absl::StrCat(base, "/rotary_cos"), std::move(m.cos));
  Value* sin = SharedConstant(graph, tables, absl::StrCat(base, "/rotary_sin"), std::move(m.sin));
  KILN_ASSIGN_OR_RETURN(Value * x_cos, add("Mul", {p, cos}, "rotary_x_cos"));
  KILN_ASSIGN_OR_RETURN(Value * p_sin, add("Mul", {partner, sin}, "rotary_partner_sin"));
  KILN_ASSIGN_OR_RETURN(Value * rotated, add("Add", {x_cos, p_sin}, "rotary"));
  if (rotated->shape() != shape) {
    return absl::InternalError(absl::StrCat("fuse-rotary-matmul: the rewrite changed the shape of ", p->name()));
  }
  int64_t first = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const int64_t count = pieces[i]->shape().back();
    const std::string name = absl::StrCat(base, "/rotary_piece_", i);
    Node* slice = graph.AddNode(
        "Slice",
        {rotated, IntsConstant(graph, name + "_starts", {first}), IntsConstant(graph, name + "_ends", {first + count}),
         IntsConstant(graph, name + "_axes", {rank - 1})},
        {pieces[i]}, name);
    KILN_RETURN_IF_ERROR(InferNode(*slice));
    first += count;
  }
  return members;
}

}  // namespace

absl::StatusOr<bool> FuseRotaryMatMul::Run(Graph& graph) {
  std::vector<Match> matches;
  for (Node* split : graph.nodes()) {
    Value* p = SplitProduct(graph, *split);
    if (p == nullptr) continue;
    Match m{split, p};
    std::vector<StridedView> views;
    int64_t first = 0;
    bool ok = true;
    for (int i = 0; i < split->num_outputs() && ok; ++i) {
      Value* piece = split->output(i);
      const int64_t count = piece->has_type() ? piece->shape().back() : 0;
      std::optional<Rotation> r = MatchRotation(graph, piece, i);
      if (r) {
        StridedView view = StridedView::Dense(p->shape());
        const int64_t h = HalfWidth(*r, p, first, count, view);
        std::string why;
        if (h == 0 || (m.h != 0 && h != m.h) || p->shape().back() % (2 * h) != 0) {
          why = absl::StrCat("layout: the rotation of ", Quote(piece->name()),
                             " does not pair columns h apart within heads of 2h aligned in ", Quote(p->name()),
                             ", one h for every piece");
        } else if (h % kMinHalf != 0 || kMaxTile % (2 * h) != 0) {
          why = absl::StrCat("head dim: the rotation of ", Quote(piece->name()), " pairs columns ", h,
                             " apart; the Hopper family pairs n8 blocks inside tiles of at most ", kMaxTile,
                             " columns (h a multiple of ", kMinHalf, ", 2h dividing ", kMaxTile, ")");
        }
        if (!why.empty()) {
          std::vector<Node*> nodes = r->views;
          nodes.insert(nodes.end(), r->nodes.begin(), r->nodes.end());
          ReportRejection(report_, name(), NodeNames(nodes), std::move(why));
          ok = false;
          break;
        }
        m.h = h;
        m.rotations.push_back(*std::move(r));
        views.push_back(std::move(view));
      }
      first += count;
    }
    if (!ok || m.rotations.empty()) continue;
    if (!BuildTables(m, views)) {
      ReportRejection(report_, name(), {split->name()},
                      absl::StrCat("tables: the rotations' cos and sin differ between the entries of ",
                                   Quote(p->name()), "'s leading dims (a batch at other positions)"));
      continue;
    }
    matches.push_back(std::move(m));
  }
  if (matches.empty()) return false;
  std::vector<Value*> tables;
  std::vector<std::vector<Node*>> groups;
  for (Match& m : matches) {
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> members, Rewrite(graph, m, tables));
    groups.push_back(std::move(members));
  }
  KILN_RETURN_IF_ERROR(graph.FinishRewrites());
  for (const std::vector<Node*>& members : groups) {
    FormAndReportGroup(graph, report_, name(), members, "rotary-matmul", members[0]);
  }
  return true;
}

}  // namespace kiln
