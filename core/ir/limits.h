// RequestLimits: how much work one request may ask of a daemon, and the checks that hold a request
// to them before anything proportional to its size is allocated.
//
// A graph, a mesh or a tensor shape arrives from a client; without caps one request can make the
// coordinator build millions of ops, enumerate a billion processors or overflow an element count.
// The defaults are sized for real models with 10x headroom or more: a 48-layer Transformer training
// graph with Adam and gradient clipping (models/transformer.h at batch 64, length 512, d_model
// 1024, 16 heads of 64, d_ff 4096) has 15,544 ops, 891 KB serialised, at most 3 inputs per op, op
// names of at most 35 bytes and 2^28 elements in its largest tensor (the attention weights);
// measured by models_test's Transformer48LayersPassesTheDefaultLimits, which also holds the 10x.
//
// Error codes: ResourceExhausted for amounts of work (graph bytes, ops, processors, elements),
// InvalidArgument for structure (inputs per op, name length, dims per shape, mesh dims, while_loop
// nesting, attr list length) and for arithmetic overflow (no flag can make that fit). Every message
// names the culprit (op, tensor, dim, mesh), the limit and the flag that sets it (--max_ops, ...;
// the flag names are the k*Flag constants below, which the daemons register).
//
// Thread-compatible value type; the check functions are pure and thread-safe.
#ifndef MESHRT_CORE_IR_LIMITS_H_
#define MESHRT_CORE_IR_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/ir/shape.h"
#include "proto/graph.pb.h"
#include "proto/mesh.pb.h"

namespace meshrt {

struct RequestLimits {
  // Serialised size of one request's graph (v1::Graph wire bytes, while_loop bodies included).
  // 16 MiB (18x the 48-layer graph; gRPC refuses any message over 64 MiB anyway).
  int64_t max_graph_bytes = 16 << 20;
  // Ops in one graph, counting every op of every while_loop body (at any depth).
  // 200,000 (13x the 48-layer graph).
  int64_t max_ops = 200000;
  // Inputs of one op (add_n, concat and the like take many; most ops take 1 or 2).
  int64_t max_inputs_per_op = 4096;
  // Length in bytes of any name: an op (= its tensor), an input reference, a graph output, a dim
  // (in a shape or an op's dims list), an attr key, a mesh dim.
  int64_t max_name_length = 1024;
  // Dims of one shape (an op's declared shape, its dims list, or an inferred tensor type).
  int64_t max_dims_per_shape = 32;
  // Dims of a mesh.
  int64_t max_mesh_dims = 8;
  // Processors of a mesh (the product of its dim sizes, overflow-checked): one worker each.
  int64_t max_mesh_processors = 4096;
  // Elements of one tensor of the graph (the whole logical tensor, before slicing over the mesh);
  // 2^34 is 64 GiB of float32. Overflow-checked.
  int64_t max_elements_per_tensor = int64_t{1} << 34;
  // How deep while_loop bodies may nest (a loop in a top-level graph is at depth 1).
  int64_t max_while_loop_depth = 8;
  // Entries of one list attr (ints, floats, strings) of an op.
  int64_t max_attr_list_length = 65536;
};

// Flag names (without "--") of the fields above, as the daemons register them.
inline constexpr char kMaxGraphBytesFlag[] = "max_graph_bytes";
inline constexpr char kMaxOpsFlag[] = "max_ops";
inline constexpr char kMaxInputsPerOpFlag[] = "max_inputs_per_op";
inline constexpr char kMaxNameLengthFlag[] = "max_name_length";
inline constexpr char kMaxDimsPerShapeFlag[] = "max_dims_per_shape";
inline constexpr char kMaxMeshDimsFlag[] = "max_mesh_dims";
inline constexpr char kMaxMeshProcessorsFlag[] = "max_mesh_processors";
inline constexpr char kMaxElementsPerTensorFlag[] = "max_elements_per_tensor";
inline constexpr char kMaxWhileLoopDepthFlag[] = "max_while_loop_depth";
inline constexpr char kMaxAttrListLengthFlag[] = "max_attr_list_length";

// InvalidArgument naming the field's flag when a limit is below 1 (a daemon checks its flags with
// this at start).
absl::Status CheckRequestLimits(const RequestLimits& limits);

// `bytes` (the serialised size of a request's graph, or of a whole request carrying one, which
// `what` names) against max_graph_bytes. ResourceExhausted.
absl::Status CheckGraphBytes(int64_t bytes, const RequestLimits& limits,
                             absl::string_view what = "the graph");

// The structure of `graph` and of every while_loop body in it, walked once without allocating in
// proportion to it: op count (first, stopping at the limit), inputs per op, name lengths, dims per
// declared shape and dims list, attr list lengths, while_loop nesting (never recursing past the
// limit). Checks nothing that needs shape inference (see CheckTensorElements).
absl::Status CheckGraphStructure(const v1::Graph& graph, const RequestLimits& limits);

// A mesh before Mesh::FromProto: its dim count, dim name lengths and processor count
// (overflow-checked, so a mesh of 2^64 processors is refused, not wrapped).
absl::Status CheckMeshLimits(const v1::Mesh& mesh, const RequestLimits& limits);

// An inferred tensor type: its rank against max_dims_per_shape and its element count
// (overflow-checked) against max_elements_per_tensor. `tensor` and `op_type` name it.
absl::Status CheckTensorElements(const Shape& shape, absl::string_view tensor,
                                 absl::string_view op_type, const RequestLimits& limits);

}  // namespace meshrt

#endif  // MESHRT_CORE_IR_LIMITS_H_
