// Everything gRPC-specific that the adapters share: the one place Status converts between gRPC and
// Abseil, channel and server settings (message-size limits set explicitly), transport security
// (TLS, mutual TLS, the bearer token), and the plaintext health endpoint for Kubernetes probes.
#ifndef MESHRT_RPC_GRPC_UTIL_H_
#define MESHRT_RPC_GRPC_UTIL_H_

#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "util/flags.h"

namespace meshrt {

// Largest single gRPC message meshrt sends or accepts. Tensors never travel as one message (they
// are chunked, tensor_chunks.h) but graphs and programs do; 64 MiB holds any sane graph.
inline constexpr int kMaxMessageBytes = 64 << 20;

// Longest error message sent on the wire. gRPC carries it in trailing metadata, whose default
// limit is 8 KiB: a longer message arrives as a transport error instead of the error itself.
inline constexpr size_t kMaxWireMessageBytes = 4096;

// A message over kMaxWireMessageBytes is cut (saying so, and where the whole text is: see
// SetDaemonLogName) and logged whole at ERROR first. The status's payloads (e.g. the error's
// origin, rpc/error_origin.h) travel as its binary error details, a google.rpc.Status (up to
// 1 KiB of them; the rest stay behind).
grpc::Status ToGrpcStatus(const absl::Status& status);

// Names this process's log in the messages ToGrpcStatus cuts: "the <daemon> log <path>" when
// stderr goes to a file (StderrLogPath), else "the <daemon> log (its stderr)". Daemons call it
// once at startup; until then the note says "the log of the daemon that answered".
void SetDaemonLogName(const std::string& daemon);

// --log_format text|json (util/logging.h), shared by the daemons and `meshrt local`.
void AddLogFormatFlag(FlagSet* flags, std::string* log_format);
// Sets this process's log format and its JSON "program" field; InvalidArgument naming the flag
// and the value when it is neither text nor json.
absl::Status ApplyLogFormat(absl::string_view program, const std::string& log_format);

// What a daemon does after parsing its flags: with --version prints VersionText and returns 0;
// applies --log_format, or prints why it is bad and returns 2; else nullopt (go on).
std::optional<int> HandleVersionAndLogFormat(const FlagSet& flags, absl::string_view program,
                                             const std::string& log_format);

// What `PROGRAM --version` prints: "meshrt-worker 0.1.0 (gRPC 1.51.1, protobuf 3.21.12)\n".
std::string VersionText(absl::string_view program);

// The code and message of `status`, with the payloads ToGrpcStatus put in its error details
// (details that are not a google.rpc.Status are ignored).
absl::Status FromGrpcStatus(const grpc::Status& status);

// Transport security of one process, as given by its flags (AddSecurityFlags). Every field empty
// or false = plaintext without a token (the local cluster on loopback).
struct SecurityOptions {
  // PEM certificate chain and private key. A server (coordinator, worker) serves TLS with them; a
  // client presents them when the server requires client certificates (mutual TLS). Both or none.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA certificates. A client verifies the server's certificate with them (and uses TLS when
  // this is set); a server verifies client certificates with them.
  std::string tls_ca_file;
  // Server: require a client certificate signed by tls_ca_file (mutual TLS).
  bool tls_require_client_cert = false;
  // Client: check the server's certificate against this name instead of the host in the address
  // (e.g. when connecting by IP).
  std::string tls_server_name;
  // Client only: a file holding the bearer token to send on every call (rpc/auth.h: its first
  // line, "TOKEN" or "NAME TOKEN"). Daemons configure their tokens with their own flags.
  std::string auth_token_file;
};

// The loaded material; cheap to copy, immutable, thread-safe.
struct Security {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  bool require_client_cert = false;
  std::string server_name;
  std::string token;

  // A server serves TLS when it has a certificate.
  bool server_tls() const { return !cert_pem.empty(); }
  // A client uses TLS when it has a CA (or a certificate to present).
  bool client_tls() const { return !ca_pem.empty() || !cert_pem.empty(); }
  // One line for logs: "TLS (client certificates required), bearer token" / "plaintext".
  std::string Describe() const;
};

// Registers --tls_cert, --tls_key, --tls_ca, --tls_require_client_cert (when `server`),
// --tls_server_name and --auth_token_file (when not `server`) on `flags`, writing to `options`
// (borrowed; must outlive the parse).
void AddSecurityFlags(FlagSet* flags, SecurityOptions* options, bool server);

// Reads the files. InvalidArgument naming the flag for an unreadable or empty file, a certificate
// without its key (or the reverse), or client certificates required without a CA.
absl::StatusOr<Security> LoadSecurity(const SecurityOptions& options);

// TLS server credentials when `security.server_tls()`, plaintext otherwise.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const Security& security);

// A channel to `address` with meshrt's message limits; TLS when `security.client_tls()`.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const Security& security = Security());

// Adds the bearer token (if any) to an outgoing call.
void AttachToken(grpc::ClientContext* context, const Security& security);

// Logs and builds GuardRpc's error.
grpc::Status GuardedFailure(const char* rpc, grpc::StatusCode code, const std::string& what);

// Runs a handler body `fn` (returning grpc::Status) so that no exception escapes to gRPC (which
// would answer UNKNOWN without a message): std::bad_alloc becomes ResourceExhausted, any other
// exception Internal, each naming `rpc` and carrying the exception's message.
template <typename Fn>
grpc::Status GuardRpc(const char* rpc, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return GuardedFailure(rpc, grpc::StatusCode::RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception& e) {
    return GuardedFailure(rpc, grpc::StatusCode::INTERNAL, e.what());
  } catch (...) {
    return GuardedFailure(rpc, grpc::StatusCode::INTERNAL, "an unknown exception");
  }
}
// The call's `authorization` metadata value, "" when absent (checked by rpc/auth.h).
std::string AuthorizationOf(const grpc::ServerContext& context);

// When an RPC to a TLS or token-protected peer fails, the likely cause in words (wrong CA, no
// client certificate, plaintext vs TLS, token), to append to the error; "" when none applies.
std::string SecurityHint(const absl::Status& status, const Security& security);

// Applies meshrt's message limits to a server being built, turns SO_REUSEPORT off (a second
// daemon on a port in use must fail to start, not share the port), and makes an undecodable
// request InvalidArgument naming the method (gRPC's own answer is INTERNAL without a message).
void ConfigureServer(grpc::ServerBuilder* builder);

// Sets a deadline `timeout` from now on `context`.
void SetTimeout(grpc::ClientContext* context, absl::Duration timeout);

// A plaintext server on `host:port` with only the standard gRPC health service: Kubernetes' gRPC
// probes cannot speak TLS, so a TLS daemon answers them here. Nothing else is served on it.
// Returns null (and logs why) when the port cannot be bound.
std::unique_ptr<grpc::Server> StartHealthServer(const std::string& host, int port);

// Asks the standard health service at `channel` about `service` ("" = the whole server), like
// Kubernetes' gRPC probe. Returns whether it is SERVING; the call's error otherwise (NotFound for
// a service the server does not know).
absl::StatusOr<bool> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::string& service, absl::Duration timeout);

// Sets `service`'s health status on each non-null server (service "" is the whole server).
void SetHealth(std::initializer_list<grpc::Server*> servers, const std::string& service,
               bool serving);

}  // namespace meshrt

#endif  // MESHRT_RPC_GRPC_UTIL_H_
