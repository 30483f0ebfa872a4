// `meshrt run`: feeds in (.npy files and/or random), one step on the chosen backend, fetches out.
//
// Decisions the brief left open:
// - --mesh and --layout default to the one-processor mesh and no rules, so `run --reference`
//   works on any graph without them.
// - With none of --fetch, --fetch_all and --print, the graph's outputs are printed, so a bare
//   `run` shows something. --print prints every fetched tensor.
// - Every check that needs no cluster (graph, mesh, layout, feeds, fetch names, output
//   directories) runs before a cluster is started or contacted.
#include <cstdint>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/chrome_trace.h"
#include "client/cli_commands.h"
#include "client/npy.h"
#include "client/random_feeds.h"
#include "core/lowering/lowering.h"
#include "core/ops/layout_names.h"
#include "util/flags.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

constexpr int kPrintValues = 8;  // how many leading values --print shows

constexpr char kRunUsage[] =
    "meshrt run GRAPH (--reference | --local N | --coordinator HOST:PORT) [--mesh MESH] "
    "[--layout RULES] [--feed NAME=FILE.npy ...] [--random_feeds SEED] [--fetch NAME=FILE.npy "
    "...] [--fetch_all DIR] [--save_feeds DIR] [--print] [--trace FILE [--trace_steps A:B]] "
    "[--tls_ca FILE [--tls_cert FILE "
    "--tls_key FILE]] [--auth_token_file FILE]";

constexpr char kRunDescription[] =
    "Runs one step of GRAPH (.pbtxt text or .pb binary, see proto/graph.proto) and writes or\n"
    "prints what it fetches. Every placeholder must be fed: from a .npy file (--feed; float32 or\n"
    "int32, C order, sizes in the placeholder's dim order) or with reproducible random values\n"
    "(--random_feeds; the same for every mesh and layout). Explicit --feed values override\n"
    "random ones. The graph, mesh, layout and feeds are all checked before anything runs; a bad\n"
    "layout fails the same way in every mode. With none of --fetch, --fetch_all and --print,\n"
    "the graph's outputs are printed.\n\n"
    "examples:\n"
    "  meshrt run examples/graphs/mlp_forward.pbtxt --mesh rows:2,cols:2 "
    "--layout batch:rows,hidden:cols --local 4 --random_feeds 1 --print\n"
    "  meshrt run g.pbtxt --reference --feed x=x.npy --random_feeds 7 --fetch y=y.npy";

// Options of one `meshrt run`, as parsed from its flags.
struct RunOptions {
  std::string graph_path;
  // Where it runs: --reference, --local N or --coordinator, --mesh, --layout, --log_dir and the
  // client security flags.
  ProgramTarget target;
  std::vector<std::string> feeds;    // NAME=FILE
  std::vector<std::string> fetches;  // NAME=FILE
  std::string random_feeds;          // seed text; empty = none
  std::string save_feeds;
  std::string fetch_all;
  bool print = false;
  std::string trace;                   // --trace FILE; empty = off
  std::string trace_steps;             // --trace_steps A:B; empty = 1:1
  std::vector<std::string> data_dirs;  // with --local
};

// `meshrt run`'s help texts of the "where to run" flags.
TargetFlagHelp RunTargetFlagHelp() {
  TargetFlagHelp help;
  help.mesh =
      "mesh dims NAME:SIZE,..., e.g. rows:2,cols:2; processors are numbered row-major "
      "(default: x:N with --local N, x:1 with --coordinator, one processor with "
      "--reference)";
  help.layout =
      "layout rules TENSOR_DIM:MESH_DIM,..., e.g. batch:rows,hidden:cols "
      "(default: empty, every dim replicated), or auto: the planner chooses them (and "
      "with --mesh auto:N the mesh) for the least predicted step time";
  help.reference =
      "run in this process with the reference interpreter (mesh and layout are still "
      "checked)";
  help.local = "start a local cluster with N worker processes for this run, then stop it; 0 = off";
  help.coordinator =
      "run on the coordinator at HOST:PORT, e.g. one started by `meshrt local` "
      "(default: empty, off)";
  help.log_dir =
      "with --local: directory for the daemons' logs (default: a new directory in "
      "/tmp, named if the run fails)";
  return help;
}

