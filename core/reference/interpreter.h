// The single-process reference interpreter: runs a Graph on whole tensors. It is the oracle every
// distributed result is compared with.
#ifndef MESHRT_CORE_REFERENCE_INTERPRETER_H_
#define MESHRT_CORE_REFERENCE_INTERPRETER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ir/tensor.h"
#include "core/ops/graph.h"
#include "core/ops/kernel_runner.h"

namespace meshrt {

using TensorMap = std::map<std::string, Tensor>;

// Checks `feeds` against the graph's placeholders: every placeholder fed, no unknown names, shapes
// (dim names, sizes and order) and dtypes exact. InvalidArgument naming the placeholder otherwise.
absl::Status CheckFeeds(const Graph& graph, const TensorMap& feeds);

// Runs every op of `graph` in topological order with `kernels` (default: the naive reference
// kernels) and returns the tensors named in `fetches` (every tensor when empty; with fetches, only
// the ops they and the variables' updates need run, see InterpretStep). Errors: those of
// CheckFeeds; InvalidArgument for a fetch naming no tensor; kernel errors, naming the op.
absl::StatusOr<TensorMap> Interpret(const Graph& graph, const TensorMap& feeds,
                                    const std::vector<std::string>& fetches = {},
                                    const KernelRunner& kernels = ReferenceKernels());

// One step of a graph with state (core/ops/ops_state.h): as Interpret, but variables read their values
// from `*variables` (a variable missing there starts from its initializer), and afterwards
// `*variables` holds every variable's value after the step (assigned values replace old ones).
// With `fetches`, only the ops that they, the variables and the variable updates depend on run
// (as runtime/executor.h prunes a step; an op nobody needs cannot fail the step).
// On error `*variables` is unchanged. InvalidArgument when a held value does not match the
// variable's declared type.
absl::StatusOr<TensorMap> InterpretStep(const Graph& graph, const TensorMap& feeds,
                                        const std::vector<std::string>& fetches,
                                        TensorMap* variables,
                                        const KernelRunner& kernels = ReferenceKernels());

}  // namespace meshrt

#endif  // MESHRT_CORE_REFERENCE_INTERPRETER_H_
