#include "worker/worker_metrics.h"

#include <chrono>

#include "absl/strings/str_join.h"
#include "core/ir/slicing.h"

namespace meshrt {
namespace {

const char* KindName(int kind) {
  static const char* const kNames[] = {"allreduce", "allgather", "alltoall", "reduce_scatter",
                                       "broadcast", "permute",   "barrier"};
  return kNames[kind];
}

// Axes as a bit set (axes outside [0, 64) are left out: a call with them fails inside anyway).
uint64_t AxisBits(const std::vector<int>& axes) {
  uint64_t bits = 0;
  for (int a : axes) {
    if (a >= 0 && a < 64) bits |= uint64_t{1} << a;
  }
  return bits;
}

}  // namespace

WorkerMetrics::WorkerMetrics(MetricsRegistry* registry) : registry_(registry) {
  const std::vector<std::string> labels = {"kind", "mesh_dims"};
  collective_calls = registry->AddCounter(
      "meshrt_worker_collective_calls_total",
      "Collective calls made by this worker's sessions, by kind and the mesh dims the group spans.",
      labels);
  collective_bytes = registry->AddCounter(
      "meshrt_worker_collective_bytes_total",
      "Bytes of this processor's input to its collective calls (not wire bytes).", labels);
  collective_seconds = registry->AddCounter(
      "meshrt_worker_collective_seconds_total",
      "Wall time spent in collective calls, waiting for peers included.", labels);
  sessions = registry->AddGauge("meshrt_worker_sessions", "Sessions loaded on this worker.")
                 ->WithLabels({});
  buffer_pool_bytes =
      registry
          ->AddGauge("meshrt_worker_buffer_pool_bytes",
                     "Storage the sessions' executors keep pooled for reuse (runtime/buffer_pool.h).")
          ->WithLabels({});
  steps_ = registry->AddCounter("meshrt_worker_steps_total", "Steps run to completion here.")
               ->WithLabels({});
  step_failures_ =
      registry->AddCounter("meshrt_worker_step_failures_total", "Steps that failed here.")
          ->WithLabels({});
  step_duration_ = registry
                       ->AddHistogram("meshrt_worker_step_duration_seconds",
                                      "Wall time of a step on this worker.", {},
                                      DurationBuckets())
                       ->WithLabels({});
  compute_seconds_ =
      registry
          ->AddCounter("meshrt_worker_compute_seconds_total",
                       "CPU time of the step threads during steps (kernels and local work; not "
                       "time blocked on peers).")
          ->WithLabels({});
}

void WorkerMetrics::StepDone(bool ok, absl::Duration wall, std::optional<absl::Duration> cpu) {
  if (!ok) {
    step_failures_->Increment();
    return;
  }
  steps_->Increment();
  step_duration_->Observe(absl::ToDoubleSeconds(wall));
  if (cpu.has_value()) compute_seconds_->Increment(absl::ToDoubleSeconds(*cpu));
}

MeteredCommunicator::MeteredCommunicator(std::unique_ptr<Communicator> inner,
                                         WorkerMetrics* metrics)
    : inner_(std::move(inner)), metrics_(metrics) {}

std::string MeteredCommunicator::MeshDimsLabel(const Mesh& mesh, const std::vector<int>& axes) {
  const uint64_t bits = AxisBits(axes);
  std::vector<std::string> names;
  for (int a = 0; a < mesh.ndims() && a < 64; ++a) {
    if (bits & (uint64_t{1} << a)) names.push_back(mesh.dims()[a].name);
  }
  return absl::StrJoin(names, ",");
}

MeteredCommunicator::Series* MeteredCommunicator::SeriesFor(Kind kind,
                                                            const std::vector<int>& axes) {
  const std::pair<int, uint64_t> key(kind, AxisBits(axes));
  absl::MutexLock lock(&mu_);
  auto it = series_.find(key);
  if (it != series_.end()) return &it->second;
  const LabelValues labels = {KindName(kind), MeshDimsLabel(mesh(), axes)};
  Series s{metrics_->collective_calls->WithLabels(labels),
           metrics_->collective_bytes->WithLabels(labels),
           metrics_->collective_seconds->WithLabels(labels)};
  return &series_.emplace(key, s).first->second;
}

int64_t MeteredCommunicator::GroupOf(const std::vector<int>& axes) const {
  const uint64_t bits = AxisBits(axes);
  int64_t g = 1;
  for (int a = 0; a < mesh().ndims() && a < 64; ++a) {
    if (bits & (uint64_t{1} << a)) g *= mesh().size(a);
  }
  return g;
}

template <typename Call>
absl::Status MeteredCommunicator::Measure(Kind kind, const std::vector<int>& axes, int64_t bytes,
                                          Call&& call) {
  Series* s = SeriesFor(kind, axes);
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = call();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  s->calls->Increment();
  s->bytes->Increment(static_cast<double>(bytes));
  s->seconds->Increment(took.count());
  return status;
}

absl::Status MeteredCommunicator::AllReduce(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                            DType dtype, void* data, int64_t count) {
  return Measure(kAllReduce, mesh_axes, count * DTypeSize(dtype),
                 [&] { return inner_->AllReduce(mesh_axes, op, dtype, data, count); });
}

absl::Status MeteredCommunicator::AllGather(const std::vector<int>& mesh_axes, const void* in,
                                            int64_t bytes, void* out) {
  return Measure(kAllGather, mesh_axes, bytes,
                 [&] { return inner_->AllGather(mesh_axes, in, bytes, out); });
}

absl::Status MeteredCommunicator::AllToAll(const std::vector<int>& mesh_axes, const void* in,
                                           void* out, int64_t bytes_per_rank) {
  return Measure(kAllToAll, mesh_axes, GroupOf(mesh_axes) * bytes_per_rank,
                 [&] { return inner_->AllToAll(mesh_axes, in, out, bytes_per_rank); });
}

absl::Status MeteredCommunicator::ReduceScatter(const std::vector<int>& mesh_axes,
                                                v1::ReduceOp op, DType dtype, const void* in,
                                                int64_t count_per_rank, void* out) {
  return Measure(kReduceScatter, mesh_axes,
                 GroupOf(mesh_axes) * count_per_rank * DTypeSize(dtype), [&] {
                   return inner_->ReduceScatter(mesh_axes, op, dtype, in, count_per_rank, out);
                 });
}

absl::Status MeteredCommunicator::Broadcast(const std::vector<int>& mesh_axes, int root_rank,
                                            void* data, int64_t bytes) {
  return Measure(kBroadcast, mesh_axes, bytes,
                 [&] { return inner_->Broadcast(mesh_axes, root_rank, data, bytes); });
}

absl::Status MeteredCommunicator::Permute(int mesh_axis, int shift, bool wrap, const void* in,
                                          void* out, int64_t bytes) {
  return Measure(kPermute, {mesh_axis}, bytes,
                 [&] { return inner_->Permute(mesh_axis, shift, wrap, in, out, bytes); });
}

absl::Status MeteredCommunicator::Barrier(const std::vector<int>& mesh_axes) {
  return Measure(kBarrier, mesh_axes, 0, [&] { return inner_->Barrier(mesh_axes); });
}

absl::Status MeteredCommunicator::AllReduceInto(const std::vector<int>& mesh_axes,
                                                v1::ReduceOp op, DType dtype, const void* in,
                                                void* out, int64_t count) {
  return Measure(kAllReduce, mesh_axes, count * DTypeSize(dtype),
                 [&] { return inner_->AllReduceInto(mesh_axes, op, dtype, in, out, count); });
}

absl::Status MeteredCommunicator::AllToAllBlocked(const std::vector<int>& mesh_axes,
                                                  const void* in, int64_t in_blocks, void* out,
                                                  int64_t out_blocks, int64_t bytes_per_rank) {
  return Measure(kAllToAll, mesh_axes, GroupOf(mesh_axes) * bytes_per_rank, [&] {
    return inner_->AllToAllBlocked(mesh_axes, in, in_blocks, out, out_blocks, bytes_per_rank);
  });
}

absl::Status MeteredCommunicator::AllGatherBlocked(const std::vector<int>& mesh_axes,
                                                   const void* in, int64_t bytes, void* out,
                                                   int64_t out_blocks) {
  return Measure(kAllGather, mesh_axes, bytes, [&] {
    return inner_->AllGatherBlocked(mesh_axes, in, bytes, out, out_blocks);
  });
}

absl::Status MeteredCommunicator::ReduceScatterBlocked(const std::vector<int>& mesh_axes,
                                                       v1::ReduceOp op, DType dtype,
                                                       const void* in, int64_t in_blocks,
                                                       int64_t count_per_rank, void* out) {
  return Measure(kReduceScatter, mesh_axes,
                 GroupOf(mesh_axes) * count_per_rank * DTypeSize(dtype), [&] {
                   return inner_->ReduceScatterBlocked(mesh_axes, op, dtype, in, in_blocks,
                                                       count_per_rank, out);
                 });
}

}  // namespace meshrt
