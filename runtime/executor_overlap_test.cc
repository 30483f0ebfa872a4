// Overlap of communication with compute (ExecutorOptions::overlap_comm, executor.h): the same bits
// and the same communicator calls with overlap on and off; a local op runs while an earlier
// collective is pending; failures and aborts on the communication thread.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/ir/slicing.h"
#include "core/lowering/lowering.h"
#include "core/testing/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "models/train.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"
#include "runtime/step_activity.h"
#include "runtime/test_kernels.h"
#include "runtime/test_training_graphs.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// Forwards to `inner` and records every call (kind, axes, sizes) in order.
class RecordingCommunicator : public Communicator {
 public:
  explicit RecordingCommunicator(Communicator* inner) : inner_(inner) {}
  const Mesh& mesh() const override { return inner_->mesh(); }
  const std::vector<int64_t>& coordinate() const override { return inner_->coordinate(); }
  absl::Status AllReduce(const std::vector<int>& a, v1::ReduceOp op, DType dtype, void* data,
                         int64_t count) override {
    Record("AllReduce", a, count);
    return inner_->AllReduce(a, op, dtype, data, count);
  }
  absl::Status AllGather(const std::vector<int>& a, const void* in, int64_t bytes,
                         void* out) override {
    Record("AllGather", a, bytes);
    return inner_->AllGather(a, in, bytes, out);
  }
  absl::Status AllToAll(const std::vector<int>& a, const void* in, void* out,
                        int64_t bytes) override {
    Record("AllToAll", a, bytes);
    return inner_->AllToAll(a, in, out, bytes);
  }
  absl::Status ReduceScatter(const std::vector<int>& a, v1::ReduceOp op, DType dtype,
                             const void* in, int64_t count, void* out) override {
    Record("ReduceScatter", a, count);
    return inner_->ReduceScatter(a, op, dtype, in, count, out);
  }
  absl::Status Broadcast(const std::vector<int>& a, int root, void* data,
                         int64_t bytes) override {
    Record("Broadcast", a, bytes);
    return inner_->Broadcast(a, root, data, bytes);
  }
  absl::Status Permute(int axis, int shift, bool wrap, const void* in, void* out,
                       int64_t bytes) override {
    Record("Permute", {axis}, bytes);
    return inner_->Permute(axis, shift, wrap, in, out, bytes);
  }
  absl::Status Barrier(const std::vector<int>& a) override { return inner_->Barrier(a); }

  std::vector<std::string> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  void Record(const char* kind, const std::vector<int>& axes, int64_t size) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(absl::StrCat(kind, "[", absl::StrJoin(axes, ","), "] ", size));
  }
  Communicator* const inner_;
  mutable absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(TensorData(a), TensorData(b), TensorBytes(a)) == 0;
}

// What every processor saw and computed in some training steps.
struct Trace {
  std::vector<std::vector<std::string>> calls;             // by processor
  std::vector<std::vector<Tensor>> losses;                 // by processor, by step
  std::vector<std::map<std::string, Tensor>> variables;    // by processor, after the steps
  std::vector<std::vector<std::string>> overlap_decisions;  // by processor, after each step
};

