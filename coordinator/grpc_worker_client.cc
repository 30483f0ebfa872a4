#include "coordinator/grpc_worker_client.h"

#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/tensor_chunks.h"

namespace meshrt {
namespace {

class GrpcWorkerClient : public WorkerClient {
 public:
  explicit GrpcWorkerClient(const std::string& address)
      : stub_(v1::Worker::NewStub(MakeChannel(address))) {}

  absl::Status LoadSession(const v1::SessionSpec& spec, absl::Duration timeout) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    v1::LoadSessionResponse response;
    return FromGrpcStatus(stub_->LoadSession(&ctx, spec, &response));
  }

  absl::StatusOr<TensorMap> RunStep(const std::string& session, int64_t step,
                                    const TensorMap& feeds, const std::vector<std::string>& fetches,
                                    absl::Duration timeout, Cancellation* cancel) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    int id = cancel != nullptr ? cancel->Register([&ctx] { ctx.TryCancel(); }) : -1;
    absl::StatusOr<TensorMap> result = RunStepOn(&ctx, session, step, feeds, fetches);
    if (cancel != nullptr) cancel->Unregister(id);
    return result;
  }

  absl::Status CloseSession(const std::string& session, absl::Duration timeout) override {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, timeout);
    v1::CloseSessionRequest request;
    request.set_session(session);
    v1::CloseSessionResponse response;
    return FromGrpcStatus(stub_->CloseSession(&ctx, request, &response));
  }

 private:
  absl::StatusOr<TensorMap> RunStepOn(grpc::ClientContext* ctx, const std::string& session,
                                      int64_t step, const TensorMap& feeds,
                                      const std::vector<std::string>& fetches) {
    auto stream = stub_->RunStep(ctx);
    v1::RunStepRequest header;
    header.set_session(session);
    header.set_step(step);
    for (const std::string& f : fetches) header.add_fetches(f);
    bool ok = stream->Write(header);
    for (auto it = feeds.begin(); ok && it != feeds.end(); ++it) {
      absl::Status s = ForEachChunk(it->first, it->second, [&](v1::TensorChunk& chunk) {
        v1::RunStepRequest msg;
        msg.mutable_feed()->Swap(&chunk);
        return stream->Write(msg) ? absl::OkStatus() : absl::UnavailableError("stream broken");
      });
      ok = s.ok();
    }
    stream->WritesDone();
    TensorAssembler fetched;
    v1::RunStepResponse response;
    absl::Status assemble = absl::OkStatus();
    while (stream->Read(&response)) {
      if (response.has_fetch() && assemble.ok()) assemble = fetched.Add(*response.mutable_fetch());
    }
    absl::Status status = FromGrpcStatus(stream->Finish());
    if (!status.ok()) return status;
    if (!assemble.ok()) return assemble;
    return fetched.Finish();
  }

  std::unique_ptr<v1::Worker::Stub> stub_;
};

}  // namespace

std::unique_ptr<WorkerClient> GrpcWorkerClientFactory::Connect(const std::string& address) {
  return std::make_unique<GrpcWorkerClient>(address);
}

}  // namespace meshrt
