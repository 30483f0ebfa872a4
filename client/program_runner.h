// Where a program with fixed weights runs — a decoding program (client/translator.h, `meshrt
// sample`) — in this process (the reference interpreter with the fast kernels), on a local cluster
// the runner starts, or on a running coordinator's workers. The weights reach the workers as a
// checkpoint restored (partially: only the program's variables) into one session that lives as
// long as the runner.
#ifndef MESHRT_CLIENT_PROGRAM_RUNNER_H_
#define MESHRT_CLIENT_PROGRAM_RUNNER_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/ops/graph.h"
#include "core/reference/interpreter.h"
#include "rpc/grpc_util.h"

namespace meshrt {

// Where to run. Exactly one of reference, local > 0 and coordinator.
struct ProgramTarget {
  bool reference = false;  // in this process
  int64_t local = 0;       // > 0: a local cluster of that many worker processes
  // A coordinator's address; checkpoint_root must then be that coordinator's --checkpoint_root
  // as mounted here (the weights are written there as a checkpoint and restored into the session).
  std::string coordinator;
  std::string checkpoint_root;
  SecurityOptions security;  // coordinator: TLS and bearer token
  // The mesh and layout rules, as `meshrt run --mesh --layout` spell them (core/ir/mesh.h; not
  // used in process). No mesh: x:N on a local cluster of N, x:1 on a coordinator; no rules:
  // everything replicated.
  std::string mesh, layout;
  std::string log_dir;  // local cluster logs ("" = a temp dir)
};

// The mesh a program runs on: `mesh` when given, else x:N for a local cluster of N (every worker),
// x:1 on a coordinator (a cluster's mesh has at least one dim), "" (one processor) in process.
// (`meshrt run` and `train` default their --mesh the same way.)
std::string MeshOrDefault(const std::string& mesh, int64_t local, const std::string& coordinator);

// InvalidArgument naming `command` (and spelling the CLI flags) when `target` is not exactly one
// of reference, local > 0 and coordinator, a local cluster is too small for its mesh, or a
// coordinator comes without its checkpoint_root. A mesh that does not parse is left to the caller.
absl::Status CheckProgramTarget(const ProgramTarget& target, absl::string_view command);

// Runs steps of one graph with fixed weights. Not thread-safe.
class ProgramRunner {
 public:
  // Checks the target (CheckProgramTarget) and the layout of `graph`, starts the local cluster, loads `weights`
  // (every variable of `graph`, no more). `command` ("translate", "sample") names the temp
  // directories and the messages; what is started goes to `log` (borrowed for the call only).
  static absl::StatusOr<std::unique_ptr<ProgramRunner>> Start(const ProgramTarget& target,
                                                              Graph graph, TensorMap weights,
                                                              absl::string_view command,
                                                              std::ostream& log);
  virtual ~ProgramRunner() = default;
  // One step: `feeds` (every placeholder) in, `fetches` out.
  virtual absl::StatusOr<TensorMap> Run(const TensorMap& feeds,
                                        const std::vector<std::string>& fetches) = 0;
};

// The weights of `graph`'s variables out of `weights` (a checkpoint's tensors, which also hold
// optimizer slots and counters). InvalidArgument naming `what` and a variable missing or of
// another shape or dtype.
absl::StatusOr<TensorMap> ProgramWeights(const Graph& graph,
                                         const std::vector<std::string>& variables,
                                         const TensorMap& weights, absl::string_view what);

// Writes `weights` as a checkpoint under checkpoint root `root_dir` at a name unique to this
// process and moment (imports/init-PID-MICROS) and returns the name, for
// Session::RestoreCheckpoint.
absl::StatusOr<std::string> WriteInitialCheckpoint(const std::string& root_dir,
                                                   const TensorMap& weights);

}  // namespace meshrt

#endif  // MESHRT_CLIENT_PROGRAM_RUNNER_H_
