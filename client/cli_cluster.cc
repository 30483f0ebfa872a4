// The parts of the CLI that talk to daemons: `meshrt run --local/--coordinator` and
// `meshrt local`.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <ostream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli_commands.h"
#include "client/client.h"
#include "client/local_cluster.h"
#include "rpc/auth.h"
#include "rpc/grpc_util.h"
#include "util/file.h"
#include "util/flags.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

std::atomic<bool> g_stop_requested{false};

void OnStopSignal(int) { g_stop_requested.store(true); }

// Removes the regular files in `dir` and then `dir` (best effort; for log directories this
// process created and nobody else writes).
void RemoveFlatDir(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") ::unlink((dir + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

// Runs one step through a client connected to `address`.
absl::StatusOr<TensorMap> RunThroughClient(const std::string& address,
                                           const SecurityOptions& security, const Graph& graph,
                                           const MeshAndRules& layout, const TensorMap& feeds,
                                           const std::vector<std::string>& fetches,
                                           int64_t num_steps, StepTraceRequest* trace) {
  ClientOptions options;
  options.address = address;
  options.security = security;
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(options));
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                   client->CreateSession(graph.proto(), layout.mesh, layout.rules));
  ASSIGN_OR_RETURN(TensorMap results, session->RunSteps(num_steps, feeds, fetches, trace));
  RETURN_IF_ERROR(session->Close());
  return results;
}

}  // namespace

void PrintDashboardAddress(const LocalCluster& cluster, CliIo io) {
  const std::string url = cluster.dashboard_url();
  if (url.empty()) return;
  io.out << "dashboard: " << url
         << " (open it in a browser while the cluster runs; the token in it is the cluster's "
            "operator token: keep it to yourself)"
         << std::endl;
}

std::vector<std::string> LocalDataDirs(const std::string& data_path) {
  std::vector<std::string> dirs;
  if (!data_path.empty()) {
    char* resolved = ::realpath(data_path.c_str(), nullptr);
    if (resolved != nullptr) {
      const std::string r = resolved;
      ::free(resolved);
      dirs.push_back(r.substr(0, std::max<size_t>(r.rfind('/'), 1)));
    }
  }
  const std::string fortunes = "/usr/share/games/fortunes";  // the default --data's
  if (::access(fortunes.c_str(), X_OK) == 0 &&
      std::find(dirs.begin(), dirs.end(), fortunes) == dirs.end()) {
    dirs.push_back(fortunes);
  }
  return dirs;
}

absl::StatusOr<std::string> CurrentDirectory() {
  std::error_code error;
  const std::filesystem::path cwd = std::filesystem::current_path(error);
  if (error) {
    return absl::FailedPreconditionError("cannot read the current directory (--checkpoint_root)");
  }
  return cwd.string();
}

absl::StatusOr<std::string> LogDirectory(const std::string& requested, absl::string_view command) {
  if (!requested.empty()) {
    RETURN_IF_ERROR(MakeDirs(requested));
    return requested;
  }
  return MakeTempDirectory(absl::StrCat("meshrt-", command));
}

