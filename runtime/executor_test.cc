#include "runtime/executor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/local_communicator.h"
#include "runtime/test_kernels.h"

namespace meshrt {
namespace {

using ::testing::ElementsAre;

class ExecutorTest : public ::testing::Test {
 protected:
  ExecutorTest()
      : program_(ParseProgram(kAddThenAllreduceProgram)),
        hub_(*Mesh::Parse("x:1")),
        executor_(program_, {0}, &kernels_, hub_.communicator(0)) {}

  TestKernels kernels_;
  v1::Program program_;
  LocalCollectiveHub hub_;
  Executor executor_;
};

TEST_F(ExecutorTest, RunsAndExposesBuffersAndOutputs) {
  EXPECT_TRUE(StatusIs(executor_.OutputSlice("z").status(), absl::StatusCode::kFailedPrecondition,
                       {"'z'"}));
  ASSERT_OK(executor_.Run({{"x", Tensor::Float(Shape{{"n", 4}}, {1, 2, 3, 4})}}));
  // Buffer 1 is internal (no output), read by a small allreduce, which waits for its first reader
  // to be fused with others (here: the end of the step); the buffer stays until the next Run.
  ASSERT_NE(executor_.Buffer(1), nullptr);
  ASSERT_NE(executor_.Buffer(2), nullptr);
  EXPECT_THAT(executor_.Buffer(2)->floats(), ElementsAre(2, 4, 6, 8));
  EXPECT_EQ(executor_.Buffer(3), nullptr);
  EXPECT_EQ(executor_.Buffer(-1), nullptr);
  ASSERT_OK_AND_ASSIGN(Tensor z, executor_.OutputSlice("z"));
  EXPECT_THAT(z.floats(), ElementsAre(2, 4, 6, 8));
  EXPECT_TRUE(StatusIs(executor_.OutputSlice("w").status(), absl::StatusCode::kNotFound, {"'w'"}));

  // A second run starts from fresh buffers.
  ASSERT_OK(executor_.Run({{"x", Tensor::Float(Shape{{"n", 4}}, {0, 0, 0, 1})}}));
  EXPECT_THAT(executor_.OutputSlice("z")->floats(), ElementsAre(0, 0, 0, 2));
}

TEST_F(ExecutorTest, BadFeedsNameThePlaceholder) {
  EXPECT_TRUE(StatusIs(executor_.Run({}), absl::StatusCode::kInvalidArgument,
                       {"missing feed", "placeholder 'x'", "[n:4]"}));
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", Tensor(DType::kFloat32, Shape{{"n", 2}})}}),
                       absl::StatusCode::kInvalidArgument, {"placeholder 'x'", "[n:2]", "[n:4]"}));
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", Tensor(DType::kFloat32, Shape{{"m", 4}})}}),
                       absl::StatusCode::kInvalidArgument, {"placeholder 'x'", "[m:4]"}));
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", Tensor(DType::kInt32, Shape{{"n", 4}})}}),
                       absl::StatusCode::kInvalidArgument,
                       {"placeholder 'x'", "int32", "float32"}));
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", Tensor(DType::kFloat32, Shape{{"n", 4}})},
                                      {"typo", Tensor(DType::kFloat32, Shape{{"n", 4}})}}),
                       absl::StatusCode::kInvalidArgument, {"feed 'typo'", "x"}));
}

TEST_F(ExecutorTest, StepErrorsNameTheInstruction) {
  // A kernel error keeps its code.
  program_.mutable_instructions(0)->mutable_local()->set_type("nope");
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", Tensor(DType::kFloat32, Shape{{"n", 4}})}}),
                       absl::StatusCode::kUnimplemented,
                       {"instruction 0", "source_op 'y'", "local op 'nope'", "processor (0)"}));
  program_.mutable_instructions(0)->mutable_local()->set_type("add");

  // A malformed collective.
  program_.mutable_instructions(1)->mutable_collective()->set_reduce_op(v1::REDUCE_INVALID);
  EXPECT_TRUE(
      StatusIs(executor_.Run({{"x", Tensor(DType::kFloat32, Shape{{"n", 4}})}}),
               absl::StatusCode::kInvalidArgument,
               {"instruction 1", "source_op 'z'", "collective ALLREDUCE over [x]", "reduce op"}));
  program_.mutable_instructions(1)->mutable_collective()->set_reduce_op(v1::REDUCE_SUM);

  // A result that does not match the declared slice shape.
  program_.mutable_instructions(1)->mutable_slice_shape()->mutable_dims(0)->set_size(2);
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", Tensor(DType::kFloat32, Shape{{"n", 4}})}}),
                       absl::StatusCode::kInvalidArgument,
                       {"instruction 1", "produced float32 [n:4]", "declares float32 [n:2]"}));
  program_.mutable_instructions(1)->mutable_slice_shape()->mutable_dims(0)->set_size(4);

  // Reading a buffer nothing wrote.
  program_.mutable_instructions(0)->set_inputs(1, 2);
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", Tensor(DType::kFloat32, Shape{{"n", 4}})}}),
                       absl::StatusCode::kInvalidArgument,
                       {"instruction 0", "reads buffer 2", "not written"}));
}