void AddRunFlags(FlagSet& flags, RunOptions* o) {
  AddTargetFlags(flags, RunTargetFlagHelp(), &o->target);
  flags.Repeated("feed", &o->feeds,
                 "NAME=FILE.npy: feed placeholder NAME from a .npy file; repeatable (default: "
                 "none)");
  flags.String("random_feeds", &o->random_feeds,
               "SEED: feed every placeholder not given by --feed with reproducible random "
               "values (float32 in [-1, 1), int32 in [0, 16)) (default: empty, off)");
  flags.String("save_feeds", &o->save_feeds,
               "DIR: write every feed used as DIR/NAME.npy, e.g. to re-run with --feed "
               "(default: empty, off)");
  flags.Repeated("fetch", &o->fetches,
                 "NAME=FILE.npy: write tensor NAME (any tensor of the graph) to a .npy file; "
                 "repeatable (default: none)");
  flags.String("fetch_all", &o->fetch_all,
               "DIR: write every graph output as DIR/NAME.npy (default: empty, off)");
  flags.Repeated("data_dir", &o->data_dirs,
                 "with --local: a directory whose files the graph may read (text_windows); "
                 "repeatable; default none, so a graph reading a file is refused");
  flags.Bool("print", &o->print, "print each fetched tensor's name, shape, dtype and first values");
  flags.String("trace", &o->trace,
               "FILE: write the step's timeline on every worker (each op and collective with its "
               "bytes, time waiting for peers apart from transfer, the step spans; one track per "
               "rank) as Chrome trace-event JSON, for https://ui.perfetto.dev or "
               "chrome://tracing (default: empty, off)");
  flags.String("trace_steps", &o->trace_steps,
               "A:B: with --trace, run the step B times in one request (same feeds; fetches are "
               "the last's) and trace runs A..B inclusive, e.g. 2:3 to skip the first, which "
               "also connects the workers (default: 1:1)");
}

absl::StatusOr<std::pair<std::string, std::string>> SplitNameFile(const std::string& value,
                                                                  absl::string_view flag) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size()) {
    return UsageError(absl::StrCat("--", flag, " '", value, "': expected NAME=FILE.npy"));
  }
  return std::make_pair(value.substr(0, eq), value.substr(eq + 1));
}

// Checks flag combinations that are usage errors (exit 2).
absl::Status CheckUsage(const RunOptions& o, const std::vector<std::string>& positional) {
  if (positional.size() != 1) {
    return UsageError(absl::StrCat("meshrt run takes one GRAPH file, got ", positional.size(),
                                   " arguments (see meshrt run --help)"));
  }
  RETURN_IF_ERROR(CheckTargetFlags(o.target, RunTargetFlagHelp(), "run"));
  if (!o.trace_steps.empty() && o.trace.empty()) {
    return UsageError("--trace_steps needs --trace FILE (where the timeline goes)");
  }
  if (!o.trace.empty() && o.target.reference) {
    return UsageError("--trace records the workers' timelines: use --local N or --coordinator, "
                      "not --reference");
  }
  if (!o.trace_steps.empty()) {
    absl::StatusOr<std::pair<int64_t, int64_t>> range = ParseTraceSteps(o.trace_steps);
    if (!range.ok()) return UsageError(std::string(range.status().message()));
  }
  if (!o.random_feeds.empty()) {
    uint64_t seed;
    if (!absl::SimpleAtoi(o.random_feeds, &seed)) {
      return UsageError(absl::StrCat("--random_feeds '", o.random_feeds,
                                     "': expected a non-negative integer seed"));
    }
  }
  return absl::OkStatus();
}

std::string Names(const std::vector<std::string>& names) {
  return absl::StrJoin(names, ", ", [](std::string* out, const std::string& n) {
    absl::StrAppend(out, "'", n, "'");
  });
}

