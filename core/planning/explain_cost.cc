// The time part of `meshrt explain`: text (ExplainCost) and JSON (ExplainProgramJson).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/planning/explain.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

std::string Ms(double seconds) { return absl::StrFormat("%.4g", seconds * 1e3); }

std::string ProfileNote(const HardwareProfile& profile) {
  std::string out = absl::StrCat("profile: ", profile.source.empty() ? "defaults" : profile.source);
  if (!profile.collectives_measured) {
    absl::StrAppend(&out, " (collective alpha/beta are placeholders, not measured: ",
                    "measure them with `meshrt calibrate --out FILE` and pass --profile FILE)");
  }
  return out;
}

Value Num(double v) {
  Value value;
  value.set_number_value(v);
  return value;
}
Value Str(const std::string& s) {
  Value value;
  value.set_string_value(s);
  return value;
}
Value Bool(bool b) {
  Value value;
  value.set_bool_value(b);
  return value;
}

std::string RulesText(const v1::Program& program) {
  std::string rules;
  for (const v1::LayoutRule& r : program.rules().rules()) {
    absl::StrAppend(&rules, rules.empty() ? "" : ",", r.tensor_dim(), ":", r.mesh_dim());
  }
  return rules;
}

}  // namespace

absl::StatusOr<std::string> ExplainCost(const v1::Program& program, const HardwareProfile& profile,
                                        const std::vector<std::string>* fetches) {
  ASSIGN_OR_RETURN(ProgramCost cost, CostProgram(program, profile, fetches));
  std::string out = "compute and time per worker (one step):\n";
  absl::StrAppendFormat(&out, "  %-16s %14s %14s %14s %12s %12s\n", "op", "FLOPs", "bytes moved",
                        "bytes sent", "compute ms", "comm ms");
  auto row = [&](const OpCostTotal& t) {
    absl::StrAppendFormat(&out, "  %-16s %14.4g %14d %14d %12s %12s\n", t.source_op, t.flops,
                          t.bytes_moved, t.sent_bytes, Ms(t.compute_s), Ms(t.comm_s));
  };
  for (const OpCostTotal& t : cost.ops) row(t);
  row(cost.total);
  absl::StrAppendFormat(
      &out,
      "predicted step time: %s ms (%s ms compute + %s ms communication + %s ms step overhead "
      "= %s ms one after another%s; %d processors; %.4g FLOPs over all of them)\n",
      Ms(cost.step_s), Ms(cost.total.compute_s), Ms(cost.total.comm_s), Ms(cost.overhead_s),
      Ms(cost.serial_s),
      profile.overlap_comm ? ", communication overlapping compute where the program allows" : "",
      cost.processors, cost.total.flops * cost.processors);
  absl::StrAppend(&out, ProfileNote(profile), "\n");
  for (const std::string& w : CostWarnings(program, cost))
    absl::StrAppend(&out, "warning: ", w, "\n");
  return out;
}

absl::StatusOr<std::string> ExplainProgramJson(const v1::Program& program,
                                               const HardwareProfile& profile,
                                               const std::vector<std::string>* fetches) {
  ASSIGN_OR_RETURN(ProgramCost cost, CostProgram(program, profile, fetches));
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::FromProto(program.mesh()));
  Struct root;
  auto& f = *root.mutable_fields();
  f["mesh"] = Str(mesh.ToString());
  f["rules"] = Str(RulesText(program));
  ListValue* tensors = f["tensors"].mutable_list_value();
  for (const v1::ProgramTensor& t : program.outputs()) {
    auto shape = Shape::FromProto(t.shape());
    if (!shape.ok()) continue;
    TensorLayout layout = TensorLayout::FromProto(t.layout());
    Struct s;
    (*s.mutable_fields())["name"] = Str(t.name());
    (*s.mutable_fields())["shape"] = Str(shape->ToString());
    (*s.mutable_fields())["layout"] = Str(layout.ToString(*shape, mesh));
    (*s.mutable_fields())["slice"] = Str(SliceShape(*shape, layout, mesh).ToString());
    *tensors->add_values()->mutable_struct_value() = std::move(s);
  }
  auto totals = [](const OpCostTotal& t, Struct* s) {
    auto& g = *s->mutable_fields();
    g["flops"] = Num(t.flops);
    g["bytes_moved"] = Num(static_cast<double>(t.bytes_moved));
    g["sent_bytes"] = Num(static_cast<double>(t.sent_bytes));
    g["compute_s"] = Num(t.compute_s);
    g["comm_s"] = Num(t.comm_s);
  };
  ListValue* ops = f["ops"].mutable_list_value();
  for (const OpCostTotal& t : cost.ops) {
    Struct s;
    (*s.mutable_fields())["name"] = Str(t.source_op);
    totals(t, &s);
    *ops->add_values()->mutable_struct_value() = std::move(s);
  }
  ListValue* collectives = f["collectives"].mutable_list_value();
  int steps = 0;
  for (const InstructionCost& c : cost.instructions) {
    const v1::Instruction& inst = program.instructions(c.index);
    if (!inst.has_collective()) continue;
    if (c.runs) ++steps;
    std::string axes;
    for (int a : inst.collective().mesh_axes()) {
      absl::StrAppend(&axes, axes.empty() ? "" : ",", program.mesh().dims(a).name());
    }
    Struct s;
    auto& g = *s.mutable_fields();
    g["index"] = Num(c.index);
    g["op"] = Str(c.source_op);
    g["kind"] = Str(c.kind);
    g["mesh_dims"] = Str(axes);
    g["slice"] = Str(Shape::FromProto(inst.slice_shape()).value_or(Shape()).ToString());
    g["sent_bytes"] = Num(static_cast<double>(c.sent_bytes));
    g["comm_s"] = Num(c.comm_s);
    g["in_step"] = Bool(c.runs);
    *collectives->add_values()->mutable_struct_value() = std::move(s);
  }
  Struct* t = f["totals"].mutable_struct_value();
  totals(cost.total, t);
  (*t->mutable_fields())["predicted_s"] = Num(cost.step_s);
  (*t->mutable_fields())["serial_s"] = Num(cost.serial_s);
  (*t->mutable_fields())["overhead_s"] = Num(cost.overhead_s);
  (*t->mutable_fields())["communication_steps"] = Num(steps);
  (*t->mutable_fields())["processors"] = Num(cost.processors);
  Struct* p = f["profile"].mutable_struct_value();
  (*p->mutable_fields())["source"] = Str(profile.source);
  (*p->mutable_fields())["collectives_measured"] = Bool(profile.collectives_measured);
  ListValue* warnings = f["warnings"].mutable_list_value();
  for (const std::string& w : CostWarnings(program, cost)) *warnings->add_values() = Str(w);
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  auto status = google::protobuf::util::MessageToJsonString(root, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("explain --json: ", status.ToString()));
  }
  return json;
}

}  // namespace meshrt
