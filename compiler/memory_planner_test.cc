// Tests for the memory planner: an independent plan checker, random buffer sets and
// graphs, hand-built cases and the light ONNX models.
#include "compiler/memory_planner.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx_importer.h"
#include "graph/dtype.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------------------------
// Independent checker: written from the contract in memory_planner.h, sharing no
// code with the planner.
// ---------------------------------------------------------------------------------

int64_t RoundUp256(int64_t x) { return ((x + 255) / 256) * 256; }

struct Dsu {
  std::vector<int> p;
  explicit Dsu(int n) : p(n) {
    for (int i = 0; i < n; ++i) p[i] = i;
  }
  int Root(int x) { return p[x] == x ? x : p[x] = Root(p[x]); }
  void Join(int a, int b) { p[Root(a)] = Root(b); }
};

::testing::AssertionResult CheckPlan(const std::vector<BufferRequest>& bufs, const MemoryPlan& plan) {
  const int n = static_cast<int>(bufs.size());
  std::ostringstream err;
  if (static_cast<int>(plan.offsets.size()) != n || static_cast<int>(plan.in_place.size()) != n) {
    return ::testing::AssertionFailure() << "plan has the wrong number of entries";
  }
  if (plan.arena_bytes % 256 != 0) err << "arena " << plan.arena_bytes << " not 256-aligned\n";
  for (int i = 0; i < n; ++i) {
    const int64_t off = plan.offsets[i];
    if (off < 0 || off % 256 != 0) err << "buffer " << i << " offset " << off << " not 256-aligned\n";
    if (bufs[i].size_bytes > 0 && off + RoundUp256(bufs[i].size_bytes) > plan.arena_bytes) {
      err << "buffer " << i << " [" << off << "," << off + RoundUp256(bufs[i].size_bytes)
          << ") exceeds arena " << plan.arena_bytes << "\n";
    }
    if (bufs[i].alias_of >= 0 && off != plan.offsets[bufs[i].alias_of] + bufs[i].alias_offset) {
      err << "alias " << i << " at " << off << " but its source " << bufs[i].alias_of << " at "
          << plan.offsets[bufs[i].alias_of] << " + " << bufs[i].alias_offset << "\n";
    }
    if (plan.in_place[i]) {
      if (!bufs[i].can_run_in_place || bufs[i].in_place_of < 0 || bufs[i].alias_of >= 0) {
        err << "buffer " << i << " runs in place without a request\n";
      } else if (off != plan.offsets[bufs[i].in_place_of]) {
        err << "in-place buffer " << i << " not at its source's offset\n";
      }
    }
  }
  // Alias classes: buffers that are (parts of) the same bytes; rel[i]: where buffer i
  // starts within its class's first buffer.
  Dsu alias(n);
  std::vector<int64_t> rel(n, 0);
  for (int i = 0; i < n; ++i) {
    if (bufs[i].alias_of >= 0) {
      alias.Join(i, bufs[i].alias_of);
      rel[i] = rel[bufs[i].alias_of] + bufs[i].alias_offset;
    }
  }
  std::map<int, std::pair<int, int>> life;  // class -> [first, last]
  std::map<int, int> latest_first;
  for (int i = 0; i < n; ++i) {
    const int c = alias.Root(i);
    auto [it, fresh] = life.try_emplace(c, bufs[i].first_step, bufs[i].last_step);
    if (!fresh) {
      it->second.first = std::min(it->second.first, bufs[i].first_step);
      it->second.second = std::max(it->second.second, bufs[i].last_step);
    }
    latest_first[c] = std::max(fresh ? bufs[i].first_step : latest_first[c], bufs[i].first_step);
  }
  // Honoured in-place hand-overs: source class -> destination class at step s.
  std::set<std::pair<int, int>> handover;
  for (int i = 0; i < n; ++i) {
    if (!plan.in_place[i] || bufs[i].in_place_of < 0) continue;
    const int src = alias.Root(bufs[i].in_place_of), dst = alias.Root(i);
    if (life[src].second > bufs[i].first_step || latest_first[src] >= bufs[i].first_step) {
      err << "in-place buffer " << i << " overwrites class of buffer " << bufs[i].in_place_of
          << " that is still live or written at step " << bufs[i].first_step << "\n";
    }
    if (rel[bufs[i].in_place_of] != 0) {
      err << "in-place buffer " << i << " over buffer " << bufs[i].in_place_of << ", which does not start its block\n";
    }
    handover.insert({src, dst});
  }
  // No two buffers of different classes whose lifetimes overlap share bytes, except
  // across an in-place hand-over whose only common step is the hand-over step.
  for (int i = 0; i < n; ++i) {
    if (bufs[i].size_bytes == 0) continue;
    for (int j = i + 1; j < n; ++j) {
      if (bufs[j].size_bytes == 0) continue;
      const int ci = alias.Root(i), cj = alias.Root(j);
      if (ci == cj) continue;
      const int64_t bi = plan.offsets[i], ei = bi + RoundUp256(bufs[i].size_bytes);
      const int64_t bj = plan.offsets[j], ej = bj + RoundUp256(bufs[j].size_bytes);
      if (ei <= bj || ej <= bi) continue;
      const auto [fi, li] = life[ci];
      const auto [fj, lj] = life[cj];
      if (li < fj || lj < fi) continue;
      const bool ok = (handover.count({ci, cj}) && li == fj && fi < fj) ||
                      (handover.count({cj, ci}) && lj == fi && fj < fi);
      if (!ok) {
        err << "buffers " << i << " '" << bufs[i].name << "' [" << bi << "," << ei << ") steps [" << fi << ","
            << li << "] and " << j << " '" << bufs[j].name << "' [" << bj << "," << ej << ") steps [" << fj
            << "," << lj << "] overlap\n";
      }
    }
  }
  // Lower bound over memory blocks (alias classes joined by hand-overs).
  Dsu block(n);
  for (int i = 0; i < n; ++i) {
    if (bufs[i].alias_of >= 0) block.Join(i, bufs[i].alias_of);
    if (plan.in_place[i]) block.Join(i, bufs[i].in_place_of);
  }
  // A block's size: its members' largest end (in-place partners start the block).
  std::map<int, std::tuple<int64_t, int, int>> blocks;  // size, first, last
  for (int i = 0; i < n; ++i) {
    const int b = block.Root(i);
    const int64_t end = rel[i] + RoundUp256(bufs[i].size_bytes);
    auto [it, fresh] = blocks.try_emplace(b, end, bufs[i].first_step, bufs[i].last_step);
    if (!fresh) {
      auto& [size, first, last] = it->second;
      size = std::max(size, end);
      first = std::min(first, bufs[i].first_step);
      last = std::max(last, bufs[i].last_step);
    }
  }
  std::set<int> steps;
  for (const auto& [b, t] : blocks) steps.insert(std::get<1>(t));
  int64_t bound = 0;
  for (int s : steps) {
    int64_t live = 0;
    for (const auto& [b, t] : blocks) {
      if (std::get<1>(t) <= s && s <= std::get<2>(t)) live += std::get<0>(t);
    }
    bound = std::max(bound, live);
  }
  if (bound != plan.lower_bound_bytes) err << "lower bound " << plan.lower_bound_bytes << " != " << bound << "\n";
  if (plan.arena_bytes < bound) err << "arena " << plan.arena_bytes << " below the lower bound " << bound << "\n";
  int64_t no_reuse = 0;
  for (int i = 0; i < n; ++i) {
    if (bufs[i].alias_of < 0) no_reuse += RoundUp256(bufs[i].size_bytes);
  }
  if (no_reuse != plan.no_reuse_bytes) err << "no-reuse " << plan.no_reuse_bytes << " != " << no_reuse << "\n";
  const std::string text = err.str();
  if (!text.empty()) return ::testing::AssertionFailure() << text.substr(0, 4000);
  return ::testing::AssertionSuccess();
}

