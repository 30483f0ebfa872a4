#include "core/planning/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/ir/mesh.h"
#include "core/ir/shape.h"
#include "core/ir/step_fusion.h"
#include "core/ops/op_cost.h"
#include "core/ops/ops.h"
#include "core/planning/explain.h"
#include "util/file.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

const char* const kKinds[] = {"allreduce",      "allgather", "alltoall",
                              "reduce_scatter", "permute",   "broadcast"};

// A buffer as the instructions that read it see it.
struct BufferInfo {
  bool known = false;
  TensorType type;
  TensorLayout layout;
};

DType DTypeOr(v1::DType proto) { return DTypeFromProto(proto).value_or(DType::kFloat32); }

std::vector<BufferInfo> Buffers(const v1::Program& program, const Mesh& mesh) {
  std::vector<BufferInfo> buffers(std::max(program.num_buffers(), 0));
  auto set = [&](int b, const Shape& slice, DType dtype, const v1::TensorLayout& layout) {
    if (b < 0 || b >= static_cast<int>(buffers.size())) return;
    buffers[b] = BufferInfo{true, TensorType{slice, dtype}, TensorLayout::FromProto(layout)};
  };
  auto set_global = [&](int b, const v1::Shape& shape, v1::DType dtype,
                        const v1::TensorLayout& layout) {
    absl::StatusOr<Shape> s = Shape::FromProto(shape);
    if (!s.ok()) return;
    set(b, SliceShape(*s, TensorLayout::FromProto(layout), mesh), DTypeOr(dtype), layout);
  };
  for (const v1::ProgramTensor& t : program.inputs()) {
    set_global(t.buffer(), t.shape(), t.dtype(), t.layout());
  }
  for (const v1::ProgramVariable& v : program.variables()) {
    set_global(v.buffer(), v.shape(), v.dtype(), v.layout());
  }
  for (const v1::Instruction& inst : program.instructions()) {
    absl::StatusOr<Shape> s = Shape::FromProto(inst.slice_shape());
    if (s.ok()) set(inst.output(), *s, DTypeOr(inst.dtype()), inst.layout());
  }
  return buffers;
}

std::string KindName(v1::Collective::Kind kind) {
  return absl::AsciiStrToLower(v1::Collective::Kind_Name(kind));
}

// The product of the sizes of the dims every operand and the output hold: how many independent
// products a batched GEMM of the einsum runs (at least 1).
int64_t GemmBatch(const std::vector<TensorType>& inputs, const TensorType& out) {
  int64_t batch = 1;
  for (const Dim& d : out.shape.dims()) {
    bool everywhere = true;
    for (const TensorType& in : inputs) everywhere = everywhere && in.shape.Contains(d.name);
    if (everywhere) batch *= std::max<int64_t>(d.size, 1);
  }
  return batch;
}

// The smallest of M, N and K of a two-operand einsum's product (dims of one operand and the
// output, of the other and the output, of both operands only); 0 for other operand counts.
int64_t GemmMinDim(const std::vector<TensorType>& inputs, const TensorType& out) {
  if (inputs.size() != 2) return 0;
  int64_t m = 1, n = 1, k = 1;
  auto size_of = [](const Dim& d) { return std::max<int64_t>(d.size, 1); };
  for (const Dim& d : out.shape.dims()) {
    const bool in0 = inputs[0].shape.Contains(d.name), in1 = inputs[1].shape.Contains(d.name);
    if (in0 && !in1) m *= size_of(d);
    if (in1 && !in0) n *= size_of(d);
  }
  for (const Dim& d : inputs[0].shape.dims()) {
    if (inputs[1].shape.Contains(d.name) && !out.shape.Contains(d.name)) k *= size_of(d);
  }
  return std::min({m, n, k});
}

absl::Status ProfileError(absl::string_view source, int line, absl::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat("hardware profile ", source, " line ", line, ": ", msg));
}

}  // namespace

std::map<std::string, CollectiveLink> DefaultCollectiveLinks() {
  std::map<std::string, CollectiveLink> links;
  for (const char* kind : kKinds) links[kind] = CollectiveLink{50e-6, 1e9};
  return links;
}

CollectiveLink DefaultCrossHostLink() { return CollectiveLink{100e-6, 1.25e9}; }

bool OnSeveralHosts(const std::vector<std::string>& hosts) {
  return std::any_of(hosts.begin(), hosts.end(),
                     [&](const std::string& h) { return h != hosts.front(); });
}

