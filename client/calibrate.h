// `meshrt calibrate`: measures, on the workers of a cluster, the figures the planner's time model
// needs (issue 15 item 3), in seconds, through the ordinary session path — no special RPC: each
// figure is a small graph whose lowered program does exactly one kind of work per step, run for
// a few steps on a 1-D mesh x:W of the cluster's workers.
//
//   step overhead       a 4-float negation: the time of a step that computes nothing (the median
//                       of 3 sessions)
//   compute rates       each from a graph that runs its op once and a graph that runs it 5 times
//                       in a chain (each op reads the last one's result, the intermediates come
//                       from the worker's buffer pool as a real step's do): rate = the 4 extra ops'
//                       work / the time they add, so the step overhead, the variable update and
//                       the fetch cancel out (noise that inverts the two: the chain's work over its
//                       step minus the overhead); the median of 3 such pairs, measured in turn
//   GEMM throughput     per worker, [512 x 1024] x [1024 x 1024] products of a batch-split
//                       activation by replicated weights (no communication), and batched
//                       attention-shaped ones (16 x 16 x [128 x 32] x [32 x 128])
//   memory bandwidth    elementwise negations of a 16 MiB slice: bytes read and written
//   elementwise rate    softmaxes over rows of 1024 of an 8 MiB slice (per worker): their FLOPs as
//                       core/ops/op_cost.h counts them (kSoftmaxFlops per element). The kernels of the
//                       norms, softmaxes and transcendentals run at several times the negation's
//                       FLOP rate, which is memory-bound; a rate from the negation made them 10x
//                       too slow.
//   collectives         allreduce (a sum over the split dim), allgather (a rename of a split dim to
//                       a replicated one) and alltoall (a reshape moving the split to the other
//                       dim), each at two sizes: alpha (s) and beta (bytes/s) fitted to
//                       t - overhead = alpha + bytes_sent / beta, bytes_sent as core/planning/explain.h
//                       CostOf counts them
// Each graph's program is checked to contain exactly the collective it is meant to measure (and
// no other), so a change in the lowering cannot silently measure something else.
//
// Thread-safety: Calibrate uses the client from the calling thread.
#ifndef MESHRT_CLIENT_CALIBRATE_H_
#define MESHRT_CLIENT_CALIBRATE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "core/planning/cost_model.h"

namespace meshrt {

struct CommFit {
  double alpha_seconds = 0;
  double beta_bytes_per_second = 0;
};

struct Calibration {
  int workers = 0;
  int collective_group = 0;  // workers per group the collectives were measured in
  double step_overhead_seconds = 0;
  double gemm_flops_per_second = 0;         // large products, per worker
  double small_gemm_flops_per_second = 0;   // batched 128 x 128 x 32 products, per worker
  double memory_bytes_per_second = 0;       // elementwise, per worker
  double elementwise_flops_per_second = 0;  // the softmax graph's, per worker
  std::map<std::string, CommFit> comm;      // "allreduce", ...: groups within a host
  // The same kinds over groups whose workers are on more than one host (empty on one host).
  std::map<std::string, CommFit> cross_host_comm;
  // The host of each worker, in the order sessions take them (rpc/auth.h HostOf of its address).
  std::vector<std::string> hosts;
};

struct CalibrateOptions {
  int workers = 2;
  // Workers per collective group: 0 = all of them (mesh x:W). G < W (dividing W) measures the
  // collectives on mesh r:W/G,x:G, W/G groups of G at once, as a 2-D mesh's collectives over one
  // of its dims run (e.g. rows:2,cols:2: two groups of 2, on the same-host path of
  // worker/gloo_same_host.h rather than a TCP ring of 4). The other figures use all W workers.
  // With workers on several hosts, 0 means the workers per host (when every host has the same
  // number, >= 2, of the calibrated workers), else all of them. The collectives are then also
  // measured on mesh x:G,r:W/G (each group takes every (W/G)-th worker): whichever arrangement's
  // groups span hosts gives the cross-host links (HardwareProfile::cross_host), the other the
  // same-host ones. On one host only r:W/G,x:G runs.
  int collective_group = 0;
  int steps = 5;  // timed steps per graph (the median is used), after one untimed
};

// One calibration graph (exposed for tests): `kind` is "overhead", "gemm", "small_gemm",
// "memory", "elementwise", "allreduce", "allgather" or "alltoall"; `size` 0 or 1 picks the smaller
// or larger collective, or for the compute kinds one op or the chain of 5 (ignored for
// "overhead"); flops and bytes are the whole graph's. The work is a variable update; the graph's
// only output is a scalar "tick", which is what a step fetches.
struct CalibrationGraph {
  Graph graph;
  std::string layout;  // rules for mesh x:W
  double flops = 0;    // per worker per step
  double bytes = 0;    // memory: read + written per worker; collectives: payload per worker
};
absl::StatusOr<CalibrationGraph> MakeCalibrationGraph(const std::string& kind, int size,
                                                      int workers);

// Checks that `graph` lowered on x:W (r:R,x:W with `replicas` R > 1) under its layout sends what
// `kind` says: for a collective
// kind exactly one collective instruction of that kind runs per step; for the others none.
// Returns the bytes each worker sends (core/planning/explain.h CostOf) — FailedPrecondition naming the
// kind and what the program does instead.
// With `groups_outer` the mesh is x:W,r:R instead: each group takes every R-th processor.
absl::StatusOr<int64_t> CheckCalibrationProgram(const std::string& kind, const CalibrationGraph& g,
                                                int workers, int replicas = 1,
                                                bool groups_outer = false);

// Runs every calibration graph on the cluster behind `client` (it must have `workers` free
// workers) and fits the figures.
absl::StatusOr<Calibration> Calibrate(Client& client, const CalibrateOptions& options);

// The calibration as the cost model's hardware profile (core/planning/cost_model.h): large / small GEMM
// FLOP/s, memory bytes/s, the elementwise FLOP rate (the softmax graph's; without it the memory
// graph's negation's), the step
// overhead, and the fitted alpha/beta per collective kind (within a host, and `cross_host` across
// hosts), marked measured when either was.
HardwareProfile ToHardwareProfile(const Calibration& c, const std::string& source);

// The profile file `meshrt explain --profile` reads (core/planning/cost_model.h FormatHardwareProfile),
// preceded by comment lines with `header` and the figures the profile has no key for (workers,
// the collectives' group size; the step overhead is repeated there).
std::string FormatCalibration(const Calibration& c, const std::string& header);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_CALIBRATE_H_
