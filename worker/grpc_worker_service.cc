#include "worker/grpc_worker_service.h"

#include "rpc/grpc_util.h"
#include "rpc/step_stream.h"

namespace meshrt {

grpc::Status GrpcWorkerService::LoadSession(grpc::ServerContext*, const v1::SessionSpec* request,
                                            v1::LoadSessionResponse*) {
  return ToGrpcStatus(worker_->LoadSession(*request));
}

grpc::Status GrpcWorkerService::RunStep(
    grpc::ServerContext*, grpc::ServerReaderWriter<v1::RunStepResponse, v1::RunStepRequest>* stream) {
  v1::RunStepRequest header;
  absl::StatusOr<TensorMap> fed = ReadStep(stream, &header);
  if (!fed.ok()) return ToGrpcStatus(fed.status());
  std::vector<std::string> fetches(header.fetches().begin(), header.fetches().end());
  absl::StatusOr<TensorMap> out = worker_->RunStep(header.session(), header.step(), *fed, fetches);
  if (!out.ok()) return ToGrpcStatus(out.status());
  return ToGrpcStatus(WriteStepResult(stream, *out, header.step()));
}

grpc::Status GrpcWorkerService::CloseSession(grpc::ServerContext*,
                                             const v1::CloseSessionRequest* request,
                                             v1::CloseSessionResponse*) {
  return ToGrpcStatus(worker_->CloseSession(request->session()));
}

}  // namespace meshrt
