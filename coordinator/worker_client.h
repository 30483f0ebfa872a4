// The coordinator's view of one worker: load a session, run a step, save or restore a checkpoint,
// close a session. The gRPC
// implementation is in grpc_worker_client.h; tests plug in-process Workers in instead.
#ifndef MESHRT_COORDINATOR_WORKER_CLIENT_H_
#define MESHRT_COORDINATOR_WORKER_CLIENT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/reference/interpreter.h"
#include "proto/checkpoint.pb.h"
#include "proto/session.pb.h"
#include "rpc/tensor_region.h"
#include "runtime/step_request.h"

namespace meshrt {

// A cancellation signal for calls in flight, shared by the calls of one step. Thread-safe.
class Cancellation {
 public:
  // Runs every registered callback (once); later Register calls run theirs at once.
  void Cancel();
  bool cancelled() const;
  // `fn` runs on Cancel, under this object's lock (keep it short, e.g. ClientContext::TryCancel).
  int Register(std::function<void()> fn);
  // After this returns, the callback `id` will not run (and is not running).
  void Unregister(int id);

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
};

// A worker's slice of one fed tensor: `region` of `whole`, whose ownership the caller shares (the
// wire may reference its storage after RunStep returns, until it has sent it).
struct FeedSlice {
  std::shared_ptr<const Tensor> whole;
  TensorRegion region;
};
using FeedSlices = std::map<std::string, FeedSlice>;

// Where a worker's slice of one fetched tensor goes: `region` of the whole tensor's storage
// `whole` (borrowed; written only during RunStep, by it). RunStep sets `filled` once every byte
// of the slice is there.
struct FetchTarget {
  char* whole = nullptr;
  TensorRegion region;
  bool filled = false;
};
using FetchTargets = std::map<std::string, FetchTarget>;

// Thread-safe.
class WorkerClient {
 public:
  virtual ~WorkerClient() = default;
  virtual absl::Status LoadSession(const v1::SessionSpec& spec, absl::Duration timeout) = 0;
  // Sends this worker's feed slices, runs `request` on it (Worker::RunStep) and writes the
  // slice of each tensor of `request.fetches` into its target in `*fetches` (which holds one for
  // each of them). A returned slice whose dtype or shape is not its target's is an error. Returns
  // soon with Cancelled once `cancel` (borrowed, may be null) is cancelled. `traces` (borrowed,
  // may be null): where the timelines of the repetitions request.trace_first..trace_last go.
  // The worker's own errors carry its mark (rpc/error_origin.h); transport errors do not.
  virtual absl::Status RunStep(const StepRequest& request, const FeedSlices& feeds,
                               FetchTargets* fetches, absl::Duration timeout, Cancellation* cancel,
                               std::vector<v1::StepTrace>* traces) = 0;
  virtual absl::Status CloseSession(const std::string& session, absl::Duration timeout) = 0;
  // Checkpoints (Worker::SaveCheckpoint / Worker::RestoreCheckpoint).
  virtual absl::StatusOr<v1::WorkerSaveCheckpointResponse> SaveCheckpoint(
      const v1::WorkerSaveCheckpointRequest& request, absl::Duration timeout) = 0;
  virtual absl::Status RestoreCheckpoint(const v1::WorkerRestoreCheckpointRequest& request,
                                         absl::Duration timeout) = 0;
};

class WorkerClientFactory {
 public:
  virtual ~WorkerClientFactory() = default;
  // `address` is what the worker registered with; `secret` is the credential it registered (the
  // client presents it on every call: the worker accepts only its coordinator, rpc/auth.h).
  virtual std::unique_ptr<WorkerClient> Connect(const std::string& address,
                                                const std::string& secret) = 0;
};

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_WORKER_CLIENT_H_