bool GroupsSpanHosts(const Mesh& mesh, const std::vector<int>& mesh_axes,
                     const std::vector<std::string>& hosts) {
  const int n = mesh.num_processors();
  if (static_cast<int>(hosts.size()) != n) return false;
  // Processors with equal coordinates off the group's axes are one group.
  std::map<std::vector<int64_t>, const std::string*> host_of_group;
  for (int p = 0; p < n; ++p) {
    std::vector<int64_t> key = mesh.Coordinate(p);
    for (int a : mesh_axes) {
      if (a >= 0 && a < static_cast<int>(key.size())) key[a] = -1;
    }
    auto [it, added] = host_of_group.emplace(std::move(key), &hosts[p]);
    if (!added && *it->second != hosts[p]) return true;
  }
  return false;
}

double GemmFlopsPerSecond(const HardwareProfile& p, double product_flops, double min_dim) {
  const double small = p.gemm_small_dim, large = p.gemm_large_dim;
  if (min_dim <= 0 || small <= 0 || large <= small) {
    return product_flops >= p.gemm_large_flops ? p.gemm_large_flops_per_s
                                               : p.gemm_small_flops_per_s;
  }
  if (min_dim <= small) return p.gemm_small_flops_per_s;
  if (min_dim >= large) return p.gemm_large_flops_per_s;
  const double f = std::log(min_dim / small) / std::log(large / small);
  return p.gemm_small_flops_per_s + f * (p.gemm_large_flops_per_s - p.gemm_small_flops_per_s);
}

std::string FormatHardwareProfile(const HardwareProfile& p) {
  std::string out = absl::StrCat("# meshrt hardware profile (core/planning/cost_model.h)",
                                 p.source.empty() ? "" : absl::StrCat("; from ", p.source), "\n");
  auto line = [&](absl::string_view key, double v) {
    absl::StrAppendFormat(&out, "%s %.6g\n", key, v);
  };
  line("gemm_small_flops_per_s", p.gemm_small_flops_per_s);
  line("gemm_large_flops_per_s", p.gemm_large_flops_per_s);
  line("gemm_large_flops", p.gemm_large_flops);
  line("gemm_small_dim", p.gemm_small_dim);
  line("gemm_large_dim", p.gemm_large_dim);
  line("elementwise_flops_per_s", p.elementwise_flops_per_s);
  line("memory_bytes_per_s", p.memory_bytes_per_s);
  line("step_overhead_s", p.step_overhead_s);
  absl::StrAppend(&out, "overlap_comm ", p.overlap_comm ? 1 : 0, "\n");
  absl::StrAppend(&out, "collectives_measured ", p.collectives_measured ? 1 : 0, "\n");
  for (const auto& [kind, link] : p.collectives) {
    line(absl::StrCat(kind, ".alpha_s"), link.alpha_s);
    line(absl::StrCat(kind, ".beta_bytes_per_s"), link.beta_bytes_per_s);
  }
  for (const auto& [kind, link] : p.cross_host) {
    line(absl::StrCat("cross_host.", kind, ".alpha_s"), link.alpha_s);
    line(absl::StrCat("cross_host.", kind, ".beta_bytes_per_s"), link.beta_bytes_per_s);
  }
  return out;
}

