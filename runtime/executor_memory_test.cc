// The memory model (core/planning/memory_model.h) against what the executor holds: on training steps of the
// MLP and the Transformer (Adam: parameters, slots, gradients) under several meshes and layouts,
// the bytes an executor's buffers hold at its peak (ExecutorOptions::track_live_bytes), on every
// processor and step, are at most the model's peak and within 10% of it (equal on one processor).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/lowering/lowering.h"
#include "core/planning/memory_model.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "models/train.h"
#include "runtime/executor.h"
#include "runtime/local_communicator.h"
#include "runtime/test_training_graphs.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// Every processor's peak over `steps` training steps fetching `fetch`.
std::vector<int64_t> PeakLiveBytes(const v1::Program& program, const std::string& fetch,
                                   int steps) {
  const Mesh mesh = Mesh::FromProto(program.mesh()).value();
  LocalCollectiveHub hub(mesh, {absl::Seconds(30)});
  const int n = mesh.num_processors();
  ExecutorOptions options;
  options.overlap_comm = false;
  options.track_live_bytes = true;
  std::vector<std::unique_ptr<Executor>> executors;
  for (int p = 0; p < n; ++p) {
    executors.push_back(std::make_unique<Executor>(program, mesh.Coordinate(p), &CpuKernels(),
                                                   hub.communicator(p), KernelContext(), options));
  }
  std::vector<int64_t> peaks(n, 0);
  for (int s = 0; s < steps; ++s) {
    const std::vector<absl::Status> statuses = hub.RunOnAll([&](int p, Communicator*) {
      absl::Status status = executors[p]->Run({}, {fetch});
      if (!status.ok()) hub.Abort(status);
      return status;
    });
    for (int p = 0; p < n; ++p) {
      EXPECT_TRUE(statuses[p].ok()) << statuses[p];
      peaks[p] = std::max(peaks[p], executors[p]->peak_live_bytes());
    }
  }
  return peaks;
}

TEST(ExecutorMemoryTest, TheMemoryModelsPeakBoundsWhatTheExecutorHoldsClosely) {
  TrainOptions train;
  train.optimizer = "adam";
  train.learning_rate.base = 1e-3f;
  ASSERT_OK_AND_ASSIGN(models::TrainGraph m, TinyMlpTrainGraph(train));
  ASSERT_OK_AND_ASSIGN(models::TrainGraph t, TinyTransformerTrainGraph(train));
  struct Case {
    const models::TrainGraph* graph;
    std::string mesh, layout;
  };
  const std::vector<Case> cases = {
      {&m, "x:1", ""},
      {&m, "x:2", "batch:x"},
      {&m, "x:2", "d_ff:x"},
      {&m, "rows:2,cols:2", "batch:rows,d_ff:cols"},
      {&t, "x:1", ""},
      {&t, "x:2", "batch:x"},
      {&t, "rows:2,cols:2", "batch:rows,heads:cols,d_ff:cols,vocab:cols"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.mesh, " '", c.layout, "'"));
    const Mesh mesh = Mesh::Parse(c.mesh).value();
    ASSERT_OK_AND_ASSIGN(const LayoutRules rules, LayoutRules::Parse(c.layout, mesh));
    ASSERT_OK_AND_ASSIGN(const v1::Program program, Lower(c.graph->graph, mesh, rules));
    const std::vector<std::string> fetches = {c.graph->loss};
    MemoryOptions options;
    options.fetches = &fetches;
    ASSERT_OK_AND_ASSIGN(const MemoryReport model, ComputeMemory(program, options));
    // Never more than the model; at most 10% less, where a fused group skips an intermediate or a
    // deferred allreduce writes its output later than the model counts it.
    for (const int64_t held : PeakLiveBytes(program, c.graph->loss, 2)) {
      EXPECT_LE(held, model.peak_bytes);
      EXPECT_GE(held, model.peak_bytes * 9 / 10) << "the model's peak: " << model.peak_bytes;
      if (mesh.num_processors() == 1) EXPECT_EQ(held, model.peak_bytes);
    }
  }
}

}  // namespace
}  // namespace meshrt
