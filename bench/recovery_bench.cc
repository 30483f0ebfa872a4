// Recovery times of a training run (client/training_run.h) on a local cluster of real processes:
// for each kind of failure, the time from the failure to the first training step completed after
// it ("failure -> training again"), the recovery's own share (new session + restore) and the steps
// redone. A small Transformer LM on rows:2,cols:2 (batch:rows,heads:cols,d_ff:cols,vocab:cols),
// checkpoints every 10 steps, the failure at step 15. Medians over --reps runs.
//   bazel run -c opt //bench:recovery_bench -- --reps 3
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/local_cluster.h"
#include "client/training_run.h"
#include "kernels/blas_probe.h"
#include "models/train.h"
#include "util/flags.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

struct Scenario {
  const char* name;
  int workers;  // 4 = no spare
  absl::Duration replace_wait;
  // Injects the failure; returns when it has been done.
  std::function<absl::Status(LocalCluster&)> fail;
};

struct Sample {
  double to_training = 0;  // failure -> the first step done after the recovery
  double recovery = 0;     // Recovery::took
  int64_t redone = 0;
  std::string mesh;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

absl::StatusOr<Sample> RunOnce(const Scenario& sc, const v1::Graph& graph, const std::string& dir) {
  LocalClusterOptions o;
  o.workers = sc.workers;
  o.coordinator_command = {"client/meshrt", "coordinator"};
  o.worker_command = {"client/meshrt", "worker"};
  o.checkpoint_root = dir;
  o.log_dir = dir;
  ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(o));
  TrainingRunOptions r;
  r.client = cluster->client_options();
  r.graph = graph;
  ASSIGN_OR_RETURN(r.mesh, Mesh::Parse("rows:2,cols:2"));
  ASSIGN_OR_RETURN(r.rules, LayoutRules::Parse("batch:rows,heads:cols,d_ff:cols,vocab:cols", r.mesh));
  r.checkpoint = "ck";
  r.save_every = 10;
  r.replace_wait = sc.replace_wait;
  r.log = [](const std::string&) {};
  ASSIGN_OR_RETURN(std::unique_ptr<TrainingRun> run, TrainingRun::Start(r));
  absl::Time failed;
  Sample sample;
  bool injected = false, measured = false;
  while (run->step() < 25) {
    ASSIGN_OR_RETURN(TensorMap out, run->Steps(1, {}));
    if (injected && !measured && !run->recoveries().empty()) {
      measured = true;
      sample.to_training = absl::ToDoubleSeconds(absl::Now() - failed);
      const Recovery& rec = run->recoveries().back();
      sample.recovery = absl::ToDoubleSeconds(rec.took);
      sample.redone = rec.failed_at - rec.resumed_at;
      sample.mesh = rec.mesh;
    }
    if (run->step() == 15 && !injected) {
      injected = true;
      failed = absl::Now();
      RETURN_IF_ERROR(sc.fail(*cluster));
    }
  }
  if (!measured) return absl::InternalError("the failure caused no recovery");
  return sample;
}

int Main(int argc, char** argv) {
  int64_t reps = 3;
  FlagSet flags("recovery_bench [--reps N]", "Recovery times of a training run by failure kind.");
  flags.Int("reps", &reps, "runs per failure kind (median reported)");
  if (absl::Status s = flags.Parse(argc, argv).status(); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  models::TransformerOptions m;
  m.batch = 16;
  m.length = 64;
  m.d_model = 128;
  m.heads = 4;
  m.d_ff = 512;
  m.layers = 2;
  m.data_path = "";  // synthetic bytes: no data dir needed
  TrainOptions t;
  t.optimizer = "adam";
  t.learning_rate.base = 0.01f;
  absl::StatusOr<models::TrainGraph> tg = models::BuildTransformerTrainGraph(m, t);
  if (!tg.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tg.status().message()).c_str());
    return 1;
  }
  const std::vector<Scenario> scenarios = {
      {"worker kill -9, a spare registered", 5, absl::Seconds(10),
       [](LocalCluster& c) { return c.KillWorker(1); }},
      {"worker kill -9, no spare (smaller mesh)", 4, absl::Seconds(10),
       [](LocalCluster& c) { return c.KillWorker(1); }},
      {"worker SIGTERM (drains), a spare", 5, absl::Seconds(10),
       [](LocalCluster& c) { return c.TerminateWorker(1, absl::Seconds(10)).status(); }},
      {"worker SIGSTOP (not responding), a spare", 5, absl::Seconds(10),
       [](LocalCluster& c) {
         return kill(c.worker_pid(1), SIGSTOP) == 0 ? absl::OkStatus()
                                                    : absl::InternalError("SIGSTOP failed");
       }},
      {"coordinator kill -9, back after 1 s", 4, absl::Seconds(10),
       [](LocalCluster& c) { return c.RestartCoordinator(absl::Seconds(1)); }},
  };
  std::printf("CPU: %s\n", kernels::CpuModelName().c_str());
  std::printf("%-42s %22s %14s %8s %s\n", "failure", "failure->training (s)", "recovery (s)",
              "redone", "continued on");
  for (const Scenario& sc : scenarios) {
    std::vector<double> to_training, recovery;
    Sample last;
    for (int64_t i = 0; i < reps; ++i) {
      char dir_template[] = "/tmp/meshrt-recovery-XXXXXX";
      if (mkdtemp(dir_template) == nullptr) return 1;
      absl::StatusOr<Sample> s = RunOnce(sc, tg->graph.proto(), dir_template);
      if (!s.ok()) {
        std::fprintf(stderr, "%s: %s\n", sc.name, std::string(s.status().message()).c_str());
        return 1;
      }
      to_training.push_back(s->to_training);
      recovery.push_back(s->recovery);
      last = *s;
    }
    std::printf("%-42s %22.2f %14.2f %8lld %s\n", sc.name, Median(to_training), Median(recovery),
                static_cast<long long>(last.redone), last.mesh.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace meshrt

int main(int argc, char** argv) { return meshrt::Main(argc, argv); }
