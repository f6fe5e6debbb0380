// Static memory planner: packs buffers with known sizes and lifetimes into one arena.
//
// Contract.
//  * Input: a list of BufferRequest over an abstract step order. Buffer i is live on
//    the closed interval [first_step, last_step]: written at first_step, last read at
//    last_step. Two buffers whose intervals intersect never share bytes, except:
//      - alias_of = j (a view, e.g. Reshape): buffer i IS buffer j's bytes under
//        another name; it gets j's offset and extends j's lifetime. Always honoured.
//      - can_run_in_place with in_place_of = j: buffer i may take j's memory when j
//        (with all its aliases and earlier in-place partners) is last read at
//        i.first_step and j's block is at least as large. Honoured when legal;
//        MemoryPlan::in_place says which were.
//    alias_of and in_place_of must name earlier buffers (index < i).
//  * Every offset and every size is rounded up to kArenaAlignment (256) bytes.
//  * Output: one offset per buffer; arena_bytes >= every offset + aligned size;
//    arena_bytes >= lower_bound_bytes = max over steps of the sum of the aligned sizes
//    of the memory blocks (alias / in-place groups) live at that step.
//  * Algorithm: groups are formed (aliases, then in-place requests in index order);
//    each ordering (size desc; size x lifetime desc; start step asc) places groups one
//    by one at the smallest free gap between already-placed, lifetime-overlapping
//    groups that fits, else on top of them; the smallest arena wins, and trying stops
//    as soon as an arena equals the lower bound.
//
// PlanGraphMemory applies this to a Graph whose nodes are topologically ordered:
// node k is step k; every non-constant value that a node produces or that is a graph
// input is a buffer (graph inputs live from step 0, graph outputs to the last step);
// outputs of view ops (OpDef::is_view) alias their first input; element-wise ops may
// run in place on an input (see CanRunInPlace).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/graph.h"

namespace kiln {

inline constexpr int64_t kArenaAlignment = 256;

// Rounds `bytes` up to a multiple of kArenaAlignment.
inline int64_t AlignArena(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

struct BufferRequest {
  std::string name;      // for messages only
  int64_t size_bytes = 0;  // unaligned size; >= 0
  int first_step = 0;
  int last_step = 0;     // >= first_step
  int alias_of = -1;     // earlier buffer whose bytes this one is (a view)
  int in_place_of = -1;  // earlier buffer whose memory this one may reuse
  bool can_run_in_place = false;  // the producer may write over in_place_of
};

enum class PlanOrdering { kSizeDesc, kSizeTimesLifetimeDesc, kStartStep };
const char* PlanOrderingName(PlanOrdering ordering);

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per buffer, multiple of kArenaAlignment
  std::vector<int> group_of;     // per buffer: the root buffer of its memory block
  std::vector<bool> in_place;    // per buffer: its in-place request was honoured
  int64_t arena_bytes = 0;
  int64_t lower_bound_bytes = 0;
  // Sum of the aligned sizes of all buffers that are not aliases (what allocating
  // every tensor separately would take).
  int64_t no_reuse_bytes = 0;
  PlanOrdering ordering = PlanOrdering::kSizeDesc;  // the ordering that won
  int orderings_tried = 0;
};

// Plans `buffers` into one arena. InvalidArgument on a malformed request (negative
// size, last_step < first_step, alias_of / in_place_of not naming an earlier buffer,
// an alias that starts before the buffer it aliases).
absl::StatusOr<MemoryPlan> PlanMemory(absl::Span<const BufferRequest> buffers);

// Whether `node` may write its single output over its input `input_index`: the op is
// element-wise, the input is a non-constant value with the output's dtype and shape,
// it has a single consumer node (this one), and neither it nor any value sharing its
// bytes through views is a graph input or output. (Whether the input is last read at
// this step is checked by PlanMemory over the whole alias group.)
bool CanRunInPlace(const Graph& graph, const Node& node, int input_index);

struct GraphMemoryPlan {
  std::vector<BufferRequest> buffers;
  std::vector<const Value*> values;  // values[i] is buffer i
  absl::flat_hash_map<const Value*, int> buffer_of;
  MemoryPlan plan;

  // Offset of `value` in the arena; -1 for a value that is not a buffer (constant).
  int64_t OffsetOf(const Value* value) const {
    auto it = buffer_of.find(value);
    return it == buffer_of.end() ? -1 : plan.offsets[it->second];
  }
};

// Plans the intermediate tensors of `graph`. FailedPrecondition when a value is
// untyped or the nodes are not in topological order.
absl::StatusOr<GraphMemoryPlan> PlanGraphMemory(const Graph& graph);

}  // namespace kiln