absl::StatusOr<TensorMap> RunOnCluster(const ClusterTarget& target, const Graph& graph,
                                       const MeshAndRules& layout, const TensorMap& feeds,
                                       const std::vector<std::string>& fetches,
                                       int64_t num_steps, StepTraceRequest* trace) {
  if (target.local_workers <= 0) {
    absl::StatusOr<TensorMap> results =
        RunThroughClient(target.coordinator, target.security, graph, layout, feeds, fetches,
                         num_steps, trace);
    if (!results.ok()) {
      return WithContext(results.status(), absl::StrCat("coordinator ", target.coordinator));
    }
    return results;
  }

  // Daemon logs go to a directory, not to our stderr, so a failure stays one line long; the
  // line names the directory. A directory we made ourselves is removed after a clean run.
  const bool own_log_dir = target.log_dir.empty();
  ASSIGN_OR_RETURN(const std::string log_dir, LogDirectory(target.log_dir, "run"));
  absl::StatusOr<TensorMap> results;
  {
    LocalClusterOptions options;
    options.workers = target.local_workers;
    options.log_dir = log_dir;
    options.data_dirs = target.data_dirs;
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
    if (!cluster.ok()) {
      results = WithContext(cluster.status(), "cannot start the local cluster");
    } else {
      results =
          RunThroughClient((*cluster)->address(), (*cluster)->client_security(), graph, layout,
                           feeds, fetches, num_steps, trace);
    }
  }  // the cluster stops here
  if (!results.ok()) {
    return absl::Status(results.status().code(), absl::StrCat(results.status().message(),
                                                              " (daemon logs in ", log_dir, ")"));
  }
  if (own_log_dir) RemoveFlatDir(log_dir);
  return results;
}

void AddClientSecurityFlags(FlagSet& flags, SecurityOptions* options) {
  AddSecurityFlags(&flags, options, /*server=*/false);
}

void AddTargetFlags(FlagSet& flags, const TargetFlagHelp& help, ProgramTarget* target) {
  if (!help.reference.empty()) flags.Bool("reference", &target->reference, help.reference);
  flags.Int("local", &target->local, help.local);
  flags.String("coordinator", &target->coordinator, help.coordinator);
  if (!help.mesh.empty()) flags.String("mesh", &target->mesh, help.mesh);
  if (!help.layout.empty()) flags.String("layout", &target->layout, help.layout);
  if (!help.log_dir.empty()) flags.String("log_dir", &target->log_dir, help.log_dir);
  if (!help.checkpoint_root.empty()) {
    flags.String("checkpoint_root", &target->checkpoint_root, help.checkpoint_root);
  }
  AddClientSecurityFlags(flags, &target->security);
}

absl::Status CheckTargetFlags(const ProgramTarget& target, const TargetFlagHelp& help,
                              absl::string_view command) {
  const bool takes_reference = !help.reference.empty();
  const int targets = (takes_reference && target.reference ? 1 : 0) +
                      (target.local != 0 ? 1 : 0) + (target.coordinator.empty() ? 0 : 1);
  if (targets != 1) {
    return UsageError(absl::StrCat("meshrt ", command, " needs exactly one of ",
                                   takes_reference ? "--reference, " : "",
                                   "--local N and --coordinator HOST:PORT"));
  }
  if (target.local < 0) return UsageError("--local N needs N >= 1 workers");
  return absl::OkStatus();
}

TargetFlagHelp ProgramTargetFlagHelp(absl::string_view verb) {
  TargetFlagHelp help;
  help.reference = absl::StrCat(verb, " in this process (the reference interpreter)");
  help.local = absl::StrCat(verb, " on a local cluster of N worker processes");
  help.coordinator = absl::StrCat(verb, " on the workers of this coordinator");
  help.mesh = "mesh, e.g. rows:2,cols:2 (default: x:N with --local N, x:1 with --coordinator)";
  help.layout = "layout rules, e.g. batch:rows,heads:cols,d_ff:cols,vocab:cols (default: none)";
  help.log_dir = "with --local: the daemons' logs (default: a temp dir)";
  help.checkpoint_root =
      "the directory CHECKPOINT is named relative to (default: CHECKPOINT is a path); "
      "with --coordinator, that coordinator's --checkpoint_root as mounted here";
  return help;
}

absl::Status CheckProgramTargetFlags(const ProgramTarget& target, absl::string_view command) {
  RETURN_IF_ERROR(CheckTargetFlags(target, ProgramTargetFlagHelp(""), command));
  absl::Status checked = CheckProgramTarget(target, absl::StrCat("meshrt ", command));
  if (!checked.ok()) return UsageError(checked.message());
  return ParseMeshAndRules(MeshOrDefault(target.mesh, target.local, target.coordinator),
                           target.layout)
      .status();
}

