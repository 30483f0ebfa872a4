// Plan-time fusion for the executor (runtime/executor.h): which instructions of a lowered program run
// inside a later instruction S that reads their result, so that the intermediate is never written
// out and read back. Fusion never changes a bit of any result: the fused passes compute the same
// float operations in the same order as the ops one by one.
//
// The patterns (positions are instruction indices; "read once" = exactly one running instruction
// reads the buffer, it has one writer, and it is not pinned: no input, fetched output, variable):
//
//   - Scaled einsum updates: S = sub(x, mul(einsum(...), s)) (or add, in either order; s a
//     scalar), the einsum's and the mul's results read once, runs as out = x + alpha * einsum(...)
//     in the einsum's GEMM (beta = 1), alpha = -s or s: SGD's w - lr * grad when the gradient needs
//     no allreduce (model-parallel weights). The three declare one slice shape; anything unusual
//     when S runs (a non-scalar s, another dtype, a KernelRunner without the fused op) runs
//     the three ops one by one instead.
//   - Plain scaled updates (`einsum` -1): S = x -/+ mul(y, s) with a scalar s and the product read
//     once runs as out = x -/+ (y * s) in one pass (each product rounded before the add, as in two
//     ops): data-parallel SGD, whose gradient comes out of an allreduce.
//   - Masked products (`mask`): S = mul(dy, greater(x, s)) (a ReLU's gradient; s a scalar attr),
//     the mask read once, runs as out = dy * (x > s ? 1 : 0).
//   - Add + softmax (`add`): S = softmax(t) or log_softmax(t) with t = add(a, b) read once (the
//     causal mask added to the attention logits) runs as one pass over a + b: the kernel runner's
//     "_add_softmax" / "_add_log_softmax" op (inputs a, b; S's dims), which must give the bits of
//     the add then the softmax (kernels::AddSoftmax does); a runner without it, or any failure,
//     runs the two ops instead. The add and S declare one slice shape.
//
// Every instruction of a group is a local op without a predicate (a guarded instruction runs at
// its own place, where its guard is read), and no running instruction between a fused op and S
// rewrites a buffer the fused op reads (those are read at S instead). The fused ops do not run at
// their own positions; their inputs stay alive until S.
#ifndef MESHRT_CORE_IR_STEP_FUSION_H_
#define MESHRT_CORE_IR_STEP_FUSION_H_

#include <array>
#include <map>
#include <string>
#include <vector>

#include "proto/program.pb.h"

namespace meshrt {

// The instructions one S runs with (positions; -1: none). One pattern per S: einsum and/or mul,
// or mask, or add.
struct FusedUpdate {
  int einsum = -1, mul = -1;  // scaled updates (einsum -1: a plain one)
  int mul_input = 1;          // which input of S is the mul's (or the mask's) result
  int einsum_input = 0;       // which input of the mul is the einsum's result
  int mask = -1;              // the greater of a masked product
  int add = -1;               // the add of an add + softmax (S is the softmax)

  // The fused instructions (-1 entries: none), in the order they would run one by one.
  std::array<int, 4> ops() const { return {einsum, mul, mask, add}; }
};

// The fusions of one step, keyed by S. `runs[i]`: instruction i is part of the step (one entry per
// instruction); every instruction a fusion absorbs gets false (it runs inside S). `pinned[b]`:
// buffer b must keep its value (one entry per buffer). Only running instructions are matched.
// Nothing here is checked beyond what matching needs (buffer indices in range for the fused
// intermediates, parsable slice shapes): the executor checks the operands when S runs, and a
// group whose operands do not fit runs its ops one by one, each reporting its own error. Pure and
// deterministic: every processor derives the same fusions from the same program, runs and
// pinned.
// The buffers a step must keep (FindFusions' `pinned`; the executor never frees them early):
// the program's inputs, the fetched outputs (`fetches`; null: every output), the variables and
// their updates, and with a fetch list the predicates of the running instructions `runs` (read
// where a guarded instruction is reached). One entry per buffer.
std::vector<bool> StepPinnedBuffers(const v1::Program& program,
                                    const std::vector<std::string>* fetches,
                                    const std::vector<bool>& runs);

// Whether `op` combines values (sum, max, min, prod): what an allreduce or reduce-scatter may do.
bool IsReduceOp(v1::ReduceOp op);

// Allreduces the executor defers and runs in buckets (Executor::Plan, as DDP buckets gradients):
// an ALLREDUCE of one input in range, with a reduce op, whose slice has at most
// kDeferredAllReduceBytes (4 bytes per element). DeferredAllReduceBytes returns those bytes for
// such an allreduce, 0 for any other instruction. The executor keeps such an allreduce's input to
// the end of the step (it may be read when the bucket runs, after its last reader), and the memory
// model (core/planning/memory_model.h) counts it so.
constexpr int64_t kDeferredAllReduceBytes = 1 << 20;
int64_t DeferredAllReduceBytes(const v1::Instruction& instr, int num_buffers);

std::map<int, FusedUpdate> FindFusions(const v1::Program& program, const std::vector<bool>& pinned,
                                       std::vector<bool>* runs);

// Which pattern a fusion is (what the executor counts).
enum class FusionKind { kScaledEinsumUpdate, kScaledUpdate, kMaskedProduct, kAddSoftmax };
FusionKind FusionKindOf(const FusedUpdate& f);

// The rewrite: the one local instruction that computes S (position `s`) with the instructions of
// `f` (a FindFusions result for `program`), which the executor runs in S's place through its
// KernelRunner like any local op. It writes S's output with S's dtype, slice shape and source_op,
// reads the group's outside operands, and names a fused op type (a '_' type: not a registered op;
// kernels/fast_kernels.h holds its kernel):
//   _scaled_einsum_add  inputs (x, s, einsum inputs...), attr sign (f, -1 or 1):
//                       x + sign * s * einsum(inputs...) (the einsum's output dims are S's)
//   _scaled_add         inputs (x, m0, m1), attr sign: x + (y * s) * sign, s the scalar of m0, m1
//                       (the product rounded before the add, as the two ops)
//   _masked_mul         inputs (dy, x), attr scalar (f): dy * (x > scalar ? 1 : 0)
//   _add_softmax, _add_log_softmax   inputs (a, b), S's attrs: softmax(a + b) over S's dims
// A kernel that cannot run its fused op (a runner without it, operands of another dtype or shape)
// fails, and the executor then runs the group's instructions one by one instead (same bits).
v1::Instruction FusedInstruction(const v1::Program& program, int s, const FusedUpdate& f);

}  // namespace meshrt

#endif  // MESHRT_CORE_IR_STEP_FUSION_H_