// With fixed_program (the worker's), the program is decoded and planned at the first Run only:
// an edit afterwards (outside the contract) does not reach later Runs, where without the option
// (the fixture's executor, StepErrorsNameTheInstruction) every Run sees it.
TEST_F(ExecutorTest, FixedProgramIsDecodedOnce) {
  ExecutorOptions options;
  options.fixed_program = true;
  Executor fixed(program_, {0}, &kernels_, hub_.communicator(0), KernelContext(), options);
  ASSERT_OK(fixed.Run({{"x", Tensor::Float(Shape{{"n", 4}}, {1, 2, 3, 4})}}));
  program_.mutable_instructions(1)->mutable_slice_shape()->mutable_dims(0)->set_size(2);
  ASSERT_OK(fixed.Run({{"x", Tensor::Float(Shape{{"n", 4}}, {1, 1, 1, 1})}}));
  EXPECT_THAT(fixed.OutputSlice("z")->floats(), ElementsAre(2, 2, 2, 2));
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", Tensor(DType::kFloat32, Shape{{"n", 4}})}}),
                       absl::StatusCode::kInvalidArgument, {"instruction 1", "declares float32 [n:2]"}));
}

TEST_F(ExecutorTest, FetchesPruneTheStepToWhatTheyNeed) {
  // Add w = fail_if_negative(x), an output of its own: fetching only z must not run it.
  v1::Instruction* w = program_.add_instructions();
  *w = program_.instructions(0);
  w->set_output(3);
  w->clear_inputs();
  w->add_inputs(0);
  w->set_source_op("w");
  w->mutable_local()->set_type("fail_if_negative");
  program_.set_num_buffers(4);
  v1::ProgramTensor* out = program_.add_outputs();
  *out = program_.outputs(0);
  out->set_name("w");
  out->set_buffer(3);
  const Tensor negative = Tensor::Float(Shape{{"n", 4}}, {1, -2, 3, 4});

  ASSERT_OK(executor_.Run({{"x", negative}}, {"z"}));
  EXPECT_THAT(executor_.OutputSlice("z")->floats(), ElementsAre(2, -4, 6, 8));
  EXPECT_TRUE(StatusIs(executor_.OutputSlice("w").status(), absl::StatusCode::kFailedPrecondition,
                       {"'w'"}));
  // Fetching w runs it (and not the allreduce): its error surfaces.
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", negative}}, {"w"}),
                       absl::StatusCode::kInvalidArgument, {"instruction 2", "source_op 'w'"}));
  ASSERT_OK(executor_.Run({{"x", Tensor::Float(Shape{{"n", 4}}, {1, 2, 3, 4})}}, {"w", "w"}));
  EXPECT_THAT(executor_.OutputSlice("w")->floats(), ElementsAre(1, 2, 3, 4));
  EXPECT_TRUE(StatusIs(executor_.OutputSlice("z").status(), absl::StatusCode::kFailedPrecondition,
                       {"'z'"}));
  // No fetches: nothing but variable updates (there are none) runs; an unknown name selects
  // nothing and OutputSlice names it.
  ASSERT_OK(executor_.Run({{"x", negative}}, {}));
  ASSERT_OK(executor_.Run({{"x", negative}}, {"nope"}));
  EXPECT_TRUE(
      StatusIs(executor_.OutputSlice("nope").status(), absl::StatusCode::kNotFound, {"'nope'"}));
  // Run without fetches runs everything.
  EXPECT_TRUE(StatusIs(executor_.Run({{"x", negative}}), absl::StatusCode::kInvalidArgument,
                       {"source_op 'w'"}));
}