// Runs `steps` steps of `program` fetching `fetch` on every processor (one thread each).
Trace RunSteps(const v1::Program& program, const std::string& fetch, int steps,
               const ExecutorOptions& options) {
  const Mesh mesh = Mesh::FromProto(program.mesh()).value();
  LocalCollectiveHub hub(mesh, {absl::Seconds(30)});
  const int n = mesh.num_processors();
  std::vector<std::unique_ptr<RecordingCommunicator>> comms;
  std::vector<std::unique_ptr<Executor>> executors;
  for (int p = 0; p < n; ++p) {
    comms.push_back(std::make_unique<RecordingCommunicator>(hub.communicator(p)));
    executors.push_back(std::make_unique<Executor>(program, mesh.Coordinate(p), &CpuKernels(),
                                                   comms.back().get(), KernelContext(), options));
  }
  Trace trace;
  trace.losses.resize(n);
  trace.overlap_decisions.resize(n);
  for (int s = 0; s < steps; ++s) {
    std::vector<absl::Status> statuses(n);
    std::vector<std::thread> threads;
    for (int p = 0; p < n; ++p) {
      threads.emplace_back([&, p] {
        statuses[p] = executors[p]->Run({}, {fetch});
        if (!statuses[p].ok()) hub.Abort(statuses[p]);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int p = 0; p < n; ++p) {
      EXPECT_TRUE(statuses[p].ok()) << statuses[p];
      absl::StatusOr<Tensor> loss = executors[p]->OutputSlice(fetch);
      EXPECT_TRUE(loss.ok()) << loss.status();
      if (loss.ok()) trace.losses[p].push_back(*loss);
      for (std::string& d : executors[p]->TakeOverlapDecisions()) {
        trace.overlap_decisions[p].push_back(absl::StrCat("step ", s, ": ", d));
      }
    }
  }
  for (int p = 0; p < n; ++p) {
    trace.calls.push_back(comms[p]->calls());
    trace.variables.push_back(executors[p]->variables());
  }
  return trace;
}

Trace RunSteps(const v1::Program& program, const std::string& fetch, int steps, bool overlap) {
  ExecutorOptions options;
  options.overlap_comm = overlap;
  return RunSteps(program, fetch, steps, options);
}

void ExpectSameTrace(const Trace& on, const Trace& off) {
  ASSERT_EQ(on.calls.size(), off.calls.size());
  for (size_t p = 0; p < on.calls.size(); ++p) {
    SCOPED_TRACE(absl::StrCat("processor ", p));
    EXPECT_FALSE(on.calls[p].empty());
    EXPECT_EQ(on.calls[p], off.calls[p]);
    ASSERT_EQ(on.losses[p].size(), off.losses[p].size());
    for (size_t s = 0; s < on.losses[p].size(); ++s) {
      EXPECT_TRUE(SameBits(on.losses[p][s], off.losses[p][s])) << "loss of step " << s;
    }
    ASSERT_EQ(on.variables[p].size(), off.variables[p].size());
    for (const auto& [name, value] : on.variables[p]) {
      ASSERT_TRUE(off.variables[p].count(name)) << name;
      EXPECT_TRUE(SameBits(value, off.variables[p].at(name))) << "variable " << name;
    }
  }
}

v1::Program LowerFor(const Graph& graph, const std::string& mesh_text, const std::string& layout) {
  const Mesh mesh = Mesh::Parse(mesh_text).value();
  absl::StatusOr<v1::Program> program = Lower(graph, mesh, LayoutRules::Parse(layout, mesh).value());
  MESHRT_CHECK(program.ok(), program.status().ToString());
  return *std::move(program);
}

TrainOptions SgdTraining() {
  TrainOptions train;
  train.optimizer = "sgd";
  train.learning_rate.base = 1e-2f;
  return train;
}

TEST(ExecutorOverlapTest, TrainingStepsGiveTheSameBitsAndCallsWithOverlapOnAndOff) {
  ASSERT_OK_AND_ASSIGN(models::TrainGraph m, TinyMlpTrainGraph(SgdTraining()));
  ASSERT_OK_AND_ASSIGN(models::TrainGraph t, TinyTransformerTrainGraph(SgdTraining()));
  struct Case {
    const models::TrainGraph* graph;
    std::string mesh, layout;
  };
  const std::vector<Case> cases = {
      {&m, "x:2", "batch:x"},
      {&m, "x:2", "d_ff:x"},
      {&m, "x:4", "batch:x"},
      {&t, "x:2", "batch:x"},
      {&t, "rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.mesh, " ", c.layout));
    const v1::Program program = LowerFor(c.graph->graph, c.mesh, c.layout);
    const Trace on = RunSteps(program, c.graph->loss, 3, /*overlap=*/true);
    const Trace off = RunSteps(program, c.graph->loss, 3, /*overlap=*/false);
    ExpectSameTrace(on, off);
  }
}

// Overlap chosen by measurement (ExecutorOptions::choose_overlap, runtime/overlap_choice.h): the
// first 2 steps overlap, the next 6 alternate, and every processor then reports its choice once,
// after step 8 (index 7); whatever each chose, the bits and calls are those without overlap.
TEST(ExecutorOverlapTest, ChosenOverlapDecidesOnceAfterItsTrialsAndKeepsTheBits) {
  ASSERT_OK_AND_ASSIGN(models::TrainGraph m, TinyMlpTrainGraph(SgdTraining()));
  const v1::Program program = LowerFor(m.graph, "x:2", "batch:x");
  ExecutorOptions options;
  options.choose_overlap = true;
  options.fixed_program = true;
  const Trace chosen = RunSteps(program, m.loss, 10, options);
  ExpectSameTrace(chosen, RunSteps(program, m.loss, 10, /*overlap=*/false));
  for (const std::vector<std::string>& decisions : chosen.overlap_decisions) {
    ASSERT_EQ(decisions.size(), 1u);
    EXPECT_THAT(decisions[0],
                testing::MatchesRegex("step 7: o(n|ff) \\(step medians: on [0-9.]+ ms, off "
                                      "[0-9.]+ ms, 3 steps each; .*\\)"));
  }
  // Without a fixed program there is nothing to keep the measurements in: overlap_comm holds.
  options.fixed_program = false;
  const Trace unchosen = RunSteps(program, m.loss, 10, options);
  for (const std::vector<std::string>& decisions : unchosen.overlap_decisions) {
    EXPECT_TRUE(decisions.empty());
  }
}

// A one-processor view of a 2-processor mesh: every collective is this class's hook (no peer is
// needed); the others are Unimplemented.
class HookCommunicator : public Communicator {
 public:
  HookCommunicator() : mesh_(*Mesh::Parse("x:2")) {}
  const Mesh& mesh() const override { return mesh_; }
  const std::vector<int64_t>& coordinate() const override { return coordinate_; }
  // A SUM over two equal members: data doubles (float32).
  absl::Status AllReduce(const std::vector<int>&, v1::ReduceOp, DType dtype, void* data,
                         int64_t count) override {
    if (dtype != DType::kFloat32) return absl::UnimplementedError("AllReduce of int32");
    {
      absl::MutexLock lock(&mu_);
      reduce_counts_.push_back(count);
    }
    for (int64_t i = 0; i < count; ++i) static_cast<float*>(data)[i] *= 2;
    return absl::OkStatus();
  }
  std::vector<int64_t> reduce_counts() const {
    absl::MutexLock lock(&mu_);
    return reduce_counts_;
  }
  // out = two copies of in, after `gather_hook` (when set) lets it go on.
  absl::Status AllGather(const std::vector<int>&, const void* in, int64_t bytes,
                         void* out) override {
    ++gathers;
    if (gather_hook) {
      RETURN_IF_ERROR(gather_hook());
    }
    std::memcpy(out, in, bytes);
    std::memcpy(static_cast<char*>(out) + bytes, in, bytes);
    return absl::OkStatus();
  }
  absl::Status AllToAll(const std::vector<int>&, const void*, void*, int64_t) override {
    return absl::UnimplementedError("AllToAll");
  }
  absl::Status ReduceScatter(const std::vector<int>&, v1::ReduceOp, DType, const void*, int64_t,
                             void*) override {
    return absl::UnimplementedError("ReduceScatter");
  }
  absl::Status Broadcast(const std::vector<int>&, int, void*, int64_t) override {
    return absl::UnimplementedError("Broadcast");
  }
  absl::Status Permute(int, int, bool, const void*, void*, int64_t) override {
    return absl::UnimplementedError("Permute");
  }
  absl::Status Barrier(const std::vector<int>&) override { return absl::OkStatus(); }

  std::function<absl::Status()> gather_hook;
  std::atomic<int> gathers{0};

 private:
  mutable absl::Mutex mu_;
  std::vector<int64_t> reduce_counts_ ABSL_GUARDED_BY(mu_);
  const Mesh mesh_;
  const std::vector<int64_t> coordinate_ = {0};
};

// TestKernels plus "hook": out = in0 after `hook` runs.
class HookKernels : public KernelRunner {
 public:
  using KernelRunner::Run;
  absl::Status Run(const v1::Op& op, absl::Span<const Tensor* const> inputs, Tensor* output,
                   const KernelContext& context) const override {
    if (op.type() != "hook") return test_.Run(op, inputs, output, context);
    if (hook) {
      RETURN_IF_ERROR(hook());
    }
    std::memcpy(TensorData(output), TensorData(*inputs[0]), TensorBytes(*inputs[0]));
    return absl::OkStatus();
  }
  std::function<absl::Status()> hook;

 private:
  TestKernels test_;
};

// g = allgather(a) over x (instruction 0), then instruction 1 = LOCAL1(a), which does not read g,
// instruction 2 = allgather(h) (h = instruction 1's result), and s = add(g, g) (instruction 3).
constexpr char kGatherThenLocal[] = R"pb(
  mesh { dims { name: "x" size: 2 } }
  num_buffers: 5
  inputs { name: "a" buffer: 0 dtype: DT_FLOAT32 layout { mesh_axis: [ 0 ] }
           shape { dims { name: "n" size: 4 } } }
  instructions { output: 1 inputs: 0 dtype: DT_FLOAT32 source_op: "g"
                 slice_shape { dims { name: "n" size: 4 } }
                 collective { kind: ALLGATHER mesh_axes: 0 concat_axis: 0 } }
  instructions { output: 2 inputs: 0 dtype: DT_FLOAT32 source_op: "h"
                 slice_shape { dims { name: "n" size: 2 } } local { type: "LOCAL1" } }
  instructions { output: 3 inputs: 2 dtype: DT_FLOAT32 source_op: "hg"
                 slice_shape { dims { name: "n" size: 4 } }
                 collective { kind: ALLGATHER mesh_axes: 0 concat_axis: 0 } }
  instructions { output: 4 inputs: [ 1, 1 ] dtype: DT_FLOAT32 source_op: "s"
                 slice_shape { dims { name: "n" size: 4 } } local { type: "add" } }
  outputs { name: "s" buffer: 4 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
            shape { dims { name: "n" size: 4 } } }
)pb";

v1::Program GatherThenLocal(const std::string& local) {
  std::string text = kGatherThenLocal;
  text.replace(text.find("LOCAL1"), 6, local);
  return ParseProgram(text);
}

const std::map<std::string, Tensor>& Feeds() {
  static const auto* feeds =
      new std::map<std::string, Tensor>{{"a", Tensor::Float(Shape{{"n", 2}}, {1, 2})}};
  return *feeds;
}

// The allgather of instruction 0 waits for a latch that only the local op after it releases:
// without overlap the step would deadlock (here: the allgather gives up after a while).
TEST(ExecutorOverlapTest, ALocalOpRunsWhileAnEarlierCollectiveIsPending) {
  const v1::Program program = GatherThenLocal("hook");
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    HookCommunicator comm;
    HookKernels kernels;
    absl::Notification latch;
    comm.gather_hook = [&]() -> absl::Status {
      if (comm.gathers > 1 || latch.WaitForNotificationWithTimeout(absl::Seconds(overlap ? 20 : 0.3))) {
        return absl::OkStatus();
      }
      return absl::DeadlineExceededError("the latch was not released: the local op did not run");
    };
    kernels.hook = [&] {
      if (!latch.HasBeenNotified()) latch.Notify();
      return absl::OkStatus();
    };
    ExecutorOptions options;
    options.overlap_comm = overlap;
    Executor executor(program, {0}, &kernels, &comm, KernelContext(), options);
    const absl::Status s = executor.Run(Feeds());
    if (overlap) {
      ASSERT_OK(s);
      EXPECT_THAT(executor.OutputSlice("s")->floats(), testing::ElementsAre(2, 4, 2, 4));
      EXPECT_THAT(executor.Buffer(3)->floats(), testing::ElementsAre(1, 2, 1, 2));
    } else {
      EXPECT_TRUE(StatusIs(s, absl::StatusCode::kDeadlineExceeded,
                           {"instruction 0", "source_op 'g'", "the local op did not run"}));
    }
  }
}

// `count` allreduces of a (n floats each, 0..count-1), then h = hook(a), then their sum s.
v1::Program SmallAllReducesThenLocal(int count, int64_t n) {
  std::string text = absl::StrCat(R"pb(
    mesh { dims { name: "x" size: 2 } }
    inputs { name: "a" buffer: 0 dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] }
             shape { dims { name: "n" size: )pb", n, R"pb( } } }
  )pb");
  int buffer = 1;
  for (int k = 0; k < count; ++k, ++buffer) {
    absl::StrAppend(&text, "instructions { output: ", buffer, " inputs: 0 dtype: DT_FLOAT32 ",
                    "slice_shape { dims { name: \"n\" size: ", n, " } } ",
                    "collective { kind: ALLREDUCE mesh_axes: 0 reduce_op: REDUCE_SUM } }\n");
  }
  absl::StrAppend(&text, "instructions { output: ", buffer, " inputs: 0 dtype: DT_FLOAT32 ",
                  "source_op: \"h\" slice_shape { dims { name: \"n\" size: ", n, " } } ",
                  "local { type: \"hook\" } }\n");
  int sum = 1;
  for (int k = 1; k < count; ++k) {
    ++buffer;
    absl::StrAppend(&text, "instructions { output: ", buffer, " inputs: [ ", sum, ", ", k + 1,
                    " ] dtype: DT_FLOAT32 slice_shape { dims { name: \"n\" size: ", n,
                    " } } local { type: \"add\" } }\n");
    sum = buffer;
  }
  absl::StrAppend(&text, "outputs { name: \"s\" buffer: ", sum,
                  " dtype: DT_FLOAT32 layout { mesh_axis: [ -1 ] } shape { dims { name: \"n\" "
                  "size: ", n, " } } }\nnum_buffers: ", buffer + 1, "\n");
  return ParseProgram(text);
}

