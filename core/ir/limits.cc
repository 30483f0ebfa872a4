#include "core/ir/limits.h"

#include <algorithm>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// "over the limit of 8 (--max_mesh_dims)".
std::string Over(int64_t limit, const char* flag) {
  return absl::StrCat("over the limit of ", limit, " (--", flag, ")");
}

// A name's first bytes, for messages about names that are too long.
std::string Head(absl::string_view name) { return Abbreviated(name, 40); }

// One walk over a graph and its while_loop bodies. `where` says which body a graph is
// ("" at top level, " in the body of while_loop 'a'" below it); it grows with the nesting depth
// only, which is bounded before recursing.
class StructureCheck {
 public:
  explicit StructureCheck(const RequestLimits& limits) : limits_(limits) {}

  absl::Status Graph(const v1::Graph& graph, int64_t depth, const std::string& where) {
    // Count first: the rest of the walk is then bounded by max_ops.
    ops_ += graph.ops_size();
    if (ops_ > limits_.max_ops) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the graph has at least ", ops_, " ops (counting while_loop bodies; ", graph.ops_size(),
          " in the graph", where, "), ", Over(limits_.max_ops, kMaxOpsFlag),
          "; split the model into smaller graphs or raise --", kMaxOpsFlag));
    }
    if (graph.outputs_size() > limits_.max_ops) {
      return absl::ResourceExhaustedError(absl::StrCat("the graph", where, " lists ",
                                                       graph.outputs_size(), " outputs, ",
                                                       Over(limits_.max_ops, kMaxOpsFlag)));
    }
    for (int i = 0; i < graph.ops_size(); ++i) {
      const v1::Op& op = graph.ops(i);
      if (op.inputs_size() > limits_.max_inputs_per_op) {
        return absl::InvalidArgumentError(absl::StrCat(
            Label(op, i, where), " has ", op.inputs_size(), " inputs, ",
            Over(limits_.max_inputs_per_op, kMaxInputsPerOpFlag),
            "; combine them in steps (e.g. a tree of add ops) or raise --", kMaxInputsPerOpFlag));
      }
      RETURN_IF_ERROR(Op(op, i, depth, where));
    }
    for (const std::string& out : graph.outputs()) {
      RETURN_IF_ERROR(Name(out, absl::StrCat("graph output", where)));
    }
    return absl::OkStatus();
  }

 private:
  // "op 'x' (add) in the body of while_loop 'l'"; op #i when the name is empty or too long.
  std::string Label(const v1::Op& op, int i, const std::string& where) const {
    const bool named =
        !op.name().empty() && static_cast<int64_t>(op.name().size()) <= limits_.max_name_length;
    const bool typed = static_cast<int64_t>(op.type().size()) <= limits_.max_name_length;
    return absl::StrCat(named ? absl::StrCat("op '", op.name(), "'") : absl::StrCat("op #", i),
                        " (", typed ? op.type() : Head(op.type()), ")", where);
  }

  absl::Status Name(absl::string_view name, const std::string& what) const {
    if (static_cast<int64_t>(name.size()) <= limits_.max_name_length) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the name '", Head(name), "' is ", name.size(), " bytes long, ",
                     Over(limits_.max_name_length, kMaxNameLengthFlag), "; use a shorter name"));
  }

  absl::Status Dims(int64_t count, const std::string& what) const {
    if (count <= limits_.max_dims_per_shape) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", count, " dims, ", Over(limits_.max_dims_per_shape, kMaxDimsPerShapeFlag)));
  }

  absl::Status Shape(const v1::Shape& shape, const std::string& what) const {
    RETURN_IF_ERROR(Dims(shape.dims_size(), what));
    for (const v1::Dim& d : shape.dims())
      RETURN_IF_ERROR(Name(d.name(), absl::StrCat(what, " dim")));
    return absl::OkStatus();
  }

  absl::Status Op(const v1::Op& op, int i, int64_t depth, const std::string& where) {
    // Name checks come before Label uses the name in other messages.
    RETURN_IF_ERROR(Name(op.name(), absl::StrCat("op #", i, where)));
    RETURN_IF_ERROR(Name(op.type(), absl::StrCat("the type of op #", i, where)));
    const std::string label = Label(op, i, where);
    for (const std::string& in : op.inputs()) {
      RETURN_IF_ERROR(Name(in, absl::StrCat(label, ", an input")));
    }
    RETURN_IF_ERROR(Shape(op.shape(), absl::StrCat(label, ", its shape")));
    RETURN_IF_ERROR(Dims(op.dims_size(), absl::StrCat(label, ", its dims list")));
    for (const std::string& d : op.dims()) {
      RETURN_IF_ERROR(Name(d, absl::StrCat(label, ", its dims list")));
    }
    RETURN_IF_ERROR(Shape(op.value().shape(), absl::StrCat(label, ", its value's shape")));
    for (const auto& [key, attr] : op.attrs()) {
      RETURN_IF_ERROR(Name(key, absl::StrCat(label, ", an attr")));
      int64_t length = 0;
      switch (attr.value_case()) {
        case v1::AttrValue::kInts:
          length = attr.ints().values_size();
          break;
        case v1::AttrValue::kFloats:
          length = attr.floats().values_size();
          break;
        case v1::AttrValue::kStrings:
          length = attr.strings().values_size();
          break;
        default:
          break;
      }
      if (length > limits_.max_attr_list_length) {
        return absl::InvalidArgumentError(
            absl::StrCat(label, ": attr '", key, "' lists ", length, " values, ",
                         Over(limits_.max_attr_list_length, kMaxAttrListLengthFlag)));
      }
    }
    if (op.has_body()) {
      if (depth + 1 > limits_.max_while_loop_depth) {
        return absl::InvalidArgumentError(
            absl::StrCat(label, " has a body at while_loop depth ", depth + 1, ", ",
                         Over(limits_.max_while_loop_depth, kMaxWhileLoopDepthFlag),
                         "; nest fewer loops or raise --", kMaxWhileLoopDepthFlag));
      }
      RETURN_IF_ERROR(Graph(op.body(), depth + 1,
                            absl::StrCat(" in the body of while_loop '", op.name(), "'",
                                         where.empty() ? "" : ",", where)));
    }
    return absl::OkStatus();
  }

  const RequestLimits& limits_;
  int64_t ops_ = 0;
};

}  // namespace

