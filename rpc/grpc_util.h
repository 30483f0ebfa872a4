// Everything gRPC-specific that the adapters share: the one place Status converts between gRPC and
// Abseil, channel and server settings (message-size limits set explicitly), and tensor chunking.
#ifndef MESHRT_RPC_GRPC_UTIL_H_
#define MESHRT_RPC_GRPC_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace meshrt {

// Largest single gRPC message meshrt sends or accepts. Tensors never travel as one message (they
// are chunked, tensor_chunks.h) but graphs and programs do; 64 MiB holds any sane graph.
inline constexpr int kMaxMessageBytes = 64 << 20;

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// A channel to `address` with meshrt's message limits.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// Applies meshrt's message limits to a server being built.
void ConfigureServer(grpc::ServerBuilder* builder);

// Sets a deadline `timeout` from now on `context`.
void SetTimeout(grpc::ClientContext* context, absl::Duration timeout);

}  // namespace meshrt

#endif  // MESHRT_RPC_GRPC_UTIL_H_