TEST(ExecutorOverlapTest, DeferredAllReducesGoOutOnceTheirBucketIsFull) {
  // Two allreduces of 512 KiB fill a 1 MiB bucket: it is issued (one fused call) before the local
  // op after them, whose kernel checks that; three of 256 KiB do not, and wait for their reader.
  struct Case {
    int count;
    int64_t n;
    bool issued_before_h;
  };
  for (const Case& c : {Case{2, 128 << 10, true}, Case{3, 64 << 10, false}}) {
    for (bool overlap : {true, false}) {
      SCOPED_TRACE(absl::StrCat(c.count, " allreduces, overlap ", overlap));
      const v1::Program program = SmallAllReducesThenLocal(c.count, c.n);
      HookCommunicator comm;
      HookKernels kernels;
      kernels.hook = [&]() -> absl::Status {
        // With overlap the bucket may still be on its way: give it a while.
        for (int i = 0; i < (c.issued_before_h && overlap ? 2000 : 1); ++i) {
          if (!comm.reduce_counts().empty()) break;
          absl::SleepFor(absl::Milliseconds(5));
        }
        if (comm.reduce_counts().empty() == c.issued_before_h) {
          return absl::FailedPreconditionError(
              absl::StrCat("allreduce calls before h: ", comm.reduce_counts().size()));
        }
        return absl::OkStatus();
      };
      ExecutorOptions options;
      options.overlap_comm = overlap;
      Executor executor(program, {0}, &kernels, &comm, KernelContext(), options);
      std::vector<float> a(c.n);
      for (int64_t i = 0; i < c.n; ++i) a[i] = static_cast<float>(i % 7);
      ASSERT_OK(executor.Run({{"a", Tensor::Float(Shape{{"n", c.n}}, a)}}));
      EXPECT_THAT(comm.reduce_counts(), testing::ElementsAre(c.count * c.n));  // one fused call
      const Tensor s = *executor.OutputSlice("s");
      for (int64_t i : {int64_t{0}, int64_t{5}, c.n - 1}) {
        EXPECT_EQ(s.f32()[i], 2.0f * c.count * a[i]) << i;
      }
    }
  }
}

