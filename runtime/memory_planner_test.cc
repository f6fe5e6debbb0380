// Tests for the memory planner: an independent plan checker, random buffer sets and
// graphs, hand-built cases and the light ONNX models.
#include "runtime/memory_planner.h"

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
    if (bufs[i].alias_of >= 0 && off != plan.offsets[bufs[i].alias_of]) {
      err << "alias " << i << " at " << off << " but its root " << bufs[i].alias_of << " at "
          << plan.offsets[bufs[i].alias_of] << "\n";
    }
    if (plan.in_place[i]) {
      if (!bufs[i].can_run_in_place || bufs[i].in_place_of < 0 || bufs[i].alias_of >= 0) {
        err << "buffer " << i << " runs in place without a request\n";
      } else if (off != plan.offsets[bufs[i].in_place_of]) {
        err << "in-place buffer " << i << " not at its source's offset\n";
      }
    }
  }
  // Alias classes: buffers that are the same bytes.
  Dsu alias(n);
  for (int i = 0; i < n; ++i) {
    if (bufs[i].alias_of >= 0) alias.Join(i, bufs[i].alias_of);
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
  std::map<int, std::tuple<int64_t, int, int>> blocks;  // size, first, last
  for (int i = 0; i < n; ++i) {
    const int b = block.Root(i);
    auto [it, fresh] = blocks.try_emplace(b, RoundUp256(bufs[i].size_bytes), bufs[i].first_step, bufs[i].last_step);
    if (!fresh) {
      auto& [size, first, last] = it->second;
      size = std::max(size, RoundUp256(bufs[i].size_bytes));
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

TEST(PlanMemoryTest, RejectsMalformedRequests) {
  EXPECT_FALSE(PlanMemory({BufferRequest{"a", -1, 0, 0}}).ok());
  EXPECT_FALSE(PlanMemory({BufferRequest{"a", 1, 3, 2}}).ok());
  EXPECT_FALSE(PlanMemory({BufferRequest{"a", 1, 0, 1, /*alias_of=*/0}}).ok());
  EXPECT_FALSE(PlanMemory({BufferRequest{"a", 1, 2, 3}, BufferRequest{"b", 1, 1, 3, /*alias_of=*/0}}).ok());
  EXPECT_TRUE(PlanMemory({}).ok());
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
    switch (uni(0, 7)) {
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
  int honoured = 0;
  for (int seed = 0; seed < 300; ++seed) {
    std::unique_ptr<Graph> g = RandomGraph(seed);
    auto gp = PlanGraphMemory(*g);
    ASSERT_TRUE(gp.ok()) << gp.status();
    ASSERT_TRUE(CheckGraphPlan(*g, *gp)) << "seed " << seed;
    EXPECT_LE(gp->plan.arena_bytes, gp->plan.no_reuse_bytes) << "seed " << seed;
    for (bool b : gp->plan.in_place) honoured += b;
  }
  EXPECT_GT(honoured, 0) << "no random graph ran anything in place";
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
