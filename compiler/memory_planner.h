// Static memory planner: packs buffers with known sizes and lifetimes into one arena.
//
// Contract.
//  * Input: a list of BufferRequest over an abstract step order. Buffer i is live on
//    the closed interval [first_step, last_step]: written at first_step, last read at
//    last_step. Two buffers whose intervals intersect never share bytes, except:
//      - alias_of = j (a view, e.g. Reshape, or a piece of a Split): buffer i IS
//        bytes [alias_offset, alias_offset + size) of buffer j under another name;
//        it gets j's offset + alias_offset and extends the lifetime of j's whole
//        memory block (all of j stays live while any alias of it is). Always
//        honoured. alias_offset is a multiple of kArenaAlignment and the alias lies
//        within j (alias_offset + size_bytes <= j's size_bytes).
//      - can_run_in_place with in_place_of = j: buffer i may take j's memory when j
//        (with all its aliases and earlier in-place partners) is last read at
//        i.first_step, j starts its memory block (not an alias at a non-zero
//        offset), and j's block is at least as large. Honoured when legal;
//        MemoryPlan::in_place says which were.
//    alias_of and in_place_of must name earlier buffers (index < i).
//  * Every offset and every size is rounded up to kArenaAlignment (256) bytes.
//  * Output: one offset per buffer; arena_bytes >= every offset + aligned size;
//    arena_bytes >= lower_bound_bytes = max over steps of the sum of the sizes of the
//    memory blocks (alias / in-place groups) live at that step, a block's size being
//    the largest (offset within the block + aligned size) of its members.
//  * Algorithm: groups are formed (aliases, then in-place requests in index order);
//    each ordering (size desc; size x lifetime desc; start step asc) places groups one
//    by one at the smallest free gap between already-placed, lifetime-overlapping
//    groups that fits, else on top of them; the smallest arena wins, and trying stops
//    as soon as an arena equals the lower bound.
//
// PlanGraphMemory applies this to a Graph whose nodes are topologically ordered:
// node k is step k; every non-constant value that a node produces or that is a graph
// input is a buffer (graph inputs live from step 0, graph outputs to the last step);
// outputs of view ops (OpDef::is_view) alias their first input; the outputs of a
// Split that SplitViewOffsets accepts alias its input at their pieces' offsets (the
// Split then moves no bytes); element-wise ops may run in place on an input (see
// CanRunInPlace).
#pragma once

#include <cstdint>
#include <optional>
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
  int alias_of = -1;     // earlier buffer whose bytes this one is (a view; a piece at alias_offset)
  int in_place_of = -1;  // earlier buffer whose memory this one may reuse
  bool can_run_in_place = false;  // the producer may write over in_place_of
  int64_t alias_offset = 0;  // with alias_of: where in that buffer this one starts (bytes)
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
// an alias that starts before the buffer it aliases, an alias_offset that is
// negative, not a multiple of kArenaAlignment, given without alias_of, or puts the
// alias beyond the end of the buffer it aliases).
absl::StatusOr<MemoryPlan> PlanMemory(absl::Span<const BufferRequest> buffers);

// Byte offset of each output of `node` within its input 0 when `node` is a Split
// whose outputs can be views of its input: the split axis is the outermost non-unit
// axis (every input dim before it is 1), so that each piece is one contiguous byte
// range, and every piece starts at a multiple of kArenaAlignment (the arena's
// alignment, which every kernel relies on for its pointers). nullopt otherwise
// (another op, an untyped or absent value, an inner-axis split, misaligned pieces):
// such a Split copies.
std::optional<std::vector<int64_t>> SplitViewOffsets(const Node& node);

// Whether `node` may write its single output over its input `input_index`: the op is
// element-wise, the input is a non-constant value with the output's dtype and shape,
// it has a single consumer node (this one), and neither it nor any value sharing its
// bytes through views (view ops and Splits that SplitViewOffsets accepts, up to the
// root buffer and down to every view of it) is a graph input or output. (Whether
// the input is last read at this step, and starts its memory block, is checked by
// PlanMemory over the whole alias group.)
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
