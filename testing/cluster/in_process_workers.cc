#include "testing/cluster/in_process_workers.h"

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "kernels/cpu_kernels.h"

namespace meshrt {

class InProcessWorkers::Client : public WorkerClient {
 public:
  Client(InProcessWorkers* owner, std::string address) : owner_(owner), address_(address) {}

  absl::Status LoadSession(const v1::SessionSpec& spec, absl::Duration) override {
    Worker* w;
    {
      absl::MutexLock lock(&owner_->mu_);
      Entry& e = owner_->workers_.at(address_);
      if (!e.broken.ok()) return e.broken;
      ++owner_->loads_;
      owner_->kv_prefixes_[spec.session()] = spec.kv_prefix();
      w = e.worker.get();
    }
    return w->LoadSession(spec);
  }

  absl::Status RunStep(const StepRequest& request, const FeedSlices& feeds,
                       FetchTargets* fetches, absl::Duration, Cancellation* cancel,
                       std::vector<v1::StepTrace>* traces) override {
    Worker* w;
    LocalCollectiveHub* hub = nullptr;
    {
      absl::MutexLock lock(&owner_->mu_);
      Entry& e = owner_->workers_.at(address_);
      auto h = owner_->hubs_.find(request.session);
      if (h != owner_->hubs_.end()) hub = h->second.get();
      if (!e.broken.ok()) {
        // A dead worker: its peers' collectives must not wait for it.
        if (hub != nullptr) hub->Abort(absl::UnavailableError("peer died"));
        return e.broken;
      }
      w = e.worker.get();
    }
    int id = cancel->Register([hub] {
      if (hub != nullptr) hub->Abort(absl::CancelledError("step cancelled"));
    });
    TensorMap slices;
    for (const auto& [name, slice] : feeds) {
      slices.emplace(name, slice.region.Extract(*slice.whole));
    }
    absl::StatusOr<TensorMap> result = w->RunStep(request, std::move(slices), traces);
    cancel->Unregister(id);
    if (!result.ok()) return result.status();
    // What the gRPC path does on receipt (TensorAssembler::PlaceInto).
    for (auto& [name, target] : *fetches) {
      auto it = result->find(name);
      if (it == result->end()) continue;
      const Tensor& t = it->second;
      if (t.dtype() != target.region.dtype() || t.shape() != target.region.slice_shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor '", name, "' arrived as ", DTypeName(t.dtype()), " ", t.shape().ToString(),
            " but its place holds ", DTypeName(target.region.dtype()), " ",
            target.region.slice_shape().ToString()));
      }
      target.region.Scatter(static_cast<const char*>(TensorData(t)), 0, target.region.bytes(),
                            target.whole);
      target.filled = true;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<v1::WorkerSaveCheckpointResponse> SaveCheckpoint(
      const v1::WorkerSaveCheckpointRequest& request, absl::Duration) override {
    Worker* w;
    absl::Status fail;
    {
      absl::MutexLock lock(&owner_->mu_);
      Entry& e = owner_->workers_.at(address_);
      if (!e.broken.ok()) return e.broken;
      w = e.worker.get();
      std::swap(fail, e.fail_next_save);
    }
    absl::StatusOr<std::vector<v1::CheckpointShard>> shards =
        w->SaveCheckpoint(request.session(), request.directory());
    if (!fail.ok()) return fail;
    if (!shards.ok()) return shards.status();
    v1::WorkerSaveCheckpointResponse response;
    for (v1::CheckpointShard& s : *shards) *response.add_shards() = std::move(s);
    return response;
  }

  absl::Status RestoreCheckpoint(const v1::WorkerRestoreCheckpointRequest& request,
                                 absl::Duration) override {
    Worker* w;
    {
      absl::MutexLock lock(&owner_->mu_);
      Entry& e = owner_->workers_.at(address_);
      if (!e.broken.ok()) return e.broken;
      w = e.worker.get();
    }
    return w->RestoreCheckpoint(request);
  }

  absl::Status CloseSession(const std::string& session, absl::Duration) override {
    Worker* w;
    {
      absl::MutexLock lock(&owner_->mu_);
      Entry& e = owner_->workers_.at(address_);
      if (!e.broken.ok()) return e.broken;
      w = e.worker.get();
    }
    return w->CloseSession(session);
  }

 private:
  InProcessWorkers* owner_;
  std::string address_;
};

void InProcessWorkers::AddWorker(const std::string& address, WorkerFileAccess files) {
  absl::MutexLock lock(&mu_);
  workers_[address] = Entry{std::make_unique<Worker>(&CpuKernels(), this, files), absl::OkStatus(),
                            absl::OkStatus()};
}

void InProcessWorkers::FailNextSave(const std::string& address, absl::Status status) {
  absl::MutexLock lock(&mu_);
  workers_.at(address).fail_next_save = std::move(status);
}

void InProcessWorkers::Break(const std::string& address, absl::Status status) {
  absl::MutexLock lock(&mu_);
  workers_.at(address).broken = status;
}

int InProcessWorkers::loads() const {
  absl::MutexLock lock(&mu_);
  return loads_;
}

std::string InProcessWorkers::KvPrefix(const std::string& session) const {
  absl::MutexLock lock(&mu_);
  auto it = kv_prefixes_.find(session);
  return it == kv_prefixes_.end() ? "" : it->second;
}

std::unique_ptr<WorkerClient> InProcessWorkers::Connect(const std::string& address,
                                                        const std::string& /*secret*/) {

  return std::make_unique<Client>(this, address);
}

absl::StatusOr<std::unique_ptr<Communicator>> InProcessWorkers::Create(
    const v1::SessionSpec& spec, const Mesh& mesh, const std::vector<std::vector<int>>&) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<LocalCollectiveHub>& hub = hubs_[spec.session()];
  if (hub == nullptr) {
    LocalCollectiveHub::Options options;
    options.timeout = absl::Seconds(5);
    hub = std::make_unique<LocalCollectiveHub>(mesh, options);
  }
  std::vector<int64_t> coord(spec.coordinate().begin(), spec.coordinate().end());
  return std::unique_ptr<Communicator>(
      std::make_unique<ForwardingCommunicator>(hub->communicator(mesh.ProcessorNumber(coord))));
}

}  // namespace meshrt
