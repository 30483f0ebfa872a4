#include "core/planning/memory_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/ir/slicing.h"
#include "core/ir/step_fusion.h"
#include "core/ir/tensor.h"
#include "core/lowering/lowering.h"
#include "core/planning/explain.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

constexpr int Index(MemoryCategory c) { return static_cast<int>(c); }

bool Transient(MemoryCategory c) {
  return c == MemoryCategory::kFetches || c == MemoryCategory::kUpdates ||
         c == MemoryCategory::kActivations || c == MemoryCategory::kGradients;
}

absl::StatusOr<int64_t> SliceBytes(const v1::Shape& proto, v1::DType dtype,
                                   const std::string& what) {
  ASSIGN_OR_RETURN(const Shape shape, Shape::FromProto(proto, what));
  auto t = DTypeFromProto(dtype);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", t.status().message()));
  return shape.num_elements() * DTypeSize(*t);
}

absl::StatusOr<int64_t> TensorSliceBytes(const v1::Shape& global, const v1::TensorLayout& layout,
                                         v1::DType dtype, const Mesh& mesh,
                                         const std::string& what) {
  ASSIGN_OR_RETURN(const Shape shape, Shape::FromProto(global, what));
  const TensorLayout l = TensorLayout::FromProto(layout);
  if (static_cast<int>(l.mesh_axis.size()) != shape.rank()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": its layout has ", l.mesh_axis.size(),
                                                   " entries for a rank-", shape.rank(), " shape"));
  }
  for (int a : l.mesh_axis) {
    if (a != kReplicated && (a < 0 || a >= mesh.ndims())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": its layout names mesh axis ", a, " of mesh ", mesh.ToString()));
    }
  }
  auto t = DTypeFromProto(dtype);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", t.status().message()));
  return SliceShape(shape, l, mesh).num_elements() * DTypeSize(*t);
}

// Every buffer's category and name, and what the simulation needs to know of the step.
struct BufferInfo {
  MemoryCategory category = MemoryCategory::kActivations;
  std::string name;
  bool pinned = false;  // lives to the end of the step once written
};

}  // namespace

const char* MemoryCategoryName(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::kParameters:
      return "parameters";
    case MemoryCategory::kOptimizerState:
      return "optimizer slots / other state";
    case MemoryCategory::kVariables:
      return "variables";
    case MemoryCategory::kFeeds:
      return "feeds";
    case MemoryCategory::kFetches:
      return "fetched outputs";
    case MemoryCategory::kUpdates:
      return "variable updates";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kGradients:
      return "gradients (backward pass)";
  }
  return "?";
}

int64_t MemoryReport::persistent_bytes() const {
  return bytes(MemoryCategory::kParameters) + bytes(MemoryCategory::kOptimizerState) +
         bytes(MemoryCategory::kVariables);
}

