// A worker daemon's Prometheus metrics (monitoring/metrics.h), served on its /metrics:
//
//   meshrt_worker_collective_calls_total{kind,mesh_dims}    counter
//   meshrt_worker_collective_bytes_total{kind,mesh_dims}    counter
//   meshrt_worker_collective_seconds_total{kind,mesh_dims}  counter
//   meshrt_worker_steps_total                               counter  steps run to completion
//   meshrt_worker_step_failures_total                       counter  steps that failed
//   meshrt_worker_step_duration_seconds                     histogram  wall time of a step here
//   meshrt_worker_compute_seconds_total                     counter  step threads' CPU time
//   meshrt_worker_sessions                                  gauge    sessions loaded
//   meshrt_worker_buffer_pool_bytes                         gauge    executors' pooled storage
//   and the process metrics (monitoring/process_metrics.h).
//
// Collectives are measured by MeteredCommunicator, a decorator the Worker puts around every
// session's communicator (Gloo in the daemon): `kind` is allreduce, allgather, alltoall,
// reduce_scatter, broadcast, permute or barrier (the blocked and out-of-place forms count as their
// plain kind), and `mesh_dims` the names of the mesh dims the call's group spans, in mesh order,
// joined by "," ("rows", "rows,cols"; "" for a group of no dims). The communicator sees the mesh
// and the axes of every call, so no instruction attributes are needed; the label set is bounded by
// the kinds × the subsets of mesh dims the programs use. Bytes are the size of this processor's
// input to the call: the reduced buffer (allreduce), its own chunk (allgather), all g chunks it
// sends (alltoall, reduce_scatter), the broadcast or permuted buffer, none for a barrier — a
// measure of the data handed to the collective, not of the bytes on the wire (which depend on the
// algorithm). Seconds are the call's wall time, waiting for peers included. Failed calls count too.
//
// Compute: `meshrt_worker_compute_seconds_total` is the CPU time of the sessions' step threads
// during steps (runtime/step_activity.h; pthread CPU clocks): kernels (OpenBLAS runs in the
// calling thread), packing and the share of collective work done on the step thread — not time
// blocked waiting for peers. Collectives the executor overlaps on its communication thread are
// not in it (their wall time is in the collective seconds).
//
// Thread-safety: thread-safe; one WorkerMetrics serves every session of the worker.
#ifndef MESHRT_WORKER_WORKER_METRICS_H_
#define MESHRT_WORKER_WORKER_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "monitoring/metrics.h"
#include "runtime/communicator.h"

namespace meshrt {

class WorkerMetrics {
 public:
  // Registers the families above in `registry` (borrowed; must outlive this).
  explicit WorkerMetrics(MetricsRegistry* registry);

  MetricsRegistry* registry() const { return registry_; }

  // A step that ended on this worker (a repetition of a RunStep): its wall time and, when known,
  // the step thread's CPU time in it.
  void StepDone(bool ok, absl::Duration wall, std::optional<absl::Duration> cpu);

  MetricFamily<Counter>* collective_calls;
  MetricFamily<Counter>* collective_bytes;
  MetricFamily<Counter>* collective_seconds;
  Gauge* sessions;
  Gauge* buffer_pool_bytes;

 private:
  MetricsRegistry* const registry_;
  Counter* steps_;
  Counter* step_failures_;
  Histogram* step_duration_;
  Counter* compute_seconds_;
};

// Forwards every call (the blocked and out-of-place ones included, so the inner communicator's
// own fast paths stay in use) to `inner` and counts it in `metrics`. Owns `inner`; `metrics` is
// borrowed and must outlive it. Thread-safe as far as `inner` is (the series cache has its own
// lock, taken once per call).
class MeteredCommunicator : public Communicator {
 public:
  MeteredCommunicator(std::unique_ptr<Communicator> inner, WorkerMetrics* metrics);

  const Mesh& mesh() const override { return inner_->mesh(); }
  const std::vector<int64_t>& coordinate() const override { return inner_->coordinate(); }
  absl::Status AllReduce(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                         void* data, int64_t count) override;
  absl::Status AllGather(const std::vector<int>& mesh_axes, const void* in, int64_t bytes,
                         void* out) override;
  absl::Status AllToAll(const std::vector<int>& mesh_axes, const void* in, void* out,
                        int64_t bytes_per_rank) override;
  absl::Status ReduceScatter(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                             const void* in, int64_t count_per_rank, void* out) override;
  absl::Status Broadcast(const std::vector<int>& mesh_axes, int root_rank, void* data,
                         int64_t bytes) override;
  absl::Status Permute(int mesh_axis, int shift, bool wrap, const void* in, void* out,
                       int64_t bytes) override;
  absl::Status Barrier(const std::vector<int>& mesh_axes) override;
  absl::Status AllReduceInto(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                             const void* in, void* out, int64_t count) override;
  absl::Status AllToAllBlocked(const std::vector<int>& mesh_axes, const void* in,
                               int64_t in_blocks, void* out, int64_t out_blocks,
                               int64_t bytes_per_rank) override;
  absl::Status AllGatherBlocked(const std::vector<int>& mesh_axes, const void* in, int64_t bytes,
                                void* out, int64_t out_blocks) override;
  absl::Status ReduceScatterBlocked(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                    DType dtype, const void* in, int64_t in_blocks,
                                    int64_t count_per_rank, void* out) override;

  // The `mesh_dims` label of a call over `axes` of `mesh`: the distinct in-range axes' names in
  // mesh order, joined by ",".
  static std::string MeshDimsLabel(const Mesh& mesh, const std::vector<int>& axes);

 private:
  enum Kind { kAllReduce, kAllGather, kAllToAll, kReduceScatter, kBroadcast, kPermute, kBarrier };
  struct Series {
    Counter* calls;
    Counter* bytes;
    Counter* seconds;
  };
  // The series of (kind, axes), made on first use.
  Series* SeriesFor(Kind kind, const std::vector<int>& axes);
  // The group size of `axes` (the in-range distinct ones).
  int64_t GroupOf(const std::vector<int>& axes) const;
  // Runs `call`, timing it into the series of (kind, axes) with `bytes`.
  template <typename Call>
  absl::Status Measure(Kind kind, const std::vector<int>& axes, int64_t bytes, Call&& call);

  const std::unique_ptr<Communicator> inner_;
  WorkerMetrics* const metrics_;
  absl::Mutex mu_;
  // By (kind, bit set of the axes).
  std::map<std::pair<int, uint64_t>, Series> series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace meshrt

#endif  // MESHRT_WORKER_WORKER_METRICS_H_