TEST_F(ExecutorTest, CoordinateMustBeInTheMesh) {
  Executor outside(program_, {1}, &kernels_, hub_.communicator(0));
  EXPECT_TRUE(StatusIs(outside.Run({{"x", Tensor(DType::kFloat32, Shape{{"n", 4}})}}),
                       absl::StatusCode::kInvalidArgument, {"(1)", "x:1"}));
}

// Two processors, each with its own executor: checks every rank's slice of an alltoall and a
// reduce-scatter, not just the assembled result.
TEST(ExecutorCollectivesTest, PerRankSlicesOfAllToAllAndReduceScatter) {
  const v1::Program program = ParseProgram(R"pb(
    mesh { dims { name: "x" size: 2 } }
    num_buffers: 3
    inputs {
      name: "a"
      buffer: 0
      dtype: DT_INT32
      layout { mesh_axis: [ 0, -1 ] }
      shape {
        dims { name: "r" size: 4 }
        dims { name: "c" size: 4 }
      }
    }
    instructions {
      output: 1
      inputs: 0
      dtype: DT_INT32
      slice_shape {
        dims { name: "r" size: 4 }
        dims { name: "c" size: 2 }
      }
      collective { kind: ALLTOALL mesh_axes: 0 split_axis: 1 concat_axis: 0 }
    }
    instructions {
      output: 2
      inputs: 0
      dtype: DT_INT32
      slice_shape {
        dims { name: "r" size: 2 }
        dims { name: "c" size: 2 }
      }
      collective { kind: REDUCE_SCATTER mesh_axes: 0 reduce_op: REDUCE_MAX split_axis: 1 }
    }
  )pb");
  LocalCollectiveHub hub(*Mesh::Parse("x:2"), {absl::Seconds(10)});
  TestKernels kernels;
  std::vector<std::unique_ptr<Executor>> executors;
  for (int p = 0; p < 2; ++p) {
    executors.push_back(std::make_unique<Executor>(program, std::vector<int64_t>{p}, &kernels,
                                                   hub.communicator(p)));
  }
  // Whole a = iota [r:4, c:4]; processor p holds rows 2p, 2p+1.
  const std::vector<std::vector<int32_t>> slices = {{0, 1, 2, 3, 4, 5, 6, 7},
                                                    {8, 9, 10, 11, 12, 13, 14, 15}};
  std::vector<absl::Status> statuses(2);
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      statuses[p] = executors[p]->Run({{"a", Tensor::Int(Shape{{"r", 2}, {"c", 4}}, slices[p])}});
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_OK(statuses[0]);
  ASSERT_OK(statuses[1]);
  // AllToAll: processor p gets columns 2p, 2p+1 of all four rows.
  EXPECT_THAT(executors[0]->Buffer(1)->ints(), ElementsAre(0, 1, 4, 5, 8, 9, 12, 13));
  EXPECT_THAT(executors[1]->Buffer(1)->ints(), ElementsAre(2, 3, 6, 7, 10, 11, 14, 15));
  // ReduceScatter MAX over the two processors' [r:2, c:4] slices, keeping columns 2p, 2p+1.
  EXPECT_THAT(executors[0]->Buffer(2)->ints(), ElementsAre(8, 9, 12, 13));
  EXPECT_THAT(executors[1]->Buffer(2)->ints(), ElementsAre(10, 11, 14, 15));
}

// Counts AllReduce calls and their element counts; forwards everything.
class CountingCommunicator : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  absl::Status AllReduce(const std::vector<int>& axes, v1::ReduceOp op, DType dtype, void* data,
                         int64_t count) override {
    counts.push_back(count);
    return ForwardingCommunicator::AllReduce(axes, op, dtype, data, count);
  }
  std::vector<int64_t> counts;
};