absl::StatusOr<MemoryReport> ComputeMemory(const v1::Program& program,
                                           const MemoryOptions& options) {
  ASSIGN_OR_RETURN(const Mesh mesh, Mesh::FromProto(program.mesh()));
  const int n = program.num_buffers();
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("program has ", n, " buffers"));
  auto valid = [&](int b) { return b >= 0 && b < n; };
  MemoryReport report;
  report.mesh = mesh.ToString();
  {
    std::vector<std::string> rules;
    for (const v1::LayoutRule& r : program.rules().rules()) {
      rules.push_back(absl::StrCat(r.tensor_dim(), ":", r.mesh_dim()));
    }
    report.layout = absl::StrJoin(rules, ",");
  }

  std::vector<BufferInfo> info(n);
  std::vector<bool> persistent(n, false);  // live for the whole step from its start
  std::vector<int64_t> start_bytes(n, 0);
  for (const v1::ProgramTensor& t : program.inputs()) {
    const std::string what = absl::StrCat("input '", t.name(), "'");
    if (!valid(t.buffer())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " names buffer ", t.buffer(), " but the program has ", n));
    }
    ASSIGN_OR_RETURN(const int64_t bytes,
                     TensorSliceBytes(t.shape(), t.layout(), t.dtype(), mesh, what));
    info[t.buffer()] = {MemoryCategory::kFeeds, t.name(), true};
    persistent[t.buffer()] = true;
    start_bytes[t.buffer()] = bytes;
  }
  std::set<std::string> trainable;
  if (options.trainable != nullptr)
    trainable.insert(options.trainable->begin(), options.trainable->end());
  for (const v1::ProgramVariable& v : program.variables()) {
    const std::string what = absl::StrCat("variable '", v.name(), "'");
    if (!valid(v.buffer()) || v.update_buffer() < -1 || v.update_buffer() >= n) {
      return absl::InvalidArgumentError(absl::StrCat(what, " names buffers ", v.buffer(), " and ",
                                                     v.update_buffer(), " but the program has ",
                                                     n));
    }
    ASSIGN_OR_RETURN(const int64_t bytes,
                     TensorSliceBytes(v.shape(), v.layout(), v.dtype(), mesh, what));
    const MemoryCategory c = options.trainable == nullptr    ? MemoryCategory::kVariables
                             : trainable.count(v.name()) > 0 ? MemoryCategory::kParameters
                                                             : MemoryCategory::kOptimizerState;
    info[v.buffer()] = {c, v.name(), true};
    persistent[v.buffer()] = true;
    start_bytes[v.buffer()] = bytes;
    if (valid(v.update_buffer()) && !persistent[v.update_buffer()]) {
      info[v.update_buffer()] = {MemoryCategory::kUpdates, "", true};
    }
  }
  // Fetched outputs, as StepInstructions names them.
  for (const v1::ProgramTensor& t : program.outputs()) {
    const bool wanted = options.fetches == nullptr
                            ? !t.resolved_on_fetch()
                            : std::find(options.fetches->begin(), options.fetches->end(),
                                        t.name()) != options.fetches->end();
    if (!wanted || !valid(t.buffer()) || persistent[t.buffer()]) continue;
    BufferInfo& b = info[t.buffer()];
    if (b.category == MemoryCategory::kActivations) b.category = MemoryCategory::kFetches;
    b.pinned = true;
  }

  const std::vector<bool> runs = StepInstructions(program, options.fetches);
  const int count = program.instructions_size();
  std::vector<int> last_reader(n, -1);
  std::vector<int64_t> out_bytes(count, 0);
  std::vector<bool> from_seed(n, false);
  for (int i = 0; i < count; ++i) {
    const v1::Instruction& instr = program.instructions(i);
    const std::string what = absl::StrCat("instruction ", i, " (op '", instr.source_op(), "')");
    if (!valid(instr.output())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " writes buffer ", instr.output(), " but the program has ", n));
    }
    for (int b : instr.inputs()) {
      if (!valid(b)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " reads buffer ", b, " but the program has ", n));
      }
    }
    if (!runs[i]) continue;
    ++report.running_instructions;
    for (int b : instr.inputs()) last_reader[b] = i;
    if (instr.has_predicate() && valid(instr.predicate())) info[instr.predicate()].pinned = true;
    // The executor keeps a deferred allreduce's input to the end of the step.
    if (DeferredAllReduceBytes(instr, n) > 0) info[instr.inputs(0)].pinned = true;
    ASSIGN_OR_RETURN(out_bytes[i], SliceBytes(instr.slice_shape(), instr.dtype(), what));
    // The backward pass (see the header): what is computed from a scalar `ones` of no input.
    bool backward = instr.kind_case() == v1::Instruction::kLocal &&
                    instr.local().type() == "ones" && instr.inputs_size() == 0 &&
                    instr.slice_shape().dims_size() == 0;
    for (int b : instr.inputs()) backward = backward || from_seed[b];
    if (backward) {
      from_seed[instr.output()] = true;
      if (report.backward_from < 0) report.backward_from = i;
    }
    BufferInfo& o = info[instr.output()];
    if (o.name.empty()) o.name = instr.source_op();
    if (backward && o.category == MemoryCategory::kActivations && !o.pinned) {
      o.category = MemoryCategory::kGradients;
    }
  }

  int64_t base = 0;
  for (int b = 0; b < n; ++b) {
    if (persistent[b]) {
      base += start_bytes[b];
      report.at_peak[Index(info[b].category)] += start_bytes[b];
    }
  }

  // The walk: live transient bytes per buffer (0 = not allocated).
  auto walk = [&](int stop_at, std::vector<int64_t>* live_out) {
    std::vector<int64_t> live(n, 0);
    int64_t total = 0, peak = 0;
    int peak_at = -1;
    for (int i = 0; i < count; ++i) {
      if (!runs[i]) continue;
      const v1::Instruction& instr = program.instructions(i);
      const int o = instr.output();
      if (!persistent[o] && out_bytes[i] > live[o]) {  // a buffer written again keeps its storage
        total += out_bytes[i] - live[o];
        live[o] = out_bytes[i];
      }
      if (total > peak) {
        peak = total;
        peak_at = i;
      }
      if (i == stop_at) break;
      for (int b : instr.inputs()) {
        if (b != o && !persistent[b] && !info[b].pinned && last_reader[b] == i && live[b] > 0) {
          total -= live[b];
          live[b] = 0;
        }
      }
    }
    if (live_out != nullptr) *live_out = std::move(live);
    return std::make_pair(peak, peak_at);
  };
  const auto [transient_peak, peak_at] = walk(-1, nullptr);
  report.peak_instruction = peak_at;
  std::vector<int64_t> live(n, 0);
  if (peak_at >= 0) {
    report.peak_op = program.instructions(peak_at).source_op();
    walk(peak_at, &live);
  }
  for (int b = 0; b < n; ++b) {
    if (live[b] > 0) report.at_peak[Index(info[b].category)] += live[b];
  }
  report.peak_bytes = base + transient_peak;

  // The top tensors: aggregated by name, largest first, ties by name.
  std::map<std::pair<std::string, int>, int64_t> by_name;
  for (int b = 0; b < n; ++b) {
    const int64_t bytes = persistent[b] ? start_bytes[b] : live[b];
    if (bytes > 0) by_name[{info[b].name, Index(info[b].category)}] += bytes;
  }
  for (const auto& [key, bytes] : by_name) {
    report.top.push_back({key.first, static_cast<MemoryCategory>(key.second), bytes});
  }
  std::sort(report.top.begin(), report.top.end(), [](const MemoryTensor& a, const MemoryTensor& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name;
  });
  if (static_cast<int>(report.top.size()) > std::max(options.top_tensors, 0)) {
    report.top.resize(std::max(options.top_tensors, 0));
  }
  return report;
}

