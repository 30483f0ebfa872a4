// Where decoding programs run (client/program_runner.h).
#include "client/program_runner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/local_cluster.h"
#include "core/lowering/lowering.h"
#include "kernels/cpu_kernels.h"
#include "runtime/checkpoint_store.h"
#include "runtime/checkpoint_tensors.h"
#include "util/file.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

// `status` with `prefix: ` before its message.
absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

// In process, with the reference interpreter and the fast kernels.
class InProcessRunner : public ProgramRunner {
 public:
  InProcessRunner(Graph graph, TensorMap weights)
      : graph_(std::move(graph)), variables_(std::move(weights)) {}
  absl::StatusOr<TensorMap> Run(const TensorMap& feeds,
                                const std::vector<std::string>& fetches) override {
    return InterpretStep(graph_, feeds, fetches, &variables_, CpuKernels());
  }

 private:
  Graph graph_;
  TensorMap variables_;
};

// On a cluster's workers: one session, the weights restored into it from a checkpoint.
class ClusterRunner : public ProgramRunner {
 public:
  ~ClusterRunner() override {
    session_.reset();  // before the client and the cluster
    client_.reset();
    cluster_.reset();
    if (!private_root_.empty()) {
      std::error_code ignored;  // a leftover temp directory is no reason to fail
      std::filesystem::remove_all(private_root_, ignored);
    }
  }

  absl::Status Connect(const ProgramTarget& o, const Graph& graph, const TensorMap& weights,
                       absl::string_view command, std::ostream& log) {
    absl::StatusOr<Mesh> mesh = Mesh::Parse(MeshOrDefault(o.mesh, o.local, o.coordinator));
    if (!mesh.ok()) return Prefixed(mesh.status(), "--mesh");
    absl::StatusOr<LayoutRules> rules = LayoutRules::Parse(o.layout, *mesh);
    if (!rules.ok()) return Prefixed(rules.status(), "--layout");
    RETURN_IF_ERROR(ValidateLayouts(graph, *mesh, *rules));
    std::string root = o.checkpoint_root;
    std::string address = o.coordinator;
    SecurityOptions security = o.security;
    if (o.local > 0) {
      // The weights reach the workers as a checkpoint in a private root.
      ASSIGN_OR_RETURN(root, MakeTempDirectory(absl::StrCat("meshrt-", command)));
      private_root_ = root;
      LocalClusterOptions options;
      options.workers = static_cast<int>(o.local);
      options.checkpoint_root = root;
      options.log_dir = o.log_dir;
      if (options.log_dir.empty()) {
        ASSIGN_OR_RETURN(options.log_dir,
                         MakeTempDirectory(absl::StrCat("meshrt-", command, "-logs")));
      } else if (::mkdir(options.log_dir.c_str(), 0777) != 0 && errno != EEXIST) {
        return absl::ErrnoToStatus(errno, absl::StrCat("cannot create --log_dir ", o.log_dir));
      }
      log << "starting a local cluster: 1 coordinator + " << o.local
          << " worker processes (logs in " << options.log_dir << ")\n";
      absl::StatusOr<std::unique_ptr<LocalCluster>> started = LocalCluster::Start(options);
      if (!started.ok()) return Prefixed(started.status(), "cannot start the local cluster");
      cluster_ = *std::move(started);
      address = cluster_->address();
      security = cluster_->client_security();
    }
    ASSIGN_OR_RETURN(const std::string imported, WriteInitialCheckpoint(root, weights));
    ClientOptions client;
    client.address = address;
    client.security = security;
    ASSIGN_OR_RETURN(client_, Client::Connect(client));
    ASSIGN_OR_RETURN(session_, client_->CreateSession(graph.proto(), *mesh, *rules));
    absl::StatusOr<int64_t> restored = session_->RestoreCheckpoint(imported, /*partial=*/true);
    if (!restored.ok()) return Prefixed(restored.status(), "loading the weights");
    log << "decoding on " << mesh->num_processors() << " worker processes, mesh "
        << mesh->ToString() << ", layout '"
        << (rules->ToString().empty() ? "(replicated)" : rules->ToString()) << "'\n";
    return absl::OkStatus();
  }

  absl::StatusOr<TensorMap> Run(const TensorMap& feeds,
                                const std::vector<std::string>& fetches) override {
    return session_->Run(feeds, fetches);
  }

 private:
  std::string private_root_;  // the temp checkpoint root of a local cluster ("" otherwise)
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Session> session_;
};

}  // namespace

absl::StatusOr<TensorMap> ProgramWeights(const Graph& graph,
                                         const std::vector<std::string>& variables,
                                         const TensorMap& weights, absl::string_view what) {
  TensorMap out;
  for (const std::string& name : variables) {
    const TensorType& type = graph.type(name);
    auto it = weights.find(name);
    if (it == weights.end() || it->second.shape() != type.shape ||
        it->second.dtype() != type.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has no variable ", name, " of ",
                                                     DTypeName(type.dtype), " ",
                                                     type.shape.ToString()));
    }
    out[name] = it->second;
  }
  return out;
}

absl::Status CheckProgramTarget(const ProgramTarget& target, absl::string_view command) {
  const int targets = (target.reference ? 1 : 0) + (target.local > 0 ? 1 : 0) +
                      (target.coordinator.empty() ? 0 : 1);
  if (targets != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        command, " needs exactly one of --reference, --local N and --coordinator HOST:PORT"));
  }
  if (!target.coordinator.empty() && target.checkpoint_root.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        command,
        " --coordinator needs --checkpoint_root DIR: that coordinator's checkpoint root as "
        "mounted here (the weights are written there and restored into the session)"));
  }
  absl::StatusOr<Mesh> mesh =
      Mesh::Parse(MeshOrDefault(target.mesh, target.local, target.coordinator));
  if (target.local > 0 && mesh.ok() && target.local < mesh->num_processors()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--local ", target.local, " starts too few workers for mesh ", mesh->ToString()));
  }
  return absl::OkStatus();
}

std::string MeshOrDefault(const std::string& mesh, int64_t local, const std::string& coordinator) {
  if (!mesh.empty()) return mesh;
  if (local > 0) return absl::StrCat("x:", local);
  return coordinator.empty() ? "" : "x:1";
}

absl::StatusOr<std::string> WriteInitialCheckpoint(const std::string& root_dir,
                                                   const TensorMap& weights) {
  ASSIGN_OR_RETURN(const CheckpointRoot root, CheckpointRoot::Open(root_dir));
  // Unique per run: two runs sharing a root never restore each other's weights.
  const std::string name = absl::StrFormat("imports/init-%d-%d", ::getpid(),
                                           absl::ToUnixMicros(absl::Now()));
  ASSIGN_OR_RETURN(const std::string dir, root.Resolve(name, /*create=*/true));
  RETURN_IF_ERROR(WriteCheckpointFromTensors(dir, weights, /*step=*/0, /*keep=*/1));
  return name;
}

absl::StatusOr<std::unique_ptr<ProgramRunner>> ProgramRunner::Start(const ProgramTarget& target,
                                                                    Graph graph, TensorMap weights,
                                                                    absl::string_view command,
                                                                    std::ostream& log) {
  RETURN_IF_ERROR(CheckProgramTarget(target, command));
  if (target.reference) {
    return std::make_unique<InProcessRunner>(std::move(graph), std::move(weights));
  }
  auto cluster = std::make_unique<ClusterRunner>();
  RETURN_IF_ERROR(cluster->Connect(target, graph, weights, command, log));
  return cluster;
}

}  // namespace meshrt
