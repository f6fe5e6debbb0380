// Tests for EliminateDeadCode.
#include "graph/eliminate_dead_code.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(EliminateDeadCodeTest, RemovesDeadChainKeepsLivePath) {
  Graph g;
  Value* x = g.AddValue("x");
  g.AddInput(x);
  Value* a = g.AddValue("a");
  Value* dead1 = g.AddValue("dead1");
  Value* dead2 = g.AddValue("dead2");
  g.AddNode("Relu", {x}, {a}, "live");
  g.AddNode("Neg", {x}, {dead1}, "d1");
  g.AddNode("Neg", {dead1}, {dead2}, "d2");
  g.AddOutput(a);
  auto changed = EliminateDeadCode().Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  ASSERT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(g.nodes()[0]->name(), "live");
  EXPECT_EQ(g.FindValue("dead2"), nullptr);
  EXPECT_TRUE(x->uses().size() == 1);
}

TEST(EliminateDeadCodeTest, DoesNotFireWhenEverythingIsLive) {
  Graph g;
  Value* x = g.AddValue("x");
  g.AddInput(x);
  Value* a = g.AddValue("a");
  Value* b = g.AddValue("b");
  g.AddNode("Relu", {x}, {a});
  g.AddNode("Neg", {a}, {b});
  g.AddOutput(a);  // an intermediate that is also a graph output stays
  g.AddOutput(b);
  auto changed = EliminateDeadCode().Run(g);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(g.num_nodes(), 2);
}

}  // namespace
}  // namespace kiln
