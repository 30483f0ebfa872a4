// Internal to //core: state ops — variables and their updates (ops_state.cc). Users see them
// through the registry (core/ops/ops.h, `meshrt ops`) and GraphBuilder::Variable/Assign/AssignAdd.
//
//   variable              0 inputs; shape; dtype float32 (unset) or int32; attrs
//                         {initializer: s = "zeros", seed: i = 0, ...}. Initializers:
//                           zeros, ones, constant {value: f}
//                           uniform {minval: f = 0, maxval: f = 1}
//                           normal {mean: f = 0, stddev: f = 1}
//                           truncated_normal {mean, stddev}: draws beyond 2 stddev are redrawn
//                           glorot_uniform / glorot_normal: fan_in = product of the sizes of the
//                             op's `dims` (default: every dim but the last), fan_out = product of
//                             the other dims; limit sqrt(6 / (fan_in + fan_out)) / stddev
//                             sqrt(2 / (fan_in + fan_out))
//                         Random initializers use the random ops' generator (core/ops/ops_random.h)
//                         keyed on (seed, the variable's name, global index), so a variable starts
//                         bitwise equal on every mesh and layout and in the interpreter.
//   assign(v, value)      v: a variable op's output; value: v's type. Output: value. After the
//                         step, v holds value.
//   assign_add(v, delta)  as assign(v, v + delta); delta: v's type.
//
// Semantics (decided here; Mesh-TensorFlow leaves ordering to TF control dependencies): within a
// step every read of a variable sees its value at the start of the step, whatever the graph
// assigns; assignments take effect together when the step succeeds (a failed step changes no
// variable). A variable is assigned at most once per graph (Graph::Build refuses two updates of
// one variable, naming both ops), and loop bodies hold no state ops.
//
// A variable with attrs {accumulator_apply: s = P} (kAccumulatorApplyAttr) is a microbatch
// accumulator (core/train/optimizers.h sets it on "<var>/acc"): P names a float32 scalar that is nonzero
// on the steps that use the accumulated sum. The attr changes no value; it lets the lowering keep
// the accumulator as a partial sum and resolve it only on those steps (core/lowering/lower_accumulate.cc
// checks that this changes nothing any update or fetch sees). Ignored by the interpreter.
//
// Lowering: a variable is a program variable (proto ProgramVariable) in the rule layout of its
// shape: each processor keeps its slice between steps; the initializer runs on each processor for
// its own slice, with no communication. An assign reshards the value to the variable's layout (the
// only communication it may need, e.g. resolving a partial sum).
#ifndef MESHRT_CORE_OPS_OPS_STATE_H_
#define MESHRT_CORE_OPS_OPS_STATE_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "proto/graph.pb.h"

namespace meshrt {

class Graph;

// The variable attr naming a microbatch accumulator's apply predicate (above).
inline constexpr char kAccumulatorApplyAttr[] = "accumulator_apply";

// Whether ops of type `op_type` write a variable (OpInfo::updates_variable: assign, assign_add).
bool IsVariableUpdate(const std::string& op_type);

// Checks the state rules of a graph whose ops and types are otherwise valid: every update's first
// input is a variable op; no variable is updated twice; no state op in a loop body.
// InvalidArgument naming the ops otherwise. (Called by Graph::Build.)
absl::Status CheckStateOps(const v1::Graph& graph);

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_OPS_STATE_H_
