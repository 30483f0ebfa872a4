// The worker daemon: flags -> WorkerServerOptions -> WorkerServer::Start (worker_server.h), which
// serves and registers; then the drain on SIGTERM.
#include "worker/worker_main.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <optional>

#include "absl/strings/match.h"
#include "rpc/daemon_exit.h"
#include "rpc/grpc_util.h"
#include "rpc/http_server.h"
#include "util/flags.h"
#include "util/logging.h"
#include "worker/worker_server.h"

namespace meshrt {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

// The flags' values as given; OptionsFromFlags types them.
struct WorkerFlags {
  std::string coordinator;
  std::string host = "127.0.0.1";
  std::string advertise_address;
  std::string cluster_token_file;
  std::string credentials_dir;
  bool insecure = false;
  std::string gloo_address;
  int64_t port = 0;
  int64_t register_timeout_s = 120;
  int64_t drain_timeout_s = 20;
  int64_t health_port = 0;
  HttpFlags http;
  std::string rank;
  std::vector<std::string> data_dirs;
  std::string checkpoint_root;
  std::string log_format = "text";
  int64_t debug_freeze_at_step = 0;
  int64_t debug_freeze_at_instruction = -1;
  int64_t debug_spin_at_step = 0;
  int64_t debug_spin_at_instruction = -1;
  double debug_spin_seconds = 4;
  std::string overlap_comm = "auto";
  SecurityOptions security;
};

// Where the worker serves, its coordinator, its rank and the files it may touch.
void AddPlacementFlags(FlagSet* flags, WorkerFlags* f) {
  flags->String("coordinator", &f->coordinator, "coordinator address HOST:PORT (required)");
  flags->Int("port", &f->port, "port of this worker's gRPC service; 0 picks a free one");
  flags->String("host", &f->host,
               "address this worker's gRPC service listens on; anything but loopback needs TLS or "
               "--cluster_token_file, or --insecure (0.0.0.0 = every interface)");
  flags->String("advertise_address", &f->advertise_address,
               "host name or IP the coordinator and peers use to reach this worker (default: "
               "--host, or 127.0.0.1 when --host is loopback or a wildcard)");
  flags->String("gloo_address", &f->gloo_address,
               "host name or IP Gloo binds and advertises (default: --advertise_address)");
  flags->Int("register_timeout_s", &f->register_timeout_s,
            "give up if the coordinator cannot be reached for this long (retrying with backoff)");
  flags->String("rank", &f->rank,
               "stable rank of this worker: N, or a StatefulSet pod name NAME-N (rank N); "
               "sessions take free workers in rank order (default: empty, no rank)");
  flags->Int("drain_timeout_s", &f->drain_timeout_s,
            "on SIGTERM, how long the step in flight may take to finish before it is aborted; "
            "the worker then deregisters and exits");
  flags->Int("health_port", &f->health_port,
            "also serve the standard gRPC health service, alone and in plaintext, on this port "
            "(for Kubernetes' gRPC probes, which cannot speak TLS); 0 = off");
  flags->Repeated("data_dir", &f->data_dirs,
                 "a directory whose files the graphs' ops may read (text_windows); repeatable. "
                 "Paths are resolved (symlinks, '..') and must stay inside one; none given = "
                 "graphs read no file");
  flags->String("checkpoint_root", &f->checkpoint_root,
               "checkpoints are written to and read from directories under this one only "
               "(the coordinator's --checkpoint_root, on the shared filesystem at the same "
               "path); empty = this worker takes no part in checkpoints");
}

// How steps run, with the fault injections for tests.
void AddStepFlags(FlagSet* flags, WorkerFlags* f) {
  flags->Int("debug_freeze_at_step", &f->debug_freeze_at_step,
            "FOR TESTS ONLY (fault injection): in every session, step N blocks before "
            "--debug_freeze_at_instruction until the session is closed, while heartbeats go on "
            "(a stuck rank); 0 = off");
  flags->Int("debug_freeze_at_instruction", &f->debug_freeze_at_instruction,
            "FOR TESTS ONLY: the program instruction --debug_freeze_at_step blocks before "
            "(-1 = the step's first)");
  flags->Int("debug_spin_at_step", &f->debug_spin_at_step,
            "FOR TESTS ONLY (fault injection): in every session, step N busy-loops its step thread "
            "(burning CPU) for --debug_spin_seconds before --debug_spin_at_instruction, then goes "
            "on (a slow rank, not a stuck one); 0 = off");
  flags->Int("debug_spin_at_instruction", &f->debug_spin_at_instruction,
            "FOR TESTS ONLY: the program instruction --debug_spin_at_step spins before (-1 = the "
            "step's first)");
  flags->Double("debug_spin_seconds", &f->debug_spin_seconds,
               "FOR TESTS ONLY: how long --debug_spin_at_step spins");
  flags->String("overlap_comm", &f->overlap_comm,
               "auto, true or false: run each session's collectives on a communication thread, "
               "overlapping the compute that does not read their results (true), or on the step "
               "thread (false: every collective blocks it), or measure both on each session's "
               "first 8 steps and keep the faster, logging the figures (auto: overlap pays only "
               "where a core is free for the communication thread). Results are the same bits");
}

// Every flag, in --help's order.
void AddWorkerFlags(FlagSet* flags, WorkerFlags* f) {
  AddPlacementFlags(flags, f);
  AddStepFlags(flags, f);
  AddSecurityFlags(flags, &f->security, /*server=*/true);
  flags->String("cluster_token_file", &f->cluster_token_file,
               "file with the cluster token this worker presents to the coordinator (the "
               "coordinator's --cluster_token_file); default: for a coordinator on this machine's "
               "loopback, the one it generated in --credentials_dir");
  flags->String("credentials_dir", &f->credentials_dir,
               "where a coordinator on this machine keeps generated tokens (default: "
               "$MESHRT_HOME, else ~/.meshrt)");
  flags->Bool("insecure", &f->insecure,
             "allow listening beyond loopback without TLS or --cluster_token_file (the worker "
             "still accepts calls only from its coordinator, but the secret that proves it "
             "travels in plaintext)");
  AddHttpFlags(flags, &f->http, "Prometheus metrics at /metrics");
  AddLogFormatFlag(flags, &f->log_format);
}

// The options `f` says; InvalidArgument naming the flag (CheckWorkerServerOptions, --rank,
// --overlap_comm, in that order).
absl::StatusOr<WorkerServerOptions> OptionsFromFlags(const WorkerFlags& f) {
  WorkerServerOptions o;
  o.coordinator = f.coordinator;
  o.host = f.host;
  o.port = f.port;
  o.advertise_address = f.advertise_address;
  o.gloo_address = f.gloo_address;
  o.register_timeout = absl::Seconds(f.register_timeout_s);
  o.drain_timeout = absl::Seconds(f.drain_timeout_s);
  o.health_port = f.health_port;
  o.http = f.http;
  o.data_dirs = f.data_dirs;
  o.checkpoint_root = f.checkpoint_root;
  o.debug_freeze_at_step = f.debug_freeze_at_step;
  o.debug_freeze_at_instruction = f.debug_freeze_at_instruction;
  o.debug_spin_at_step = f.debug_spin_at_step;
  o.debug_spin_at_instruction = f.debug_spin_at_instruction;
  o.debug_spin_seconds = f.debug_spin_seconds;
  o.security = f.security;
  o.cluster_token_file = f.cluster_token_file;
  o.credentials_dir = f.credentials_dir;
  o.insecure = f.insecure;
  if (absl::Status s = CheckWorkerServerOptions(o); !s.ok()) return s;
  absl::StatusOr<std::optional<int>> rank = ParseRank(f.rank);
  if (!rank.ok()) return rank.status();
  o.rank = *rank;
  absl::StatusOr<Worker::Overlap> overlap = ParseOverlap(f.overlap_comm);
  if (!overlap.ok()) return overlap.status();
  o.overlap = *overlap;
  return o;
}

// Prints why the worker could not start, as "meshrt-worker: ..." (ServeCheck's messages name the
// daemon already), and returns the exit code (rpc/daemon_exit.h).
int StartFailed(const absl::Status& status) {
  const std::string message(status.message());
  if (absl::StartsWith(message, "meshrt-worker: ")) {
    std::fprintf(stderr, "%s\n", message.c_str());
  } else {
    std::fprintf(stderr, "meshrt-worker: %s\n", message.c_str());
  }
  return DaemonExitCode(status);
}

// Every step receives its feeds and sends its fetches in fresh buffers (the step's RPC messages,
// the assembled feed tensors); by default glibc returns big freed blocks to the kernel and the
// next step pays the page faults again. Blocks above 32 MiB (glibc's largest mmap threshold) are
// each their own mmap, unmapped on free, whatever the threshold says: so no mmap at all (every
// block from the heap, reused step after step), and freed memory stays mapped up to 1 GiB of
// free heap top. Cost: the worker's resident size stays at its high-water mark (what its largest
// step needed) instead of shrinking between steps. The executor's own buffers are recycled by
// its BufferPool either way. cluster_bench, 4 workers on a loaded 2-core machine, with the same
// setting in every process (GLIBC_TUNABLES=glibc.malloc.mmap_max=0): feed/fetch of a split
// 16-64 MiB tensor 10-25% faster than with the 32 MiB threshold alone (noisy: load 8-13).
void KeepFreedMemoryMapped() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace

int WorkerMain(int argc, char** argv) {
  WorkerFlags f;
  FlagSet flags("meshrt-worker --coordinator HOST:PORT [flags]",
                "Runs a meshrt worker: registers with the coordinator, loads the SPMD programs of "
                "the sessions it is given, runs their steps with OpenBLAS kernels and Gloo "
                "collectives.\nExample: meshrt-worker --coordinator 127.0.0.1:7070");
  AddWorkerFlags(&flags, &f);
  auto positional = flags.Parse(argc, argv);
  if (!positional.ok()) {
    std::fprintf(stderr, "meshrt-worker: %s\n", std::string(positional.status().message()).c_str());
    return 2;
  }
  if (flags.help()) {
    std::cout << flags.Help();
    return 0;
  }
  if (std::optional<int> done = HandleVersionAndLogFormat(flags, "meshrt-worker", f.log_format)) {
    return *done;
  }
  absl::StatusOr<WorkerServerOptions> options = OptionsFromFlags(f);
  if (!options.ok()) return StartFailed(UsageError(options.status()));

  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  signal(SIGPIPE, SIG_IGN);
  SetDaemonLogName("worker");
  KeepFreedMemoryMapped();
  absl::StatusOr<std::unique_ptr<WorkerServer>> server =
      WorkerServer::Start(*std::move(options), &g_stop);
  if (!server.ok()) return StartFailed(server.status());
  (*server)->Wait();
  // Past 4 s a step stuck in a collective holds the gRPC server: exit without it (the peers'
  // collectives then fail at once, on the closed connections).
  if (!(*server)->Shutdown(absl::Seconds(4))) {
    std::fflush(nullptr);
    _exit(0);
  }
  return 0;
}

}  // namespace meshrt
