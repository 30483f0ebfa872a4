#include "coordinator/grpc_worker_client.h"

#include "core/ir/slicing.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/step_stream.h"
#include "util/status_macros.h"

namespace meshrt {
namespace {

Security WithToken(Security security, const std::string& token) {
  security.token = token;
  return security;
}

class GrpcWorkerClient : public WorkerClient {
 public:
  // Every call carries `secret`, the worker's own credential, instead of any token of ours.
  GrpcWorkerClient(const std::string& address, const Security& security, const std::string& secret)
      : GrpcWorkerClient(MakeChannel(address, security), WithToken(security, secret)) {}

  absl::Status LoadSession(const v1::SessionSpec& spec, absl::Duration timeout) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    AttachToken(&ctx, security_);
    v1::LoadSessionResponse response;
    return FromGrpcStatus(stub_->LoadSession(&ctx, spec, &response));
  }

  absl::Status RunStep(const StepRequest& request, const FeedSlices& feeds,
                       FetchTargets* fetches, absl::Duration timeout, Cancellation* cancel,
                       std::vector<v1::StepTrace>* traces) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    AttachToken(&ctx, security_);
    int id = cancel != nullptr ? cancel->Register([&ctx] { ctx.TryCancel(); }) : -1;
    absl::Status result = RunStepOn(&ctx, request, feeds, fetches, traces);
    if (cancel != nullptr) cancel->Unregister(id);
    return result;
  }

  absl::StatusOr<v1::WorkerSaveCheckpointResponse> SaveCheckpoint(
      const v1::WorkerSaveCheckpointRequest& request, absl::Duration timeout) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    AttachToken(&ctx, security_);
    v1::WorkerSaveCheckpointResponse response;
    absl::Status s = FromGrpcStatus(stub_->SaveCheckpoint(&ctx, request, &response));
    if (!s.ok()) return s;
    return response;
  }

  absl::Status RestoreCheckpoint(const v1::WorkerRestoreCheckpointRequest& request,
                                 absl::Duration timeout) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    AttachToken(&ctx, security_);
    v1::WorkerRestoreCheckpointResponse response;
    return FromGrpcStatus(stub_->RestoreCheckpoint(&ctx, request, &response));
  }

  absl::Status CloseSession(const std::string& session, absl::Duration timeout) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    AttachToken(&ctx, security_);
    v1::CloseSessionRequest request;
    request.set_session(session);
    v1::CloseSessionResponse response;
    return FromGrpcStatus(stub_->CloseSession(&ctx, request, &response));
  }

 private:
  GrpcWorkerClient(std::shared_ptr<grpc::Channel> channel, Security security)
      : security_(std::move(security)),
        stub_(v1::Worker::NewStub(channel)),
        run_step_(kWorkerRunStep, channel) {}

  absl::Status RunStepOn(grpc::ClientContext* ctx, const StepRequest& request,
                         const FeedSlices& feeds, FetchTargets* fetches,
                         std::vector<v1::StepTrace>* traces) {
    // Send the call's metadata with the header message: one write less per step.
    ctx->set_initial_metadata_corked(true);
    auto stream = run_step_.Open(ctx);
    const v1::RunStepRequest header = StepHeader(request);
    // The slices go from the whole feeds onto the wire, and from the wire into the whole fetches.
    FrameSources sources;
    for (const auto& [name, slice] : feeds) {
      sources[name] = FrameSource{static_cast<const char*>(TensorData(*slice.whole)),
                                  slice.region, slice.whole};
    }
    TensorAssembler fetched;
    for (const auto& [name, target] : *fetches) {
      fetched.PlaceInto(name, target.whole, target.region);
    }
    RETURN_IF_ERROR(CallStep(stream.get(), header, sources, &fetched, traces));
    for (auto& [name, target] : *fetches) target.filled = fetched.Complete(name);
    return fetched.Finish().status();
  }

  const Security security_;
  std::unique_ptr<v1::Worker::Stub> stub_;
  const StepMethod run_step_;
};

}  // namespace

std::unique_ptr<WorkerClient> GrpcWorkerClientFactory::Connect(const std::string& address,
                                                               const std::string& secret) {
  return std::make_unique<GrpcWorkerClient>(address, security_, secret);
}

}  // namespace meshrt