absl::StatusOr<HardwareProfile> ParseHardwareProfile(absl::string_view text,
                                                     absl::string_view source) {
  HardwareProfile p;
  p.source = std::string(source);
  p.collectives = DefaultCollectiveLinks();
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = line.substr(0, std::min(line.size(), line.find('#')));
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (parts.size() != 2) {
      return ProfileError(source, line_number,
                          absl::StrCat("expected `key value`, got '", line, "'"));
    }
    const std::string key(parts[0]);
    double v = 0;
    if (!absl::SimpleAtod(parts[1], &v) || !(v >= 0)) {
      return ProfileError(source, line_number,
                          absl::StrCat("value of ", key, " '", parts[1], "' is not a number >= 0"));
    }
    if (key == "collectives_measured" || key == "overlap_comm") {
      (key == "overlap_comm" ? p.overlap_comm : p.collectives_measured) = v != 0;
      continue;
    }
    double* field = key == "gemm_small_flops_per_s"    ? &p.gemm_small_flops_per_s
                    : key == "gemm_large_flops_per_s"  ? &p.gemm_large_flops_per_s
                    : key == "gemm_large_flops"        ? &p.gemm_large_flops
                    : key == "gemm_small_dim"          ? &p.gemm_small_dim
                    : key == "gemm_large_dim"          ? &p.gemm_large_dim
                    : key == "elementwise_flops_per_s" ? &p.elementwise_flops_per_s
                    : key == "memory_bytes_per_s"      ? &p.memory_bytes_per_s
                    : key == "step_overhead_s"         ? &p.step_overhead_s
                                                       : nullptr;
    const bool cross = absl::StartsWith(key, "cross_host.");
    const std::string link_key = cross ? key.substr(std::strlen("cross_host.")) : key;
    const size_t dot = link_key.find('.');
    if (field == nullptr && dot != std::string::npos) {
      const std::string kind = link_key.substr(0, dot), what = link_key.substr(dot + 1);
      if (std::find(std::begin(kKinds), std::end(kKinds), kind) != std::end(kKinds)) {
        std::map<std::string, CollectiveLink>& links = cross ? p.cross_host : p.collectives;
        // A cross-host kind first named here starts from the placeholder's other half.
        if (cross && !links.count(kind)) links[kind] = DefaultCrossHostLink();
        if (what == "alpha_s") field = &links[kind].alpha_s;
        if (what == "beta_bytes_per_s") field = &links[kind].beta_bytes_per_s;
      }
    }
    if (field == nullptr) {
      return ProfileError(
          source, line_number,
          absl::StrCat("unknown key '", key, "' (see core/planning/cost_model.h FormatHardwareProfile)"));
    }
    if (v == 0 && field != &p.gemm_large_flops && field != &p.gemm_small_dim &&
        field != &p.gemm_large_dim &&
        field != &p.step_overhead_s &&
        (dot == std::string::npos || link_key.substr(dot + 1) != "alpha_s")) {
      return ProfileError(source, line_number, absl::StrCat(key, " must be > 0"));
    }
    *field = v;
  }
  return p;
}

absl::StatusOr<HardwareProfile> LoadHardwareProfile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("hardware profile: ", text.status().message()));
  }
  return ParseHardwareProfile(*text, path);
}

namespace {

// GroupsSpanHosts per set of mesh axes, remembered (a program's collectives use few sets).
class HostSpans {
 public:
  HostSpans(const Mesh& mesh, const std::vector<std::string>& hosts)
      : mesh_(mesh), hosts_(hosts), several_(OnSeveralHosts(hosts)) {}
  bool Spans(const v1::Collective& c) {
    if (!several_) return false;
    std::vector<int> axes(c.mesh_axes().begin(), c.mesh_axes().end());
    auto it = known_.find(axes);
    if (it == known_.end()) it = known_.emplace(axes, GroupsSpanHosts(mesh_, axes, hosts_)).first;
    return it->second;
  }

