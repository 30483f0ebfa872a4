#include "runtime/simulated_mesh.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/test_kernels.h"

namespace meshrt {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Text-format pieces of a program. `shape` is "a:4,b:2"; `layout` is "0,-1".
std::string ShapeText(const std::string& shape) {
  std::string out;
  const Shape parsed = *Shape::Parse(shape);
  for (const Dim& d : parsed.dims()) {
    absl::StrAppend(&out, "dims { name: '", d.name, "' size: ", d.size, " } ");
  }
  return out;
}

std::string TensorText(const std::string& name, int buffer, const std::string& shape,
                       const std::string& layout, const std::string& dtype = "DT_FLOAT32") {
  return absl::StrCat("name: '", name, "' buffer: ", buffer, " shape { ", ShapeText(shape),
                      "} dtype: ", dtype, " layout { mesh_axis: [", layout, "] }");
}

std::string MeshText(const std::string& mesh) {
  return absl::StrCat("mesh { ", ShapeText(mesh), "}");
}

class SimulatedMeshTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::map<std::string, Tensor>> Run(const std::string& text,
                                                    const std::map<std::string, Tensor>& feeds) {
    program_ = ParseProgram(text);
    SimulatedMeshOptions options;
    options.kernels = &kernels_;
    options.timeout = absl::Seconds(30);
    return RunOnSimulatedMesh(program_, feeds, options);
  }

  TestKernels kernels_;
  v1::Program program_;
};