TEST(ExecutorOverlapTest, ACollectiveFailingOnTheCommunicationThreadNamesItsInstruction) {
  // The allgather fails while the local op after it runs: the step reports the allgather, with
  // overlap and without; the second allgather is never called.
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    HookCommunicator comm;
    HookKernels kernels;
    comm.gather_hook = [] { return absl::UnavailableError("peer (1) closed the connection"); };
    ExecutorOptions options;
    options.overlap_comm = overlap;
    const v1::Program failing_local = GatherThenLocal("add");
    Executor executor(failing_local, {0}, &kernels, &comm, KernelContext(), options);
    // add(a) of one input fails: with overlap it runs after the allgather was issued, but the
    // allgather comes first in program order and its error is the step's.
    EXPECT_TRUE(StatusIs(executor.Run(Feeds()), absl::StatusCode::kUnavailable,
                         {"instruction 0", "source_op 'g'", "collective ALLGATHER over [x]",
                          "processor (0)", "peer (1) closed"}));
    EXPECT_EQ(comm.gathers, 1);
    // Without a failing local op the reader of g gets the error too (it does not wait forever).
    const v1::Program program = GatherThenLocal("hook");
    Executor plain(program, {0}, &kernels, &comm, KernelContext(), options);
    EXPECT_TRUE(StatusIs(plain.Run(Feeds()), absl::StatusCode::kUnavailable,
                         {"instruction 0", "source_op 'g'", "peer (1) closed"}));
    EXPECT_EQ(comm.gathers, 2);
  }
}

