#include "rpc/step_stream.h"

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "google/protobuf/descriptor.h"
#include "rpc/grpc_util.h"
#include "util/logging.h"

namespace meshrt {

StepMethod::StepMethod(const char* name, std::shared_ptr<grpc::ChannelInterface> channel)
    : channel_(std::move(channel)),
      method_(name, grpc::internal::RpcMethod::BIDI_STREAMING, channel_) {}

std::unique_ptr<StepClientStream> StepMethod::Open(grpc::ClientContext* ctx) const {
  return std::unique_ptr<StepClientStream>(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_.get(), method_, ctx));
}

FrameSources BorrowedSources(const TensorMap& tensors) {
  FrameSources sources;
  for (const auto& [name, t] : tensors) {
    sources[name] = FrameSource{static_cast<const char*>(TensorData(t)),
                                TensorRegion::Whole(t.dtype(), t.shape()), nullptr};
  }
  return sources;
}

FrameSources SharedSources(const std::shared_ptr<const TensorMap>& tensors) {
  FrameSources sources;
  for (const auto& [name, t] : *tensors) {
    sources[name] = FrameSource{static_cast<const char*>(TensorData(t)),
                                TensorRegion::Whole(t.dtype(), t.shape()),
                                std::shared_ptr<const void>(tensors, &t)};
  }
  return sources;
}

v1::RunStepRequest StepHeader(const StepRequest& request) {
  v1::RunStepRequest header;
  header.set_session(request.session);
  header.set_step(request.step);
  header.set_num_steps(request.num_steps);
  for (const std::string& f : request.fetches) header.add_fetches(f);
  for (const std::string& f : request.step_fetches) header.add_step_fetches(f);
  header.set_trace_first(request.trace_first);
  header.set_trace_last(request.trace_last);
  return header;
}

StepRequest StepRequestOf(const v1::RunStepRequest& header) {
  StepRequest request;
  request.session = header.session();
  request.step = header.step();
  request.num_steps = header.num_steps();
  request.fetches.assign(header.fetches().begin(), header.fetches().end());
  request.step_fetches.assign(header.step_fetches().begin(), header.step_fetches().end());
  request.trace_first = header.trace_first();
  request.trace_last = header.trace_last();
  return request;
}

absl::Status CallStep(StepClientStream* stream, const v1::RunStepRequest& header,
                      const FrameSources& feeds, TensorAssembler* fetched,
                      std::vector<v1::StepTrace>* traces) {
  bool ok = stream->Write(EncodeMessage(header));
  for (auto it = feeds.begin(); ok && it != feeds.end(); ++it) {
    ok = ForEachFrame(it->first, it->second, kFeedField, kChunkBytes,
                      [&](const grpc::ByteBuffer& frame) { return stream->Write(frame); });
  }
  stream->WritesDone();
  absl::Status assemble;
  grpc::ByteBuffer buffer;
  v1::RunStepResponse response;
  FrameData data;
  while (stream->Read(&buffer)) {
    if (!assemble.ok()) continue;  // read to the end all the same, for the call's status
    assemble = DecodeResponse(buffer, &response, &data);
    if (assemble.ok() && response.has_fetch()) {
      assemble = fetched->Add(response.fetch(), data.pieces);
    }
    if (assemble.ok() && traces != nullptr) {
      for (v1::StepTrace& t : *response.mutable_traces()) traces->push_back(std::move(t));
    }
  }
  absl::Status status = FromGrpcStatus(stream->Finish());
  if (!status.ok()) return status;
  return assemble;
}

absl::StatusOr<TensorMap> ReadStep(StepServerStream* stream, v1::RunStepRequest* header) {
  grpc::ByteBuffer buffer;
  if (!stream->Read(&buffer)) {
    return absl::InvalidArgumentError("RunStep stream ended before its header");
  }
  FrameData data;
  absl::Status status = DecodeRequest(buffer, header, &data);
  TensorAssembler feeds;
  v1::RunStepRequest msg;
  while (stream->Read(&buffer)) {
    if (!status.ok()) continue;  // read to the end: the caller half-closes before it reads
    status = DecodeRequest(buffer, &msg, &data);
    if (status.ok()) status = feeds.Add(msg.feed(), data.pieces);
  }
  if (!status.ok()) return status;
  return feeds.Finish();
}

absl::Status WriteStepResult(StepServerStream* stream, TensorMap fetches, int64_t step,
                             std::vector<v1::StepTrace> traces) {
  // Once gRPC has sent (or dropped) the last frame, the storage goes back for the next step.
  const std::shared_ptr<const TensorMap> owned = ShareAndRecycle(std::move(fetches));
  for (const auto& [name, source] : SharedSources(owned)) {
    if (!ForEachFrame(name, source, kFetchField, kChunkBytes,
                      [&](const grpc::ByteBuffer& frame) { return stream->Write(frame); })) {
      return absl::UnavailableError("the caller went away mid-response");
    }
  }
  v1::RunStepResponse done;
  done.set_done(true);
  done.set_step(step);
  for (v1::StepTrace& t : traces) *done.add_traces() = std::move(t);
  stream->Write(EncodeMessage(done));
  return absl::OkStatus();
}

int MethodIndex(absl::string_view service, absl::string_view method) {
  const google::protobuf::ServiceDescriptor* s =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(std::string(service));
  MESHRT_CHECK(s != nullptr, "no service ", service);
  const google::protobuf::MethodDescriptor* m = s->FindMethodByName(std::string(method));
  MESHRT_CHECK(m != nullptr, "no method ", method, " in service ", service);
  return m->index();
}

}  // namespace meshrt
