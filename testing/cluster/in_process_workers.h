// Test support: workers as objects in this process, reached through WorkerClientFactory, with
// in-memory collectives (one LocalCollectiveHub per session). Lets coordinator tests exercise the
// whole session logic without sockets, and inject failures per worker.
#ifndef MESHRT_TESTING_CLUSTER_IN_PROCESS_WORKERS_H_
#define MESHRT_TESTING_CLUSTER_IN_PROCESS_WORKERS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/worker_client.h"
#include "runtime/local_communicator.h"
#include "worker/worker.h"

namespace meshrt {

class InProcessWorkers : public WorkerClientFactory, public CommunicatorFactory {
 public:
  InProcessWorkers() = default;

  // Adds a worker reachable at `address`, touching on the host only what `files` allows (its
  // policies are borrowed and must outlive this).
  void AddWorker(const std::string& address, WorkerFileAccess files = WorkerFileAccess());
  // From now on, every call to `address` fails with `status` (as a dead process would); an OK
  // status mends it.
  void Break(const std::string& address, absl::Status status);
  // The next checkpoint save on `address` writes its shards, then fails with `status` (a disk
  // error after some files, or a worker dying before it answers).
  void FailNextSave(const std::string& address, absl::Status status);
  // Number of LoadSession calls that reached any worker.
  int loads() const;
  // The kv_prefix the coordinator gave `session` (from its last LoadSession), or "".
  std::string KvPrefix(const std::string& session) const;

  std::unique_ptr<WorkerClient> Connect(const std::string& address,
                                        const std::string& secret) override;
  absl::StatusOr<std::unique_ptr<Communicator>> Create(
      const v1::SessionSpec& spec, const Mesh& mesh,
      const std::vector<std::vector<int>>& groups) override;

 private:
  class Client;
  struct Entry {
    std::unique_ptr<Worker> worker;
    absl::Status broken;
    absl::Status fail_next_save;
  };

  mutable absl::Mutex mu_;
  std::map<std::string, Entry> workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<LocalCollectiveHub>> hubs_ ABSL_GUARDED_BY(mu_);
  int loads_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> kv_prefixes_ ABSL_GUARDED_BY(mu_);  // by session
};

}  // namespace meshrt

#endif  // MESHRT_TESTING_CLUSTER_IN_PROCESS_WORKERS_H_