// Small allreduces wait for their first reader and run fused by (axes, op, dtype): two SUMs of
// 4 and 2 elements become one call of 6; the MAX is a call of its own; results are unchanged.
TEST(ExecutorCollectivesTest, SmallAllReducesWaitForTheirReaderAndFuse) {
  const v1::Program program = ParseProgram(R"pb(
    mesh { dims { name: "x" size: 2 } }
    num_buffers: 7
    inputs {
      name: "a"
      buffer: 0
      dtype: DT_INT32
      layout { mesh_axis: -1 }
      shape { dims { name: "n" size: 4 } }
    }
    inputs {
      name: "b"
      buffer: 1
      dtype: DT_INT32
      layout { mesh_axis: -1 }
      shape { dims { name: "m" size: 2 } }
    }
    instructions {
      output: 2
      inputs: 0
      dtype: DT_INT32
      source_op: "sa"
      slice_shape { dims { name: "n" size: 4 } }
      collective { kind: ALLREDUCE mesh_axes: 0 reduce_op: REDUCE_SUM }
    }
    instructions {
      output: 3
      inputs: 0
      dtype: DT_INT32
      source_op: "ma"
      slice_shape { dims { name: "n" size: 4 } }
      collective { kind: ALLREDUCE mesh_axes: 0 reduce_op: REDUCE_MAX }
    }
    instructions {
      output: 4
      inputs: 1
      dtype: DT_INT32
      source_op: "sb"
      slice_shape { dims { name: "m" size: 2 } }
      collective { kind: ALLREDUCE mesh_axes: 0 reduce_op: REDUCE_SUM }
    }
    instructions {
      output: 5
      inputs: [ 2, 3 ]
      dtype: DT_INT32
      source_op: "y"
      slice_shape { dims { name: "n" size: 4 } }
      local { type: "add" }
    }
    outputs {
      name: "y"
      buffer: 5
      dtype: DT_INT32
      layout { mesh_axis: -1 }
      shape { dims { name: "n" size: 4 } }
    }
    outputs {
      name: "sb"
      buffer: 4
      dtype: DT_INT32
      layout { mesh_axis: -1 }
      shape { dims { name: "m" size: 2 } }
    }
  )pb");
  LocalCollectiveHub hub(*Mesh::Parse("x:2"), {absl::Seconds(10)});
  TestKernels kernels;
  std::vector<std::unique_ptr<CountingCommunicator>> comms;
  std::vector<std::unique_ptr<Executor>> executors;
  for (int p = 0; p < 2; ++p) {
    comms.push_back(std::make_unique<CountingCommunicator>(hub.communicator(p)));
    executors.push_back(std::make_unique<Executor>(program, std::vector<int64_t>{p}, &kernels,
                                                   comms.back().get()));
  }
  const std::vector<std::vector<int32_t>> a = {{1, 2, 3, 4}, {10, 0, 30, 0}};
  const std::vector<std::vector<int32_t>> b = {{5, 6}, {7, 8}};
  std::vector<absl::Status> statuses(2);
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      statuses[p] = executors[p]->Run({{"a", Tensor::Int(Shape{{"n", 4}}, a[p])},
                                       {"b", Tensor::Int(Shape{{"m", 2}}, b[p])}},
                                      {"y", "sb"});
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_OK(statuses[0]);
  ASSERT_OK(statuses[1]);
  for (int p = 0; p < 2; ++p) {
    // y = (a0 + a1) + max(a0, a1); sb = b0 + b1.
    EXPECT_THAT(executors[p]->OutputSlice("y")->ints(), ElementsAre(21, 4, 63, 8));
    EXPECT_THAT(executors[p]->OutputSlice("sb")->ints(), ElementsAre(12, 14));
    // At y (the first reader of sa and ma) every waiting allreduce runs: SUM {sa, sb} fused (6
    // elements), then MAX {ma} (4).
    EXPECT_THAT(comms[p]->counts, ElementsAre(6, 4));
  }
}

