// Tests for RemoveIdentity: text graph in, expected text out, outputs unchanged.
#include "graph/remove_identity.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "graph/pass_test_util.h"

namespace kiln {
namespace {

using ::kiln::pass_test::ExpectNoChange;
using ::kiln::pass_test::MustParse;
using ::kiln::pass_test::Print;
using ::kiln::pass_test::RunPass;

TEST(RemoveIdentityTest, RemovesIdentityAndInferenceDropout) {
  const std::string out = RunPass<RemoveIdentity>(R"(
graph @main {
  input %x : f32[2,3]
  const %ratio : f32[] = [0.1]
  const %train : bool[] = [false]
  %a = Identity(%x)
  %b = Relu(%a)
  %c = Identity(%b)
  %d = Dropout(%c, %ratio)
  %e, %mask = Dropout(%d, %ratio, %train)
  %y = Tanh(%e)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[2,3]
  %b : f32[2,3] = Relu(%x)
  %y : f32[2,3] = Tanh(%b)
  output %y
}
)");
}

TEST(RemoveIdentityTest, KeepsGraphOutputsUsedMasksAndTrainingMode) {
  // %i is a graph output (its name must stay); %m is read; %t is computed.
  const std::string in = R"(
graph @main {
  input %x : f32[4]
  %i = Identity(%x)
  %r = Relu(%i)
  %d, %m = Dropout(%r)
  %n = Not(%m)
  output %i
  output %d
  output %n
}
)";
  ExpectNoChange<RemoveIdentity>(in);
}

TEST(RemoveIdentityTest, KeepsDropoutWithNonConstantTrainingMode) {
  std::unique_ptr<Graph> g = MustParse(R"(
graph @main {
  input %x : f32[4]
  input %t : bool[]
  %d = Dropout(%x, _, %t)
  %y = Relu(%d)
  output %y
}
)");
  const std::string before = Print(*g);
  auto changed = RemoveIdentity().Run(*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(Print(*g), before);
}

TEST(RemoveIdentityTest, OnlyTheOutputIdentityOfAChainStays) {
  const std::string out = RunPass<RemoveIdentity>(R"(
graph @main {
  input %x : f32[3]
  %a = Identity(%x)
  %b = Identity(%a)
  %y = Identity(%b)
  output %y
}
)");
  EXPECT_EQ(out, R"(graph @main {
  input %x : f32[3]
  %y : f32[3] = Identity(%x)
  output %y
}
)");
}

}  // namespace
}  // namespace kiln
