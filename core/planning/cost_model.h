// The time model of a lowered program: FLOPs and bytes of every instruction a step runs (local ops
// by their cost facet, core/ops/op_cost.h; collectives by core/planning/explain.h CostOf), per source op and in
// total, and a predicted step time under a HardwareProfile.
//
// Predicted time = sum over the step's instructions (core/planning/explain.h StepInstructions) of
//   compute        max(FLOPs / throughput, (bytes read + written) / memory bandwidth), where the
//                  throughput of an einsum of >= 2 operands is the profile's GEMM throughput of
//                  one of its products (GemmFlopsPerSecond: two classes by FLOPs, or by its
//                  smallest of M, N, K between the two calibrated products; a product is one of the
//                  einsum's batch, the dims every operand and the output hold, so attention's
//                  many small products per head are small however many),
//                  and of
//                  every other op the profile's elementwise FLOP rate; local slices are bytes only
//   communication  alpha + bytes sent per worker / beta of the collective's kind, from the
//                  profile's same-host links, or its cross-host ones when some group of the
//                  collective spans hosts (HardwareProfile::processor_hosts); a group of one
//                  costs nothing
// Every processor runs the same instructions on equal slices, so one processor's time is the
// step's. The predicted step (ProgramCost::step_s) is the profile's step overhead plus, with
// overlap (HardwareProfile::overlap_comm), the critical path of the executor's calling and
// communication threads (StepCriticalPath), without it the sum of every instruction's time.
// Thread-safety: pure functions; HardwareProfile is a value.
#ifndef MESHRT_CORE_PLANNING_COST_MODEL_H_
#define MESHRT_CORE_PLANNING_COST_MODEL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ir/mesh.h"
#include "proto/program.pb.h"

