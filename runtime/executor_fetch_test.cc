// Executor::TakeOutputSlices: fetched slices are moved out of the executor where that is safe and
// copied where it is not (a variable's value, a buffer two fetched names share).
#include <string>
#include <vector>

#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/ops/graph.h"
#include "core/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"

namespace meshrt {
namespace {

using ::testing::ElementsAre;

// y = -x; the variable v accumulates x (v += x each step).
v1::Program NegAndAccumulate() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"n", 4}}));
  b.MarkOutput(b.Neg(x, "y"));
  TensorRef v = b.Variable("v", Shape({{"n", 4}}));
  b.AssignAdd(v, x, "v_next");
  const Graph graph = Graph::Build(b.proto()).value();
  v1::Program program = Lower(graph, *Mesh::Parse("x:1"), LayoutRules()).value();
  // A second name for y's buffer, as an alias of one tensor under two names would be.
  for (const v1::ProgramTensor& t : program.outputs()) {
    if (t.name() == "y") {
      v1::ProgramTensor* alias = program.add_outputs();
      *alias = t;
      alias->set_name("y_alias");
      break;
    }
  }
  return program;
}

class TakeOutputSlicesTest : public ::testing::Test {
 protected:
  TakeOutputSlicesTest()
      : program_(NegAndAccumulate()),
        hub_(*Mesh::Parse("x:1")),
        executor_(program_, {0}, &CpuKernels(), hub_.communicator(0)) {}

  Executor::StorageFn Counting() {
    return [this](DType dtype, const Shape& shape) {
      ++copies_;
      return Tensor(dtype, shape);
    };
  }
  const std::map<std::string, Tensor> feeds_ = {
      {"x", Tensor::Float(Shape({{"n", 4}}), {1, 2, 3, 4})}};
  int copies_ = 0;
  v1::Program program_;
  LocalCollectiveHub hub_;
  Executor executor_;
};

TEST_F(TakeOutputSlicesTest, AStepsOwnBufferIsMovedOutAndReadsAsNotWrittenAfterwards) {
  ASSERT_OK(executor_.Run(feeds_, {"y"}));
  ASSERT_OK_AND_ASSIGN(auto out, executor_.TakeOutputSlices({"y", "y"}, Counting()));
  ASSERT_EQ(out.size(), 1u);  // a name given twice appears once
  EXPECT_THAT(out.at("y").floats(), ElementsAre(-1, -2, -3, -4));
  EXPECT_EQ(copies_, 0);  // moved, not copied
  EXPECT_TRUE(StatusIs(executor_.OutputSlice("y").status(), absl::StatusCode::kFailedPrecondition,
                       {"'y'"}));
  // The next step computes it again.
  ASSERT_OK(executor_.Run(feeds_, {"y"}));
  EXPECT_THAT(executor_.OutputSlice("y")->floats(), ElementsAre(-1, -2, -3, -4));
}

TEST_F(TakeOutputSlicesTest, AVariablesNewValueIsCopiedAndTheVariableKeepsIt) {
  // v_next is the buffer the variable takes at the end of the step: copied. v (its value at the
  // start of the step) is a step buffer like any other: moved.
  ASSERT_OK(executor_.Run(feeds_, {"v_next", "v"}));
  ASSERT_OK_AND_ASSIGN(auto out, executor_.TakeOutputSlices({"v_next", "v"}, Counting()));
  EXPECT_EQ(copies_, 1);
  EXPECT_THAT(out.at("v_next").floats(), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(out.at("v").floats(), ElementsAre(0, 0, 0, 0));
  // The variable still holds its value: the next step adds to it.
  ASSERT_OK(executor_.Run(feeds_, {"v_next"}));
  ASSERT_OK_AND_ASSIGN(out, executor_.TakeOutputSlices({"v_next"}, Counting()));
  EXPECT_THAT(out.at("v_next").floats(), ElementsAre(2, 4, 6, 8));
  EXPECT_THAT(executor_.variables().at("v").floats(), ElementsAre(2, 4, 6, 8));
}

TEST_F(TakeOutputSlicesTest, ABufferTwoFetchedNamesShareIsCopiedForBoth) {
  ASSERT_OK(executor_.Run(feeds_, {"y", "y_alias"}));
  ASSERT_OK_AND_ASSIGN(auto out, executor_.TakeOutputSlices({"y", "y_alias"}, Counting()));
  EXPECT_EQ(copies_, 2);
  EXPECT_THAT(out.at("y").floats(), ElementsAre(-1, -2, -3, -4));
  EXPECT_THAT(out.at("y_alias").floats(), ElementsAre(-1, -2, -3, -4));
}

TEST_F(TakeOutputSlicesTest, ErrorsNameTheOutput) {
  EXPECT_TRUE(StatusIs(executor_.TakeOutputSlices({"y"}, Counting()).status(),
                       absl::StatusCode::kFailedPrecondition, {"'y'", "has not been computed"}));
  ASSERT_OK(executor_.Run(feeds_, {"y"}));
  EXPECT_TRUE(StatusIs(executor_.TakeOutputSlices({"y", "nope"}, Counting()).status(),
                       absl::StatusCode::kNotFound, {"'nope'"}));
}

}  // namespace
}  // namespace meshrt
