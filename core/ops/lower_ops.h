// Internal to lowering: one function per op family (lower_<family>.cc). Each lowers `op` whose
// inputs are laid out in their rule layouts (ctx.RuleLayout) and returns its output in the rule
// layout — or, for einsum and reduce_sum/mean over split dims, as a partial sum in the rule
// layout without its partial axes (resolved by LowerOp or kept lazy) — or an error:
// InvalidArgument naming the op (OpError) when its attrs or inputs cannot be lowered, Internal
// naming the op for a broken lowering invariant. Nothing on this path aborts the process.
#ifndef MESHRT_CORE_OPS_LOWER_OPS_H_
#define MESHRT_CORE_OPS_LOWER_OPS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ir/program_builder.h"
#include "core/ops/graph.h"

namespace meshrt {

struct LoweringContext {
  const Graph& graph;
  const LayoutRules& rules;
  ProgramBuilder& builder;
  // Ops whose partial sums the caller resolves itself (a loop's accumulators, summed over the
  // iterations first): their lowering may return a LaidOutTensor with partial_sum_axes.
  const std::set<std::string>* keep_partial = nullptr;
  // Lazy partial sums (lower_partial.cc): with `lazy`, LowerOp may return a partial sum for any
  // op, and an op linear in its partial inputs keeps them partial when it is their only reader
  // (`readers`: graph tensor -> number of ops reading it). Without, every partial sum is
  // resolved where it is made (except keep_partial's).
  bool lazy = false;
  const std::map<std::string, int>* readers = nullptr;
  // Buffers of partial sums that a consumer read unresolved (filled by LowerOp when set).
  std::set<int>* read_partial = nullptr;
  // While an op linear in partial sums over these mesh axes is lowered on their unresolved
  // buffers: RuleLayout leaves the axes out (a partial sum is never split over its own axes).
  std::vector<int> partial_axes;

  const Mesh& mesh() const { return builder.mesh(); }
  TensorLayout RuleLayout(const Shape& s) const {
    TensorLayout l = rules.LayoutFor(s);
    for (int& a : l.mesh_axis) {
      for (int p : partial_axes) {
        if (a == p) a = kReplicated;
      }
    }
    return l;
  }
};

// Lowers one op by its family (or its OpInfo::lower hook). lowering.cc. Partial-sum inputs are
// resolved to their rule layouts first, unless LowerOnPartials keeps them partial; a partial-sum
// output is returned as one only with ctx.lazy or keep_partial, else resolved to the rule layout.
// InvalidArgument for an unknown op type or a wrong number of inputs; Internal for a registered
// type with no lowering.
absl::StatusOr<LaidOutTensor> LowerOp(LoweringContext& ctx, const v1::Op& op,
                                      const std::vector<LaidOutTensor>& inputs);

// The family lowering of `op` (or its OpInfo::lower hook), with no partial-sum handling: LowerOp
// resolves partial inputs first, LowerOnPartials lowers linear ops on them.
absl::StatusOr<LaidOutTensor> LowerByFamily(LoweringContext& ctx, const v1::Op& op,
                                            const std::vector<LaidOutTensor>& inputs);

absl::StatusOr<LaidOutTensor> LowerSource(LoweringContext& ctx, const v1::Op& op);
absl::StatusOr<LaidOutTensor> LowerElementwise(LoweringContext& ctx, const v1::Op& op,
                                               const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerEinsum(LoweringContext& ctx, const v1::Op& op,
                                          const std::vector<LaidOutTensor>& inputs);
absl::StatusOr<LaidOutTensor> LowerReshape(LoweringContext& ctx, const v1::Op& op,
                                           const LaidOutTensor& input);

// Lazy partial sums (lower_partial.cc). When `op` is linear in its partial-sum inputs, they
// share their partial axes, it is their only reader, and staying partial costs no more than
// resolving them, lowers it on the unresolved buffers and returns its output as a partial sum
// over those axes (plus any the op adds, e.g. reduce_sum over a split dim). Returns nullopt when
// `op` must read resolved inputs instead.
absl::StatusOr<std::optional<LaidOutTensor>> LowerOnPartials(
    LoweringContext& ctx, const v1::Op& op, const std::vector<LaidOutTensor>& inputs);

// Microbatch accumulators (lower_accumulate.cc, which says when and why): a variable with attr
// kAccumulatorApplyAttr (core/ops/ops_state.h) whose gradient is a partial sum is kept as a partial
// sum over the gradient's axes, and the accumulated sum is resolved by a resolve guarded by the
// apply predicate. Lower asks it about every op, in order.
class AccumulatorLowering {
 public:
  // One accumulator: variable `variable`, sum = add(variable, gradient) (either order),
  // next = where(condition, sum, 0), update = assign(variable, next), guarded by `predicate`.
  struct Accumulator {
    std::string variable, gradient, sum, condition, next, update, predicate;
    bool partial = false;  // decided when `sum` is lowered
  };
  // What Lower does with an op.
  enum class Action {
    kGeneric,   // lower it as usual (after recording the tensors `made`, if any)
    kDeferred,  // nothing now: an accumulator, lowered with its sum
    kLowered,   // done: its tensors are in `made`
  };

  // The accumulators of `graph` whose pattern and taint check hold (`readers`: graph tensor ->
  // number of ops reading it, as Lower counts them).
  static AccumulatorLowering Find(const Graph& graph, const std::map<std::string, int>& readers);

  // For op `op` (all ops before it in `lowered`): appends the tensors it lowers — by name, to be
  // bound and recorded by the caller in order — to `made`, and says what is left to do. Errors:
  // those of the builder (Internal, a lowering bug).
  absl::StatusOr<Action> Lower(LoweringContext& ctx, const v1::Op& op,
                               const std::map<std::string, LaidOutTensor>& lowered,
                               std::vector<std::pair<std::string, LaidOutTensor>>* made);

 private:
  std::vector<Accumulator> accumulators_;
  std::map<std::string, int> role_;  // variable, sum, next and update op -> its accumulator
};

// Sorts `t`'s partial axes and drops those of size 1 (a sum over one processor), relabelling the
// dim the rules split over such an axis (the slices are the same).
void DropUnitPartialAxes(const LoweringContext& ctx, LaidOutTensor* t);

// Internal "lowering op 'NAME' (TYPE): what (a lowering bug)": a broken invariant of lowering.
absl::Status LoweringBug(const v1::Op& op, absl::string_view what);

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_LOWER_OPS_H_