TEST_F(SimulatedMeshTest, AllGatherAlongAxis1OnTwoProcessors) {
  // x [r:2, c:4] split over x:2 along c; gathering along c replicates it.
  const std::string text = absl::StrCat(
      MeshText("x:2"), " num_buffers: 2 inputs { ", TensorText("a", 0, "r:2,c:4", "-1,0"), " }",
      " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("r:2,c:4"),
      "} dtype: DT_FLOAT32 source_op: 'g' collective { kind: ALLGATHER mesh_axes: 0 "
      "concat_axis: 1 } }",
      " outputs { ", TensorText("g", 1, "r:2,c:4", "-1,-1"), " }");
  ASSERT_OK_AND_ASSIGN(auto out, Run(text, {{"a", IotaFloat(Shape{{"r", 2}, {"c", 4}})}}));
  EXPECT_THAT(out.at("g").floats(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST_F(SimulatedMeshTest, AllToAllMovesSplitFromDim0ToDim1On2x2) {
  // a over rows -> b over rows; cols replicate (so copies are checked too).
  const std::string text =
      absl::StrCat(MeshText("rows:2,cols:2"), " num_buffers: 2 inputs { ",
                   TensorText("x", 0, "a:4,b:4", "0,-1", "DT_INT32"), " }",
                   " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("a:4,b:2"),
                   "} dtype: DT_INT32 source_op: 'y' collective { kind: ALLTOALL mesh_axes: 0 "
                   "split_axis: 1 concat_axis: 0 } }",
                   " outputs { ", TensorText("y", 1, "a:4,b:4", "-1,0", "DT_INT32"), " }");
  const Tensor x = IotaInt(Shape{{"a", 4}, {"b", 4}});
  ASSERT_OK_AND_ASSIGN(auto out, Run(text, {{"x", x}}));
  EXPECT_EQ(out.at("y").shape(), x.shape());
  EXPECT_THAT(out.at("y").ints(), ElementsAreArray(x.ints()));
}

TEST_F(SimulatedMeshTest, AllToAllWithEqualSplitAndConcatPermutesBlocks) {
  // Rank r receives piece r of every sender: [x0 x1 | x2 x3] -> [x0 x2 | x1 x3].
  const std::string text =
      absl::StrCat(MeshText("x:2"), " num_buffers: 2 inputs { ", TensorText("x", 0, "a:4", "0"),
                   " }", " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("a:2"),
                   "} dtype: DT_FLOAT32 collective { kind: ALLTOALL mesh_axes: 0 split_axis: 0 "
                   "concat_axis: 0 } }",
                   " outputs { ", TensorText("p", 1, "a:4", "0"), " }");
  ASSERT_OK_AND_ASSIGN(auto out, Run(text, {{"x", IotaFloat(Shape{{"a", 4}})}}));
  EXPECT_THAT(out.at("p").floats(), ElementsAre(0, 2, 1, 3));
}

TEST_F(SimulatedMeshTest, LocalSlicesOnBothMeshAxes) {
  // Replicated x -> b split over cols -> a split over rows as well.
  const std::string text =
      absl::StrCat(MeshText("rows:2,cols:3"), " num_buffers: 3 inputs { ",
                   TensorText("x", 0, "a:2,b:6", "-1,-1"), " }",
                   " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("a:2,b:2"),
                   "} dtype: DT_FLOAT32 local_slice { mesh_axis: 1 axis: 1 } }",
                   " instructions { output: 2 inputs: 1 slice_shape { ", ShapeText("a:1,b:2"),
                   "} dtype: DT_FLOAT32 local_slice { mesh_axis: 0 axis: 0 } }", " outputs { ",
                   TensorText("y", 1, "a:2,b:6", "-1,1"), " }", " outputs { ",
                   TensorText("z", 2, "a:2,b:6", "0,1"), " }");
  const Tensor x = IotaFloat(Shape{{"a", 2}, {"b", 6}});
  ASSERT_OK_AND_ASSIGN(auto out, Run(text, {{"x", x}}));
  EXPECT_THAT(out.at("y").floats(), ElementsAreArray(x.floats()));
  EXPECT_THAT(out.at("z").floats(), ElementsAreArray(x.floats()));
}

TEST_F(SimulatedMeshTest, ReduceScatterOfPartialSums) {
  // x [k:2, a:4] split over k; each processor sums its k rows, then reduce-scatter along a:
  // s[j] = sum_k x[k, j], split over x:2.
  const std::string text = absl::StrCat(
      MeshText("x:2"), " num_buffers: 3 inputs { ", TensorText("x", 0, "k:2,a:4", "0,-1"), " }",
      " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("a:4"),
      "} dtype: DT_FLOAT32 local { type: 'sum_leading' } }",
      " instructions { output: 2 inputs: 1 slice_shape { ", ShapeText("a:2"),
      "} dtype: DT_FLOAT32 source_op: 's' collective { kind: REDUCE_SCATTER mesh_axes: 0 "
      "reduce_op: REDUCE_SUM split_axis: 0 } }",
      " outputs { ", TensorText("s", 2, "a:4", "0"), " }");
  // x = [[0 1 2 3], [4 5 6 7]].
  ASSERT_OK_AND_ASSIGN(auto out, Run(text, {{"x", IotaFloat(Shape{{"k", 2}, {"a", 4}})}}));
  EXPECT_THAT(out.at("s").floats(), ElementsAre(4, 6, 8, 10));
}

TEST_F(SimulatedMeshTest, AllReduceOverBothAxesOf2x2) {
  // Each processor sums its [2,3] block of x [a:4, b:6]; SUM and MAX over the whole mesh.
  const std::string text = absl::StrCat(
      MeshText("rows:2,cols:2"), " num_buffers: 4 inputs { ",
      TensorText("x", 0, "a:4,b:6", "0,1", "DT_INT32"), " }",
      " instructions { output: 1 inputs: 0 dtype: DT_INT32 local { type: 'sum_all' } }",
      " instructions { output: 2 inputs: 1 dtype: DT_INT32 collective { kind: ALLREDUCE "
      "mesh_axes: [0, 1] reduce_op: REDUCE_SUM } }",
      " instructions { output: 3 inputs: 1 dtype: DT_INT32 collective { kind: ALLREDUCE "
      "mesh_axes: [1, 0] reduce_op: REDUCE_MAX } }",
      " outputs { ", TensorText("total", 2, "", "", "DT_INT32"), " }", " outputs { ",
      TensorText("largest", 3, "", "", "DT_INT32"), " }");
  const Tensor x = IotaInt(Shape{{"a", 4}, {"b", 6}});
  int32_t largest = 0;
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 2; ++c) {
      int32_t block = 0;
      for (int i = 2 * r; i < 2 * r + 2; ++i) {
        for (int j = 3 * c; j < 3 * c + 3; ++j) block += 6 * i + j;
      }
      largest = std::max(largest, block);
    }
  }
  ASSERT_OK_AND_ASSIGN(auto out, Run(text, {{"x", x}}));
  EXPECT_THAT(out.at("total").ints(), ElementsAre(276));  // 0 + 1 + ... + 23
  EXPECT_THAT(out.at("largest").ints(), ElementsAre(largest));
  EXPECT_EQ(largest, 15 + 16 + 17 + 21 + 22 + 23);  // block (1,1): rows 2-3, cols 3-5
}

TEST_F(SimulatedMeshTest, AllGatherOnTheMiddleAxisOfA3DMesh) {
  const std::string text = absl::StrCat(
      MeshText("x:2,y:2,z:2"), " num_buffers: 3 inputs { ",
      TensorText("t", 0, "a:2,b:4,c:2", "0,1,2"), " }",
      " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("a:1,b:4,c:1"),
      "} dtype: DT_FLOAT32 collective { kind: ALLGATHER mesh_axes: 1 concat_axis: 1 } }",
      " instructions { output: 2 inputs: [1, 1] slice_shape { ", ShapeText("a:1,b:4,c:1"),
      "} dtype: DT_FLOAT32 local { type: 'add' } }", " outputs { ",
      TensorText("g", 1, "a:2,b:4,c:2", "0,-1,2"), " }", " outputs { ",
      TensorText("twice", 2, "a:2,b:4,c:2", "0,-1,2"), " }");
  const Tensor t = IotaFloat(Shape{{"a", 2}, {"b", 4}, {"c", 2}});
  ASSERT_OK_AND_ASSIGN(auto out, Run(text, {{"t", t}}));
  EXPECT_THAT(out.at("g").floats(), ElementsAreArray(t.floats()));
  std::vector<float> twice;
  for (float v : t.floats()) twice.push_back(2 * v);
  EXPECT_THAT(out.at("twice").floats(), ElementsAreArray(twice));
}

TEST_F(SimulatedMeshTest, GroupOfOneIsACopy) {
  const std::string text = absl::StrCat(
      MeshText("x:1"), " num_buffers: 2 inputs { ", TensorText("a", 0, "n:3", "0"), " }",
      " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("n:3"),
      "} dtype: DT_FLOAT32 collective { kind: ALLGATHER mesh_axes: 0 concat_axis: 0 } }",
      " outputs { ", TensorText("b", 1, "n:3", "-1"), " }");
  ASSERT_OK_AND_ASSIGN(auto out, Run(text, {{"a", IotaFloat(Shape{{"n", 3}})}}));
  EXPECT_THAT(out.at("b").floats(), ElementsAre(0, 1, 2));
}

TEST_F(SimulatedMeshTest, BadFeedsAreInvalidArgument) {
  const std::string text = absl::StrCat(MeshText("x:2"), " num_buffers: 1 inputs { ",
                                        TensorText("a", 0, "n:4", "0"), " }");
  EXPECT_TRUE(StatusIs(Run(text, {}).status(), absl::StatusCode::kInvalidArgument,
                       {"missing feed", "placeholder 'a'"}));
  EXPECT_TRUE(StatusIs(Run(text, {{"a", IotaFloat(Shape{{"n", 6}})}}).status(),
                       absl::StatusCode::kInvalidArgument, {"placeholder 'a'", "[n:6]", "[n:4]"}));
  EXPECT_TRUE(StatusIs(Run(text, {{"a", IotaInt(Shape{{"n", 4}})}}).status(),
                       absl::StatusCode::kInvalidArgument, {"placeholder 'a'", "int32"}));
  EXPECT_TRUE(StatusIs(
      Run(text, {{"a", IotaFloat(Shape{{"n", 4}})}, {"b", IotaFloat(Shape{{"n", 4}})}}).status(),
      absl::StatusCode::kInvalidArgument, {"feed 'b'"}));
}

TEST_F(SimulatedMeshTest, FailingProcessorReleasesTheOthers) {
  // Processor 3 of x:4 holds the negative element; the others wait in the allreduce until the
  // abort releases them. The 30 s timeout must not be what ends the run.
  const std::string text = absl::StrCat(
      MeshText("x:4"), " num_buffers: 3 inputs { ", TensorText("a", 0, "n:4", "0"), " }",
      " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("n:1"),
      "} dtype: DT_FLOAT32 source_op: 'check' local { type: 'fail_if_negative' } }",
      " instructions { output: 2 inputs: 1 slice_shape { ", ShapeText("n:1"),
      "} dtype: DT_FLOAT32 collective { kind: ALLREDUCE mesh_axes: 0 reduce_op: REDUCE_SUM } }",
      " outputs { ", TensorText("b", 2, "n:4", "0"), " }");
  const absl::Time start = absl::Now();
  auto result = Run(text, {{"a", Tensor::Float(Shape{{"n", 4}}, {1, 2, 3, -4})}});
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(StatusIs(result.status(), absl::StatusCode::kInvalidArgument,
                       {"processor 3 (3)", "instruction 0", "source_op 'check'",
                        "local op 'fail_if_negative'", "negative value -4"}));
}

TEST_F(SimulatedMeshTest, StuckProcessorMakesTheOthersTimeOut) {
  // Processor 3 is slower than the 200 ms collective timeout; the others give up waiting for it.
  const std::string text =
      absl::StrCat(MeshText("x:4"), " num_buffers: 3 inputs { ", TensorText("a", 0, "n:4", "0"),
                   " }", " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("n:1"),
                   "} dtype: DT_FLOAT32 local { type: 'slow_if_negative' } }",
                   " instructions { output: 2 inputs: 1 slice_shape { ", ShapeText("n:1"),
                   "} dtype: DT_FLOAT32 source_op: 'sum' collective { kind: ALLREDUCE mesh_axes: 0 "
                   "reduce_op: REDUCE_SUM } }",
                   " outputs { ", TensorText("b", 2, "n:4", "0"), " }");
  program_ = ParseProgram(text);
  SimulatedMeshOptions options;
  options.kernels = &kernels_;
  options.timeout = absl::Milliseconds(200);
  const absl::Time start = absl::Now();
  auto result =
      RunOnSimulatedMesh(program_, {{"a", Tensor::Float(Shape{{"n", 4}}, {1, 2, 3, -4})}}, options);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_TRUE(StatusIs(result.status(), absl::StatusCode::kDeadlineExceeded,
                       {"instruction 1", "source_op 'sum'", "AllReduce over mesh axes [x]",
                        "missing processors (3)"}));
}

TEST_F(SimulatedMeshTest, DisagreeingReplicasAreAnInternalError) {
  // A wrong program: it declares buffer 0 (a different slice on each processor) replicated.
  const std::string text =
      absl::StrCat(MeshText("x:2"), " num_buffers: 1 inputs { ", TensorText("a", 0, "n:2", "0"),
                   " }", " outputs { ", TensorText("bad", 0, "n:1", "-1"), " }");
  EXPECT_TRUE(StatusIs(Run(text, {{"a", IotaFloat(Shape{{"n", 2}})}}).status(),
                       absl::StatusCode::kInternal,
                       {"output 'bad'", "processor 0 (0)", "processor 1 (1)"}));
}

TEST_F(SimulatedMeshTest, MalformedCollectiveNamesTheInstruction) {
  // concat_axis 3 does not exist: every processor fails before communicating.
  const std::string text = absl::StrCat(
      MeshText("x:2"), " num_buffers: 2 inputs { ", TensorText("a", 0, "n:2", "0"), " }",
      " instructions { output: 1 inputs: 0 slice_shape { ", ShapeText("n:2"),
      "} dtype: DT_FLOAT32 collective { kind: ALLGATHER mesh_axes: 0 concat_axis: 3 } }",
      " outputs { ", TensorText("b", 1, "n:2", "-1"), " }");
  EXPECT_TRUE(StatusIs(Run(text, {{"a", IotaFloat(Shape{{"n", 2}})}}).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"collective ALLGATHER over [x]", "concat_axis 3"}));
}

}  // namespace
}  // namespace meshrt