TEST(ExecutorOverlapTest, ALocalOpFailingWhileACollectiveIsInFlightWaitsForItAndReportsItself) {
  HookCommunicator comm;
  HookKernels kernels;
  absl::Notification local_failed;
  comm.gather_hook = [&] {
    if (comm.gathers == 1) local_failed.WaitForNotificationWithTimeout(absl::Seconds(20));
    return absl::OkStatus();
  };
  kernels.hook = [&] {
    local_failed.Notify();
    return absl::InvalidArgumentError("the local op failed");
  };
  const v1::Program program = GatherThenLocal("hook");
  Executor executor(program, {0}, &kernels, &comm);
  EXPECT_TRUE(StatusIs(executor.Run(Feeds()), absl::StatusCode::kInvalidArgument,
                       {"instruction 1", "source_op 'h'", "the local op failed"}));
  EXPECT_EQ(comm.gathers, 1);
  ASSERT_NE(executor.Buffer(1), nullptr);  // the allgather finished before Run returned
  EXPECT_THAT(executor.Buffer(1)->floats(), testing::ElementsAre(1, 2, 1, 2));
}

TEST(ExecutorOverlapTest, AnAbortWhileACollectiveIsInFlightEndsTheStepWithAborted) {
  // g = allgather(a) (instruction 0) waits for a latch; hg = allgather(a) (1) is queued behind it;
  // the local op h (2) aborts the activity and then releases the latch. The queued allgather is
  // never started: the step is Aborted there, the first instruction it did not run.
  v1::Program program = GatherThenLocal("hook");
  program.mutable_instructions(2)->set_inputs(0, 0);
  program.mutable_instructions(2)->mutable_slice_shape()->mutable_dims(0)->set_size(4);
  program.mutable_instructions()->SwapElements(1, 2);
  HookCommunicator comm;
  HookKernels kernels;
  StepActivity activity;
  absl::Notification started, latch;
  comm.gather_hook = [&]() -> absl::Status {
    started.Notify();
    if (latch.WaitForNotificationWithTimeout(absl::Seconds(20))) return absl::OkStatus();
    return absl::DeadlineExceededError("the latch was not released");
  };
  kernels.hook = [&] {
    started.WaitForNotificationWithTimeout(absl::Seconds(20));  // g is in flight
    activity.Abort();
    latch.Notify();
    return absl::OkStatus();
  };
  Executor executor(program, {0}, &kernels, &comm);
  executor.set_activity(&activity);
  activity.BeginStep(1);
  const absl::Status s = executor.Run(Feeds());
  activity.EndStep();
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kAborted,
                       {"instruction 1", "source_op 'hg'", "collective ALLGATHER", "aborted"}));
  EXPECT_EQ(comm.gathers, 1);
  EXPECT_EQ(activity.Read().ordinal, 4);  // the calling thread entered g, hg, h and (refused) s
}