namespace {

// `meshrt status --session ID`: the session's processors, each with what its step thread did at
// its worker's last heartbeat.
// One line per session the caller may see: id, owner, mesh, layout, state, step, age, lease, error.
void PrintSessionInfos(const v1::ListWorkersResponse& list, absl::string_view indent,
                       std::ostream& out) {
  for (const v1::SessionInfo& s : list.session_infos()) {
    out << indent << s.session() << "  owner " << (s.owner().empty() ? "-" : s.owner())
        << "  mesh " << s.mesh() << "  layout '" << s.layout() << "'  " << s.state() << "  step "
        << s.step() << "  age " << absl::StrFormat("%.1f", s.age_ms() / 1000.0) << " s"
        << (s.lease_renewed_ms_ago() >= 0 ? absl::StrFormat("  lease renewed %.1f s ago",
                                                            s.lease_renewed_ms_ago() / 1000.0)
                                          : std::string())
        << (s.last_error().empty() ? "" : "  error: " + s.last_error()) << "\n";
  }
}

absl::Status PrintSessionStatus(const v1::ListWorkersResponse& list, const std::string& id,
                                const std::string& coordinator, std::ostream& out) {
  const v1::SessionInfo* info = nullptr;
  for (const v1::SessionInfo& s : list.session_infos()) {
    if (s.session() == id) info = &s;
  }
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "coordinator ", coordinator, " has no session ", id,
        " that this client may see (see `meshrt sessions`; another client's sessions need the "
        "operator token)"));
  }
  std::vector<const v1::WorkerInfo*> workers;
  for (const v1::WorkerInfo& w : list.workers()) {
    if (w.session() == id) workers.push_back(&w);
  }
  // Row-major coordinates sort in processor-number order.
  std::sort(workers.begin(), workers.end(), [](const v1::WorkerInfo* a, const v1::WorkerInfo* b) {
    return std::vector<int64_t>(a->coordinate().begin(), a->coordinate().end()) <
           std::vector<int64_t>(b->coordinate().begin(), b->coordinate().end());
  });
  out << "session " << id << "  mesh " << info->mesh() << "  layout '" << info->layout() << "'  "
      << info->state() << "  step " << info->step() << "  " << workers.size() << " processor(s)\n";
  if (!info->last_error().empty()) out << "  error: " << info->last_error() << "\n";
  auto seconds = [](int64_t ms) { return absl::StrFormat("%.1f s", ms / 1000.0); };
  absl::StatusOr<Mesh> mesh = Mesh::Parse(info->mesh());
  for (size_t p = 0; p < workers.size(); ++p) {
    const v1::WorkerInfo& w = *workers[p];
    const std::vector<int64_t> coord(w.coordinate().begin(), w.coordinate().end());
    const bool fits = mesh.ok() && static_cast<int>(coord.size()) == mesh->ndims();
    out << "  processor " << (fits ? absl::StrCat(mesh->ProcessorNumber(coord)) : "?") << "  ("
        << absl::StrJoin(coord, ",") << ")  worker "
        << w.worker_id() << " " << w.address() << "  ";
    if (!w.has_activity()) {
      out << "no activity reported yet";
    } else if (!w.activity().running()) {
      out << "idle after step " << w.activity().step() << " for "
          << seconds(w.activity().step_ms() + w.last_heartbeat_ms_ago());
    } else {
      const v1::WorkerActivity& a = w.activity();
      out << "step " << a.step() << "  ";
      if (a.instruction() < 0) {
        out << "starting";
      } else {
        out << "instruction " << a.instruction() << " '" << a.op() << "' " << a.kind();
      }
      out << "  for " << seconds(a.instruction_ms() + w.last_heartbeat_ms_ago());
      // The step thread's CPU share over its step so far: ~100% computing, ~0% blocked (frozen,
      // or waiting in a collective).
      if (a.has_step_cpu_ms() && a.step_ms() > 0) {
        out << "  cpu " << std::min<int64_t>(999, a.step_cpu_ms() * 100 / a.step_ms())
            << "% of the step";
      }
      if (!a.collective().empty()) {
        out << "  in collective " << a.collective() << " over ["
            << absl::StrJoin(a.mesh_dims(), ",") << "]";
      }
      if (!a.note().empty()) out << "  [" << a.note() << "]";
    }
    out << "  heartbeat " << seconds(w.last_heartbeat_ms_ago()) << " ago\n";
  }
  out.flush();
  return absl::OkStatus();
}

}  // namespace

