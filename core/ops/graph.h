// Graph: a validated mesh graph. Built from the wire proto (hand-written text format, the C++
// builder, or a client over gRPC); after Build succeeds every op has a known type, the right number
// of inputs, existing inputs, no cycles, and every tensor has a shape and dtype consistent with all
// others (one size per dim name).
//
// Immutable after Build; thread-safe for concurrent reads.
#ifndef MESHRT_CORE_OPS_GRAPH_H_
#define MESHRT_CORE_OPS_GRAPH_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ir/limits.h"
#include "core/ops/ops.h"
#include "proto/graph.pb.h"

namespace meshrt {

class Graph {
 public:
  // Validates `proto`. Every error is InvalidArgument and names what is wrong:
  //   an op without a name, or two ops with one name; an unknown op type; a wrong input count;
  //   an input naming no op (dangling); a cycle (listing its ops); a repeated dim in a shape; one dim
  //   name with two sizes (naming both tensors); an `outputs` entry naming no tensor.
  // Every inferred tensor's element count is overflow-checked (InvalidArgument).
  // No RequestLimits apply (for graphs made in process), except inside a call of the overload
  // below on the same thread: while_loop bodies, which shape inference builds through this
  // overload, are then held to that call's limits.
  static absl::StatusOr<Graph> Build(v1::Graph proto);
  // For untrusted graphs: first CheckGraphStructure(proto, limits) (core/ir/limits.h), before
  // copying `proto` or allocating anything in proportion to it; then Build; then every tensor's
  // type (while_loop bodies' too) against max_dims_per_shape and max_elements_per_tensor. Errors
  // are those of the limit checks (ResourceExhausted / InvalidArgument naming the limit's flag)
  // and of Build.
  static absl::StatusOr<Graph> Build(const v1::Graph& proto, const RequestLimits& limits);

  const v1::Graph& proto() const { return proto_; }
  // Op indices into proto().ops() in a topological order (inputs before users).
  const std::vector<int>& topological_order() const { return order_; }
  const v1::Op& op(int index) const { return proto_.ops(index); }
  // The op called `name` (which is also its output tensor's name), or nullptr.
  const v1::Op* FindOp(absl::string_view name) const;
  // Type of tensor `name`. Precondition: the tensor exists (CHECKed): for names the graph itself
  // holds (its ops, their inputs). Names from a request go through FindType.
  const TensorType& type(absl::string_view name) const;
  // Type of tensor `name`, or InvalidArgument naming it when the graph has no such tensor.
  absl::StatusOr<const TensorType*> FindType(absl::string_view name) const;
  bool HasTensor(absl::string_view name) const { return types_.count(std::string(name)) > 0; }
  // Placeholder op names, in topological order.
  std::vector<std::string> Placeholders() const;
  // proto().outputs() if any, else every tensor no op consumes.
  std::vector<std::string> Outputs() const;

 private:
  v1::Graph proto_;
  std::vector<int> order_;
  std::map<std::string, int> index_;        // op name -> index in proto_.ops()
  std::map<std::string, TensorType> types_;  // tensor name -> type
};

}  // namespace meshrt

#endif  // MESHRT_CORE_OPS_GRAPH_H_