absl::Status CheckRequestLimits(const RequestLimits& limits) {
  const std::pair<int64_t, const char*> fields[] = {
      {limits.max_graph_bytes, kMaxGraphBytesFlag},
      {limits.max_ops, kMaxOpsFlag},
      {limits.max_inputs_per_op, kMaxInputsPerOpFlag},
      {limits.max_name_length, kMaxNameLengthFlag},
      {limits.max_dims_per_shape, kMaxDimsPerShapeFlag},
      {limits.max_mesh_dims, kMaxMeshDimsFlag},
      {limits.max_mesh_processors, kMaxMeshProcessorsFlag},
      {limits.max_elements_per_tensor, kMaxElementsPerTensorFlag},
      {limits.max_while_loop_depth, kMaxWhileLoopDepthFlag},
      {limits.max_attr_list_length, kMaxAttrListLengthFlag},
  };
  for (const auto& [value, flag] : fields) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " is ", value, "; every request limit must be >= 1"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGraphBytes(int64_t bytes, const RequestLimits& limits, absl::string_view what) {
  if (bytes <= limits.max_graph_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " is ", bytes, " bytes serialised, ", Over(limits.max_graph_bytes, kMaxGraphBytesFlag),
      "; split the model into smaller graphs or raise --", kMaxGraphBytesFlag));
}

