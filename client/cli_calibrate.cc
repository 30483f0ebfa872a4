// `meshrt calibrate`: the planner's time-model figures measured on a cluster (client/calibrate.h).
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/calibrate.h"
#include "client/cli_commands.h"
#include "client/local_cluster.h"
#include "runtime/checkpoint.h"
#include "util/file.h"
#include "util/flags.h"
#include "util/status_macros.h"

namespace meshrt {

constexpr char kCalibrateUsage[] =
    "meshrt calibrate (--local N | --coordinator HOST:PORT --workers W) [--out FILE]";

constexpr char kCalibrateDescription[] =
    "Measures on the workers of a cluster what the planner's time model needs: the time of a "
    "step that computes nothing, GEMM throughput (large and attention-shaped products), "
    "memory bandwidth, the FLOP rate of a softmax, and latency (alpha) and bandwidth (beta) of "
    "allreduce, allgather and "
    "alltoall in groups of the workers, each from a small graph run for a few steps "
    "through an ordinary session (client/calibrate.h). With workers on several hosts (by "
    "their registered addresses) the collectives are measured both in groups within a host "
    "and in groups spanning hosts (the profile's cross_host.* links). Takes seconds. Prints "
    "the profile (`key value` lines) or writes it to --out.\n\n"
    "examples:\n  meshrt calibrate --local 2 --out cluster.profile\n"
    "  meshrt calibrate --coordinator 127.0.0.1:7070 --workers 4";

absl::Status CalibrateCommand(const std::vector<std::string>& args, CliIo io) {
  int64_t workers = 0, steps = 5, group = 0;
  std::string out_path;
  ProgramTarget target;  // --local or --coordinator only
  const int64_t& local = target.local;
  FlagSet flags(kCalibrateUsage, kCalibrateDescription);
  TargetFlagHelp target_help;
  target_help.local = "start a local cluster with N worker processes, then stop it";
  target_help.coordinator = "calibrate the workers of the coordinator HOST:PORT";
  AddTargetFlags(flags, target_help, &target);
  flags.Int("workers", &workers,
            "how many of its workers (with --coordinator; default: --local's N)");
  flags.Int("collective_group", &group,
            "workers per collective group, dividing W (default: the workers per host when "
            "several hosts have the same number, else all W)");
  flags.Int("steps", &steps, "timed steps per measurement (the median counts; default 5)");
  flags.String("out", &out_path, "write the profile here (default: print it)");
  ASSIGN_OR_RETURN(std::vector<std::string> positional,
                   ParseCommandFlags(flags, args, "calibrate"));
  if (flags.help()) {
    io.out << flags.Help();
    return absl::OkStatus();
  }
  if (!positional.empty()) return UsageError("meshrt calibrate takes no argument");
  RETURN_IF_ERROR(CheckTargetFlags(target, target_help, "calibrate"));
  if (workers == 0) workers = local;
  if (workers < 1) return UsageError("--coordinator needs --workers W (W >= 1)");
  if (local > 0 && workers > local) {
    return UsageError(absl::StrCat("--workers ", workers, " is more than --local ", local));
  }
  if (steps < 1) return UsageError("--steps needs N >= 1");
  if (group < 0 || (group > 0 && workers % group != 0)) {
    return UsageError(absl::StrCat("--collective_group ", group, " must divide --workers ",
                                   workers));
  }

  std::unique_ptr<LocalCluster> cluster;
  ClientOptions options;
  if (local > 0) {
    LocalClusterOptions cluster_options;
    cluster_options.workers = static_cast<int>(local);
    ASSIGN_OR_RETURN(const std::string log_dir, LogDirectory("", "calibrate"));
    cluster_options.log_dir = log_dir;
    absl::StatusOr<std::unique_ptr<LocalCluster>> started = LocalCluster::Start(cluster_options);
    if (!started.ok()) return WithContext(started.status(), "cannot start the local cluster");
    cluster = *std::move(started);
    options.address = cluster->address();
    options.security = cluster->client_security();
  } else {
    options.address = target.coordinator;
    options.security = target.security;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(options));
  CalibrateOptions calibrate;
  calibrate.workers = static_cast<int>(workers);
  calibrate.steps = static_cast<int>(steps);
  calibrate.collective_group = static_cast<int>(group);
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(const Calibration c, Calibrate(*client, calibrate));
  const std::string text = FormatCalibration(
      c, absl::StrCat(local > 0 ? "local cluster" : "coordinator " + target.coordinator, ", ",
                      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone()),
                      ", ", absl::StrFormat("%.1f", absl::ToDoubleSeconds(absl::Now() - start)),
                      " s"));
  if (out_path.empty()) {
    io.out << text;
  } else {
    RETURN_IF_ERROR(WriteFileAtomically(out_path, text));  // never half a profile
    io.out << "wrote the profile of " << workers << " worker(s) to " << out_path << "\n";
  }
  return absl::OkStatus();
}

}  // namespace meshrt
