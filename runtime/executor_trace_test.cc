// The executor's step timeline (set_trace, step_trace.h): every instruction it ran is recorded
// once, times lie inside the step and never overlap on one thread, collectives carry their bytes
// and run on the communication thread with overlap (on the step thread without).
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/lowering/lowering.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "models/train.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"
#include "runtime/step_trace.h"
#include "runtime/test_training_graphs.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

v1::Program LowerFor(const Graph& graph, const std::string& mesh_text, const std::string& layout) {
  const Mesh mesh = Mesh::Parse(mesh_text).value();
  absl::StatusOr<v1::Program> program = Lower(graph, mesh, LayoutRules::Parse(layout, mesh).value());
  MESHRT_CHECK(program.ok(), program.status().ToString());
  return *std::move(program);
}

// Runs `steps` steps on every processor (one thread each), tracing the last one; `fetch` empty:
// Run(feeds), every instruction.
std::vector<v1::StepTrace> TraceLastStep(const v1::Program& program, const std::string& fetch,
                                         int steps, bool overlap) {
  const Mesh mesh = Mesh::FromProto(program.mesh()).value();
  LocalCollectiveHub hub(mesh, {absl::Seconds(30)});
  const int n = mesh.num_processors();
  ExecutorOptions options;
  options.overlap_comm = overlap;
  std::vector<std::unique_ptr<Executor>> executors;
  std::vector<std::unique_ptr<StepTraceRecorder>> recorders;
  for (int p = 0; p < n; ++p) {
    executors.push_back(std::make_unique<Executor>(program, mesh.Coordinate(p), &CpuKernels(),
                                                   hub.communicator(p), KernelContext(), options));
    recorders.push_back(std::make_unique<StepTraceRecorder>());
  }
  std::vector<v1::StepTrace> traces(n);
  for (int s = 1; s <= steps; ++s) {
    std::vector<absl::Status> statuses(n);
    std::vector<std::thread> threads;
    for (int p = 0; p < n; ++p) {
      threads.emplace_back([&, p] {
        const bool traced = s == steps;
        if (traced) {
          recorders[p]->Begin(s);
          executors[p]->set_trace(recorders[p].get());
        }
        statuses[p] = fetch.empty() ? executors[p]->Run({}) : executors[p]->Run({}, {fetch});
        if (traced) {
          executors[p]->set_trace(nullptr);
          traces[p] = recorders[p]->Finish();
        }
        if (!statuses[p].ok()) hub.Abort(statuses[p]);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int p = 0; p < n; ++p) EXPECT_TRUE(statuses[p].ok()) << statuses[p];
  }
  return traces;
}

// Times inside the step, and no two events of one thread overlap.
void ExpectWellFormed(const v1::StepTrace& trace) {
  std::map<int, int64_t> thread_end;  // thread -> end of its last event so far
  EXPECT_GT(trace.dur_us(), 0);
  EXPECT_FALSE(trace.clock().empty());
  for (const v1::TraceEvent& e : trace.events()) {
    SCOPED_TRACE(e.ShortDebugString());
    EXPECT_GE(e.start_us(), 0);
    EXPECT_GE(e.dur_us(), 0);
    EXPECT_LE(e.start_us() + e.dur_us(), trace.dur_us());
    int64_t& end = thread_end[e.thread()];
    EXPECT_GE(e.start_us(), end) << "overlaps the thread's previous event";
    end = std::max(end, e.start_us() + e.dur_us());
    if (e.kind() == v1::TraceEvent::COLLECTIVE) {
      EXPECT_GT(e.bytes(), 0);
      EXPECT_GE(e.fused(), 1);
    }
    if (e.kind() == v1::TraceEvent::WAIT) EXPECT_EQ(e.thread(), v1::TraceEvent::STEP);
    if (e.kind() == v1::TraceEvent::OP) EXPECT_EQ(e.thread(), v1::TraceEvent::STEP);
  }
}

TEST(ExecutorTraceTest, RecordsEveryInstructionOnceWithTimesInsideTheStep) {
  TrainOptions train;
  train.optimizer = "sgd";
  train.learning_rate.base = 1e-2f;
  ASSERT_OK_AND_ASSIGN(models::TrainGraph t, TinyTransformerTrainGraph(train));
  const v1::Program program =
      LowerFor(t.graph, "rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols");
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap on" : "overlap off");
    // Run(feeds): no fusion of local ops, so every instruction is an OP event of its own or a
    // member of a COLLECTIVE event (deferred allreduces fused into one call count `fused`).
    const std::vector<v1::StepTrace> traces = TraceLastStep(program, "", 2, overlap);
    int comm_events = 0;
    for (size_t p = 0; p < traces.size(); ++p) {
      SCOPED_TRACE(absl::StrCat("processor ", p));
      const v1::StepTrace& trace = traces[p];
      EXPECT_EQ(trace.step(), 2);
      ExpectWellFormed(trace);
      std::vector<int> seen(program.instructions_size(), 0);
      int64_t covered = 0, collectives = 0;
      for (const v1::TraceEvent& e : trace.events()) {
        if (e.kind() == v1::TraceEvent::WAIT) continue;
        ASSERT_GE(e.instruction(), 0);
        ASSERT_LT(e.instruction(), program.instructions_size());
        const bool is_collective =
            program.instructions(e.instruction()).kind_case() == v1::Instruction::kCollective;
        EXPECT_EQ(is_collective, e.kind() == v1::TraceEvent::COLLECTIVE) << e.ShortDebugString();
        ++seen[e.instruction()];
        covered += e.kind() == v1::TraceEvent::COLLECTIVE ? e.fused() : 1;
        collectives += e.kind() == v1::TraceEvent::COLLECTIVE;
        comm_events += e.thread() == v1::TraceEvent::COMM;
      }
      EXPECT_EQ(covered, program.instructions_size());
      EXPECT_GT(collectives, 0);
      for (int i = 0; i < program.instructions_size(); ++i) {
        EXPECT_LE(seen[i], 1) << "instruction " << i << " recorded twice";
      }
    }
    if (overlap) {
      EXPECT_GT(comm_events, 0) << "no collective ran on the communication thread";
    } else {
      EXPECT_EQ(comm_events, 0);
    }
  }
}

TEST(ExecutorTraceTest, PrunedTrainingStepsRecordOnlyTheirStep) {
  TrainOptions train;
  train.optimizer = "adam";
  train.learning_rate.base = 1e-3f;
  ASSERT_OK_AND_ASSIGN(models::TrainGraph m, TinyMlpTrainGraph(train));
  const v1::Program program = LowerFor(m.graph, "x:2", "batch:x");
  const std::vector<v1::StepTrace> traces = TraceLastStep(program, m.loss, 3, true);
  ASSERT_EQ(traces.size(), 2u);
  for (const v1::StepTrace& trace : traces) {
    EXPECT_EQ(trace.step(), 3);
    ExpectWellFormed(trace);
    int ops = 0, collectives = 0;
    for (const v1::TraceEvent& e : trace.events()) {
      ops += e.kind() == v1::TraceEvent::OP;
      collectives += e.kind() == v1::TraceEvent::COLLECTIVE;
    }
    // One step's worth: no more events than instructions (step 1 and 2 were not traced).
    EXPECT_GT(ops, 0);
    EXPECT_GT(collectives, 0);  // the data-parallel gradient allreduces
    EXPECT_LE(ops + collectives, program.instructions_size());
  }
}

TEST(ExecutorTraceTest, WithoutARecorderNothingIsRecorded) {
  StepTraceRecorder recorder;
  recorder.Begin(7);
  ASSERT_OK_AND_ASSIGN(models::TrainGraph m, TinyMlpTrainGraph(TrainOptions()));
  const v1::Program program = LowerFor(m.graph, "x:2", "batch:x");
  TraceLastStep(program, m.loss, 1, true);  // its own recorders, not this one
  const v1::StepTrace trace = recorder.Finish();
  EXPECT_EQ(trace.step(), 7);
  EXPECT_EQ(trace.events_size(), 0);
}

}  // namespace
}  // namespace meshrt