namespace meshrt {

// α-β model of one collective kind.
struct CollectiveLink {
  double alpha_s = 0;           // fixed cost per call, seconds
  double beta_bytes_per_s = 1;  // bytes sent per worker per second
};

struct HardwareProfile {
  // Where the numbers come from, for the report (e.g. "measured in process", a file path).
  std::string source;
  // GEMM throughput (FLOP/s) of products below and at or above `gemm_large_flops` FLOPs (per
  // product of a batched einsum: its FLOPs / InstructionCost::gemm_batch). With `gemm_small_dim`
  // and `gemm_large_dim` > 0 (the smallest of M, N and K of the products the two rates were
  // measured on; `meshrt calibrate` sets them), the rate of a two-operand product goes by its
  // smallest dim instead: interpolated linearly in log(dim) between the two, the nearer rate
  // outside them (a [1024 x 128] x [128 x 4096] product runs well below a cube of its FLOPs).
  double gemm_small_flops_per_s = 20e9;
  double gemm_large_flops_per_s = 100e9;
  double gemm_large_flops = 1e8;
  double gemm_small_dim = 0;
  double gemm_large_dim = 0;
  // FLOP rate of elementwise, reduction and norm kernels.
  double elementwise_flops_per_s = 4e9;
  // Memory bandwidth (bytes/s) of one worker's copy (read + written bytes).
  double memory_bytes_per_s = 10e9;
  // Per collective kind ("allreduce", "allgather", "alltoall", "reduce_scatter", "permute",
  // "broadcast"), for groups on one host. A kind absent here uses "allreduce"'s link.
  std::map<std::string, CollectiveLink> collectives;
  // The same for groups whose members are on more than one host (`cross_host.KIND.alpha_s` in a
  // profile file): a kind absent here uses "allreduce"'s, else the DefaultCrossHostLinks
  // placeholder.
  std::map<std::string, CollectiveLink> cross_host;
  // The host of the processor at each mesh rank (Mesh::Coordinate order), as the coordinator
  // assigns its workers; empty (or one name): every group shares a host. Not in the profile
  // file: it is the cluster's, set where the workers are known.
  std::vector<std::string> processor_hosts;
  // Fixed time of a step that computes nothing (request, fan-out, executor setup, the reply),
  // measured by `meshrt calibrate` (its "overhead" graph); added once per step.
  double step_overhead_s = 1e-3;
  // Whether the workers overlap communication with compute (their --overlap_comm, on by
  // default): the predicted step is then the critical path of the executor's two threads
  // (CostProgram), else the sum of every instruction's time.
  bool overlap_comm = true;
  // False while α/β are the documented placeholders of DefaultCollectiveLinks; true in a profile
  // `meshrt calibrate` wrote (client/calibrate.h). Reports say which.
  bool collectives_measured = false;
};

// Placeholder α/β for same-host groups over loopback TCP (Gloo): 50 µs per call and 1 GB/s for
// every kind, round figures of this machine's order of magnitude, for when no profile from
// `meshrt calibrate` is given.
std::map<std::string, CollectiveLink> DefaultCollectiveLinks();

// Placeholder α/β for groups spanning hosts: 100 µs per call and 1.25 GB/s (10 Gbit/s Ethernet)
// for every kind, for when a profile gives no cross_host links.
CollectiveLink DefaultCrossHostLink();

// Whether `processor_hosts` (HardwareProfile::processor_hosts) names more than one host.
bool OnSeveralHosts(const std::vector<std::string>& processor_hosts);

// Whether some group of a collective over `mesh_axes` has members on different hosts under
// `processor_hosts` (HardwareProfile::processor_hosts; false when it is empty or its size is not
// the mesh's processor count).
bool GroupsSpanHosts(const Mesh& mesh, const std::vector<int>& mesh_axes,
                     const std::vector<std::string>& processor_hosts);

// The GEMM throughput (FLOP/s) under `profile` of one product of `product_flops` FLOPs whose
// smallest of M, N, K is `min_dim` (0: unknown, e.g. an einsum of 3 operands; the FLOPs decide).
// See HardwareProfile::gemm_small_dim.
double GemmFlopsPerSecond(const HardwareProfile& profile, double product_flops, double min_dim);

// A profile as `key value` lines ('#' starts a comment): gemm_small_flops_per_s,
// gemm_large_flops_per_s, gemm_large_flops, gemm_small_dim, gemm_large_dim, elementwise_flops_per_s,
// memory_bytes_per_s,
// step_overhead_s, overlap_comm (0|1), collectives_measured (0|1), and per kind `KIND.alpha_s`,
// `KIND.beta_bytes_per_s` (same-host groups) and `cross_host.KIND.alpha_s`,
// `cross_host.KIND.beta_bytes_per_s` (groups spanning hosts; only those set are written).
std::string FormatHardwareProfile(const HardwareProfile& profile);
// Parses FormatHardwareProfile's form; keys left out keep their defaults (links: the placeholders).
// InvalidArgument naming `source`, the line and the key on an unknown key, a malformed or
// non-positive value.
absl::StatusOr<HardwareProfile> ParseHardwareProfile(absl::string_view text,
                                                     absl::string_view source);
// Reads and parses a profile file; NotFound / InvalidArgument naming `path`.
absl::StatusOr<HardwareProfile> LoadHardwareProfile(const std::string& path);

struct InstructionCost {
  int index = 0;
  std::string source_op;
  std::string kind;    // local op type, "local_slice", or the collective ("allreduce", ...)
  bool runs = true;    // in the step (StepInstructions)
  bool gemm = false;   // an einsum of >= 2 operands
  bool fused = false;  // runs inside another instruction's pass (CostProgram's `fusions`)
  // gemm: its batch, the product of the sizes of the dims all operands and the output hold.
  int64_t gemm_batch = 1;
  // gemm of two operands: the smallest of a product's M, N and K (0 otherwise).
  int64_t gemm_min_dim = 0;
  double flops = 0;        // per worker
  int64_t bytes_read = 0;  // per worker, local
  int64_t bytes_written = 0;
  int64_t sent_bytes = 0;  // per worker, collectives
  bool cross_host = false;  // a collective some group of which spans hosts
  double compute_s = 0;
  double comm_s = 0;
};

struct OpCostTotal {
  std::string source_op;
  double flops = 0;
  int64_t bytes_moved = 0;  // local bytes read + written
  int64_t sent_bytes = 0;
  double compute_s = 0;
  double comm_s = 0;
};

struct ProgramCost {
  std::vector<InstructionCost> instructions;  // every instruction, in program order
  std::vector<OpCostTotal> ops;               // over the step's instructions, by first appearance
  OpCostTotal total;                          // source_op "total"
  int processors = 1;
  double overhead_s = 0;  // the profile's step overhead
  // overhead_s + total.compute_s + total.comm_s: every instruction one after another.
  double serial_s = 0;
  // The predicted step time: overhead_s plus the executor's critical path (StepCriticalPath)
  // when the profile overlaps communication, else serial_s.
  double step_s = 0;
};

// The end of a step whose instructions take `instructions[i].compute_s` (local work, on the
// calling thread) or `.comm_s` (collectives, on the communication thread) seconds, as
// runtime/executor.h runs them with overlap: in program order, the calling thread runs local
// work once its inputs are ready and issues each collective without waiting; the communication
// thread runs collectives one at a time in program order, each once it is issued and its inputs
// are ready; a buffer is ready when the instruction writing it ends (inputs and variables at 0).
// Instructions that do not run are skipped. The result is the later thread's end. `program`
// gives each instruction's inputs and output (same length as `instructions`).
double StepCriticalPath(const v1::Program& program,
                        const std::vector<InstructionCost>& instructions);

// An executor fusion (core/ir/step_fusion.h FindFusions: S and the instructions it runs with) as
// the cost model counts it: the instructions absorbed into S take no time of their own (a scaled
// update's mul, a ReLU gradient's mask, the causal mask's add: S reads their inputs in its own
// pass), and with `into_gemm` (S = x - lr * einsum(...) run as the einsum's GEMM with beta = 1) S
// takes none either: the einsum's GEMM is the whole group's time.
struct FusedGroup {
  std::vector<int> absorbed;  // instruction positions (the mul, mask or add; not the einsum)
  bool into_gemm = false;
};

// The fusions the executor makes in a step of `program` fetching `fetches` (keyed by S):
// FindFusions over StepInstructions(program, fetches) with the buffers the executor pins
// (core/ir/step_fusion.h StepPinnedBuffers). None without `fetches` (the executor fuses only in a
// step with a fetch list).
std::map<int, FusedGroup> StepFusedGroups(const v1::Program& program,
                                          const std::vector<std::string>* fetches);

// Costs of `program`'s instructions under `profile`, over the step StepInstructions(program,
// fetches) runs, with the executor's fusions taking time as FusedGroup says (their instructions
// keep their FLOPs and bytes, with compute_s 0 and `fused` set): `fusions` keyed by S, or when
// null StepFusedGroups(program, fetches) (an empty map costs every instruction on its own).
// InvalidArgument naming the instruction when a local op's cost cannot be computed (unknown
// type, a buffer read before it is written).
absl::StatusOr<ProgramCost> CostProgram(const v1::Program& program, const HardwareProfile& profile,
                                        const std::vector<std::string>* fetches = nullptr,
                                        const std::map<int, FusedGroup>* fusions = nullptr);

// CostProgram without the names: instructions carry no source_op (those the step does not run
// no cost either) and `ops` is empty; totals, overhead_s, serial_s and step_s are CostProgram's
// (for the planner, which costs many candidates). Errors as CostProgram's, for the instructions
// the step runs.
absl::StatusOr<ProgramCost> CostProgramTotal(const v1::Program& program,
                                             const HardwareProfile& profile,
                                             const std::vector<std::string>* fetches = nullptr,
                                             const std::map<int, FusedGroup>* fusions = nullptr);

// An einsum is compute-heavy when its per-worker FLOPs are at least this fraction of the step's
// per-worker FLOPs.
inline constexpr double kHeavyEinsumFraction = 0.01;

// Warnings about `program`: "compute duplicated Nx over MESH_DIM: einsum 'OP' ..." for every mesh
// dim of size N > 1 that splits none of the dims (operands' or output's) of a compute-heavy einsum
// (its slices are replicated over that dim, so every processor along it computes the same
// product). One line per (mesh dim, einsum), in program order.
std::vector<std::string> CostWarnings(const v1::Program& program, const ProgramCost& cost);

}  // namespace meshrt

#endif  // MESHRT_CORE_PLANNING_COST_MODEL_H_