absl::Status StatusCommand(const std::vector<std::string>& args, CliIo io) {
  std::string coordinator;
  std::string session;
  SecurityOptions security;
  FlagSet flags(
      "meshrt status --coordinator HOST:PORT [--session ID] [--tls_ca FILE ...] "
      "[--auth_token_file FILE]",
      "Shows what a coordinator knows: its workers (rank, gRPC and Gloo addresses, the "
      "session each serves, seconds since its last heartbeat), its sessions, and every "
      "session waiting for workers with the ranks it still misses and why. With --session: "
      "that session's processors live, each with its coordinate, worker, the step and the "
      "instruction (op, collective) its step thread is in and for how long, the share of a "
      "core its step thread used in the step so far (cpu), and its heartbeat's age (the "
      "session's owner or an operator).\n\n"
      "examples:\n  meshrt status --coordinator 127.0.0.1:7070\n"
      "  meshrt status --coordinator 127.0.0.1:7070 --session s-0123abcd...");
  flags.String("coordinator", &coordinator, "coordinator address HOST:PORT (required)");
  flags.String("session", &session, "show this session's processors and their current ops");
  AddClientSecurityFlags(flags, &security);
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "status"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (!positional.empty()) return UsageError("meshrt status takes no arguments, only flags");
  if (coordinator.empty()) return UsageError("meshrt status needs --coordinator HOST:PORT");
  ClientOptions options;
  options.address = coordinator;
  options.security = security;
  options.prefer_operator_token = true;
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(options));
  ASSIGN_OR_RETURN(v1::ListWorkersResponse list, client->ListWorkers());
  if (!session.empty()) return PrintSessionStatus(list, session, coordinator, io.out);
  io.out << "coordinator " << coordinator << ": " << list.workers_size() << " worker(s), "
         << list.sessions_size() << " session(s), " << list.waiting_size() << " waiting\n";
  for (const v1::WorkerInfo& w : list.workers()) {
    io.out << "  worker " << w.worker_id() << "  rank "
           << (w.rank() >= 0 ? absl::StrCat(w.rank()) : std::string("-")) << "  " << w.address()
           << "  gloo " << w.gloo_address() << "  "
           << (w.session().empty() ? std::string("free") : "session " + w.session())
           << "  heartbeat " << absl::StrFormat("%.1f", w.last_heartbeat_ms_ago() / 1000.0)
           << " s ago\n";
  }
  // Sessions with their owner, mesh, layout and step; ids alone for any the caller may not see.
  std::set<std::string> described;
  for (const v1::SessionInfo& s : list.session_infos()) described.insert(s.session());
  PrintSessionInfos(list, "  session ", io.out);
  for (const std::string& s : list.sessions()) {
    if (!described.count(s)) io.out << "  session " << s << "\n";
  }
  for (const std::string& w : list.waiting()) io.out << "  waiting: " << w << "\n";
  io.out.flush();
  return absl::OkStatus();
}

