// `meshrt explain`, `meshrt ops`, and the helpers the commands share.
#include "client/cli_commands.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/graph_io.h"
#include "client/hardware_probe.h"
#include "core/lowering/lowering.h"
#include "core/ops/layout_names.h"
#include "core/ops/ops.h"
#include "core/planning/explain.h"
#include "core/planning/layout_search.h"
#include "core/planning/memory_model.h"
#include "core/train/autodiff.h"
#include "kernels/fast_kernels.h"
#include "util/flags.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

std::string Arity(const OpInfo& op) {
  if (op.max_inputs < 0) return absl::StrCat(">=", op.min_inputs);
  if (op.min_inputs == op.max_inputs) return absl::StrCat(op.min_inputs);
  return absl::StrCat(op.min_inputs, "-", op.max_inputs);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseCommandFlags(FlagSet& flags,
                                                           const std::vector<std::string>& args,
                                                           absl::string_view command) {
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(args);
  if (!positional.ok()) {
    return UsageError(absl::StrCat("meshrt ", command, ": ", positional.status().message()));
  }
  return positional;
}

absl::StatusOr<Graph> LoadAndBuildGraph(const std::string& path) {
  ASSIGN_OR_RETURN(v1::Graph proto, LoadGraph(path));
  absl::StatusOr<Graph> graph = Graph::Build(std::move(proto));
  if (!graph.ok()) return WithContext(graph.status(), path);
  return graph;
}

absl::StatusOr<MeshAndRules> ParseMeshAndRules(absl::string_view mesh_text,
                                               absl::string_view layout_text) {
  MeshAndRules out;
  absl::StatusOr<Mesh> mesh = Mesh::Parse(mesh_text);
  if (!mesh.ok()) return WithContext(mesh.status(), "--mesh");
  out.mesh = *std::move(mesh);
  absl::StatusOr<LayoutRules> rules = LayoutRules::Parse(layout_text, out.mesh);
  if (!rules.ok()) return WithContext(rules.status(), "--layout");
  out.rules = *std::move(rules);
  return out;
}

absl::Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      const int err = errno;
      return absl::ErrnoToStatus(err, absl::StrCat("cannot create directory ", prefix));
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

namespace {

// --hosts: one host name per processor of --mesh (MESH, or auto:N), in mesh order.
absl::StatusOr<std::vector<std::string>> ParseHosts(const std::string& text,
                                                    const std::string& mesh_text) {
  std::vector<std::string> hosts = absl::StrSplit(text, ',');
  for (const std::string& h : hosts) {
    if (h.empty()) return UsageError(absl::StrCat("--hosts '", text, "' has an empty host name"));
  }
  int processors = 0;
  if (absl::StartsWith(mesh_text, "auto")) {
    absl::StatusOr<int> n = ParseAutoMesh(mesh_text);
    if (!n.ok()) return WithContext(n.status(), "--mesh");
    processors = *n;
  } else {
    absl::StatusOr<Mesh> mesh = Mesh::Parse(mesh_text);
    if (!mesh.ok()) return WithContext(mesh.status(), "--mesh");
    processors = mesh->num_processors();
  }
  if (static_cast<int>(hosts.size()) != processors) {
    return UsageError(absl::StrCat("--hosts names ", hosts.size(), " host(s) for the ", processors,
                                   " processor(s) of --mesh ", mesh_text,
                                   ": give one per processor, in mesh order"));
  }
  return hosts;
}

}  // namespace

absl::Status ExplainCommand(const std::vector<std::string>& args, CliIo io) {
  std::string mesh_text, layout_text, profile_path, memory_limit_text, hosts_text;
  bool json = false;
  FlagSet flags(
      "meshrt explain GRAPH --mesh MESH|auto:N --layout RULES|auto [--profile FILE] "
      "[--hosts H,H,...] [--memory_limit BYTES] [--json]",
      "Lowers GRAPH for the mesh and layout rules and prints the report: every tensor's layout\n"
      "and per-worker slice shape, every communication step with its mesh dims and bytes, the\n"
      "total bytes each worker sends, per op and in total the FLOPs, bytes moved and the\n"
      "predicted step time split into compute and communication (core/planning/cost_model.h), with\n"
      "warnings (e.g. an einsum whose compute a mesh dim duplicates), then the memory each\n"
      "worker holds in a step that fetches the graph's outputs (by category, the peak, the\n"
      "tensors live at it). Nothing runs.\n"
      "With --layout auto the planner chooses the rules (and with --mesh auto:N also the mesh\n"
      "among N's shapes: N, 2xN/2, ...) that minimise the predicted step time within\n"
      "--memory_limit, and prints its choice with the next best candidates first.\n\n"
      "examples:\n"
      "  meshrt explain examples/graphs/mlp_forward.pbtxt --mesh rows:2,cols:2 "
      "--layout d_in:rows,hidden:cols\n"
      "  meshrt explain examples/graphs/mlp_forward.pbtxt --mesh auto:4 --layout auto");
  flags.String("mesh", &mesh_text,
               "mesh dims NAME:SIZE,..., e.g. rows:2,cols:2 (default: empty, one processor)");
  flags.String("layout", &layout_text,
               "layout rules TENSOR_DIM:MESH_DIM,..., e.g. batch:rows,hidden:cols "
               "(default: empty, every dim replicated)");
  flags.String("profile", &profile_path,
               "hardware profile file (`key value` lines, core/planning/cost_model.h) for the predicted "
               "time (default: measured now in this process, with placeholder collective costs)");
  flags.String("hosts", &hosts_text,
               "the host of each processor in mesh order (one name per processor, e.g. "
               "a,a,b,b), for a cluster of several hosts: collectives whose groups span hosts "
               "take the profile's cross_host links (default: every processor on one host)");
  flags.String("memory_limit", &memory_limit_text,
               "per-worker bytes (e.g. 8G, 512M) the planner's choice must fit (default: none)");
  flags.Bool("json", &json, "print the report as one JSON object instead of text");
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "explain"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (positional.size() != 1) {
    return UsageError("meshrt explain takes one GRAPH file (see meshrt explain --help)");
  }
  ASSIGN_OR_RETURN(Graph graph, LoadAndBuildGraph(positional[0]));
  // One profile for the planner and the report (a file is read once).
  ASSIGN_OR_RETURN(HardwareProfile profile, ProfileFromFlag(profile_path));
  if (!hosts_text.empty()) {
    ASSIGN_OR_RETURN(profile.processor_hosts, ParseHosts(hosts_text, mesh_text));
  }
  PlanFlags plan{profile_path, 0, graph.Outputs(), &profile};
  if (!memory_limit_text.empty()) {
    ASSIGN_OR_RETURN(plan.memory_limit_bytes, ParseByteSize(memory_limit_text, "--memory_limit"));
  }
  // With --json the plan goes to stderr, so that stdout stays one JSON object.
  ASSIGN_OR_RETURN(MeshAndRules layout,
                   ChooseMeshAndRules(graph, mesh_text, layout_text, plan, json ? io.err : io.out));
  RETURN_IF_ERROR(CheckRulesNameGraphDims(graph, layout.rules));
  ASSIGN_OR_RETURN(v1::Program program, Lower(graph, layout.mesh, layout.rules));
  if (json) {
    ASSIGN_OR_RETURN(std::string text, ExplainProgramJson(program, profile));
    io.out << text;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::string cost, ExplainCost(program, profile));
  io.out << ExplainProgram(program) << cost;
  // Memory as a default step (fetching the graph's outputs) holds it.
  const std::vector<std::string> fetches = graph.Outputs();
  const std::vector<std::string> trainable = VariablesWithSlots(program);
  MemoryOptions memory_options;
  memory_options.fetches = &fetches;
  if (!trainable.empty()) memory_options.trainable = &trainable;
  ASSIGN_OR_RETURN(const MemoryReport memory, ComputeMemory(program, memory_options));
  io.out << ExplainMemory(memory);
  return absl::OkStatus();
}

absl::Status OpsCommand(const std::vector<std::string>& args, CliIo io) {
  FlagSet flags("meshrt ops",
                "Lists every op meshrt knows: its type (the `type` of an op in a graph), family,\n"
                "number of inputs, whether it is differentiable and its gradient (yes: a rule,\n"
                "zero: piecewise constant), whether workers run it on a fast kernel (else the\n"
                "reference kernel), its cost model (its family's default or an override), the\n"
                "collectives its SPMD lowering may emit, and what it computes.\n\n"
                "example:\n  meshrt ops");
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "ops"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (!positional.empty()) return UsageError("meshrt ops takes no arguments");
  // One column per facet of the op's record (core/README.md "Adding an op"): GRADIENT is its
  // gradient rule (OpInfo::gradient; zero: OpInfo::zero_gradient), FAST whether the fast-kernel
  // table (kernels/fast_kernels.h) has it, COST its cost facet (OpInfo::cost or the family's).
  auto row = [](absl::string_view type, absl::string_view family, absl::string_view arity,
                absl::string_view differentiable, absl::string_view gradient,
                absl::string_view fast, absl::string_view cost, absl::string_view collectives,
                absl::string_view summary) {
    return absl::StrFormat("%-12s %-12s %-7s %-15s %-9s %-5s %-9s %-35s %s\n", type, family, arity,
                           differentiable, gradient, fast, cost, collectives, summary);
  };
  io.out << row("TYPE", "FAMILY", "INPUTS", "DIFFERENTIABLE", "GRADIENT", "FAST", "COST",
                "COLLECTIVES (LOWERING MAY EMIT)", "COMPUTES");
  for (const OpInfo& op : AllOps()) {
    const absl::string_view gradient = HasGradient(op.type) ? "yes"
                                       : op.zero_gradient   ? "zero"
                                       : op.differentiable  ? "not yet"
                                                            : "-";
    io.out << row(op.type, FamilyName(op.family), Arity(op), op.differentiable ? "yes" : "no",
                  gradient, FindFastKernel(op.type) != nullptr ? "yes" : "-",
                  op.cost != nullptr ? "override" : "default", op.collectives, op.summary);
  }
  return absl::OkStatus();
}

}  // namespace meshrt