 private:
  const Mesh& mesh_;
  const std::vector<std::string>& hosts_;
  const bool several_;
  std::map<std::vector<int>, bool> known_;
};

// Instruction `i`'s cost (every field but index, source_op and runs); `buffers` gives the types
// of what it reads.
absl::StatusOr<InstructionCost> CostInstruction(const v1::Program& program, int i,
                                                const std::vector<BufferInfo>& buffers,
                                                const HardwareProfile& profile, bool fused,
                                                HostSpans& host_spans) {
  const v1::Instruction& inst = program.instructions(i);
  InstructionCost c;
  ASSIGN_OR_RETURN(Shape slice, Shape::FromProto(inst.slice_shape()));
  const TensorType out{slice, DTypeOr(inst.dtype())};
  if (inst.has_local()) {
    c.kind = inst.local().type();
    std::vector<TensorType> inputs;
    for (int b : inst.inputs()) {
      if (b < 0 || b >= static_cast<int>(buffers.size()) || !buffers[b].known) {
        return absl::InvalidArgumentError(absl::StrCat("instruction #", i, " (op '",
                                                       inst.source_op(), "') reads buffer ", b,
                                                       " that nothing writes; re-lower the graph"));
      }
      inputs.push_back(buffers[b].type);
    }
    ASSIGN_OR_RETURN(SliceCost s, OpSliceCost(inst.local(), inputs, out));
    c.flops = s.flops;
    c.bytes_read = s.bytes_read;
    c.bytes_written = s.bytes_written;
    c.gemm = c.kind == "einsum" && inputs.size() >= 2;
    if (c.gemm) {
      c.gemm_batch = GemmBatch(inputs, out);
      c.gemm_min_dim = GemmMinDim(inputs, out);
    }
    const double rate = !c.gemm ? profile.elementwise_flops_per_s
                                : GemmFlopsPerSecond(profile,
                                                     c.flops / static_cast<double>(c.gemm_batch),
                                                     static_cast<double>(c.gemm_min_dim));
    c.fused = fused;
    c.compute_s =
        c.fused ? 0
                : std::max(c.flops / rate, static_cast<double>(c.bytes_read + c.bytes_written) /
                                               profile.memory_bytes_per_s);
  } else if (inst.has_local_slice()) {
    c.kind = "local_slice";
    c.bytes_read = c.bytes_written = SliceBytes(out);
    c.compute_s = 2.0 * static_cast<double>(c.bytes_read) / profile.memory_bytes_per_s;
  } else if (inst.has_collective()) {
    c.kind = KindName(inst.collective().kind());
    const CollectiveCost cc = CostOf(program, i);
    c.sent_bytes = cc.sent_bytes;
    if (cc.group_size > 1) {
      c.cross_host = host_spans.Spans(inst.collective());
      const std::map<std::string, CollectiveLink>& links =
          c.cross_host ? profile.cross_host : profile.collectives;
      auto link = links.find(c.kind);
      if (link == links.end()) link = links.find("allreduce");
      const CollectiveLink l = link != links.end() ? link->second
                               : c.cross_host     ? DefaultCrossHostLink()
                                                  : CollectiveLink{50e-6, 1e9};
      c.comm_s = l.alpha_s + static_cast<double>(c.sent_bytes) / l.beta_bytes_per_s;
    }
  }
  return c;
}

void AddTo(const InstructionCost& c, OpCostTotal* t) {
  t->flops += c.flops;
  t->bytes_moved += c.bytes_read + c.bytes_written;
  t->sent_bytes += c.sent_bytes;
  t->compute_s += c.compute_s;
  t->comm_s += c.comm_s;
}

}  // namespace

double StepCriticalPath(const v1::Program& program,
                        const std::vector<InstructionCost>& instructions) {
  std::vector<double> ready(std::max(program.num_buffers(), 0), 0.0);
  auto ready_at = [&](int b) {
    return b >= 0 && b < static_cast<int>(ready.size()) ? ready[b] : 0;
  };
  double calling = 0, comm = 0;
  const int n = std::min<int>(program.instructions_size(), instructions.size());
  for (int i = 0; i < n; ++i) {
    const InstructionCost& c = instructions[i];
    if (!c.runs) continue;
    const v1::Instruction& inst = program.instructions(i);
    double inputs = 0;
    for (int b : inst.inputs()) inputs = std::max(inputs, ready_at(b));
    double end = 0;
    if (inst.has_collective()) {
      end = std::max({calling, comm, inputs}) + c.comm_s;
      comm = end;
    } else {
      end = std::max(calling, inputs) + c.compute_s;
      calling = end;
    }
    if (inst.output() >= 0 && inst.output() < static_cast<int>(ready.size())) {
      ready[inst.output()] = end;
    }
  }
  return std::max(calling, comm);
}

namespace {

// StepFusedGroups over the step's instructions `runs` (StepInstructions(program, fetches)).
std::map<int, FusedGroup> FusedGroupsOf(const v1::Program& program,
                                        const std::vector<std::string>* fetches,
                                        std::vector<bool> runs) {
  std::map<int, FusedGroup> groups;
  if (fetches == nullptr) return groups;
  const std::vector<bool> pinned = StepPinnedBuffers(program, fetches, runs);
  for (const auto& [s, f] : FindFusions(program, pinned, &runs)) {
    FusedGroup& g = groups[s];
    for (int i : {f.mul, f.mask, f.add}) {
      if (i >= 0) g.absorbed.push_back(i);
    }
    g.into_gemm = f.einsum >= 0;
  }
  return groups;
}

}  // namespace

std::map<int, FusedGroup> StepFusedGroups(const v1::Program& program,
                                          const std::vector<std::string>* fetches) {
  if (fetches == nullptr) return {};
  return FusedGroupsOf(program, fetches, StepInstructions(program, fetches));
}