// PERMUTE along x of a 3-processor mesh (wrapping and zero-filling), and BROADCAST from rank 2.
TEST(ExecutorCollectivesTest, PermuteAndBroadcast) {
  const v1::Program program = ParseProgram(R"pb(
    mesh { dims { name: "x" size: 3 } }
    num_buffers: 4
    inputs {
      name: "a"
      buffer: 0
      dtype: DT_INT32
      layout { mesh_axis: [ 0 ] }
      shape { dims { name: "n" size: 6 } }
    }
    instructions {
      output: 1
      inputs: 0
      dtype: DT_INT32
      slice_shape { dims { name: "n" size: 2 } }
      collective { kind: PERMUTE mesh_axes: 0 shift: 1 wrap: true }
    }
    instructions {
      output: 2
      inputs: 0
      dtype: DT_INT32
      slice_shape { dims { name: "n" size: 2 } }
      collective { kind: PERMUTE mesh_axes: 0 shift: -1 }
    }
    instructions {
      output: 3
      inputs: 0
      dtype: DT_INT32
      slice_shape { dims { name: "n" size: 2 } }
      collective { kind: BROADCAST mesh_axes: 0 root: 2 }
    }
  )pb");
  LocalCollectiveHub hub(*Mesh::Parse("x:3"), {absl::Seconds(10)});
  TestKernels kernels;
  std::vector<std::unique_ptr<Executor>> executors;
  for (int p = 0; p < 3; ++p) {
    executors.push_back(std::make_unique<Executor>(program, std::vector<int64_t>{p}, &kernels,
                                                   hub.communicator(p)));
  }
  std::vector<absl::Status> statuses(3);
  std::vector<std::thread> threads;
  for (int p = 0; p < 3; ++p) {
    threads.emplace_back([&, p] {
      statuses[p] = executors[p]->Run({{"a", Tensor::Int(Shape{{"n", 2}}, {10 * p, 10 * p + 1})}});
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : statuses) ASSERT_OK(s);
  EXPECT_THAT(executors[0]->Buffer(1)->ints(), ElementsAre(20, 21));
  EXPECT_THAT(executors[1]->Buffer(1)->ints(), ElementsAre(0, 1));
  EXPECT_THAT(executors[2]->Buffer(1)->ints(), ElementsAre(10, 11));
  EXPECT_THAT(executors[0]->Buffer(2)->ints(), ElementsAre(10, 11));
  EXPECT_THAT(executors[1]->Buffer(2)->ints(), ElementsAre(20, 21));
  EXPECT_THAT(executors[2]->Buffer(2)->ints(), ElementsAre(0, 0));
  for (int p = 0; p < 3; ++p) EXPECT_THAT(executors[p]->Buffer(3)->ints(), ElementsAre(20, 21));
}

// One collective instruction on a 1-processor mesh; COLLECTIVE is replaced by its fields.
constexpr char kOneCollective[] = R"pb(
  mesh { dims { name: "x" size: 1 } }
  num_buffers: 2
  inputs {
    name: "a"
    buffer: 0
    dtype: DT_INT32
    layout { mesh_axis: [ -1 ] }
    shape { dims { name: "n" size: 2 } }
  }
  instructions {
    output: 1
    inputs: 0
    dtype: DT_INT32
    slice_shape { dims { name: "n" size: 2 } }
    collective { COLLECTIVE }
  }
)pb";

TEST(ExecutorCollectivesTest, PermuteNeedsOneAxisAndBroadcastAValidRoot) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"kind: PERMUTE shift: 1", "PERMUTE takes exactly one mesh axis"},
      {"kind: BROADCAST mesh_axes: 0 root: 1", "root 1 is not a rank of a group of 1"}};
  for (const auto& [collective, message] : cases) {
    const v1::Program program =
        ParseProgram(absl::StrReplaceAll(kOneCollective, {{"COLLECTIVE", collective}}));
    LocalCollectiveHub hub(*Mesh::Parse("x:1"));
    TestKernels kernels;
    Executor e(program, {0}, &kernels, hub.communicator(0));
    absl::Status s = e.Run({{"a", Tensor::Int(Shape{{"n", 2}}, {1, 2})}});
    EXPECT_TRUE(StatusIs(s, absl::StatusCode::kInvalidArgument, {message})) << collective;
  }
}

}  // namespace
}  // namespace meshrt