// Random feeds (if asked), then every --feed on top; then checks every placeholder is fed.
absl::StatusOr<TensorMap> BuildFeeds(const RunOptions& o, const Graph& graph) {
  TensorMap feeds;
  if (!o.random_feeds.empty()) {
    uint64_t seed = 0;
    (void)absl::SimpleAtoi(o.random_feeds, &seed);  // validated in CheckUsage
    feeds = RandomFeeds(graph, seed);
  }
  const std::vector<std::string> placeholders = graph.Placeholders();
  std::set<std::string> given;
  for (const std::string& spec : o.feeds) {
    ASSIGN_OR_RETURN(auto name_file, SplitNameFile(spec, "feed"));
    const auto& [name, file] = name_file;
    const v1::Op* op = graph.FindOp(name);
    if (op == nullptr || !IsFed(*op)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--feed ", name, ": the graph has no placeholder '", name, "'; its placeholders are ",
          placeholders.empty() ? "none" : Names(placeholders)));
    }
    if (!given.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("placeholder '", name, "' is fed twice"));
    }
    const TensorType& type = graph.type(name);
    ASSIGN_OR_RETURN(NpyArray array, ReadNpy(file));
    const std::string what = absl::StrCat("feed '", name, "' (", file, ")");
    ASSIGN_OR_RETURN(Tensor value, NpyToTensor(array, type.shape, what));
    if (value.dtype() != type.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": dtype ", DTypeName(value.dtype()),
                                                     ", but placeholder '", name, "' is ",
                                                     DTypeName(type.dtype)));
    }
    feeds[name] = std::move(value);
  }
  std::vector<std::string> missing;
  for (const std::string& p : placeholders) {
    if (!feeds.count(p)) missing.push_back(p);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(missing.size() == 1 ? "placeholder " : "placeholders ", Names(missing),
                     missing.size() == 1 ? " is" : " are", " not fed; give --feed ", missing[0],
                     "=FILE.npy or --random_feeds SEED"));
  }
  return feeds;
}

// "y [batch:8, d_out:8] float32: 0.1 -0.25 ... (64 values)".
std::string Summary(const std::string& name, const Tensor& t) {
  std::string out = absl::StrCat(name, " ", t.shape().ToString(), " ", DTypeName(t.dtype()), ":");
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n && i < kPrintValues; ++i) {
    if (t.dtype() == DType::kFloat32) {
      absl::StrAppend(&out, " ", absl::StrFormat("%.6g", t.floats()[i]));
    } else {
      absl::StrAppend(&out, " ", t.ints()[i]);
    }
  }
  if (n > kPrintValues) absl::StrAppend(&out, " ...");
  absl::StrAppend(&out, " (", n, n == 1 ? " value)" : " values)");
  return out;
}

// The mesh and layout of `graph` (--mesh defaulted by MeshOrDefault), checked before anything
// runs.
absl::StatusOr<MeshAndRules> RunLayout(const ProgramTarget& target, const Graph& graph,
                                       CliIo io) {
  ASSIGN_OR_RETURN(MeshAndRules layout,
                   ChooseMeshAndRules(graph,
                                      MeshOrDefault(target.mesh, target.local, target.coordinator),
                                      target.layout, PlanFlags{}, io.err));
  RETURN_IF_ERROR(CheckRulesNameGraphDims(graph, layout.rules));
  RETURN_IF_ERROR(ValidateLayouts(graph, layout.mesh, layout.rules));
  if (target.local > 0 && target.local < layout.mesh.num_processors()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--local ", target.local, " starts too few workers for mesh ",
                     layout.mesh.ToString(), " of ", layout.mesh.num_processors(), " processors"));
  }
  return layout;
}

