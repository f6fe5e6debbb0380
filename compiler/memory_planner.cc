// Static memory planner: liveness groups, best-fit offset assignment, lower bound.
#include "compiler/memory_planner.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "graph/dtype.h"
#include "graph/op_registry.h"

namespace kiln {
namespace {

// A memory block: a buffer with its aliases and in-place partners.
struct Group {
  int root = 0;
  int64_t size = 0;  // aligned extent: max over members of (offset in the block + aligned size)
  int first = 0;
  int last = 0;
  int latest_first = 0;  // the latest first step of any member
};

int Find(std::vector<int>& parent, int i) {
  while (parent[i] != i) {
    parent[i] = parent[parent[i]];
    i = parent[i];
  }
  return i;
}

bool Overlap(const Group& a, const Group& b) { return a.first <= b.last && b.first <= a.last; }

// Peak over steps of the summed sizes of live groups.
int64_t LowerBound(const std::vector<Group>& groups) {
  std::vector<std::pair<int64_t, int64_t>> events;  // (step, delta); frees sort first
  events.reserve(groups.size() * 2);
  for (const Group& g : groups) {
    if (g.size == 0) continue;
    events.push_back({static_cast<int64_t>(g.first), g.size});
    events.push_back({static_cast<int64_t>(g.last) + 1, -g.size});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (const auto& [step, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

// Places groups in `order`; returns the arena size and fills `offsets` (per group).
int64_t PlaceGroups(const std::vector<Group>& groups, const std::vector<int>& order,
                    std::vector<int64_t>& offsets) {
  offsets.assign(groups.size(), 0);
  std::vector<int> placed;
  placed.reserve(groups.size());
  std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of overlapping groups
  int64_t arena = 0;
  for (int gi : order) {
    const Group& g = groups[gi];
    if (g.size == 0) continue;
    busy.clear();
    for (int pi : placed) {
      if (Overlap(g, groups[pi])) busy.push_back({offsets[pi], offsets[pi] + groups[pi].size});
    }
    std::sort(busy.begin(), busy.end());
    int64_t cursor = 0;
    int64_t best_offset = -1, best_gap = 0;
    for (const auto& [begin, end] : busy) {
      if (begin > cursor) {
        const int64_t gap = begin - cursor;
        if (gap >= g.size && (best_offset < 0 || gap < best_gap)) {
          best_offset = cursor;
          best_gap = gap;
        }
      }
      cursor = std::max(cursor, end);
    }
    offsets[gi] = best_offset >= 0 ? best_offset : cursor;
    arena = std::max(arena, offsets[gi] + g.size);
    placed.push_back(gi);
  }
  return arena;
}

std::vector<int> Ordering(const std::vector<Group>& groups, PlanOrdering kind) {
  std::vector<int> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  auto length = [&](int i) { return static_cast<int64_t>(groups[i].last - groups[i].first + 1); };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Group& x = groups[a];
    const Group& y = groups[b];
    switch (kind) {
      case PlanOrdering::kSizeDesc:
        if (x.size != y.size) return x.size > y.size;
        if (length(a) != length(b)) return length(a) > length(b);
        return x.first < y.first;
      case PlanOrdering::kSizeTimesLifetimeDesc: {
        // Sizes are multiples of 256, so divide first to keep the product in range.
        const int64_t px = (x.size / kArenaAlignment) * length(a);
        const int64_t py = (y.size / kArenaAlignment) * length(b);
        if (px != py) return px > py;
        return x.size > y.size;
      }
      case PlanOrdering::kStartStep:
        if (x.first != y.first) return x.first < y.first;
        if (x.size != y.size) return x.size > y.size;
        return length(a) > length(b);
    }
    return false;
  });
  return order;
}

const OpDef* FindOp(const Node& node) { return OpRegistry::Global().Find(node.op_type()); }

bool IsView(const Node* node) {
  if (node == nullptr) return false;
  const OpDef* def = FindOp(*node);
  return def != nullptr && def->is_view;
}

// The view op's input that the output aliases, or nullptr when it aliases nothing in
// the arena (missing or constant input).
const Value* ViewSource(const Node& node) {
  const Value* in = node.input(0);
  if (in == nullptr || in->is_constant()) return nullptr;
  return in;
}

// Whether the outputs of `node` are bytes of its input 0 (a view op, or a Split whose
// pieces are views) in the arena.
bool AliasesInput(const Node* node) {
  if (node == nullptr || ViewSource(*node) == nullptr) return false;
  return IsView(node) || SplitViewOffsets(*node).has_value();
}

}  // namespace

const char* PlanOrderingName(PlanOrdering ordering) {
  switch (ordering) {
    case PlanOrdering::kSizeDesc:
      return "size";
    case PlanOrdering::kSizeTimesLifetimeDesc:
      return "size*lifetime";
    case PlanOrdering::kStartStep:
      return "start";
  }
  return "?";
}

absl::StatusOr<MemoryPlan> PlanMemory(absl::Span<const BufferRequest> buffers) {
  const int n = static_cast<int>(buffers.size());
  for (int i = 0; i < n; ++i) {
    const BufferRequest& b = buffers[i];
    auto error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("buffer ", i, " '", b.name, "': ", what));
    };
    if (b.size_bytes < 0) return error("negative size");
    if (b.last_step < b.first_step) return error("last_step < first_step");
    if (b.alias_of >= i) return error("alias_of must name an earlier buffer");
    if (b.in_place_of >= i) return error("in_place_of must name an earlier buffer");
    if (b.alias_of >= 0 && b.first_step < buffers[b.alias_of].first_step) {
      return error("an alias cannot start before the buffer it aliases");
    }
    if (b.alias_offset != 0) {
      if (b.alias_of < 0) return error("alias_offset without alias_of");
      if (b.alias_offset < 0 || b.alias_offset % kArenaAlignment != 0) {
        return error(absl::StrCat("alias_offset ", b.alias_offset, " is not a non-negative multiple of ",
                                  kArenaAlignment));
      }
    }
    if (b.alias_of >= 0 && b.alias_offset + b.size_bytes > buffers[b.alias_of].size_bytes) {
      return error(absl::StrCat("the alias (", b.size_bytes, " bytes at offset ", b.alias_offset,
                                ") does not lie within the ", buffers[b.alias_of].size_bytes,
                                " bytes of the buffer it aliases"));
    }
  }