namespace {

// The ops lowering emits for `graph`: a while_loop's body is lowered trip_count times, so a loop
// of 10^9 trips over one op is 10^9 ops of program. Saturates at cap + 1; sets `*loop` to a
// loop whose unrolling passes the cap.
int64_t UnrolledOps(const v1::Graph& graph, int64_t cap, const v1::Op** loop) {
  int64_t total = 0;
  for (const v1::Op& op : graph.ops()) {
    int64_t n = 1;
    if (op.has_body()) {
      auto trip = op.attrs().find("trip_count");
      const int64_t trips =
          trip == op.attrs().end() ? 0 : std::max<int64_t>(trip->second.i(), 0);
      const int64_t body = UnrolledOps(op.body(), cap, loop);
      if (trips > 0 && body > cap / trips) {
        if (*loop == nullptr) *loop = &op;
        return cap + 1;
      }
      n += trips * body;
    }
    total += n;
    if (total > cap) {
      if (*loop == nullptr && op.has_body()) *loop = &op;
      return cap + 1;
    }
  }
  return total;
}

}  // namespace

absl::Status CheckGraphStructure(const v1::Graph& graph, const RequestLimits& limits) {
  RETURN_IF_ERROR(StructureCheck(limits).Graph(graph, 0, ""));
  const v1::Op* loop = nullptr;
  if (UnrolledOps(graph, limits.max_ops, &loop) > limits.max_ops) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the graph has more than ", limits.max_ops, " ops once its while_loops are unrolled",
        loop != nullptr ? absl::StrCat(" (while_loop '", Head(loop->name()), "' repeats its body ",
                                       loop->attrs().at("trip_count").i(), " times)")
                        : "",
        ", ", Over(limits.max_ops, kMaxOpsFlag), "; use fewer trips or raise --", kMaxOpsFlag));
  }
  return absl::OkStatus();
}

absl::Status CheckMeshLimits(const v1::Mesh& mesh, const RequestLimits& limits) {
  if (mesh.dims_size() > limits.max_mesh_dims) {
    return absl::InvalidArgumentError(absl::StrCat("the mesh has ", mesh.dims_size(), " dims, ",
                                                   Over(limits.max_mesh_dims, kMaxMeshDimsFlag)));
  }
  std::string text;  // "rows:2,cols:4": bounded by max_mesh_dims names of max_name_length
  for (const v1::Dim& d : mesh.dims()) {
    if (static_cast<int64_t>(d.name().size()) > limits.max_name_length) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh dim '", Head(d.name()), "' has a name of ", d.name().size(),
                       " bytes, ", Over(limits.max_name_length, kMaxNameLengthFlag)));
    }
    if (d.size() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh dim '", d.name(), "' has size ", d.size(), "; sizes must be >= 1"));
    }
    absl::StrAppend(&text, text.empty() ? "" : ",", d.name(), ":", d.size());
  }
  int64_t n = 1;
  for (const v1::Dim& d : mesh.dims()) {
    // n <= max and size >= 1: n * size > max exactly when n > max / size (no overflow).
    if (n > limits.max_mesh_processors / d.size()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("mesh ", text, " has more than ", limits.max_mesh_processors,
                       " processors (the product passes it at mesh dim '", d.name(), "'), ",
                       Over(limits.max_mesh_processors, kMaxMeshProcessorsFlag),
                       "; every processor is one worker: use a smaller mesh or raise --",
                       kMaxMeshProcessorsFlag));
    }
    n *= d.size();
  }
  return absl::OkStatus();
}

absl::Status CheckTensorElements(const Shape& shape, absl::string_view tensor,
                                 absl::string_view op_type, const RequestLimits& limits) {
  const std::string what =
      absl::StrCat("tensor '", tensor, "' (made by op '", tensor, "', ", op_type, ")");
  if (shape.rank() > limits.max_dims_per_shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", shape.rank(), " dims, ",
                     Over(limits.max_dims_per_shape, kMaxDimsPerShapeFlag)));
  }
  absl::StatusOr<int64_t> n = CheckedDimProduct(shape.dims(), limits.max_elements_per_tensor, what);
  if (n.ok()) return absl::OkStatus();
  // Tell overflow (or an absurd size) apart from a shape that is merely over the cap.
  absl::StatusOr<int64_t> real = shape.CheckedNumElements(what);
  if (!real.ok()) return real.status();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " of shape ", shape.ToString(), " has ", *real, " elements, ",
                   Over(limits.max_elements_per_tensor, kMaxElementsPerTensorFlag),
                   "; use smaller dims or raise --", kMaxElementsPerTensorFlag));
}

}  // namespace meshrt
