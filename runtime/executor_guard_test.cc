// Guarded instructions (proto Instruction.predicate): skipped, their output zeros, on steps where
// the predicate is zero — unless a fetched output depends on them — and a bad predicate is an
// error naming the instruction.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_replace.h"
#include "core/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"
#include "runtime/test_kernels.h"

namespace meshrt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// On x:2: sum = allreduce(g) guarded by p (instruction 0); twice = sum + sum, the update of
// variable v (instruction 1); other = allreduce(g), unguarded (instruction 2). PREDICATE is
// replaced by the predicate's buffer.
constexpr char kGuardedProgram[] = R"pb(
  mesh { dims { name: "x" size: 2 } }
  num_buffers: 6
  inputs {
    name: "g"
    buffer: 0
    dtype: DT_FLOAT32
    layout { mesh_axis: -1 }
    shape { dims { name: "n" size: 4 } }
  }
  inputs { name: "p" buffer: 1 dtype: DT_FLOAT32 shape {} }
  instructions {
    output: 2
    inputs: 0
    predicate: PREDICATE
    dtype: DT_FLOAT32
    source_op: "sum"
    slice_shape { dims { name: "n" size: 4 } }
    collective { kind: ALLREDUCE mesh_axes: 0 reduce_op: REDUCE_SUM }
  }
  instructions {
    output: 3
    inputs: [ 2, 2 ]
    dtype: DT_FLOAT32
    source_op: "twice"
    slice_shape { dims { name: "n" size: 4 } }
    local { type: "add" }
  }
  instructions {
    output: 4
    inputs: 0
    dtype: DT_FLOAT32
    source_op: "other"
    slice_shape { dims { name: "n" size: 4 } }
    collective { kind: ALLREDUCE mesh_axes: 0 reduce_op: REDUCE_SUM }
  }
  outputs {
    name: "sum"
    buffer: 2
    dtype: DT_FLOAT32
    layout { mesh_axis: -1 }
    shape { dims { name: "n" size: 4 } }
  }
  outputs {
    name: "twice"
    buffer: 3
    dtype: DT_FLOAT32
    layout { mesh_axis: -1 }
    shape { dims { name: "n" size: 4 } }
  }
  outputs {
    name: "other"
    buffer: 4
    dtype: DT_FLOAT32
    layout { mesh_axis: -1 }
    shape { dims { name: "n" size: 4 } }
  }
  variables {
    name: "v"
    buffer: 5
    dtype: DT_FLOAT32
    layout { mesh_axis: -1 }
    shape { dims { name: "n" size: 4 } }
    initializer {
      output: 5
      dtype: DT_FLOAT32
      slice_shape { dims { name: "n" size: 4 } }
      local { type: "zeros" shape { dims { name: "n" size: 4 } } }
    }
    update_buffer: 3
  }
)pb";

v1::Program GuardedProgram(const std::string& predicate) {
  return ParseProgram(absl::StrReplaceAll(kGuardedProgram, {{"PREDICATE", predicate}}));
}

// Counts the elements each AllReduce call reduces; forwards everything.
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

class GuardTest : public ::testing::Test {
 protected:
  GuardTest()
      : program_(GuardedProgram("1")), hub_(*Mesh::Parse("x:2"), {absl::Seconds(10)}) {
    for (int p = 0; p < 2; ++p) {
      comms_.push_back(std::make_unique<CountingCommunicator>(hub_.communicator(p)));
      executors_.push_back(std::make_unique<Executor>(program_, std::vector<int64_t>{p},
                                                      &CpuKernels(), comms_.back().get()));
    }
  }

  // One step on both processors with predicate value `p`; processor 0's status.
  absl::Status Step(float p, const std::vector<std::string>& fetches) {
    for (auto& c : comms_) c->counts.clear();
    std::vector<absl::Status> statuses(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        const float base = r == 0 ? 1.0f : 10.0f;
        statuses[r] = executors_[r]->Run(
            {{"g", Tensor::Float(Shape{{"n", 4}}, {base, 2 * base, 3 * base, 4 * base})},
             {"p", Tensor::Float(Shape(), {p})}},
            fetches);
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(statuses[0].code(), statuses[1].code()) << statuses[1];
    return statuses[0];
  }

  v1::Program program_;
  LocalCollectiveHub hub_;
  std::vector<std::unique_ptr<CountingCommunicator>> comms_;
  std::vector<std::unique_ptr<Executor>> executors_;
};

TEST_F(GuardTest, AZeroPredicateSkipsTheInstructionAndWritesZeros) {
  ASSERT_OK(Step(0.0f, {"other"}));
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(comms_[r]->counts, ElementsAre(4));  // `other` only
    EXPECT_THAT(executors_[r]->variables().at("v").floats(), ElementsAre(0, 0, 0, 0));
    EXPECT_THAT(executors_[r]->OutputSlice("other")->floats(), ElementsAre(11, 22, 33, 44));
  }
}

TEST_F(GuardTest, ANonzeroPredicateRunsIt) {
  ASSERT_OK(Step(1.0f, {"other"}));
  for (int r = 0; r < 2; ++r) {
    // The guarded allreduce ran (due at `twice`, before `other` waits): two calls.
    EXPECT_THAT(comms_[r]->counts, ElementsAre(4, 4));
    EXPECT_THAT(executors_[r]->variables().at("v").floats(), ElementsAre(22, 44, 66, 88));
  }
}

TEST_F(GuardTest, AFetchThatDependsOnItRunsItWhateverThePredicate) {
  ASSERT_OK(Step(0.0f, {"twice"}));
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(comms_[r]->counts, ElementsAre(4));
    EXPECT_THAT(executors_[r]->OutputSlice("twice")->floats(), ElementsAre(22, 44, 66, 88));
    EXPECT_THAT(executors_[r]->variables().at("v").floats(), ElementsAre(22, 44, 66, 88));
  }
  // Run(feeds) fetches every output: it runs too.
  for (auto& c : comms_) c->counts.clear();
  std::vector<absl::Status> statuses(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      statuses[r] = executors_[r]->Run({{"g", Tensor::Float(Shape{{"n", 4}}, {1, 1, 1, 1})},
                                        {"p", Tensor::Float(Shape(), {0.0f})}});
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_OK(statuses[0]);
  EXPECT_THAT(executors_[0]->OutputSlice("sum")->floats(), ElementsAre(2, 2, 2, 2));
}

TEST(GuardErrorsTest, ABadPredicateIsAnErrorNamingTheInstruction) {
  for (const auto& [predicate, what] : std::vector<std::pair<std::string, std::string>>{
           {"9", "its predicate, buffer 9, is out of range"},
           {"0", "its predicate, buffer 0, is not a scalar"},
           {"4", "its predicate, buffer 4, is not written yet"}}) {
    SCOPED_TRACE(predicate);
    const v1::Program program = GuardedProgram(predicate);
    LocalCollectiveHub hub(*Mesh::Parse("x:2"), {absl::Seconds(10)});
    std::vector<absl::Status> statuses(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        Executor e(program, {r}, &CpuKernels(), hub.communicator(r));
        statuses[r] = e.Run({{"g", Tensor::Float(Shape{{"n", 4}}, {1, 2, 3, 4})},
                             {"p", Tensor::Float(Shape(), {0.0f})}},
                            {"other"});
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& s : statuses) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_THAT(s.message(), HasSubstr("instruction 0 (source_op 'sum'"));
      EXPECT_THAT(s.message(), HasSubstr(what));
    }
  }
}

}  // namespace
}  // namespace meshrt
