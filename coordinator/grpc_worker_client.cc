#include "coordinator/grpc_worker_client.h"

#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/step_stream.h"

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
      : security_(WithToken(security, secret)),
        stub_(v1::Worker::NewStub(MakeChannel(address, security))) {}

  absl::Status LoadSession(const v1::SessionSpec& spec, absl::Duration timeout) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    AttachToken(&ctx, security_);
    v1::LoadSessionResponse response;
    return FromGrpcStatus(stub_->LoadSession(&ctx, spec, &response));
  }

  absl::StatusOr<TensorMap> RunStep(const std::string& session, int64_t step,
                                    const TensorMap& feeds, const std::vector<std::string>& fetches,
                                    const std::vector<std::string>& step_fetches,
                                    int64_t num_steps, absl::Duration timeout,
                                    Cancellation* cancel) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    AttachToken(&ctx, security_);
    int id = cancel != nullptr ? cancel->Register([&ctx] { ctx.TryCancel(); }) : -1;
    absl::StatusOr<TensorMap> result = RunStepOn(&ctx, session, step, feeds, fetches, step_fetches, num_steps);
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
  absl::StatusOr<TensorMap> RunStepOn(grpc::ClientContext* ctx, const std::string& session,
                                      int64_t step, const TensorMap& feeds,
                                      const std::vector<std::string>& fetches,
                                      const std::vector<std::string>& step_fetches,
                                      int64_t num_steps) {
    // Send the call's metadata with the header message: one write less per step.
    ctx->set_initial_metadata_corked(true);
    auto stream = stub_->RunStep(ctx);
    v1::RunStepRequest header;
    header.set_session(session);
    header.set_step(step);
    header.set_num_steps(num_steps);
    for (const std::string& f : fetches) header.add_fetches(f);
    for (const std::string& f : step_fetches) header.add_step_fetches(f);
    return CallStep(stream.get(), header, feeds);
  }

  const Security security_;
  std::unique_ptr<v1::Worker::Stub> stub_;
};

}  // namespace

std::unique_ptr<WorkerClient> GrpcWorkerClientFactory::Connect(const std::string& address,
                                                               const std::string& secret) {
  return std::make_unique<GrpcWorkerClient>(address, security_, secret);
}

}  // namespace meshrt