std::vector<std::string> VariablesWithSlots(const v1::Program& program) {
  std::set<std::string> names;
  for (const v1::ProgramVariable& v : program.variables()) names.insert(v.name());
  std::vector<std::string> out;
  for (const v1::ProgramVariable& v : program.variables()) {
    for (const char* slot : {"/m", "/v", "/vr", "/vc"}) {
      if (names.count(absl::StrCat(v.name(), slot)) > 0) {
        out.push_back(v.name());
        break;
      }
    }
  }
  return out;
}

std::string HumanBytes(int64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.2f %s", v, kUnits[u]);
}

std::string ExplainMemory(const MemoryReport& report) {
  std::string out = "memory per worker (one step):\n";
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    if (report.at_peak[c] == 0) continue;
    const auto cat = static_cast<MemoryCategory>(c);
    absl::StrAppendFormat(&out, "  %-32s %12s%s\n", MemoryCategoryName(cat),
                          HumanBytes(report.at_peak[c]), Transient(cat) ? "  (at the peak)" : "");
  }
  absl::StrAppendFormat(&out, "  %-32s %12s  (%d bytes%s)\n", "peak", HumanBytes(report.peak_bytes),
                        report.peak_bytes,
                        report.peak_instruction < 0
                            ? ", before any instruction"
                            : absl::StrCat(", at instruction ", report.peak_instruction, " of op '",
                                           report.peak_op, "'"));
  if (!report.top.empty()) {
    absl::StrAppend(&out, "  live at the peak, largest first:\n");
    for (const MemoryTensor& t : report.top) {
      absl::StrAppendFormat(&out, "    %-30s %12s  %s\n", t.name, HumanBytes(t.bytes),
                            MemoryCategoryName(t.category));
    }
  }
  return out;
}

