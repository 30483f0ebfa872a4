// Training with the C++ client API, end to end: the paper's Transformer LM (models/transformer.h)
// on a 2x2 mesh of worker processes, data parallel over `rows` and model parallel over `cols` by
// layout rules alone; the workers read their own rows of each batch from an English text; a
// checkpoint saved at the end restores onto any other mesh.
//
//   bazel run //examples/training:train_transformer -- [STEPS] [CHECKPOINT_DIR]
//
// (`meshrt train` is the same loop with a progress bar; this file is the API in one page.)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "client/client.h"
#include "client/local_cluster.h"
#include "core/train/optimizers.h"
#include "models/train.h"

namespace {

int Fail(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "train_transformer: %s: %s\n", what, std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace meshrt;
  const int steps = argc > 1 ? std::atoi(argv[1]) : 100;
  const std::string checkpoint = argc > 2 ? argv[2] : "";

  // 1. The model and its training graph: forward pass, loss, gradients and Adam updates, all ops
  //    of one mesh graph with named dims (batch, length, d_model, heads, d_kv, d_ff, vocab).
  models::TransformerOptions model;  // batch 16 x 64 bytes, d_model 128, 4 heads, d_ff 512
  model.data_path = "/usr/share/games/fortunes/cookie";  // Debian's fortunes (tools/setup.sh)
  TrainOptions train;
  train.optimizer = "adam";
  train.learning_rate = {"linear_warmup", 3e-3f, 50};
  absl::StatusOr<models::TrainGraph> graph = models::BuildTransformerTrainGraph(model, train);
  if (!graph.ok()) return Fail("building the graph", graph.status());

  // 2. A cluster: here an embedded one (a coordinator and 4 worker processes on loopback); with
  //    daemons already running, connect to the coordinator's address instead.
  LocalClusterOptions cluster_options;
  cluster_options.workers = 4;
  // The daemons, from this binary's runfiles (bazel run and bazel test start there).
  cluster_options.coordinator_command = {"coordinator/meshrt-coordinator"};
  cluster_options.worker_command = {"worker/meshrt-worker"};
  // What the workers may touch: they read the text only under these directories, and write
  // checkpoints only under the root (a checkpoint is then named relative to it). Here the
  // checkpoint argument's parent directory is the root and its last component the name.
  cluster_options.data_dirs = {"/usr/share/games/fortunes"};
  std::string checkpoint_name = checkpoint;
  if (const size_t slash = checkpoint.rfind('/'); slash != std::string::npos) {
    cluster_options.checkpoint_root = slash == 0 ? "/" : checkpoint.substr(0, slash);
    checkpoint_name = checkpoint.substr(slash + 1);
  } else if (!checkpoint.empty()) {
    cluster_options.checkpoint_root = ".";
  }
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(cluster_options);
  if (!cluster.ok()) return Fail("starting the cluster", cluster.status());
  ClientOptions client_options = (*cluster)->client_options();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
  if (!client.ok()) return Fail("connecting", client.status());

  // 3. The layout: a 2x2 mesh; the batch split over rows, heads, d_ff and vocab over cols.
  Mesh mesh = Mesh::Parse("rows:2,cols:2").value();
  LayoutRules rules =
      LayoutRules::Parse("batch:rows,heads:cols,d_ff:cols,vocab:cols", mesh).value();
  absl::StatusOr<std::unique_ptr<Session>> session =
      (*client)->CreateSession(graph->graph.proto(), mesh, rules);
  if (!session.ok()) return Fail("creating the session", session.status());

  // 4. Train: each request runs 10 steps on the workers and brings back the last loss.
  for (int done = 0; done < steps; done += 10) {
    absl::StatusOr<TensorMap> out = (*session)->RunSteps(10, {}, {graph->loss});
    if (!out.ok()) return Fail("training", out.status());
    std::printf("step %d loss %.4f\n", done + 10, out->at(graph->loss).f32()[0]);
  }

  // 5. A checkpoint: every worker writes its slices, the coordinator the manifest, and a rename of
  //    CURRENT commits it.
  if (!checkpoint.empty()) {
    absl::Status saved = (*session)->SaveCheckpoint(checkpoint_name);
    if (!saved.ok()) return Fail("saving", saved);
    std::printf("saved %s (restore it on any mesh with Session::RestoreCheckpoint)\n",
                checkpoint.c_str());
  }
  absl::Status closed = (*session)->Close();
  if (!closed.ok()) return Fail("closing", closed);
  return 0;
}