TEST(ExecutorOverlapTest, WhileTheStepWaitsForACollectiveTheActivityNamesIt) {
  // s (instruction 3) reads g (0), whose allgather waits until this test has seen the activity
  // name it: instruction 0, after four Enters (g, h, hg, s).
  const v1::Program program = GatherThenLocal("hook");
  HookCommunicator comm;
  HookKernels kernels;
  StepActivity activity;
  absl::Notification seen;
  comm.gather_hook = [&]() -> absl::Status {
    if (comm.gathers > 1 || seen.WaitForNotificationWithTimeout(absl::Seconds(20))) {
      return absl::OkStatus();
    }
    return absl::DeadlineExceededError("the activity never named the allgather");
  };
  Executor executor(program, {0}, &kernels, &comm);
  executor.set_activity(&activity);
  activity.BeginStep(1);
  absl::Status s;
  std::thread step([&] { s = executor.Run(Feeds()); });
  StepActivity::Snapshot snapshot;
  for (int i = 0; i < 2000 && !seen.HasBeenNotified(); ++i) {
    snapshot = activity.Read();
    if (snapshot.ordinal == 4 && snapshot.instruction == 0) {
      seen.Notify();
    } else {
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  step.join();
  activity.EndStep();
  ASSERT_OK(s);
  EXPECT_EQ(snapshot.instruction, 0);
  EXPECT_EQ(snapshot.ordinal, 4);
  EXPECT_EQ(activity.Read().ordinal, 4);  // waiting counted no Enter
}

}  // namespace
}  // namespace meshrt
