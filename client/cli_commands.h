// Internal to the `meshrt` CLI (client/cli*.cc): one function per subcommand, and the helpers they
// share. Each command takes its arguments (after the subcommand name), writes results to io.out,
// and returns a Status; cli.cc turns a failure into the one-line error and the exit code.
#ifndef MESHRT_CLIENT_CLI_COMMANDS_H_
#define MESHRT_CLIENT_CLI_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/client.h"
#include "client/program_runner.h"
#include "core/ir/mesh.h"
#include "core/ops/graph.h"
#include "core/planning/cost_model.h"
#include "core/reference/interpreter.h"
#include "rpc/grpc_util.h"
#include "util/flags.h"

namespace meshrt {

// Where a command writes. Both streams outlive the command.
struct CliIo {
  std::ostream& out;
  std::ostream& err;
};

// A usage error (exit code 2): InvalidArgument carrying a marker payload.
absl::Status UsageError(absl::string_view message);
bool IsUsageError(const absl::Status& status);

// Parses a subcommand's `args` with `flags` and returns the positional arguments. A parse error
// (unknown flag, missing or unparsable value) is a UsageError naming `command` and the flag.
// Callers check flags.help() next.
absl::StatusOr<std::vector<std::string>> ParseCommandFlags(FlagSet& flags,
                                                           const std::vector<std::string>& args,
                                                           absl::string_view command);

// `status` with "<prefix>: " before its message, code and payloads kept.
absl::Status WithContext(const absl::Status& status, absl::string_view prefix);

// Loads GRAPH (client/graph_io.h) and validates it (Graph::Build); errors name the file.
absl::StatusOr<Graph> LoadAndBuildGraph(const std::string& path);

// A mesh and layout rules parsed from --mesh / --layout text; empty text means the one-processor
// mesh / no rules (everything replicated).
struct MeshAndRules {
  Mesh mesh;
  LayoutRules rules;
};
absl::StatusOr<MeshAndRules> ParseMeshAndRules(absl::string_view mesh_text,
                                               absl::string_view layout_text);

// The hardware profile of --profile PATH (core/planning/cost_model.h), or, for "", the one measured in this
// process (client/hardware_probe.h). Errors name --profile.
absl::StatusOr<HardwareProfile> ProfileFromFlag(const std::string& path);

// What the planner needs besides the graph: --profile, a per-worker memory limit (0: none) and the
// step's fetches (empty: the graph's outputs).
struct PlanFlags {
  std::string profile_path;
  int64_t memory_limit_bytes = 0;
  std::vector<std::string> fetches;
  // The profile itself, for a caller that has already loaded it (then profile_path is not read
  // again); null: ProfileFromFlag(profile_path), only when the planner runs.
  const HardwareProfile* profile = nullptr;
};
// Whether --mesh / --layout ask the planner: --layout auto, or --mesh auto:N.
bool WantsPlanner(absl::string_view mesh_text, absl::string_view layout_text);
// --mesh / --layout, with the planner (core/planning/planner.h) where they ask for it: `--layout auto`
// chooses the rules for the given mesh, and with `--mesh auto:N` also the mesh among N's shapes,
// that minimise the predicted step time within the memory limit; the plan (the choice, the next
// candidates, their predicted time and memory) goes to `report`. Otherwise ParseMeshAndRules.
// InvalidArgument for --mesh auto:N without --layout auto; NotFound when no candidate fits.
absl::StatusOr<MeshAndRules> ChooseMeshAndRules(const Graph& graph, absl::string_view mesh_text,
                                                absl::string_view layout_text,
                                                const PlanFlags& plan, std::ostream& report);

// Creates `dir` and its missing parents (like mkdir -p). Errors name the directory.
absl::Status MakeDirs(const std::string& dir);

// The directory for a local cluster's daemon logs: `requested` (created if needed), or a new
// $TMPDIR/meshrt-COMMAND-XXXXXX when it is empty. Errors name the directory.
absl::StatusOr<std::string> LogDirectory(const std::string& requested, absl::string_view command);

// The directories a local cluster's workers may read (--data_dir): the one holding `data_path`
// (resolved, as the workers resolve it; none when empty or missing) and the default training
// text's, /usr/share/games/fortunes, when present.
std::vector<std::string> LocalDataDirs(const std::string& data_path);

class LocalCluster;
// Prints "dashboard: http://127.0.0.1:PORT/?token=TOKEN" for a local cluster (its coordinator's
// dashboard with the operator token, which the cluster keeps in a 0600 file) and flushes, or
// nothing when it has no dashboard. The one place meshrt shows a token: on the user's own
// terminal, for the cluster the user just started.
void PrintDashboardAddress(const LocalCluster& cluster, CliIo io);

// The current directory: a local cluster's default --checkpoint_root.
absl::StatusOr<std::string> CurrentDirectory();

// Where `meshrt run` executes a graph on workers: exactly one of the two is set.
struct ClusterTarget {
  std::string coordinator;  // address of a running coordinator
  int local_workers = 0;    // > 0: start an embedded LocalCluster with this many workers
  std::string log_dir;      // local cluster: daemon logs go here (created if needed)
  SecurityOptions
      security;  // coordinator: TLS files and bearer token (the local cluster makes its own)
  std::vector<std::string> data_dirs;  // local cluster: the workers' --data_dir
};

// Registers the client's TLS and token flags (--tls_ca, --tls_cert, --tls_key, --tls_server_name,
// --auth_token_file) on `flags`, writing to `options` (borrowed).
void AddClientSecurityFlags(FlagSet& flags, SecurityOptions* options);

// The "where to run" flag group of `meshrt run`, `train`, `calibrate`, `translate` and `sample`:
// --reference, --local N, --coordinator HOST:PORT with the client security flags
// (AddClientSecurityFlags), --mesh, --layout, --log_dir and --checkpoint_root, written to a
// ProgramTarget. Each field is that flag's help text in the command; an empty one leaves the flag
// out (the command does not take it). --local and --coordinator are always taken.
struct TargetFlagHelp {
  std::string reference;        // "": no --reference
  std::string local;
  std::string coordinator;
  std::string mesh;             // "": no --mesh
  std::string layout;           // "": no --layout
  std::string log_dir;          // "": no --log_dir
  std::string checkpoint_root;  // "": no --checkpoint_root
};
// Registers the group on `flags`, writing to `target` (borrowed; it must outlive the parse).
void AddTargetFlags(FlagSet& flags, const TargetFlagHelp& help, ProgramTarget* target);
// UsageError unless exactly one of the targets `help` takes is given ("meshrt COMMAND needs
// exactly one of --reference, --local N and --coordinator HOST:PORT", without --reference when the
// command does not take it), and a given --local N has N >= 1.
absl::Status CheckTargetFlags(const ProgramTarget& target, const TargetFlagHelp& help,
                              absl::string_view command);

// The group as `meshrt translate` and `meshrt sample` take it (client/program_runner.h): every
// flag, `verb` ("decode") starting the help texts, and --checkpoint_root naming where CHECKPOINT
// is.
TargetFlagHelp ProgramTargetFlagHelp(absl::string_view verb);
// CheckTargetFlags, then as usage errors CheckProgramTarget's refusals (a local cluster too small
// for --mesh, --coordinator without --checkpoint_root) and --mesh / --layout parse errors as
// ParseMeshAndRules.
absl::Status CheckProgramTargetFlags(const ProgramTarget& target, absl::string_view command);

// Runs `num_steps` steps (one request, Session::RunSteps) of `graph` on the cluster
// (client/client.h): creates a session for the mesh and rules, runs with `feeds`, returns the
// last step's `fetches`, closes the session. With `trace` (borrowed, may be null) the repetitions
// it names are traced into it. A local cluster is started first and stopped before returning;
// errors then name its log directory.
absl::StatusOr<TensorMap> RunOnCluster(const ClusterTarget& target, const Graph& graph,
                                       const MeshAndRules& layout, const TensorMap& feeds,
                                       const std::vector<std::string>& fetches,
                                       int64_t num_steps = 1, StepTraceRequest* trace = nullptr);

absl::Status RunCommand(const std::vector<std::string>& args, CliIo io);
absl::Status ExplainCommand(const std::vector<std::string>& args, CliIo io);
absl::Status OpsCommand(const std::vector<std::string>& args, CliIo io);
absl::Status LocalCommand(const std::vector<std::string>& args, CliIo io);
// `meshrt status --coordinator ADDR`: the coordinator's workers (rank, address, session, last
// heartbeat), sessions, and the sessions waiting for workers with the ranks they miss. With
// `--session ID`: that session's processors, each with the step, instruction, op and collective
// its step thread is in, for how long, and its heartbeat's age (NotFound when the caller may not
// see the session).
absl::Status StatusCommand(const std::vector<std::string>& args, CliIo io);
// `meshrt sessions [close ID] --coordinator ADDR`: list a coordinator's sessions, or close one.
absl::Status SessionsCommand(const std::vector<std::string>& args, CliIo io);
// `meshrt health HOST:PORT [--service NAME]`: what a Kubernetes gRPC probe asks (the standard
// health service); prints SERVING or NOT_SERVING. Not serving is an error (exit 1).
absl::Status HealthCommand(const std::vector<std::string>& args, CliIo io);
absl::Status DemoCommand(const std::vector<std::string>& args, CliIo io);
// `meshrt export CHECKPOINT FILE.npz`: a checkpoint's variables, whole, to a .npz file
// (client/cli_weights.cc).
absl::Status ExportCommand(const std::vector<std::string>& args, CliIo io);
// `meshrt calibrate` (client/cli_calibrate.cc).
absl::Status CalibrateCommand(const std::vector<std::string>& args, CliIo io);

// `meshrt help` text: every subcommand with one line each, and the quick start.
std::string TopLevelHelp();

}  // namespace meshrt

#endif  // MESHRT_CLIENT_CLI_COMMANDS_H_