// What to fetch, each name once, in order: the --fetch names (`fetch_files`), then the graph's
// outputs when `outputs`.
absl::StatusOr<std::vector<std::string>> RunFetches(
    const Graph& graph, const std::vector<std::pair<std::string, std::string>>& fetch_files,
    bool outputs) {
  std::vector<std::string> fetches;
  std::set<std::string> seen;
  auto add_fetch = [&](const std::string& name) -> absl::Status {
    if (!graph.HasTensor(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--fetch ", name, ": the graph has no tensor '", name, "'"));
    }
    if (seen.insert(name).second) fetches.push_back(name);
    return absl::OkStatus();
  };
  for (const auto& [name, file] : fetch_files) RETURN_IF_ERROR(add_fetch(name));
  if (outputs) {
    for (const std::string& name : graph.Outputs()) RETURN_IF_ERROR(add_fetch(name));
  }
  return fetches;
}

// Writes --save_feeds and creates --fetch_all's directory; sets `trace` and `num_steps` from
// --trace and --trace_steps and checks the trace file is writable. All before anything runs.
absl::Status PrepareRunOutputs(const RunOptions& o, const TensorMap& feeds,
                               StepTraceRequest* trace, int64_t* num_steps) {
  if (!o.save_feeds.empty()) {
    RETURN_IF_ERROR(MakeDirs(o.save_feeds));
    for (const auto& [name, value] : feeds) {
      RETURN_IF_ERROR(WriteNpy(absl::StrCat(o.save_feeds, "/", name, ".npy"), value));
    }
  }
  if (!o.fetch_all.empty()) RETURN_IF_ERROR(MakeDirs(o.fetch_all));
  *num_steps = 1;
  if (!o.trace.empty()) {
    trace->first = trace->last = 1;
    if (!o.trace_steps.empty()) {
      ASSIGN_OR_RETURN(std::tie(trace->first, trace->last), ParseTraceSteps(o.trace_steps));
    }
    *num_steps = trace->last;
    RETURN_IF_ERROR(CheckTraceFileWritable(o.trace));
  }
  return absl::OkStatus();
}

// PrepareRunOutputs, then the step itself: in process, or on the cluster (then --trace's
// timeline is written).
absl::StatusOr<TensorMap> ExecuteRun(const RunOptions& o, const Graph& graph,
                                     const MeshAndRules& layout, const TensorMap& feeds,
                                     const std::vector<std::string>& fetches, CliIo io) {
  StepTraceRequest trace;
  int64_t num_steps = 1;
  RETURN_IF_ERROR(PrepareRunOutputs(o, feeds, &trace, &num_steps));
  if (o.target.reference) return Interpret(graph, feeds, fetches);
  ClusterTarget target;
  target.coordinator = o.target.coordinator;
  target.local_workers = static_cast<int>(o.target.local);
  target.log_dir = o.target.log_dir;
  target.security = o.target.security;
  target.data_dirs = o.data_dirs;
  ASSIGN_OR_RETURN(TensorMap results, RunOnCluster(target, graph, layout, feeds, fetches,
                                                   num_steps, o.trace.empty() ? nullptr : &trace));
  if (!o.trace.empty()) {
    RETURN_IF_ERROR(WriteChromeTrace(o.trace, trace.traces));
    io.err << "wrote the timeline of " << trace.traces.size() << " rank-steps (steps "
           << trace.first << ".." << trace.last << ") to " << o.trace << "\n";
  }
  return results;
}

}  // namespace

absl::Status RunCommand(const std::vector<std::string>& args, CliIo io) {
  RunOptions o;
  FlagSet flags(kRunUsage, kRunDescription);
  AddRunFlags(flags, &o);
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "run"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckUsage(o, positional));
  o.graph_path = positional[0];
  std::vector<std::pair<std::string, std::string>> fetch_files;
  for (const std::string& spec : o.fetches) {
    ASSIGN_OR_RETURN(auto name_file, SplitNameFile(spec, "fetch"));
    fetch_files.push_back(std::move(name_file));
  }

  ASSIGN_OR_RETURN(Graph graph, LoadAndBuildGraph(o.graph_path));
  ASSIGN_OR_RETURN(const MeshAndRules layout, RunLayout(o.target, graph, io));
  const bool print = o.print || (fetch_files.empty() && o.fetch_all.empty());
  ASSIGN_OR_RETURN(
      const std::vector<std::string> fetches,
      RunFetches(graph, fetch_files, !o.fetch_all.empty() || (print && fetch_files.empty())));
  ASSIGN_OR_RETURN(TensorMap feeds, BuildFeeds(o, graph));
  ASSIGN_OR_RETURN(TensorMap results, ExecuteRun(o, graph, layout, feeds, fetches, io));
  for (const std::string& name : fetches) {
    if (!results.count(name)) {
      return absl::InternalError(absl::StrCat("the run returned no value for '", name, "'"));
    }
  }

  for (const auto& [name, file] : fetch_files) RETURN_IF_ERROR(WriteNpy(file, results.at(name)));
  if (!o.fetch_all.empty()) {
    for (const std::string& name : graph.Outputs()) {
      RETURN_IF_ERROR(WriteNpy(absl::StrCat(o.fetch_all, "/", name, ".npy"), results.at(name)));
    }
  }
  if (print) {
    for (const std::string& name : fetches) io.out << Summary(name, results.at(name)) << "\n";
  }
  io.out.flush();
  return absl::OkStatus();
}

}  // namespace meshrt
