// The executor's collectives on odd shapes along every tensor axis, for every kind, against the
// slices of the global tensor (core/ir/slicing.h): both the in-place paths (the split or concat axis
// has only size-1 dims before it, so the communicator reads the input or writes the output
// directly) and the packed ones, float32 and int32, groups of 2 and 3. Each program runs twice, so
// the second run reads recycled (poisoned, under bazel test) pool buffers: an element a path
// forgets to write shows up as NaN / INT32_MIN.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"

namespace meshrt {
namespace {

// [one:1, a:2g, b:3, c:g*5]: axis 0 has size 1, so a split or concat on axis 1 is contiguous; on
// axes 2 and 3 it is strided. Axis 2 (size 3) is never split.
Shape OddShape(int g) { return Shape({{"one", 1}, {"a", 2 * g}, {"b", 3}, {"c", 5 * g}}); }

Tensor Global(DType dtype, const Shape& shape, int scale) {
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const int v = scale * static_cast<int>(i % 1009 + 1);
    if (dtype == DType::kFloat32) {
      t.f32()[i] = static_cast<float>(v);
    } else {
      t.i32()[i] = v;
    }
  }
  return t;
}

TensorLayout SplitOn(int rank, int axis) {
  TensorLayout l;
  l.mesh_axis.assign(rank, kReplicated);
  if (axis >= 0) l.mesh_axis[axis] = 0;
  return l;
}

void SetTensor(v1::ProgramTensor* t, const std::string& name, int buffer, const Shape& shape,
               DType dtype, const TensorLayout& layout) {
  t->set_name(name);
  t->set_buffer(buffer);
  *t->mutable_shape() = shape.ToProto();
  t->set_dtype(DTypeToProto(dtype));
  *t->mutable_layout() = layout.ToProto();
}

// A program on mesh x:g: input "x" (global `shape`, layout `from`) -> `instr` -> output "y"
// (layout `to`).
v1::Program OneStep(int g, const Shape& shape, DType dtype, const TensorLayout& from,
                    const TensorLayout& to, const v1::Instruction& instr) {
  v1::Program p;
  *p.mutable_mesh() = Mesh::Parse(absl::StrCat("x:", g))->ToProto();
  p.set_num_buffers(2);
  SetTensor(p.add_inputs(), "x", 0, shape, dtype, from);
  v1::Instruction* i = p.add_instructions();
  *i = instr;
  i->set_output(1);
  i->add_inputs(0);
  i->set_dtype(DTypeToProto(dtype));
  *i->mutable_slice_shape() = SliceShape(shape, to, *Mesh::Parse(absl::StrCat("x:", g))).ToProto();
  SetTensor(p.add_outputs(), "y", 1, shape, dtype, to);
  return p;
}

// Runs `program` twice on every processor of x:g with feeds[p], checking "y" against want[p].
void RunAndCheck(const v1::Program& program, int g, const std::vector<Tensor>& feeds,
                 const std::vector<Tensor>& want, const std::string& where) {
  LocalCollectiveHub hub(*Mesh::Parse(absl::StrCat("x:", g)), {absl::Seconds(10)});
  std::vector<std::unique_ptr<Executor>> executors;
  for (int p = 0; p < g; ++p) {
    executors.push_back(std::make_unique<Executor>(program, std::vector<int64_t>{p}, nullptr,
                                                   hub.communicator(p)));
  }
  for (int run = 0; run < 2; ++run) {
    std::vector<absl::Status> statuses(g);
    std::vector<std::thread> threads;
    for (int p = 0; p < g; ++p) {
      threads.emplace_back([&, p] {
        if (run == 0) {
          statuses[p] = executors[p]->Run({{"x", feeds[p]}});  // moved in
        } else {
          const std::map<std::string, Tensor> kept = {{"x", feeds[p]}};
          statuses[p] = executors[p]->Run(kept);  // copied
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (int p = 0; p < g; ++p) {
      ASSERT_OK(statuses[p]);
      ASSERT_OK_AND_ASSIGN(const Tensor y, executors[p]->OutputSlice("y"));
      ASSERT_EQ(y.shape(), want[p].shape()) << where << " processor " << p;
      ASSERT_EQ(y.dtype(), want[p].dtype()) << where;
      EXPECT_EQ(MaxRelativeError(y, want[p]), 0.0) << where << " processor " << p << " run " << run;
    }
  }
}

struct Case {
  int g;
  DType dtype;
};

class ExecutorCollectivePathsTest : public ::testing::TestWithParam<Case> {
 protected:
  int g() const { return GetParam().g; }
  DType dtype() const { return GetParam().dtype; }
  Mesh mesh() const { return *Mesh::Parse(absl::StrCat("x:", g())); }
  std::string Where(const std::string& what) const {
    return absl::StrCat(what, " g=", g(), " ", DTypeName(dtype()));
  }
};

TEST_P(ExecutorCollectivePathsTest, AllGatherAlongEveryAxis) {
  const Shape shape = OddShape(g());
  const Tensor global = Global(dtype(), shape, 1);
  for (int axis : {1, 3}) {
    v1::Instruction instr;
    instr.mutable_collective()->set_kind(v1::Collective::ALLGATHER);
    instr.mutable_collective()->add_mesh_axes(0);
    instr.mutable_collective()->set_concat_axis(axis);
    const TensorLayout from = SplitOn(4, axis), to = SplitOn(4, -1);
    std::vector<Tensor> feeds, want;
    for (int64_t p = 0; p < g(); ++p) {
      feeds.push_back(ExtractSlice(global, from, mesh(), {p}));
      want.push_back(global);
    }
    RunAndCheck(OneStep(g(), shape, dtype(), from, to, instr), g(), feeds, want,
                Where(absl::StrCat("allgather axis ", axis)));
  }
}

TEST_P(ExecutorCollectivePathsTest, AllToAllBetweenEveryPairOfAxes) {
  const Shape shape = OddShape(g());
  const Tensor global = Global(dtype(), shape, 1);
  for (int split : {1, 3}) {
    for (int concat : {1, 3}) {
      if (split == concat) continue;
      v1::Instruction instr;
      v1::Collective* c = instr.mutable_collective();
      c->set_kind(v1::Collective::ALLTOALL);
      c->add_mesh_axes(0);
      c->set_split_axis(split);
      c->set_concat_axis(concat);
      // Split on `concat` before, on `split` after.
      const TensorLayout from = SplitOn(4, concat), to = SplitOn(4, split);
      std::vector<Tensor> feeds, want;
      for (int64_t p = 0; p < g(); ++p) {
        feeds.push_back(ExtractSlice(global, from, mesh(), {p}));
        want.push_back(ExtractSlice(global, to, mesh(), {p}));
      }
      RunAndCheck(OneStep(g(), shape, dtype(), from, to, instr), g(), feeds, want,
                  Where(absl::StrCat("alltoall split ", split, " concat ", concat)));
    }
  }
}

TEST_P(ExecutorCollectivePathsTest, ReduceScatterAndAllReduceOfPartialSums) {
  const Shape shape = OddShape(g());
  // Processor p holds (p + 1) * base: the sum is g (g + 1) / 2 * base, exact in both dtypes.
  std::vector<Tensor> feeds;
  for (int p = 0; p < g(); ++p) feeds.push_back(Global(dtype(), shape, p + 1));
  const Tensor sum = Global(dtype(), shape, g() * (g() + 1) / 2);
  const TensorLayout repl = SplitOn(4, -1);
  for (int split : {1, 3}) {
    v1::Instruction instr;
    v1::Collective* c = instr.mutable_collective();
    c->set_kind(v1::Collective::REDUCE_SCATTER);
    c->add_mesh_axes(0);
    c->set_reduce_op(v1::REDUCE_SUM);
    c->set_split_axis(split);
    const TensorLayout to = SplitOn(4, split);
    std::vector<Tensor> want;
    for (int64_t p = 0; p < g(); ++p) want.push_back(ExtractSlice(sum, to, mesh(), {p}));
    RunAndCheck(OneStep(g(), shape, dtype(), repl, to, instr), g(), feeds, want,
                Where(absl::StrCat("reduce-scatter split ", split)));
  }
  v1::Instruction instr;
  instr.mutable_collective()->set_kind(v1::Collective::ALLREDUCE);
  instr.mutable_collective()->add_mesh_axes(0);
  instr.mutable_collective()->set_reduce_op(v1::REDUCE_SUM);
  RunAndCheck(OneStep(g(), shape, dtype(), repl, repl, instr), g(), feeds,
              std::vector<Tensor>(g(), sum), Where("allreduce"));
}

TEST_P(ExecutorCollectivePathsTest, LocalSliceOfEveryAxis) {
  const Shape shape = OddShape(g());
  const Tensor global = Global(dtype(), shape, 1);
  for (int axis : {1, 3}) {
    v1::Instruction instr;
    instr.mutable_local_slice()->set_mesh_axis(0);
    instr.mutable_local_slice()->set_axis(axis);
    const TensorLayout from = SplitOn(4, -1), to = SplitOn(4, axis);
    std::vector<Tensor> want;
    for (int64_t p = 0; p < g(); ++p) want.push_back(ExtractSlice(global, to, mesh(), {p}));
    RunAndCheck(OneStep(g(), shape, dtype(), from, to, instr), g(),
                std::vector<Tensor>(g(), global), want,
                Where(absl::StrCat("local slice axis ", axis)));
  }
}

INSTANTIATE_TEST_SUITE_P(Groups, ExecutorCollectivePathsTest,
                         ::testing::Values(Case{2, DType::kFloat32}, Case{3, DType::kFloat32},
                                           Case{2, DType::kInt32}, Case{3, DType::kInt32}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrCat("g", info.param.g, "_",
                                               info.param.dtype == DType::kFloat32 ? "f32"
                                                                                   : "i32");
                         });

TEST(ExecutorFeedsTest, RunWithAnRvalueMapMovesTheFeedInsteadOfCopyingIt) {
  const Shape shape({{"a", 64}, {"b", 1024}});  // 256 KiB: pooled sizes
  v1::Instruction instr;
  instr.mutable_collective()->set_kind(v1::Collective::ALLREDUCE);
  instr.mutable_collective()->add_mesh_axes(0);
  instr.mutable_collective()->set_reduce_op(v1::REDUCE_SUM);
  const TensorLayout repl = SplitOn(2, -1);
  const v1::Program program = OneStep(1, shape, DType::kFloat32, repl, repl, instr);
  LocalCollectiveHub hub(*Mesh::Parse("x:1"));
  Executor executor(program, {0}, nullptr, hub.communicator(0));
  const Tensor value = Global(DType::kFloat32, shape, 1);

  std::map<std::string, Tensor> feeds = {{"x", value}};
  const float* storage = feeds.at("x").f32();
  ASSERT_OK(executor.Run(std::move(feeds)));
  // The input buffer is the fed tensor's own storage.
  ASSERT_NE(executor.Buffer(0), nullptr);
  EXPECT_EQ(executor.Buffer(0)->f32(), storage);
  EXPECT_EQ(MaxRelativeError(*executor.Buffer(1), value), 0.0);

  const std::map<std::string, Tensor> kept = {{"x", value}};
  ASSERT_OK(executor.Run(kept));
  EXPECT_NE(executor.Buffer(0)->f32(), kept.at("x").f32());  // a copy
  EXPECT_EQ(MaxRelativeError(*executor.Buffer(0), value), 0.0);
  EXPECT_EQ(MaxRelativeError(*executor.Buffer(1), value), 0.0);
}

}  // namespace
}  // namespace meshrt