namespace {

// CostProgram's work; without `named`, instructions get no source_op and `ops` stays empty.
absl::StatusOr<ProgramCost> Cost(const v1::Program& program, const HardwareProfile& profile,
                                 const std::vector<std::string>* fetches,
                                 const std::map<int, FusedGroup>* fusions, bool named) {
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::FromProto(program.mesh()));
  const std::vector<BufferInfo> buffers = Buffers(program, mesh);
  const std::vector<bool> runs = StepInstructions(program, fetches);
  HostSpans host_spans(mesh, profile.processor_hosts);
  std::vector<bool> fused(program.instructions_size(), false);
  std::map<int, FusedGroup> derived;
  if (fusions == nullptr) {
    derived = FusedGroupsOf(program, fetches, runs);
    fusions = &derived;
  }
  auto mark = [&](int i) {
    if (i >= 0 && i < program.instructions_size()) fused[i] = true;
  };
  for (const auto& [s, group] : *fusions) {
    for (int i : group.absorbed) mark(i);
    if (group.into_gemm) mark(s);
  }
  ProgramCost cost;
  cost.processors = static_cast<int>(mesh.num_processors());
  cost.total.source_op = "total";
  cost.instructions.reserve(program.instructions_size());
  std::map<std::string, size_t> op_index;
  for (int i = 0; i < program.instructions_size(); ++i) {
    InstructionCost c;
    c.index = i;
    c.runs = runs[i];
    if (c.runs || named) {
      ASSIGN_OR_RETURN(c, CostInstruction(program, i, buffers, profile, fused[i], host_spans));
      c.index = i;
      c.runs = runs[i];
    }
    if (named) c.source_op = program.instructions(i).source_op();
    if (c.runs) {
      if (named) {
        auto [it, added] = op_index.emplace(c.source_op, cost.ops.size());
        if (added) cost.ops.push_back(OpCostTotal{c.source_op});
        AddTo(c, &cost.ops[it->second]);
      }
      AddTo(c, &cost.total);
    }
    cost.instructions.push_back(std::move(c));
  }
  cost.overhead_s = profile.step_overhead_s;
  cost.serial_s = cost.overhead_s + cost.total.compute_s + cost.total.comm_s;
  cost.step_s = profile.overlap_comm
                    ? cost.overhead_s + StepCriticalPath(program, cost.instructions)
                    : cost.serial_s;
  return cost;
}

}  // namespace

absl::StatusOr<ProgramCost> CostProgram(const v1::Program& program, const HardwareProfile& profile,
                                        const std::vector<std::string>* fetches,
                                        const std::map<int, FusedGroup>* fusions) {
  return Cost(program, profile, fetches, fusions, /*named=*/true);
}

absl::StatusOr<ProgramCost> CostProgramTotal(const v1::Program& program,
                                             const HardwareProfile& profile,
                                             const std::vector<std::string>* fetches,
                                             const std::map<int, FusedGroup>* fusions) {
  return Cost(program, profile, fetches, fusions, /*named=*/false);
}

std::vector<std::string> CostWarnings(const v1::Program& program, const ProgramCost& cost) {
  std::vector<std::string> warnings;
  auto mesh = Mesh::FromProto(program.mesh());
  if (!mesh.ok() || cost.total.flops <= 0) return warnings;
  const std::vector<BufferInfo> buffers = Buffers(program, *mesh);
  std::map<std::string, double> op_flops;
  for (const OpCostTotal& t : cost.ops) op_flops[t.source_op] = t.flops;
  std::set<std::pair<std::string, int>> warned;
  for (const InstructionCost& c : cost.instructions) {
    if (!c.runs || !c.gemm || op_flops[c.source_op] < kHeavyEinsumFraction * cost.total.flops) {
      continue;
    }
    const v1::Instruction& inst = program.instructions(c.index);
    std::set<int> splitting;
    for (int a : inst.layout().mesh_axis()) splitting.insert(a);
    for (int b : inst.inputs()) {
      if (b < 0 || b >= static_cast<int>(buffers.size())) continue;
      for (int a : buffers[b].layout.mesh_axis) splitting.insert(a);
    }
    for (int a = 0; a < program.mesh().dims_size(); ++a) {
      const v1::Dim& dim = program.mesh().dims(a);
      if (dim.size() <= 1 || splitting.count(a) > 0 || !warned.emplace(c.source_op, a).second) {
        continue;
      }
      warnings.push_back(absl::StrFormat(
          "compute duplicated %dx over %s: einsum '%s' (%.3g FLOPs per worker, %.0f%% of the "
          "step) splits none of its dims over %s; a rule mapping one of its dims to %s would "
          "divide its work",
          dim.size(), dim.name(), c.source_op, op_flops[c.source_op],
          100 * op_flops[c.source_op] / cost.total.flops, dim.name(), dim.name()));
    }
  }
  return warnings;
}

}  // namespace meshrt
