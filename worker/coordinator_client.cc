#include "worker/coordinator_client.h"

#include "absl/strings/str_cat.h"
#include "rpc/grpc_util.h"

namespace meshrt {

GrpcCoordinatorClient::GrpcCoordinatorClient(const std::string& address, const Security& security)
    : address_(address),
      security_(security),
      stub_(v1::Coordinator::NewStub(MakeChannel(address, security))) {}

void GrpcCoordinatorClient::set_token(const std::string& token) {
  absl::MutexLock lock(&mu_);
  security_.token = token;
}

void GrpcCoordinatorClient::Attach(grpc::ClientContext* ctx) const {
  absl::MutexLock lock(&mu_);
  AttachToken(ctx, security_);
}

absl::StatusOr<v1::RegisterWorkerResponse> GrpcCoordinatorClient::Register(
    const v1::RegisterWorkerRequest& request, absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, timeout);
  Attach(&ctx);
  v1::RegisterWorkerResponse response;
  absl::Status s = FromGrpcStatus(stub_->RegisterWorker(&ctx, request, &response));
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> GrpcCoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& request, absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, timeout);
  Attach(&ctx);
  v1::HeartbeatResponse response;
  absl::Status s = FromGrpcStatus(stub_->Heartbeat(&ctx, request, &response));
  if (!s.ok()) return s;
  return response;
}

absl::Status GrpcCoordinatorClient::Deregister(const v1::DeregisterWorkerRequest& request,
                                               absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, timeout);
  Attach(&ctx);
  v1::DeregisterWorkerResponse response;
  return FromGrpcStatus(stub_->DeregisterWorker(&ctx, request, &response));
}

absl::Status GrpcCoordinatorClient::Set(const std::string& key, const std::string& value) {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, absl::Seconds(30));
  Attach(&ctx);
  v1::KvSetRequest request;
  request.set_key(key);
  request.set_value(value);
  v1::KvSetResponse response;
  return FromGrpcStatus(stub_->KvSet(&ctx, request, &response));
}

absl::StatusOr<std::string> GrpcCoordinatorClient::Get(const std::string& key,
                                                       absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, timeout + absl::Seconds(5));  // the server answers at `timeout` itself
  Attach(&ctx);
  v1::KvGetRequest request;
  request.set_key(key);
  request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  v1::KvGetResponse response;
  absl::Status s = FromGrpcStatus(stub_->KvGet(&ctx, request, &response));
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("key-value get of '", key, "' from coordinator ",
                                               address_, ": ", s.message()));
  }
  return std::move(*response.mutable_value());
}

}  // namespace meshrt