namespace meshrt {
namespace {

// y = w - lr * einsum(a, b) (or w + lr * ..., `op` "add"), with g = einsum(a, b) an output too.
v1::Program ScaledEinsumUpdate(const std::string& op) {
  return ParseProgram(absl::StrReplaceAll(R"pb(
    mesh { dims { name: "x" size: 1 } }
    num_buffers: 7
    inputs { name: "a" buffer: 0 dtype: DT_FLOAT32 layout { mesh_axis: [ -1, -1 ] }
             shape { dims { name: "m" size: 3 } dims { name: "k" size: 2 } } }
    inputs { name: "b" buffer: 1 dtype: DT_FLOAT32 layout { mesh_axis: [ -1, -1 ] }
             shape { dims { name: "k" size: 2 } dims { name: "n" size: 4 } } }
    inputs { name: "w" buffer: 2 dtype: DT_FLOAT32 layout { mesh_axis: [ -1, -1 ] }
             shape { dims { name: "m" size: 3 } dims { name: "n" size: 4 } } }
    inputs { name: "lr" buffer: 3 dtype: DT_FLOAT32 shape {} }
    instructions { output: 4 inputs: [ 0, 1 ] dtype: DT_FLOAT32 source_op: "g"
                   slice_shape { dims { name: "m" size: 3 } dims { name: "n" size: 4 } }
                   local { type: "einsum" } }
    instructions { output: 5 inputs: [ 4, 3 ] dtype: DT_FLOAT32 source_op: "scaled"
                   slice_shape { dims { name: "m" size: 3 } dims { name: "n" size: 4 } }
                   local { type: "mul" } }
    instructions { output: 6 inputs: [ $IN ] dtype: DT_FLOAT32 source_op: "y"
                   slice_shape { dims { name: "m" size: 3 } dims { name: "n" size: 4 } }
                   local { type: "$OP" } }
    outputs { name: "y" buffer: 6 dtype: DT_FLOAT32 layout { mesh_axis: [ -1, -1 ] }
              shape { dims { name: "m" size: 3 } dims { name: "n" size: 4 } } }
    outputs { name: "g" buffer: 4 dtype: DT_FLOAT32 layout { mesh_axis: [ -1, -1 ] }
              shape { dims { name: "m" size: 3 } dims { name: "n" size: 4 } } }
  )pb", {{"$OP", op}, {"$IN", op == "sub" ? "2, 5" : "5, 2"}}));
}

TEST(ExecutorFusionTest, ScaledEinsumUpdatesRunAsOneAccumulatingGemm) {
  const Tensor a = Tensor::Float(Shape{{"m", 3}, {"k", 2}}, {1, 2, 3, 4, 5, 6});
  const Tensor b = Tensor::Float(Shape{{"k", 2}, {"n", 4}}, {1, 0, -1, 2, 0.5, 1, 2, -3});
  const Tensor w = Tensor::Float(Shape{{"m", 3}, {"n", 4}}, {10, 11, 12, 13, 14, 15, 16, 17, 18,
                                                              19, 20, 21});
  const Tensor lr = Tensor::Float(Shape{}, {0.5f});
  const std::map<std::string, Tensor> feeds = {{"a", a}, {"b", b}, {"w", w}, {"lr", lr}};
  for (const std::string op : {"sub", "add"}) {
    SCOPED_TRACE(op);
    const float sign = op == "sub" ? -1.0f : 1.0f;
    std::vector<float> want(12);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 4; ++j) {
        float g = 0;
        for (int k = 0; k < 2; ++k) g += a.f32()[i * 2 + k] * b.f32()[k * 4 + j];
        want[i * 4 + j] = w.f32()[i * 4 + j] + sign * 0.5f * g;
      }
    }
    const v1::Program program = ScaledEinsumUpdate(op);
    LocalCollectiveHub hub(*Mesh::Parse("x:1"));
    Executor fast(program, {0}, &CpuKernels(), hub.communicator(0));
    ASSERT_OK(fast.Run(feeds, {"y"}));
    EXPECT_EQ(fast.fused_updates(), 1);
    EXPECT_THAT(fast.OutputSlice("y")->floats(), testing::Pointwise(testing::FloatEq(), want));
    // The gradient itself is fetched: it must exist, so the einsum runs at its place; the mul and
    // the update still run as one pass (the plain scaled update).
    ASSERT_OK(fast.Run(feeds, {"y", "g"}));
    EXPECT_EQ(fast.fused_updates(), 2);
    EXPECT_THAT(fast.OutputSlice("y")->floats(), testing::Pointwise(testing::FloatEq(), want));
    // A runner without the fused op (_scaled_einsum_add): the three ops run one by one at y, same result.
    Executor plain(program, {0}, &ReferenceKernels(), hub.communicator(0));
    ASSERT_OK(plain.Run(feeds, {"y"}));
    EXPECT_EQ(plain.fused_updates(), 0);
    EXPECT_THAT(plain.OutputSlice("y")->floats(), testing::Pointwise(testing::FloatEq(), want));
    // A non-scalar "learning rate" does not fit the fused path: one by one.
    std::map<std::string, Tensor> bad = feeds;
    bad["lr"] = Tensor::Float(Shape{{"m", 3}, {"n", 4}}, std::vector<float>(12, 0.5f));
    v1::Program wide = program;
    wide.mutable_inputs(3)->mutable_shape()->CopyFrom(program.inputs(2).shape());
    wide.mutable_inputs(3)->mutable_layout()->CopyFrom(program.inputs(2).layout());
    Executor widened(wide, {0}, &CpuKernels(), hub.communicator(0));
    ASSERT_OK(widened.Run(bad, {"y"}));
    EXPECT_EQ(widened.fused_updates(), 0);
    EXPECT_THAT(widened.OutputSlice("y")->floats(), testing::Pointwise(testing::FloatEq(), want));
  }
}

// y = w - g * lr (or w + lr * g, `op` "add") where g is an input, not an einsum: the data-parallel
// SGD update, whose gradient comes out of an allreduce. `scaled` is an output too.
v1::Program ScaledUpdate(const std::string& op, bool scalar_lr) {
  const std::string lr_shape =
      scalar_lr ? "shape {}" : "shape { dims { name: \"n\" size: 5 } } layout { mesh_axis: [ -1 ] }";
  return ParseProgram(absl::StrReplaceAll(R"pb(
    mesh { dims { name: "x" size: 1 } }
    num_buffers: 5
    inputs { name: "g" buffer: 0 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
             shape { dims { name: "n" size: 5 } } }
    inputs { name: "w" buffer: 1 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
             shape { dims { name: "n" size: 5 } } }
    inputs { name: "lr" buffer: 2 dtype: DT_FLOAT32 $LR }
    instructions { output: 3 inputs: [ $MUL ] dtype: DT_FLOAT32 source_op: "scaled"
                   slice_shape { dims { name: "n" size: 5 } } local { type: "mul" } }
    instructions { output: 4 inputs: [ $IN ] dtype: DT_FLOAT32 source_op: "y"
                   slice_shape { dims { name: "n" size: 5 } } local { type: "$OP" } }
    outputs { name: "y" buffer: 4 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
              shape { dims { name: "n" size: 5 } } }
    outputs { name: "scaled" buffer: 3 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
              shape { dims { name: "n" size: 5 } } }
  )pb", {{"$OP", op}, {"$LR", lr_shape}, {"$MUL", op == "sub" ? "0, 2" : "2, 0"},
         {"$IN", op == "sub" ? "1, 3" : "3, 1"}}));
}

