#include "core/planning/explain.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"

namespace meshrt {
namespace {

int64_t BytesOf(const v1::Shape& shape) {
  int64_t n = 4;  // float32 and int32 alike
  for (const v1::Dim& d : shape.dims()) n *= d.size();
  return n;
}

std::string AxesName(const v1::Program& p, const v1::Collective& c) {
  std::string s;
  for (int a : c.mesh_axes()) absl::StrAppend(&s, s.empty() ? "" : ",", p.mesh().dims(a).name());
  return s;
}

}  // namespace

CollectiveCost CostOf(const v1::Program& program, int index) {
  const v1::Instruction& inst = program.instructions(index);
  CollectiveCost cost;
  if (!inst.has_collective()) return cost;
  const v1::Collective& c = inst.collective();
  for (int a : c.mesh_axes()) cost.group_size *= program.mesh().dims(a).size();
  const int g = cost.group_size;
  const int64_t out = BytesOf(inst.slice_shape());
  switch (c.kind()) {
    case v1::Collective::ALLREDUCE:  // ring: reduce-scatter then allgather
      cost.slice_bytes = out;
      cost.sent_bytes = 2 * (g - 1) * out / g;
      break;
    case v1::Collective::ALLGATHER:  // each worker's slice reaches g-1 others
      cost.slice_bytes = out / g;
      cost.sent_bytes = (g - 1) * out / g;
      break;
    case v1::Collective::ALLTOALL:  // keep 1/g, send the rest
      cost.slice_bytes = out;
      cost.sent_bytes = (g - 1) * out / g;
      break;
    case v1::Collective::REDUCE_SCATTER:
      cost.slice_bytes = out * g;
      cost.sent_bytes = (g - 1) * out;
      break;
    case v1::Collective::PERMUTE:  // each rank sends its slice to one neighbour
      cost.slice_bytes = out;
      cost.sent_bytes = g > 1 ? out : 0;
      break;
    case v1::Collective::BROADCAST:  // the root's slice reaches g-1 others (a tree or ring)
      cost.slice_bytes = out;
      cost.sent_bytes = (g - 1) * out / g;
      break;
    default:
      break;
  }
  return cost;
}

std::vector<bool> StepInstructions(const v1::Program& program,
                                   const std::vector<std::string>* fetches) {
  std::vector<bool> live_buffer(std::max(program.num_buffers(), 0), false);
  auto mark = [&](int b) {
    if (b >= 0 && b < static_cast<int>(live_buffer.size())) live_buffer[b] = true;
  };
  for (const v1::ProgramTensor& t : program.outputs()) {
    const bool wanted = fetches == nullptr ? !t.resolved_on_fetch()
                                           : std::find(fetches->begin(), fetches->end(),
                                                       t.name()) != fetches->end();
    if (wanted) mark(t.buffer());
  }
  for (const v1::ProgramVariable& v : program.variables()) mark(v.update_buffer());
  std::vector<bool> runs(program.instructions_size(), false);
  for (int i = program.instructions_size() - 1; i >= 0; --i) {
    const v1::Instruction& inst = program.instructions(i);
    const int out = inst.output();
    if (out < 0 || out >= static_cast<int>(live_buffer.size()) || !live_buffer[out]) continue;
    runs[i] = true;
    for (int b : inst.inputs()) mark(b);
  }
  return runs;
}

int64_t SentBytesPerStep(const v1::Program& program, const std::vector<std::string>* fetches) {
  const std::vector<bool> runs = StepInstructions(program, fetches);
  int64_t bytes = 0;
  for (int i = 0; i < program.instructions_size(); ++i) {
    if (runs[i]) bytes += CostOf(program, i).sent_bytes;
  }
  return bytes;
}

std::string ExplainProgram(const v1::Program& program, const std::vector<std::string>* fetches) {
  auto mesh = Mesh::FromProto(program.mesh());
  std::string rules;
  for (const v1::LayoutRule& r : program.rules().rules()) {
    absl::StrAppend(&rules, rules.empty() ? "" : ",", r.tensor_dim(), ":", r.mesh_dim());
  }
  std::string out = absl::StrCat("mesh ", mesh.ok() ? mesh->ToString() : "?", "  layout ",
                                 rules.empty() ? "(none: all replicated)" : rules, "\n");
  absl::StrAppend(&out, "tensors:\n");
  absl::StrAppendFormat(&out, "  %-14s %-32s %-36s %s\n", "name", "shape", "layout", "slice");
  for (const v1::ProgramTensor& t : program.outputs()) {
    auto shape = Shape::FromProto(t.shape());
    if (!shape.ok() || !mesh.ok()) continue;
    TensorLayout layout = TensorLayout::FromProto(t.layout());
    absl::StrAppendFormat(&out, "  %-14s %-32s %-36s %s\n", t.name(), shape->ToString(),
                          layout.ToString(*shape, *mesh),
                          SliceShape(*shape, layout, *mesh).ToString());
  }
  absl::StrAppend(&out, "communication:\n");
  const std::vector<bool> runs = StepInstructions(program, fetches);
  int64_t total = 0, on_fetch_total = 0, guarded_total = 0;
  int steps = 0, on_fetch_steps = 0, guarded_steps = 0;
  // A guarded step's predicate, by the output bound to its buffer.
  auto predicate_name = [&](int buffer) {
    for (const v1::ProgramTensor& t : program.outputs()) {
      if (t.buffer() == buffer) return t.name();
    }
    return absl::StrCat("buffer ", buffer);
  };
  for (int i = 0; i < program.instructions_size(); ++i) {
    const v1::Instruction& inst = program.instructions(i);
    if (!inst.has_collective()) continue;
    const v1::Collective& c = inst.collective();
    CollectiveCost cost = CostOf(program, i);
    std::string kind = absl::AsciiStrToLower(v1::Collective::Kind_Name(c.kind()));
    if (c.kind() == v1::Collective::ALLREDUCE || c.kind() == v1::Collective::REDUCE_SCATTER) {
      absl::StrAppend(&kind, " ",
                      absl::AsciiStrToLower(v1::ReduceOp_Name(c.reduce_op()).substr(7)));
    }
    absl::StrAppendFormat(&out,
                          "  #%-3d %-12s %-18s over %-10s slice %-22s %10d B sent per worker%s\n",
                          i, inst.source_op(), kind, AxesName(program, c),
                          Shape::FromProto(inst.slice_shape()).value_or(Shape()).ToString(),
                          cost.sent_bytes,
                          !runs[i]             ? " (on fetch)"
                          : inst.has_predicate() ? absl::StrCat(" (when '",
                                                                predicate_name(inst.predicate()),
                                                                "' is nonzero)")
                                                 : "");
    if (runs[i]) {
      total += cost.sent_bytes;
      ++steps;
      if (inst.has_predicate()) {
        guarded_total += cost.sent_bytes;
        ++guarded_steps;
      }
    } else {
      on_fetch_total += cost.sent_bytes;
      ++on_fetch_steps;
    }
  }
  if (steps + on_fetch_steps == 0) absl::StrAppend(&out, "  (none: every step is local)\n");
  absl::StrAppend(&out, "total: ", steps, " communication step(s), ", total,
                  " bytes sent per worker\n");
  if (guarded_steps > 0) {
    absl::StrAppend(&out, "  of which guarded: ", guarded_steps, " step(s), ", guarded_total,
                    " bytes, run only on steps where their predicate is nonzero (e.g. once per K "
                    "microbatches) or whose fetches need them\n");
  }
  if (on_fetch_steps > 0) {
    absl::StrAppend(&out, "on fetch: ", on_fetch_steps, " more step(s), ", on_fetch_total,
                    " bytes, run only when their tensors are fetched\n");
  }
  return out;
}

}  // namespace meshrt