  MemoryPlan plan;
  plan.in_place.assign(n, false);
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<Group> info(n);  // indexed by root buffer
  // Offset of each buffer within its memory block's root: the sum of alias_offsets
  // up the alias chain (0 for in-place partners, which start their block).
  std::vector<int64_t> rel(n, 0);
  for (int i = 0; i < n; ++i) {
    info[i] = {i, AlignArena(buffers[i].size_bytes), buffers[i].first_step, buffers[i].last_step,
               buffers[i].first_step};
    if (buffers[i].alias_of < 0) plan.no_reuse_bytes += info[i].size;
  }
  // `from` (a root) joins `into` (the earlier root), its members keeping their
  // offsets relative to `from`, which sits at `from_offset` in `into`'s block.
  auto merge = [&](int into, int from, int64_t from_offset) {
    parent[from] = into;
    Group& g = info[into];
    g.size = std::max(g.size, from_offset + info[from].size);
    g.first = std::min(g.first, info[from].first);
    g.last = std::max(g.last, info[from].last);
    g.latest_first = std::max(g.latest_first, info[from].latest_first);
  };
  // Aliases are mandatory and fixed first, so each block's lifetime is complete
  // before in-place requests look at it.
  // Buffer i is still alone here (only later buffers alias it), and the root of
  // alias_of's block is the top of its alias chain, so rel is measured from it.
  for (int i = 0; i < n; ++i) {
    if (buffers[i].alias_of < 0) continue;
    const int a = Find(parent, buffers[i].alias_of), b = Find(parent, i);
    rel[i] = rel[buffers[i].alias_of] + buffers[i].alias_offset;
    if (a != b) merge(a, b, rel[i]);
  }
  for (int i = 0; i < n; ++i) {
    const BufferRequest& b = buffers[i];
    if (!b.can_run_in_place || b.in_place_of < 0 || b.alias_of >= 0) continue;
    const int src = Find(parent, b.in_place_of), dst = Find(parent, i);
    if (src == dst) continue;
    const Group& s = info[src];
    const Group& d = info[dst];
    // Legal when the source block is last read at this step, no member of it is
    // written at this step, the source starts the block (an element-wise op writes
    // element k over element k), and the block is large enough.
    if (s.last != b.first_step || s.latest_first >= b.first_step || d.first != b.first_step ||
        rel[b.in_place_of] != 0 || s.size < d.size) {
      continue;
    }
    // dst == i (not an alias, and no earlier buffer names it), so src < dst; i's
    // block starts at the source's offset.
    merge(std::min(src, dst), std::max(src, dst), 0);
    plan.in_place[i] = true;
  }