TEST(ExecutorFusionTest, ScaledUpdatesOfAnyValueRunInOnePassWithTheSameFloats) {
  // Values whose product needs rounding: the fused pass must round it as the mul op does.
  const Tensor g = Tensor::Float(Shape{{"n", 5}}, {0.1f, -3.7f, 1e-8f, 12345.678f, 0.3333333f});
  const Tensor w = Tensor::Float(Shape{{"n", 5}}, {1.0f, 2.5f, -1e-3f, 7.0f, 0.2f});
  const float lr = 0.0123f;
  const std::map<std::string, Tensor> feeds = {
      {"g", g}, {"w", w}, {"lr", Tensor::Float(Shape{}, {lr})}};
  for (const std::string op : {"sub", "add"}) {
    SCOPED_TRACE(op);
    std::vector<float> want(5);
    for (int i = 0; i < 5; ++i) {
      const float t = g.f32()[i] * lr;
      want[i] = op == "sub" ? w.f32()[i] - t : t + w.f32()[i];
    }
    LocalCollectiveHub hub(*Mesh::Parse("x:1"));
    const v1::Program program = ScaledUpdate(op, true);  // the executor borrows it
    Executor fused(program, {0}, &CpuKernels(), hub.communicator(0));
    ASSERT_OK(fused.Run(feeds, {"y"}));
    EXPECT_EQ(fused.fused_updates(), 1);
    EXPECT_EQ(fused.OutputSlice("y")->floats(), want);  // bitwise
    // The scaled value fetched too: it must exist, so the two run as the program says.
    ASSERT_OK(fused.Run(feeds, {"y", "scaled"}));
    EXPECT_EQ(fused.fused_updates(), 1);
    EXPECT_EQ(fused.OutputSlice("y")->floats(), want);
    // A learning "rate" that is no scalar is an elementwise product, not an update: not fused.
    std::map<std::string, Tensor> wide = feeds;
    wide["lr"] = Tensor::Float(Shape{{"n", 5}}, std::vector<float>(5, lr));
    const v1::Program elementwise = ScaledUpdate(op, false);
    Executor plain(elementwise, {0}, &CpuKernels(), hub.communicator(0));
    ASSERT_OK(plain.Run(wide, {"y"}));
    EXPECT_EQ(plain.fused_updates(), 0);
    EXPECT_EQ(plain.OutputSlice("y")->floats(), want);
  }
}