absl::StatusOr<int64_t> ParseByteSize(const std::string& text, const std::string& flag) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "='", text, "' ", why,
        ": give a byte count, optionally with a binary suffix K, M, G or T, e.g. 8G or 512M"));
  };
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return bad("does not start with a number");
  std::string suffix = text.substr(digits);
  if (suffix.size() > 1 && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.size() > 1 && (suffix.back() == 'i')) suffix.pop_back();  // "GiB"
  int shift = 0;
  if (suffix.empty() || suffix == "B" || suffix == "b") {
    shift = 0;
  } else if (suffix.size() == 1 && std::string("KkMmGgTt").find(suffix[0]) != std::string::npos) {
    shift = 10 * (1 + static_cast<int>(std::string("KMGT").find(std::toupper(suffix[0]))));
  } else {
    return bad(absl::StrCat("has an unknown suffix '", text.substr(digits), "'"));
  }
  const std::string number = text.substr(0, digits);
  if (std::count(number.begin(), number.end(), '.') > 1) return bad("is not a number");
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(v)) return bad("is not a number");
  const double bytes = std::ldexp(v, shift);
  if (bytes >= 9.0e18) return bad("is too large");
  return static_cast<int64_t>(bytes);
}

std::string SuggestFittingLayout(const Graph& graph, const Mesh& mesh, const LayoutRules& rules,
                                 const MemoryReport& report, const v1::Program& program,
                                 int64_t limit_bytes, const MemoryOptions& options,
                                 int max_lowerings, int64_t* suggested_peak) {
  // The dims of the dominating tensors, largest tensor first, each dim once.
  std::map<std::string, const v1::Shape*> shapes;
  for (const v1::ProgramTensor& t : program.outputs()) shapes[t.name()] = &t.shape();
  for (const v1::ProgramTensor& t : program.inputs()) shapes[t.name()] = &t.shape();
  for (const v1::ProgramVariable& v : program.variables()) shapes[v.name()] = &v.shape();
  std::vector<std::string> dims;
  for (const MemoryTensor& t : report.top) {
    auto it = shapes.find(t.name);
    if (it == shapes.end()) continue;
    for (const v1::Dim& d : it->second->dims()) {
      if (rules.MeshAxisFor(d.name()) == kReplicated &&
          std::find(dims.begin(), dims.end(), d.name()) == dims.end()) {
        dims.push_back(d.name());
      }
    }
  }
  std::string best;
  int64_t best_peak = 0;
  int lowerings = 0;
  for (const std::string& dim : dims) {
    for (const Dim& m : mesh.dims()) {
      if (lowerings >= max_lowerings) break;
      if (m.size <= 1) continue;
      std::vector<std::pair<std::string, std::string>> pairs(rules.rules().begin(),
                                                             rules.rules().end());
      pairs.emplace_back(dim, m.name);
      auto candidate = LayoutRules::Make(pairs, mesh);
      if (!candidate.ok()) continue;
      ++lowerings;
      auto lowered = Lower(graph, mesh, *candidate);
      if (!lowered.ok()) continue;
      auto memory = ComputeMemory(*lowered, options);
      if (!memory.ok() || memory->peak_bytes > limit_bytes) continue;
      if (best.empty() || memory->peak_bytes < best_peak) {
        best = candidate->ToString();
        best_peak = memory->peak_bytes;
      }
    }
  }
  if (suggested_peak != nullptr) *suggested_peak = best.empty() ? 0 : best_peak;
  return best;
}

}  // namespace meshrt