absl::Status SessionsCommand(const std::vector<std::string>& args, CliIo io) {
  std::string coordinator;
  SecurityOptions security;
  FlagSet flags(
      "meshrt sessions --coordinator HOST:PORT [close ID] [--auth_token_file FILE ...]",
      "Lists a coordinator's sessions (id, owner, mesh, layout, state, step, age, when its "
      "client last renewed its lease, last error), or closes one (`close ID`), freeing its "
      "workers. States: ready; failed (a worker or step failed it; its workers are free, it "
      "waits for its client to close it); expired (its client was silent longer than the "
      "coordinator's --session_lease, e.g. killed: its workers were freed, and it stays listed "
      "for 10 minutes with why). A client token sees and closes its own sessions; the operator "
      "token every session (on the coordinator's machine the generated operator token is used "
      "by itself).\n\n"
      "examples:\n  meshrt sessions --coordinator 127.0.0.1:7070\n"
      "  meshrt sessions close s-0123abcd... --coordinator 127.0.0.1:7070");
  flags.String("coordinator", &coordinator, "coordinator address HOST:PORT (required)");
  AddClientSecurityFlags(flags, &security);
  ASSIGN_OR_RETURN(std::vector<std::string> positional,
                   ParseCommandFlags(flags, args, "sessions"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (coordinator.empty()) return UsageError("meshrt sessions needs --coordinator HOST:PORT");
  const bool close = !positional.empty() && positional[0] == "close";
  if ((close && positional.size() != 2) || (!close && !positional.empty())) {
    return UsageError("meshrt sessions takes no argument, or `close ID`");
  }
  ClientOptions options;
  options.address = coordinator;
  options.security = security;
  options.prefer_operator_token = true;
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(options));
  if (close) {
    RETURN_IF_ERROR(client->CloseSession(positional[1]));
    io.out << "closed session " << positional[1] << std::endl;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(v1::ListWorkersResponse list, client->ListWorkers());
  io.out << list.session_infos_size() << " session(s)\n";
  PrintSessionInfos(list, "  ", io.out);
  io.out.flush();
  return absl::OkStatus();
}

absl::Status HealthCommand(const std::vector<std::string>& args, CliIo io) {
  std::string service;
  int64_t timeout_ms = 5000;
  SecurityOptions security;
  FlagSet flags("meshrt health HOST:PORT [--service NAME] [--timeout_ms N]",
                "Asks the standard gRPC health service at HOST:PORT, as Kubernetes' gRPC probes "
                "do, and prints SERVING or NOT_SERVING (exit 1 unless SERVING). The daemons' "
                "--health_port serves it in plaintext; their gRPC port serves it too (with their "
                "TLS, so give the TLS flags there).\n\n"
                "example:\n  meshrt health 127.0.0.1:8080 --service meshrt.v1.Worker");
  flags.String("service", &service,
               "service to ask about: meshrt.v1.Coordinator or meshrt.v1.Worker (readiness); "
               "empty = the whole server (liveness)");
  flags.Int("timeout_ms", &timeout_ms, "give up after this long");
  AddClientSecurityFlags(flags, &security);
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "health"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (positional.size() != 1) return UsageError("meshrt health takes one HOST:PORT");
  ASSIGN_OR_RETURN(Security loaded, LoadSecurity(security));
  absl::StatusOr<bool> serving =
      CheckHealth(MakeChannel(positional[0], loaded), service, absl::Milliseconds(timeout_ms));
  if (!serving.ok()) {
    return WithContext(serving.status(), absl::StrCat("health of ", positional[0],
                                                      service.empty() ? "" : " service ", service));
  }
  io.out << (*serving ? "SERVING" : "NOT_SERVING") << std::endl;
  if (!*serving) {
    return absl::UnavailableError(absl::StrCat(positional[0], " ", service, " is not serving"));
  }
  return absl::OkStatus();
}

namespace {

// `meshrt local`'s flags.
struct LocalFlags {
  int64_t workers = 4;
  int64_t port = 0;            // 0: a free one
  int64_t metrics_port = 0;    // the coordinator's HTTP port; worker i's BASE+1+i; 0: free ones
  std::string metrics_token_file;
  std::string log_dir;         // "": the daemons share this terminal
  std::vector<std::string> data_dirs;
  std::string checkpoint_root;  // "": the current directory
  std::string session_lease;    // "": the coordinator's default
  std::string log_format = "text";
};

constexpr char kLocalUsage[] =
    "meshrt local [--workers N] [--port P] [--metrics_port BASE] [--metrics_token_file F] "
    "[--log_dir DIR] [--log_format text|json]";

constexpr char kLocalDescription[] =
    "Starts a local cluster on loopback: one coordinator and N worker processes (this binary's\n"
    "hidden `coordinator` and `worker` subcommands). Prints the coordinator's address and\n"
    "keeps running until Ctrl-C (SIGINT) or SIGTERM, then stops every process it started.\n"
    "Run graphs on it from another terminal with `meshrt run ... --coordinator ADDRESS`.\n"
    "Also prints the live dashboard's address, http://127.0.0.1:PORT/?token=TOKEN: the\n"
    "workers, the sessions, their layouts and loss curves in a browser. The token is the\n"
    "cluster's operator token, kept in a 0600 file under $MESHRT_HOME (else ~/.meshrt).\n"
    "Every daemon serves Prometheus metrics at /metrics on its HTTP port (printed), behind\n"
    "a bearer token: the coordinator's operator token, a worker's the cluster token, and on\n"
    "all of them --metrics_token_file's (one scrape credential for every target).\n\n"
    "example:\n"
    "  meshrt local --workers 4 --port 7070\n"
    "  meshrt run examples/graphs/mlp_forward.pbtxt --mesh rows:2,cols:2 "
    "--layout batch:rows,hidden:cols --coordinator 127.0.0.1:7070 --random_feeds 1 --print";

void AddLocalFlags(FlagSet& flags, LocalFlags* f) {
  flags.Int("workers", &f->workers, "number of worker processes");
  flags.Int("port", &f->port, "coordinator port; 0 picks a free one");
  flags.Int("metrics_port", &f->metrics_port,
            "the coordinator's HTTP port (dashboard, /metrics); worker i's is BASE+1+i; 0 picks "
            "free ones (the default)");
  flags.String("metrics_token_file", &f->metrics_token_file,
               "a token file (one token a line) every daemon's /metrics and dashboard also "
               "accept: give Prometheus this one file for every target");
  flags.String("log_dir", &f->log_dir,
               "directory for the daemons' logs (default: empty, they share this terminal)");
  flags.Repeated("data_dir", &f->data_dirs,
                 "a directory whose files graphs may read (text_windows); repeatable (default: "
                 "/usr/share/games/fortunes, the default training text's, if present)");
  flags.String("checkpoint_root", &f->checkpoint_root,
               "the directory checkpoints are saved under, by names relative to it "
               "(default: the current directory, as for `meshrt train --local`; the cluster is "
               "yours alone, its tokens private to your user)");
  flags.String("session_lease", &f->session_lease,
               "the coordinator's --session_lease: how long a silent client keeps its session "
               "(e.g. 10s, 2500ms; 0 = forever; default: the coordinator's, 10s)");
  AddLogFormatFlag(&flags, &f->log_format);
}

// The flags' checks; creates --log_dir.
absl::Status CheckLocalFlags(const LocalFlags& f) {
  if (f.workers < 1) return UsageError("--workers needs N >= 1");
  if (f.port < 0 || f.port > 65535) return UsageError("--port needs 0 <= P <= 65535");
  if (f.metrics_port < 0 || f.metrics_port + f.workers > 65535) {
    return UsageError(absl::StrCat("--metrics_port needs 0 <= BASE <= ", 65535 - f.workers,
                                   " (the workers take BASE+1..BASE+", f.workers, ")"));
  }
  if (!f.metrics_token_file.empty() && ::access(f.metrics_token_file.c_str(), R_OK) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot read --metrics_token_file ", f.metrics_token_file));
  }
  if (absl::Status s = ParseLogFormat(f.log_format).status(); !s.ok()) {
    return UsageError(s.message());
  }
  if (!f.log_dir.empty()) RETURN_IF_ERROR(MakeDirs(f.log_dir));
  return absl::OkStatus();
}

absl::StatusOr<LocalClusterOptions> LocalOptionsFromFlags(const LocalFlags& f) {
  LocalClusterOptions options;
  options.workers = static_cast<int>(f.workers);
  options.port = static_cast<int>(f.port);
  options.log_dir = f.log_dir;
  // In the default credentials dir, so `meshrt run/train/status --coordinator` on this machine
  // find the generated tokens without flags.
  options.credentials_dir = DefaultCredentialsDir();
  options.data_dirs = f.data_dirs.empty() ? LocalDataDirs("") : f.data_dirs;
  options.checkpoint_root = f.checkpoint_root;
  if (options.checkpoint_root.empty()) {
    ASSIGN_OR_RETURN(options.checkpoint_root, CurrentDirectory());
  }
  options.http_port_base = static_cast<int>(f.metrics_port);
  options.metrics_token_file = f.metrics_token_file;
  // The coordinator checks the value (and exits naming the flag when it is bad).
  if (!f.session_lease.empty()) {
    options.coordinator_flags.push_back("--session_lease=" + f.session_lease);
  }
  options.coordinator_flags.push_back("--log_format=" + f.log_format);
  options.worker_flags.push_back("--log_format=" + f.log_format);
  return options;
}

// The started cluster's address, client token, dashboard and every daemon's /metrics.
void PrintLocalCluster(const LocalCluster& cluster, const LocalFlags& f, CliIo io) {
  io.out << "meshrt local: coordinator at " << cluster.address() << " with " << f.workers
         << " workers; Ctrl-C to stop" << std::endl;
  io.out << "meshrt local: client token " << cluster.client_security().auth_token_file
         << " (meshrt commands on this machine use it by themselves; give it to others "
            "with --auth_token_file)"
         << std::endl;
  PrintDashboardAddress(cluster, io);
  // Every daemon's /metrics, and the bearer token each accepts.
  io.out << "meshrt local: metrics at http://127.0.0.1:" << cluster.http_port()
         << "/metrics (token: " << cluster.operator_security().auth_token_file << ")";
  for (int i = 0; i < cluster.num_workers(); ++i) {
    io.out << (i == 0 ? "; workers " : ", ") << "http://127.0.0.1:" << cluster.worker_http_port(i)
           << "/metrics";
  }
  io.out << " (token: " << cluster.cluster_token_file() << ")";
  if (!f.metrics_token_file.empty()) io.out << "; all also accept " << f.metrics_token_file;
  io.out << std::endl;
}

}  // namespace

absl::Status LocalCommand(const std::vector<std::string>& args, CliIo io) {
  LocalFlags f;
  FlagSet flags(kLocalUsage, kLocalDescription);
  AddLocalFlags(flags, &f);
  ASSIGN_OR_RETURN(std::vector<std::string> positional, ParseCommandFlags(flags, args, "local"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (!positional.empty()) return UsageError("meshrt local takes no arguments, only flags");
  RETURN_IF_ERROR(CheckLocalFlags(f));

  // A flag set by the handler, polled below: nothing else is safe in a signal handler, and
  // handlers (unlike a blocked signal mask) are reset in the children at exec.
  struct sigaction action = {}, old_int = {}, old_term = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  g_stop_requested.store(false);
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);

  absl::StatusOr<LocalClusterOptions> options = LocalOptionsFromFlags(f);
  absl::Status status = options.status();
  if (status.ok()) {
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(*options);
    if (!cluster.ok()) {
      status = WithContext(cluster.status(), "cannot start the local cluster");
    } else {
      PrintLocalCluster(**cluster, f, io);
      while (!g_stop_requested.load()) absl::SleepFor(absl::Milliseconds(100));
      io.out << "meshrt local: stopping" << std::endl;
    }
  }  // the cluster stops here
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return status;
}

}  // namespace meshrt
