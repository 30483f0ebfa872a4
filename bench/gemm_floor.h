// The GEMM floor of a training step: how long one processor's matrix products alone take when
// each is run as raw OpenBLAS on contiguous operands, in its fastest transposition.
//
// Why: train_bench's goals compare ours with a PyTorch peer that calls the same OpenBLAS on the
// same products. Whatever either side does around them, neither can run a product faster than
// OpenBLAS's best call for its shape on this CPU, so the floor bounds what any layout, fusion or
// overlap can reach: a goal that needs a step shorter than the floor is unreachable here with
// this library, and the bench says so instead of leaving the gap unexplained.
//
// The products are read from the lowered program (core/lowering/lowering.h) of one processor: every local
// einsum with two operands becomes batch x (m x k)(k x n), where batch = the dims of both
// operands and the output, m (n) = the first (second) operand's dims kept in the output, and
// k = the dims of both operands summed over. Dims of one operand that the output lacks are summed
// before the product and not counted (the floor stays a lower bound). Einsums of one operand
// (reductions) and of three or more are not GEMMs and are skipped.
//
// Thread-safety: ProgramGemms is pure; GemmSeconds and MeasureGemmFloor call OpenBLAS from the
// calling thread (kernels::GetBlas(), whose core is fixed by the first call in the process).
#ifndef MESHRT_BENCH_GEMM_FLOOR_H_
#define MESHRT_BENCH_GEMM_FLOOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ops/graph.h"
#include "proto/program.pb.h"

namespace meshrt {
namespace bench {

struct GemmShape {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  double Flops() const { return 2.0 * batch * m * n * k; }
  bool operator<(const GemmShape& o) const {
    return std::tie(batch, m, n, k) < std::tie(o.batch, o.m, o.n, o.k);
  }
  bool operator==(const GemmShape& o) const { return !(*this < o) && !(o < *this); }
};

// The products one step of `program` fetching `fetches` (output names) runs on a processor, with
// how many times each shape runs: only the instructions the fetches and the variables' updates
// depend on, as the executor prunes the rest. InvalidArgument when an einsum reads a buffer no
// instruction, input or variable gives a shape.
absl::StatusOr<std::map<GemmShape, int64_t>> ProgramGemms(const v1::Program& program,
                                                          const std::vector<std::string>& fetches);

// Median seconds (over `reps` timed calls after one warm-up) of the fastest of the four
// transposition variants of `s` as raw cblas_sgemm calls on contiguous float operands.
double GemmSeconds(const GemmShape& s, int reps);

struct GemmFloor {
  double seconds = 0;  // sum over the products of count x GemmSeconds, one processor
  double flops = 0;    // their FLOPs
  int64_t products = 0;
  int64_t shapes = 0;
  std::string core;  // the OpenBLAS core that ran them
};

// Lowers `graph` on `mesh` ("x:2") with `layout` ("batch:x") and measures processor 0's floor
// of a step fetching `fetches`.
absl::StatusOr<GemmFloor> MeasureGemmFloor(const Graph& graph,
                                           const std::vector<std::string>& fetches,
                                           const std::string& mesh, const std::string& layout,
                                           int reps);

}  // namespace bench
}  // namespace meshrt

#endif  // MESHRT_BENCH_GEMM_FLOOR_H_