  std::vector<Group> groups;
  std::vector<int> group_index(n, -1);
  for (int i = 0; i < n; ++i) {
    if (Find(parent, i) == i) {
      group_index[i] = static_cast<int>(groups.size());
      groups.push_back(info[i]);
    }
  }
  plan.lower_bound_bytes = LowerBound(groups);

  std::vector<int64_t> best_offsets, offsets;
  plan.arena_bytes = -1;
  for (PlanOrdering kind : {PlanOrdering::kSizeDesc, PlanOrdering::kSizeTimesLifetimeDesc,
                            PlanOrdering::kStartStep}) {
    const int64_t arena = PlaceGroups(groups, Ordering(groups, kind), offsets);
    ++plan.orderings_tried;
    if (plan.arena_bytes < 0 || arena < plan.arena_bytes) {
      plan.arena_bytes = arena;
      plan.ordering = kind;
      best_offsets.swap(offsets);
    }
    if (plan.arena_bytes == plan.lower_bound_bytes) break;
  }

  plan.offsets.resize(n);
  plan.group_of.resize(n);
  for (int i = 0; i < n; ++i) {
    const int root = Find(parent, i);
    plan.group_of[i] = root;
    plan.offsets[i] = best_offsets[group_index[root]] + rel[i];
  }
  return plan;
}

std::optional<std::vector<int64_t>> SplitViewOffsets(const Node& node) {
  if (node.op_type() != "Split" || (!node.domain().empty() && node.domain() != "ai.onnx")) return std::nullopt;
  const Value* in = node.input(0);
  if (in == nullptr || !in->has_type() || in->rank() == 0 || node.num_outputs() == 0) return std::nullopt;
  absl::StatusOr<int64_t> attr = node.GetInt("axis", 0);
  if (!attr.ok()) return std::nullopt;
  const int64_t rank = in->rank();
  const int64_t axis = *attr < 0 ? *attr + rank : *attr;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const Shape& shape = in->shape();
  int64_t inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis && shape[d] != 1) return std::nullopt;  // pieces would be strided
    if (d > axis) inner *= shape[d];
  }
  const int64_t row_bytes = inner * static_cast<int64_t>(DTypeSize(in->dtype()));
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const Value* out : node.outputs()) {
    if (out == nullptr || !out->has_type() || out->dtype() != in->dtype() || out->rank() != rank) return std::nullopt;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis && out->shape()[d] != shape[d]) return std::nullopt;
    }
    if ((at * row_bytes) % kArenaAlignment != 0) return std::nullopt;
    offsets.push_back(at * row_bytes);
    at += out->shape()[axis];
  }
  if (at != shape[axis]) return std::nullopt;
  return offsets;
}