// Graph-level checks on top of CheckPlan: lifetimes recomputed from the graph, views
// share their input's offset, in-place only where the rules allow, graph outputs
// never share bytes with a buffer that is live later.
::testing::AssertionResult CheckGraphPlan(const Graph& graph, const GraphMemoryPlan& gp) {
  ::testing::AssertionResult base = CheckPlan(gp.buffers, gp.plan);
  if (!base) return base;
  std::ostringstream err;
  const std::vector<Node*> nodes = graph.nodes();
  std::map<const Node*, int> step;
  for (int k = 0; k < static_cast<int>(nodes.size()); ++k) step[nodes[k]] = k;
  const int last = std::max(0, static_cast<int>(nodes.size()) - 1);
  for (const Value* v : graph.values()) {
    if (v->is_constant()) continue;
    const bool is_input = graph.IsGraphInput(v);
    if (v->producer() == nullptr && !is_input) continue;
    auto it = gp.buffer_of.find(v);
    if (it == gp.buffer_of.end()) {
      err << "value " << v->name() << " has no buffer\n";
      continue;
    }
    const BufferRequest& b = gp.buffers[it->second];
    const int first = is_input ? 0 : step[v->producer()];
    int end = first;
    for (const Use& u : v->uses()) end = std::max(end, step[u.node]);
    if (graph.IsGraphOutput(v)) end = last;
    if (b.first_step != first || b.last_step != end) {
      err << v->name() << " lifetime [" << b.first_step << "," << b.last_step << "], expected [" << first << ","
          << end << "]\n";
    }
    if (b.size_bytes != v->numel() * static_cast<int64_t>(DTypeSize(v->dtype()))) err << v->name() << " size\n";
    const Node* p = v->producer();
    const std::set<std::string> views = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"};
    if (p != nullptr && views.count(p->op_type()) && p->input(0) && !p->input(0)->is_constant() &&
        gp.OffsetOf(v) != gp.OffsetOf(p->input(0))) {
      err << "view " << v->name() << " does not share its input's offset\n";
    }
    // A Split piece the planner aliased: the split is along the outermost non-unit
    // axis and the piece sits at its input's offset plus the bytes of the pieces
    // before it, a multiple of 256.
    if (p != nullptr && p->op_type() == "Split" && b.alias_of >= 0) {
      const Value* in = p->input(0);
      int64_t axis = p->GetInt("axis", 0).value_or(0);
      if (axis < 0) axis += in->rank();
      int64_t before = 0, inner = DTypeSize(in->dtype());
      for (int64_t d = 0; d < in->rank(); ++d) {
        if (d < axis && in->shape()[d] != 1) err << v->name() << " aliases an inner-axis split\n";
        if (d > axis) inner *= in->shape()[d];
      }
      for (const Value* o : p->outputs()) {
        if (o == v) break;
        before += o->shape()[axis];
      }
      if (gp.values[b.alias_of] != in) err << v->name() << " aliases a value other than its Split's input\n";
      if ((before * inner) % 256 != 0) err << v->name() << " aliased at a misaligned offset\n";
      if (gp.OffsetOf(v) != gp.OffsetOf(in) + before * inner) {
        err << "piece " << v->name() << " at " << gp.OffsetOf(v) << ", expected " << gp.OffsetOf(in) << " + "
            << before * inner << "\n";
      }
    }
    if (gp.plan.in_place[it->second]) {
      const Value* src = gp.values[b.in_place_of];
      if (graph.IsGraphInput(src) || graph.IsGraphOutput(src)) err << v->name() << " overwrites graph I/O\n";
      for (const Use& u : src->uses()) {
        if (u.node != p) err << v->name() << " in place over a value with another consumer\n";
      }
      if (src->dtype() != v->dtype() || src->shape() != v->shape()) err << v->name() << " in place, other type\n";
    }
  }
  const std::string text = err.str();
  if (!text.empty()) return ::testing::AssertionFailure() << text.substr(0, 4000);
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------------
// Graph building helpers: the planner reads only types and op flags, so nodes are
// typed by hand (no shape inference).
// ---------------------------------------------------------------------------------

Value* Typed(Graph& g, const std::string& name, Shape shape, DType dtype = DType::kFloat32) {
  Value* v = g.AddValue(name);
  v->SetType(dtype, std::move(shape));
  return v;
}

Value* Op(Graph& g, const std::string& op, std::vector<Value*> inputs, Shape shape,
          DType dtype = DType::kFloat32) {
  static int counter = 0;
  Value* out = Typed(g, absl::StrCat(op, "_", counter++), std::move(shape), dtype);
  g.AddNode(op, inputs, {out});
  return out;
}

const int64_t kS = 64 * 1024;  // elements of a test tensor: 256 KiB in f32
const Shape kShape = {kS};

// A request with an alias at `offset` bytes into buffer 0.
BufferRequest Piece(const std::string& name, int64_t size, int first, int last, int64_t offset) {
  BufferRequest b{name, size, first, last, /*alias_of=*/0};
  b.alias_offset = offset;
  return b;
}

TEST(PlanMemoryTest, RejectsMalformedRequests) {
  EXPECT_FALSE(PlanMemory({BufferRequest{"a", -1, 0, 0}}).ok());
  EXPECT_FALSE(PlanMemory({BufferRequest{"a", 1, 3, 2}}).ok());
  EXPECT_FALSE(PlanMemory({BufferRequest{"a", 1, 0, 1, /*alias_of=*/0}}).ok());
  EXPECT_FALSE(PlanMemory({BufferRequest{"a", 1, 2, 3}, BufferRequest{"b", 1, 1, 3, /*alias_of=*/0}}).ok());
  // Offset aliases: misaligned, negative, past the end, without alias_of.
  const BufferRequest whole{"p", 1024, 0, 1};
  EXPECT_FALSE(PlanMemory({whole, Piece("x", 256, 1, 2, 128)}).ok());
  EXPECT_FALSE(PlanMemory({whole, Piece("x", 256, 1, 2, -256)}).ok());
  EXPECT_FALSE(PlanMemory({whole, Piece("x", 512, 1, 2, 768)}).ok());
  BufferRequest loose{"x", 256, 1, 2};
  loose.alias_offset = 256;
  EXPECT_FALSE(PlanMemory({whole, loose}).ok());
  EXPECT_TRUE(PlanMemory({whole, Piece("x", 256, 1, 2, 768)}).ok());
  EXPECT_TRUE(PlanMemory({}).ok());
}

// Pieces of a buffer at offsets (a Split along its outer axis): each piece sits at its
// source's offset plus its own, and the whole source stays live while any piece is.
TEST(PlanMemoryTest, OffsetAliasesKeepTheWholeBlockLive) {
  std::vector<BufferRequest> bufs = {
      {"p", 3 * 1024, 0, 1},          // written at 0, split at 1
      Piece("p0", 1024, 1, 2, 0),     // read at 2
      Piece("p1", 1024, 1, 2, 1024),  // read at 2
      Piece("p2", 1000, 1, 6, 2048),  // read until 6
      {"t", 1024, 2, 3},              // could fit where p0/p1 were, were they free
      {"u", 1024, 3, 4},
      {"v", 4096, 5, 6},
  };
  auto plan = PlanMemory(bufs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(CheckPlan(bufs, *plan));
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(plan->offsets[i], plan->offsets[0] + bufs[i].alias_offset) << bufs[i].name;
    EXPECT_EQ(plan->group_of[i], 0);
  }
  // p's block (3 KiB) is live from step 0 to step 6: nothing else may use its bytes.
  const int64_t begin = plan->offsets[0], end = begin + 3 * 1024;
  for (int i = 4; i < 7; ++i) {
    const int64_t b = plan->offsets[i], e = b + RoundUp256(bufs[i].size_bytes);
    EXPECT_TRUE(e <= begin || end <= b) << bufs[i].name << " overlaps p's block";
  }
  EXPECT_EQ(plan->lower_bound_bytes, 3 * 1024 + 4096);
  EXPECT_EQ(plan->no_reuse_bytes, 3 * 1024 + 2 * 1024 + 4096);

  // The checker rejects a piece placed at its source's offset (without its own).
  MemoryPlan bad = *plan;
  bad.offsets[2] = bad.offsets[0];
  EXPECT_FALSE(CheckPlan(bufs, bad));
  // ... and t on p0's bytes, dead by step 2, while p2 keeps the block live.
  bad = *plan;
  bad.offsets[4] = bad.offsets[1];
  EXPECT_FALSE(CheckPlan(bufs, bad));
}

// In place over a piece: only over the piece that starts the block (an element-wise
// op writes element k over element k), and only once every piece is last read there.
TEST(PlanMemoryTest, InPlaceOverPieces) {
  BufferRequest over_p0{"y0", 1024, 2, 3, -1, /*in_place_of=*/1, true};
  BufferRequest over_p1{"y1", 1024, 2, 3, -1, /*in_place_of=*/2, true};
  for (const BufferRequest& request : {over_p0, over_p1}) {
    std::vector<BufferRequest> bufs = {{"p", 2048, 0, 1}, Piece("p0", 1024, 1, 2, 0), Piece("p1", 1024, 1, 2, 1024),
                                       request};
    auto plan = PlanMemory(bufs);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(CheckPlan(bufs, *plan));
    EXPECT_EQ(plan->in_place[3], request.in_place_of == 1) << request.name;
  }
  // p1 is still read at step 3: the block is live, nothing runs in place over p0.
  std::vector<BufferRequest> bufs = {{"p", 2048, 0, 1}, Piece("p0", 1024, 1, 2, 0), Piece("p1", 1024, 1, 3, 1024),
                                     over_p0};
  auto plan = PlanMemory(bufs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(CheckPlan(bufs, *plan));
  EXPECT_FALSE(plan->in_place[3]);
}

TEST(PlanMemoryTest, DisjointLifetimesShareMemory) {
  std::vector<BufferRequest> bufs = {{"a", 1000, 0, 1}, {"b", 1000, 1, 2}, {"c", 1000, 2, 3}};
  auto plan = PlanMemory(bufs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(CheckPlan(bufs, *plan));
  EXPECT_EQ(plan->arena_bytes, 2 * 1024);
  EXPECT_EQ(plan->lower_bound_bytes, 2 * 1024);
  EXPECT_EQ(plan->no_reuse_bytes, 3 * 1024);
  EXPECT_EQ(plan->offsets[0], plan->offsets[2]);
}

TEST(PlanMemoryTest, CheckerCatchesBadPlans) {
  std::vector<BufferRequest> bufs = {{"a", 1000, 0, 2}, {"b", 1000, 1, 3}, {"c", 1000, 3, 3, -1, 1, true}};
  auto plan = PlanMemory(bufs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(CheckPlan(bufs, *plan));
  MemoryPlan bad = *plan;
  bad.offsets[1] = bad.offsets[0];  // a and b are both live at steps 1..2
  EXPECT_FALSE(CheckPlan(bufs, bad));
  bad = *plan;
  bad.offsets[0] += 128;  // unaligned
  EXPECT_FALSE(CheckPlan(bufs, bad));
  bad = *plan;
  bad.arena_bytes -= 256;  // a buffer sticks out
  EXPECT_FALSE(CheckPlan(bufs, bad));
  bad = *plan;
  bad.in_place[2] = false;  // c now overlaps b at step 3 without a hand-over
  if (plan->in_place[2]) {
    EXPECT_FALSE(CheckPlan(bufs, bad));
  }
  EXPECT_TRUE(plan->in_place[2]);
}

TEST(PlanMemoryTest, TwoInPlaceRequestsOnOneSourceAtOneStep) {
  // Both b and c ask for a's memory at step 1: only one may get it.
  std::vector<BufferRequest> bufs = {{"a", 512, 0, 1}, {"b", 512, 1, 1, -1, 0, true}, {"c", 512, 1, 2, -1, 0, true}};
  auto plan = PlanMemory(bufs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(CheckPlan(bufs, *plan));
  EXPECT_TRUE(plan->in_place[1]);
  EXPECT_FALSE(plan->in_place[2]);
}

TEST(PlanMemoryTest, RandomBufferSets) {
  int at_bound = 0;
  for (int seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int n = uni(1, 150);
    const int steps = uni(1, 80);
    std::vector<BufferRequest> bufs;
    for (int i = 0; i < n; ++i) {
      BufferRequest b;
      b.name = absl::StrCat("b", i);
      const int kind = uni(0, 9);
      b.size_bytes = kind == 0 ? 0 : kind < 3 ? uni(1, 300) : uni(1, 1 << 20);
      b.first_step = uni(0, steps - 1);
      b.last_step = std::min(steps - 1, b.first_step + uni(0, kind == 9 ? steps : 6));
      if (i > 0 && uni(0, 9) == 0) {  // a view of an earlier buffer
        const int j = uni(0, i - 1);
        b.alias_of = j;
        b.size_bytes = bufs[j].size_bytes;
        b.first_step = std::max(b.first_step, bufs[j].first_step);
        b.last_step = std::max(b.last_step, b.first_step);
      } else if (i > 0 && uni(0, 9) == 0) {  // a piece of an earlier buffer, at an aligned offset
        const int j = uni(0, i - 1);
        b.alias_of = j;
        b.alias_offset = 256 * uni(0, static_cast<int>(bufs[j].size_bytes / 256));
        b.size_bytes = uni(0, static_cast<int>(bufs[j].size_bytes - b.alias_offset));
        b.first_step = std::max(b.first_step, bufs[j].first_step);
        b.last_step = std::max(b.last_step, b.first_step);
      } else if (i > 0 && uni(0, 4) == 0) {  // an in-place request at the source's last step
        const int j = uni(0, i - 1);
        if (bufs[j].last_step > bufs[j].first_step) {
          b.in_place_of = j;
          b.can_run_in_place = true;
          b.first_step = bufs[j].last_step;
          b.last_step = std::max(b.last_step, b.first_step);
          b.size_bytes = std::min<int64_t>(b.size_bytes, bufs[j].size_bytes);
        }
      }
      bufs.push_back(b);
    }
    auto plan = PlanMemory(bufs);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(CheckPlan(bufs, *plan)) << "seed " << seed;
    EXPECT_LE(plan->arena_bytes, plan->no_reuse_bytes + 0) << "seed " << seed;
    at_bound += plan->arena_bytes == plan->lower_bound_bytes;
  }
  std::cout << "random buffer sets at the lower bound: " << at_bound << "/300\n";
}

// A random DAG over a few shapes and op kinds (matmul-like, element-wise unary and
// binary, dtype-changing Cast, views, multi-consumer fan-out, dead outputs).
std::unique_ptr<Graph> RandomGraph(int seed) {
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto g = std::make_unique<Graph>();
  const std::vector<Shape> shapes = {{4, 64}, {8, 128}, {16, 256}, {1024}, {32, 32, 8}};
  std::vector<Value*> pool;
  const int num_inputs = uni(1, 3);
  for (int i = 0; i < num_inputs; ++i) {
    Value* in = Typed(*g, absl::StrCat("in", i), shapes[uni(0, shapes.size() - 1)]);
    g->AddInput(in);
    pool.push_back(in);
  }
  Value* weight = g->AddConstant("w", Tensor(DType::kFloat32, {4}));
  const int num_nodes = uni(1, 60);
  for (int k = 0; k < num_nodes; ++k) {
    // Prefer recent values so that chains form.
    Value* a = pool[std::max(0, static_cast<int>(pool.size()) - 1 - uni(0, 4))];
    a = uni(0, 5) == 0 ? pool[uni(0, pool.size() - 1)] : a;
    Value* out = nullptr;
    switch (uni(0, 8)) {
      case 0:
      case 1:
        out = Op(*g, "MatMul", {a, weight}, shapes[uni(0, shapes.size() - 1)]);
        break;
      case 2:
        out = Op(*g, uni(0, 1) ? "Relu" : "Sigmoid", {a}, a->shape(), a->dtype());
        break;
      case 3: {
        Value* b = nullptr;
        for (Value* v : pool) {
          if (v != a && v->shape() == a->shape() && v->dtype() == a->dtype() && uni(0, 1)) b = v;
        }
        out = Op(*g, "Add", {a, b ? b : a}, a->shape(), a->dtype());
        break;
      }
      case 4:
        out = Op(*g, "Reshape", {a, weight}, {a->numel()}, a->dtype());
        break;
      case 5:
        out = Op(*g, uni(0, 1) ? "Identity" : "Unsqueeze", {a}, a->shape(), a->dtype());
        break;
      case 6:
        out = Op(*g, "Cast", {a}, a->shape(), a->dtype() == DType::kFloat32 ? DType::kFloat16 : DType::kFloat32);
        break;
      case 7: {  // two outputs, the second often unused
        Value* o1 = Typed(*g, absl::StrCat("split_a", k), a->shape(), a->dtype());
        Value* o2 = Typed(*g, absl::StrCat("split_b", k), a->shape(), a->dtype());
        g->AddNode("Split", {a}, {o1, o2});
        pool.push_back(o2);
        out = o1;
        break;
      }
      case 8: {  // a real Split in two halves: along axis 0 (pieces are views) or the last axis (a copy)
        Shape half = a->shape();
        const int64_t axis = uni(0, 1) ? 0 : static_cast<int64_t>(half.size()) - 1;
        if (half[axis] % 2 != 0) {
          out = Op(*g, "Relu", {a}, a->shape(), a->dtype());
          break;
        }
        half[axis] /= 2;
        Value* o1 = Typed(*g, absl::StrCat("half_a", k), half, a->dtype());
        Value* o2 = Typed(*g, absl::StrCat("half_b", k), half, a->dtype());
        Node* split = g->AddNode("Split", {a}, {o1, o2});
        split->SetAttr("axis", Attribute(axis));
        pool.push_back(o1);
        out = o2;
        break;
      }
    }
    pool.push_back(out);
  }
  g->AddOutput(pool.back());
  for (int i = uni(0, 2); i > 0; --i) {
    Value* v = pool[uni(0, pool.size() - 1)];
    if (!g->IsGraphOutput(v)) g->AddOutput(v);
  }
  return g;
}

TEST(PlanGraphMemoryTest, RandomGraphs) {
  int honoured = 0, pieces = 0;
  for (int seed = 0; seed < 300; ++seed) {
    std::unique_ptr<Graph> g = RandomGraph(seed);
    auto gp = PlanGraphMemory(*g);
    ASSERT_TRUE(gp.ok()) << gp.status();
    ASSERT_TRUE(CheckGraphPlan(*g, *gp)) << "seed " << seed;
    EXPECT_LE(gp->plan.arena_bytes, gp->plan.no_reuse_bytes) << "seed " << seed;
    for (bool b : gp->plan.in_place) honoured += b;
    for (size_t i = 0; i < gp->buffers.size(); ++i) pieces += gp->buffers[i].alias_offset > 0;
  }
  EXPECT_GT(honoured, 0) << "no random graph ran anything in place";
  EXPECT_GT(pieces, 0) << "no random graph has a Split piece aliased at an offset";
}

TEST(PlanGraphMemoryTest, ChainReusesMemory) {
  Graph g;
  Value* in = Typed(g, "in", kShape);
  g.AddInput(in);
  Value* x = in;
  for (int i = 0; i < 6; ++i) x = Op(g, "MatMul", {x}, kShape);
  g.AddOutput(x);
  auto gp = PlanGraphMemory(g);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_TRUE(CheckGraphPlan(g, *gp));
  EXPECT_EQ(gp->plan.arena_bytes, 2 * kS * 4);
  EXPECT_EQ(gp->plan.lower_bound_bytes, 2 * kS * 4);
  EXPECT_EQ(gp->plan.no_reuse_bytes, 7 * kS * 4);
}

TEST(PlanGraphMemoryTest, Diamond) {
  Graph g;
  Value* in = Typed(g, "in", kShape);
  g.AddInput(in);
  Value* a = Op(g, "MatMul", {in}, kShape);
  Value* b = Op(g, "MatMul", {a}, kShape);
  Value* c = Op(g, "MatMul", {a}, kShape);
  Value* d = Op(g, "Add", {b, c}, kShape);
  Value* e = Op(g, "MatMul", {d}, kShape);
  g.AddOutput(e);
  auto gp = PlanGraphMemory(g);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_TRUE(CheckGraphPlan(g, *gp));
  // Step 2 holds a, b, c; d runs in place over b.
  EXPECT_EQ(gp->plan.lower_bound_bytes, 3 * kS * 4);
  EXPECT_EQ(gp->plan.arena_bytes, 3 * kS * 4);
  EXPECT_TRUE(gp->plan.in_place[gp->buffer_of.at(d)]);
  EXPECT_EQ(gp->OffsetOf(d), gp->OffsetOf(b));
  EXPECT_NE(gp->OffsetOf(b), gp->OffsetOf(c));
}

TEST(PlanGraphMemoryTest, ViewChainAliasesAndExtendsLifetime) {
  Graph g;
  Value* in = Typed(g, "in", kShape);
  g.AddInput(in);
  Value* r = Op(g, "MatMul", {in}, kShape);
  Value* v1 = Op(g, "Reshape", {r}, {256, kS / 256});
  Value* v2 = Op(g, "Flatten", {v1}, {256, kS / 256});
  Value* v3 = Op(g, "Unsqueeze", {v2}, {1, 256, kS / 256});
  Value* v4 = Op(g, "Squeeze", {v3}, {256, kS / 256});
  Value* m1 = Op(g, "MatMul", {in}, kShape);   // live while r's views are
  Value* m2 = Op(g, "MatMul", {m1}, kShape);
  Value* out = Op(g, "MatMul", {v4, m2}, kShape);
  g.AddOutput(out);
  auto gp = PlanGraphMemory(g);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_TRUE(CheckGraphPlan(g, *gp));
  for (const Value* v : {v1, v2, v3, v4}) EXPECT_EQ(gp->OffsetOf(v), gp->OffsetOf(r)) << v->name();
  EXPECT_EQ(gp->plan.group_of[gp->buffer_of.at(v4)], gp->buffer_of.at(r));
  // r's block lives until `out` reads v4, so m1, m2 and out cannot take it.
  for (const Value* v : {m1, m2, out}) EXPECT_NE(gp->OffsetOf(v), gp->OffsetOf(r)) << v->name();
  EXPECT_EQ(gp->plan.no_reuse_bytes, 5 * kS * 4);
}

TEST(PlanGraphMemoryTest, ElementwiseRunsInPlace) {
  Graph g;
  Value* in = Typed(g, "in", kShape);
  g.AddInput(in);
  Value* a = Op(g, "MatMul", {in}, kShape);
  Value* b = Op(g, "Relu", {a}, kShape);
  Value* c = Op(g, "Sigmoid", {b}, kShape);
  Value* h = Op(g, "Cast", {c}, kShape, DType::kFloat16);  // other dtype: not in place
  Value* d = Op(g, "Relu", {h}, kShape, DType::kFloat16);   // in place over h
  Value* e = Op(g, "MatMul", {d}, kShape);
  Value* f = Op(g, "Relu", {e}, kShape);                    // e has two consumers
  Value* out = Op(g, "Add", {e, f}, kShape);                // in place over f? no: e read later? both end here
  g.AddOutput(out);
  auto gp = PlanGraphMemory(g);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_TRUE(CheckGraphPlan(g, *gp));
  auto in_place = [&](const Value* v) { return gp->plan.in_place[gp->buffer_of.at(v)]; };
  EXPECT_FALSE(in_place(a));
  EXPECT_TRUE(in_place(b));
  EXPECT_TRUE(in_place(c));
  EXPECT_EQ(gp->OffsetOf(a), gp->OffsetOf(c));
  EXPECT_FALSE(in_place(h));
  EXPECT_TRUE(in_place(d));
  EXPECT_FALSE(in_place(f));
  EXPECT_TRUE(in_place(out));  // over f: its single consumer, last read here
  EXPECT_EQ(gp->OffsetOf(out), gp->OffsetOf(f));
  EXPECT_FALSE(CanRunInPlace(g, *e->uses()[0].node, 0));
}

TEST(PlanGraphMemoryTest, GraphOutputsAndInputsAreNeverOverwritten) {
  Graph g;
  Value* in = Typed(g, "in", kShape);
  g.AddInput(in);
  Value* r = Op(g, "Relu", {in}, kShape);  // not over the graph input
  Value* y = Op(g, "MatMul", {r}, kShape);
  g.AddOutput(y);
  Value* z = Op(g, "Relu", {y}, kShape);   // not over the graph output y
  Value* v = Op(g, "Reshape", {z}, {256, kS / 256});
  g.AddOutput(v);                          // z is a view of an output:
  Value* w = Op(g, "MatMul", {z}, kShape);
  Value* t = Op(g, "Relu", {w}, kShape);
  Value* u = Op(g, "MatMul", {t}, kShape);
  g.AddOutput(u);
  auto gp = PlanGraphMemory(g);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_TRUE(CheckGraphPlan(g, *gp));
  auto in_place = [&](const Value* x) { return gp->plan.in_place[gp->buffer_of.at(x)]; };
  EXPECT_FALSE(in_place(r));
  EXPECT_FALSE(in_place(z));
  EXPECT_TRUE(in_place(t));
  const int last = g.num_nodes() - 1;
  EXPECT_EQ(gp->buffers[gp->buffer_of.at(y)].last_step, last);
  EXPECT_EQ(gp->plan.group_of[gp->buffer_of.at(v)], gp->buffer_of.at(z));
  // Nothing produced after y shares its bytes.
  const int64_t yb = gp->OffsetOf(y), ye = yb + kS * 4;
  for (const Value* x : {z, w, t, u}) {
    const int64_t b = gp->OffsetOf(x), e = b + kS * 4;
    EXPECT_TRUE(e <= yb || ye <= b) << x->name() << " overlaps the graph output";
  }
}

// Split(p [3, 64] f32, axis 0): each [1, 64] piece is 256 bytes of p. The pieces
// are views at offsets 0, 256, 512, and p's bytes stay reserved while any piece lives.
TEST(PlanGraphMemoryTest, OuterAxisSplitPiecesAreViews) {
  Graph g;
  Value* in = Typed(g, "in", {3, 64});
  g.AddInput(in);
  Value* p = Op(g, "MatMul", {in}, {3, 64});
  std::vector<Value*> pieces;
  for (int i = 0; i < 3; ++i) pieces.push_back(Typed(g, absl::StrCat("piece", i), {1, 64}));
  Node* split = g.AddNode("Split", {p}, pieces);
  split->SetAttr("axis", Attribute(int64_t{0}));
  Value* a = Op(g, "Relu", {pieces[0]}, {1, 64});   // not in place: p1 and p2 are read later
  Value* b = Op(g, "MatMul", {pieces[1]}, {1, 64});
  Value* c = Op(g, "MatMul", {a, b}, {1, 64});
  Value* d = Op(g, "Add", {c, pieces[2]}, {1, 64}); // p2 read last: in place over c instead
  g.AddOutput(d);
  ASSERT_EQ(SplitViewOffsets(*split), (std::vector<int64_t>{0, 256, 512}));
  auto gp = PlanGraphMemory(g);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_TRUE(CheckGraphPlan(g, *gp));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(gp->OffsetOf(pieces[i]), gp->OffsetOf(p) + 256 * i);
    EXPECT_EQ(gp->plan.group_of[gp->buffer_of.at(pieces[i])], gp->buffer_of.at(p));
  }
  EXPECT_FALSE(gp->plan.in_place[gp->buffer_of.at(a)]);
  // Nothing produced while p2 lives (through step 5) takes p's bytes.
  const int64_t pb = gp->OffsetOf(p), pe = pb + 3 * 256;
  for (const Value* v : {a, b, c}) {
    const int64_t vb = gp->OffsetOf(v), ve = vb + 256;
    EXPECT_TRUE(ve <= pb || pe <= vb) << v->name() << " overlaps the split input";
  }
  EXPECT_EQ(gp->plan.no_reuse_bytes, (3 + 3 + 4) * 256);  // in, p, a..d: pieces are not buffers of their own
}

// Splits whose pieces are not contiguous, aligned byte ranges of the input copy.
TEST(PlanGraphMemoryTest, SplitsThatMustNotAlias) {
  struct Case {
    const char* what;
    Shape in;
    int64_t axis;
    std::vector<Shape> outs;
    DType dtype = DType::kFloat32;
  };
  const std::vector<Case> cases = {
      {"inner axis", {4, 64}, 1, {{4, 32}, {4, 32}}},
      {"inner axis (negative)", {4, 64}, -1, {{4, 32}, {4, 32}}},
      {"a non-unit dim before the axis", {2, 4, 64}, 1, {{2, 2, 64}, {2, 2, 64}}},
      {"misaligned pieces (40 bytes)", {3, 10}, 0, {{1, 10}, {2, 10}}},
      {"misaligned pieces (f16, 128 bytes)", {2, 64}, 0, {{1, 64}, {1, 64}}, DType::kFloat16},
      {"misaligned second piece", {4, 64}, 0, {{1, 64}, {1, 64}, {2, 64}}, DType::kFloat16},
  };
  for (const Case& c : cases) {
    Graph g;
    Value* in = Typed(g, "in", c.in, c.dtype);
    g.AddInput(in);
    Value* p = Op(g, "Relu", {in}, c.in, c.dtype);
    std::vector<Value*> outs;
    for (size_t i = 0; i < c.outs.size(); ++i) outs.push_back(Typed(g, absl::StrCat("o", i), c.outs[i], c.dtype));
    Node* split = g.AddNode("Split", {p}, outs);
    split->SetAttr("axis", Attribute(c.axis));
    for (Value* o : outs) g.AddOutput(o);
    EXPECT_FALSE(SplitViewOffsets(*split).has_value()) << c.what;
    auto gp = PlanGraphMemory(g);
    ASSERT_TRUE(gp.ok()) << gp.status();
    EXPECT_TRUE(CheckGraphPlan(g, *gp)) << c.what;
    for (const Value* o : outs) EXPECT_EQ(gp->buffers[gp->buffer_of.at(o)].alias_of, -1) << c.what;
  }
  // Outer non-unit axis after unit dims, unequal but aligned pieces: views.
  Graph g;
  Value* in = Typed(g, "in", {1, 4, 64}, DType::kFloat16);
  g.AddInput(in);
  Value* o0 = Typed(g, "o0", {1, 2, 64}, DType::kFloat16);
  Value* o1 = Typed(g, "o1", {1, 2, 64}, DType::kFloat16);
  Node* split = g.AddNode("Split", {in}, {o0, o1});
  split->SetAttr("axis", Attribute(int64_t{-2}));
  g.AddOutput(o0);
  g.AddOutput(o1);
  EXPECT_EQ(SplitViewOffsets(*split), (std::vector<int64_t>{0, 256}));
  auto gp = PlanGraphMemory(g);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_TRUE(CheckGraphPlan(g, *gp));
  EXPECT_EQ(gp->OffsetOf(o1), gp->OffsetOf(in) + 256);  // a view of the graph input
}

// Pieces of a graph input are bytes of the input: nothing runs in place over them.
TEST(PlanGraphMemoryTest, NoInPlaceOverPiecesOfGraphInputs) {
  Graph g;
  Value* in = Typed(g, "in", {2, 64});
  g.AddInput(in);
  Value* o0 = Typed(g, "o0", {1, 64});
  Value* o1 = Typed(g, "o1", {1, 64});
  Node* split = g.AddNode("Split", {in}, {o0, o1});
  split->SetAttr("axis", Attribute(int64_t{0}));
  Value* r = Op(g, "Relu", {o1}, {1, 64});
  Value* s = Op(g, "Relu", {o0}, {1, 64});
  Value* y = Op(g, "Add", {r, s}, {1, 64});
  g.AddOutput(y);
  EXPECT_FALSE(CanRunInPlace(g, *r->producer(), 0));
  EXPECT_FALSE(CanRunInPlace(g, *s->producer(), 0));
  auto gp = PlanGraphMemory(g);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_TRUE(CheckGraphPlan(g, *gp));
  EXPECT_EQ(gp->OffsetOf(o1), gp->OffsetOf(in) + 256);
  EXPECT_TRUE(gp->plan.in_place[gp->buffer_of.at(y)]);  // over r: an ordinary intermediate
}

TEST(PlanGraphMemoryTest, RejectsUnsortedGraph) {
  Graph g;
  Value* in = Typed(g, "in", kShape);
  g.AddInput(in);
  Value* a = Typed(g, "a", kShape);
  Value* b = Typed(g, "b", kShape);
  g.AddNode("Relu", {a}, {b});
  g.AddNode("Relu", {in}, {a});
  g.AddOutput(b);
  auto gp = PlanGraphMemory(g);
  EXPECT_EQ(gp.status().code(), absl::StatusCode::kFailedPrecondition) << gp.status();
}

TEST(PlanGraphMemoryDataTest, LightModels) {
  const char* data = std::getenv("KILN_ONNX_DATA");
  if (data == nullptr || *data == '\0') {
    GTEST_SKIP() << "KILN_ONNX_DATA is not set; point it at the ONNX backend test data (e.g. ../shared/data/onnx)";
  }
  const std::filesystem::path dir = std::filesystem::path(data) / "light";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is missing";
  std::vector<std::string> models;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".onnx") models.push_back(entry.path().string());
  }
  std::sort(models.begin(), models.end());
  ASSERT_FALSE(models.empty());
  for (const std::string& path : models) {
    auto graph = ImportOnnxFile(path);
    ASSERT_TRUE(graph.ok()) << graph.status();
    auto gp = PlanGraphMemory(**graph);
    ASSERT_TRUE(gp.ok()) << path << ": " << gp.status();
    EXPECT_TRUE(CheckGraphPlan(**graph, *gp)) << path;
    const double ratio = static_cast<double>(gp->plan.arena_bytes) / std::max<int64_t>(1, gp->plan.lower_bound_bytes);
    std::cout << std::filesystem::path(path).stem().string() << ": arena " << gp->plan.arena_bytes << " bound "
              << gp->plan.lower_bound_bytes << " ratio " << ratio << "\n";
    EXPECT_LE(ratio, 1.02) << path;
  }
}

}  // namespace
}  // namespace kiln