// dx = mul(dy, greater(x, 0)) (a ReLU's gradient; the mask first when `mask_first`), the mask an
// output too.
v1::Program MaskedProduct(bool mask_first) {
  return ParseProgram(absl::StrReplaceAll(R"pb(
    mesh { dims { name: "x" size: 1 } }
    num_buffers: 4
    inputs { name: "x" buffer: 0 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
             shape { dims { name: "n" size: 6 } } }
    inputs { name: "dy" buffer: 1 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
             shape { dims { name: "n" size: 6 } } }
    instructions { output: 2 inputs: [ 0 ] dtype: DT_FLOAT32 source_op: "mask"
                   slice_shape { dims { name: "n" size: 6 } }
                   local { type: "greater" attrs { key: "scalar" value { f: 0 } } } }
    instructions { output: 3 inputs: [ $IN ] dtype: DT_FLOAT32 source_op: "dx"
                   slice_shape { dims { name: "n" size: 6 } } local { type: "mul" } }
    outputs { name: "dx" buffer: 3 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
              shape { dims { name: "n" size: 6 } } }
    outputs { name: "mask" buffer: 2 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
              shape { dims { name: "n" size: 6 } } }
  )pb", {{"$IN", mask_first ? "2, 1" : "1, 2"}}));
}

TEST(ExecutorFusionTest, MaskedProductsRunInOnePassWithTheSameFloats) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = Tensor::Float(Shape{{"n", 6}}, {1.5f, -2.0f, 0.0f, 3.0f, -1.0f, 2.0f});
  const Tensor dy = Tensor::Float(Shape{{"n", 6}}, {0.25f, -4.0f, 7.0f, nan, inf, -0.5f});
  const std::map<std::string, Tensor> feeds = {{"x", x}, {"dy", dy}};
  for (bool mask_first : {false, true}) {
    SCOPED_TRACE(mask_first ? "mask first" : "mask second");
    const v1::Program program = MaskedProduct(mask_first);  // the executor borrows it
    LocalCollectiveHub hub(*Mesh::Parse("x:1"));
    Executor plain(program, {0}, &CpuKernels(), hub.communicator(0));
    ASSERT_OK(plain.Run(feeds, {"dx", "mask"}));  // the mask fetched: two ops
    EXPECT_EQ(plain.fused_updates(), 0);
    absl::StatusOr<Tensor> unfused = plain.OutputSlice("dx");
    ASSERT_OK(unfused.status());
    const std::vector<float> want(unfused->floats().begin(), unfused->floats().end());
    Executor fused(program, {0}, &CpuKernels(), hub.communicator(0));
    ASSERT_OK(fused.Run(feeds, {"dx"}));
    EXPECT_EQ(fused.fused_updates(), 1);
    absl::StatusOr<Tensor> one_pass = fused.OutputSlice("dx");
    ASSERT_OK(one_pass.status());
    const std::vector<float> got(one_pass->floats().begin(), one_pass->floats().end());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {  // bit for bit: -0 where a negative dy is masked
      EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0) << i << ": " << got[i];
    }
    EXPECT_TRUE(std::signbit(got[1]));  // -4 * 0
    EXPECT_TRUE(std::isnan(got[3]));    // NaN * 1
    EXPECT_TRUE(std::isnan(got[4]));    // inf * 0
  }
}

}  // namespace
}  // namespace meshrt