bool CanRunInPlace(const Graph& graph, const Node& node, int input_index) {
  const OpDef* def = FindOp(node);
  if (def == nullptr || !def->is_elementwise || node.num_outputs() != 1) return false;
  const Value* in = node.input(input_index);
  const Value* out = node.output(0);
  if (in == nullptr || out == nullptr || in->is_constant()) return false;
  if (!in->has_type() || !out->has_type()) return false;
  if (in->dtype() != out->dtype() || in->shape() != out->shape()) return false;
  for (const Use& use : in->uses()) {
    if (use.node != &node) return false;  // another consumer
  }
  // Every value sharing the input's bytes: up the view chain to the root, then down
  // through every view of it.
  const Value* root = in;
  while (AliasesInput(root->producer())) root = ViewSource(*root->producer());
  std::vector<const Value*> stack = {root};
  absl::flat_hash_set<const Value*> seen = {root};
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (graph.IsGraphInput(v) || graph.IsGraphOutput(v)) return false;
    for (const Use& use : v->uses()) {
      if (use.index != 0 || !AliasesInput(use.node)) continue;
      for (const Value* o : use.node->outputs()) {
        if (o != nullptr && seen.insert(o).second) stack.push_back(o);
      }
    }
  }
  return true;
}

absl::StatusOr<GraphMemoryPlan> PlanGraphMemory(const Graph& graph) {
  GraphMemoryPlan result;
  const std::vector<Node*> nodes = graph.nodes();
  const int last_step = std::max(0, static_cast<int>(nodes.size()) - 1);
  absl::flat_hash_map<const Node*, int> step_of;
  for (int k = 0; k < static_cast<int>(nodes.size()); ++k) step_of[nodes[k]] = k;

  auto add_buffer = [&](const Value* v, int first) -> absl::StatusOr<int> {
    if (!v->has_type()) {
      return absl::FailedPreconditionError(absl::StrCat("memory planning: value '", v->name(), "' has no type"));
    }
    BufferRequest b;
    b.name = v->name();
    b.size_bytes = v->numel() * static_cast<int64_t>(DTypeSize(v->dtype()));
    b.first_step = first;
    b.last_step = first;
    for (const Use& use : v->uses()) {
      auto it = step_of.find(use.node);
      if (it != step_of.end()) b.last_step = std::max(b.last_step, it->second);
    }
    if (graph.IsGraphOutput(v)) b.last_step = last_step;
    const int index = static_cast<int>(result.buffers.size());
    result.buffers.push_back(std::move(b));
    result.values.push_back(v);
    result.buffer_of[v] = index;
    return index;
  };

  for (const Value* in : graph.inputs()) {
    if (in->is_constant() || result.buffer_of.contains(in)) continue;
    absl::StatusOr<int> index = add_buffer(in, 0);
    if (!index.ok()) return index.status();
  }
  for (int k = 0; k < static_cast<int>(nodes.size()); ++k) {
    const Node& node = *nodes[k];
    for (const Value* in : node.inputs()) {
      if (in == nullptr || in->is_constant() || result.buffer_of.contains(in)) continue;
      return absl::FailedPreconditionError(absl::StrCat("memory planning: ", node.Describe(), " reads '",
                                                        in->name(),
                                                        "' before it is produced (nodes not in topological order)"));
    }
    for (int o = 0; o < node.num_outputs(); ++o) {
      const Value* out = node.output(o);
      if (out == nullptr || out->is_constant() || result.buffer_of.contains(out)) continue;
      absl::StatusOr<int> index = add_buffer(out, k);
      if (!index.ok()) return index.status();
      BufferRequest& b = result.buffers[*index];
      if (o == 0 && IsView(&node)) {
        if (const Value* src = ViewSource(node); src != nullptr) {
          b.alias_of = result.buffer_of.at(src);
          continue;
        }
      }
      if (node.op_type() == "Split" && ViewSource(node) != nullptr) {
        if (std::optional<std::vector<int64_t>> pieces = SplitViewOffsets(node)) {
          b.alias_of = result.buffer_of.at(ViewSource(node));
          b.alias_offset = (*pieces)[o];
          continue;
        }
      }
      for (int i = 0; i < node.num_inputs(); ++i) {
        if (CanRunInPlace(graph, node, i)) {
          b.in_place_of = result.buffer_of.at(node.input(i));
          b.can_run_in_place = true;
          break;
        }
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(result.plan, PlanMemory(result.buffers));
  return result;
}

}  // namespace kiln
