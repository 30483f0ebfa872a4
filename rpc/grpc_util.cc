#include "rpc/grpc_util.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/support/server_interceptor.h"
#include "rpc/auth.h"
#include "util/logging.h"
#include "util/status_macros.h"
#include "util/version.h"

namespace meshrt {
namespace {

constexpr char kAuthorization[] = "authorization";
constexpr char kBearer[] = "Bearer ";

absl::Mutex log_name_mu;
std::string* log_name ABSL_GUARDED_BY(log_name_mu) = nullptr;  // SetDaemonLogName's

std::string DaemonLogName() {
  absl::MutexLock lock(&log_name_mu);
  return log_name != nullptr ? *log_name : "the log of the daemon that answered";
}

// `message` as sent on the wire: over kMaxWireMessageBytes it is cut, keeping its head (what
// failed) and its tail (usually why), and logged whole first.
std::string WireMessage(absl::string_view message) {
  if (message.size() <= kMaxWireMessageBytes) return std::string(message);
  LogError("error too long for the wire (", message.size(), " bytes), in full: ", message);
  const std::string note = absl::StrCat(" ... [cut from ", message.size(),
                                        " bytes; the whole text is in ", DaemonLogName(), "] ... ");
  const size_t tail = 512;
  const size_t head = kMaxWireMessageBytes - note.size() - tail;
  return absl::StrCat(message.substr(0, head), note, message.substr(message.size() - tail));
}

// google.rpc.Status field and google.protobuf.Any field numbers: the binary error details are a
// google.rpc.Status (what every gRPC library expects there), written by hand so that meshrt needs
// no googleapis protos.
constexpr int kStatusCodeField = 1;
constexpr int kStatusMessageField = 2;
constexpr int kStatusDetailsField = 3;
constexpr int kAnyTypeUrlField = 1;
constexpr int kAnyValueField = 2;
// Payloads ride in trailing metadata (8 KiB by default, kMaxWireMessageBytes of it the message):
// larger ones stay behind rather than turn the error into a transport failure.
constexpr size_t kMaxWirePayloadBytes = 1024;

void WriteBytesField(int field, absl::string_view bytes,
                     google::protobuf::io::CodedOutputStream* out) {
  out->WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
      field, google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  out->WriteVarint32(static_cast<uint32_t>(bytes.size()));
  out->WriteRaw(bytes.data(), static_cast<int>(bytes.size()));
}

// `status`'s payloads as a serialized google.rpc.Status with `message`; "" when it has none.
std::string EncodeStatusDetails(const absl::Status& status, absl::string_view message) {
  std::string details, any;
  size_t payload_bytes = 0;
  {
    google::protobuf::io::StringOutputStream sink(&details);
    google::protobuf::io::CodedOutputStream out(&sink);
    status.ForEachPayload([&](absl::string_view type_url, const absl::Cord& value) {
      payload_bytes += type_url.size() + value.size();
      if (payload_bytes > kMaxWirePayloadBytes) return;
      any.clear();
      {
        google::protobuf::io::StringOutputStream any_sink(&any);
        google::protobuf::io::CodedOutputStream any_out(&any_sink);
        WriteBytesField(kAnyTypeUrlField, type_url, &any_out);
        WriteBytesField(kAnyValueField, std::string(value), &any_out);
      }
      WriteBytesField(kStatusDetailsField, any, &out);
    });
    if (out.ByteCount() == 0) return "";
    out.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
        kStatusCodeField, google::protobuf::internal::WireFormatLite::WIRETYPE_VARINT));
    out.WriteVarint32(static_cast<uint32_t>(status.code()));
    WriteBytesField(kStatusMessageField, message, &out);
  }
  return details;
}

// Reads one google.protobuf.Any; false when `bytes` is not one.
bool ReadAny(const std::string& bytes, std::string* type_url, std::string* value) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    const int field = google::protobuf::internal::WireFormatLite::GetTagFieldNumber(tag);
    std::string* into = field == kAnyTypeUrlField ? type_url
                        : field == kAnyValueField ? value
                                                  : nullptr;
    if (into == nullptr) {
      if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) return false;
    } else if (!google::protobuf::internal::WireFormatLite::ReadString(&in, into)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

// Sets on `status` the payloads of the serialized google.rpc.Status `details` (EncodeStatusDetails);
// details that do not parse are ignored (a peer may send what it likes there).
void RestorePayloads(const std::string& details, absl::Status* status) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(details.data()),
                                            static_cast<int>(details.size()));
  std::vector<std::pair<std::string, std::string>> payloads;
  while (const uint32_t tag = in.ReadTag()) {
    std::string any, type_url, value;
    if (google::protobuf::internal::WireFormatLite::GetTagFieldNumber(tag) != kStatusDetailsField) {
      if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) return;
    } else if (!google::protobuf::internal::WireFormatLite::ReadString(&in, &any) ||
               !ReadAny(any, &type_url, &value)) {
      return;
    } else {
      payloads.emplace_back(std::move(type_url), std::move(value));
    }
  }
  if (!in.ConsumedEntireMessage()) return;
  for (auto& [type_url, value] : payloads) status->SetPayload(type_url, absl::Cord(value));
}

}  // namespace

void SetDaemonLogName(const std::string& daemon) {
  const std::string path = StderrLogPath();
  std::string name = path.empty() ? absl::StrCat("the ", daemon, " log (its stderr)")
                                  : absl::StrCat("the ", daemon, " log ", Abbreviated(path, 400));
  absl::MutexLock lock(&log_name_mu);
  delete log_name;
  log_name = new std::string(std::move(name));
}

void AddLogFormatFlag(FlagSet* flags, std::string* log_format) {
  flags->String("log_format", log_format, kLogFormatHelp);
}

absl::Status ApplyLogFormat(absl::string_view program, const std::string& log_format) {
  ASSIGN_OR_RETURN(LogFormat format, ParseLogFormat(log_format));
  SetLogFormat(format);
  SetLogProgram(program);
  return absl::OkStatus();
}

std::optional<int> HandleVersionAndLogFormat(const FlagSet& flags, absl::string_view program,
                                             const std::string& log_format) {
  if (flags.version()) {
    std::cout << VersionText(program);
    return 0;
  }
  if (absl::Status s = ApplyLogFormat(program, log_format); !s.ok()) {
    std::cerr << program << ": " << s.message() << std::endl;
    return 2;
  }
  return std::nullopt;
}

std::string VersionText(absl::string_view program) {
  const int pb = GOOGLE_PROTOBUF_VERSION;  // e.g. 3021012
  return absl::StrCat(program, " ", kMeshrtVersion, " (gRPC ", grpc::Version(), ", protobuf ",
                      pb / 1000000, ".", pb / 1000 % 1000, ".", pb % 1000, ")\n");
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  const auto code = static_cast<grpc::StatusCode>(status.code());
  const std::string message = WireMessage(status.message());
  const std::string details = EncodeStatusDetails(status, message);
  return details.empty() ? grpc::Status(code, message) : grpc::Status(code, message, details);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status converted(static_cast<absl::StatusCode>(status.error_code()),
                         status.error_message());
  RestorePayloads(status.error_details(), &converted);
  return converted;
}

std::string Security::Describe() const {
  std::vector<std::string> parts;
  if (server_tls() || client_tls()) {
    parts.push_back(require_client_cert ? "TLS (client certificates required)" : "TLS");
  } else {
    parts.push_back("plaintext");
  }
  if (!token.empty()) parts.push_back("bearer token");
  return absl::StrJoin(parts, ", ");
}

void AddSecurityFlags(FlagSet* flags, SecurityOptions* options, bool server) {
  flags->String("tls_cert", &options->tls_cert_file,
                server ? "PEM certificate chain this daemon serves TLS with and presents to peers "
                         "(with --tls_key; default: empty, plaintext)"
                       : "PEM client certificate, for servers that require one (with --tls_key)");
  flags->String("tls_key", &options->tls_key_file, "PEM private key of --tls_cert");
  flags->String("tls_ca", &options->tls_ca_file,
                server ? "PEM CA certificates that verify peers: the servers this daemon calls, "
                         "and clients' certificates with --tls_require_client_cert"
                       : "PEM CA certificates that verify the coordinator's certificate; "
                         "turns TLS on");
  if (server) {
    flags->Bool("tls_require_client_cert", &options->tls_require_client_cert,
                "require callers to present a certificate signed by --tls_ca (mutual TLS)");
  } else {
    flags->String("tls_server_name", &options->tls_server_name,
                  "name the coordinator's certificate must carry, when it differs from the "
                  "address's host (e.g. connecting by IP)");
  }
  if (!server) {
    flags->String("auth_token_file", &options->auth_token_file,
                  "file with the client (or operator) token the coordinator requires; default: "
                  "for a coordinator on this machine's loopback, the token it generated "
                  "($MESHRT_HOME or ~/.meshrt, <port>/client.token)");
  }
}

absl::StatusOr<Security> LoadSecurity(const SecurityOptions& options) {
  Security s;
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together: give both or neither");
  }
  if (options.tls_require_client_cert && options.tls_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_require_client_cert needs --tls_ca (the CA that signs client certificates)");
  }
  if (options.tls_require_client_cert && options.tls_cert_file.empty()) {
    return absl::InvalidArgumentError("--tls_require_client_cert needs --tls_cert and --tls_key");
  }
  if (!options.tls_cert_file.empty()) {
    auto cert = ReadFlagFile(options.tls_cert_file, "tls_cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadFlagFile(options.tls_key_file, "tls_key");
    if (!key.ok()) return key.status();
    s.cert_pem = *std::move(cert);
    s.key_pem = *std::move(key);
  }
  if (!options.tls_ca_file.empty()) {
    auto ca = ReadFlagFile(options.tls_ca_file, "tls_ca");
    if (!ca.ok()) return ca.status();
    s.ca_pem = *std::move(ca);
  }
  s.require_client_cert = options.tls_require_client_cert;
  s.server_name = options.tls_server_name;
  if (!options.auth_token_file.empty()) {
    auto token = ReadOwnToken(options.auth_token_file, "auth_token_file");
    if (!token.ok()) return token.status();
    s.token = *std::move(token);
  }
  return s;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const Security& security) {
  if (!security.server_tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      security.require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                   : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = security.ca_pem;
  options.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const Security& security) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Fail fast and reconnect quickly: a dead peer must surface within seconds.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (!security.client_tls()) {
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = security.ca_pem;
  ssl.pem_private_key = security.key_pem;
  ssl.pem_cert_chain = security.cert_pem;
  if (!security.server_name.empty()) args.SetSslTargetNameOverride(security.server_name);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
}

void AttachToken(grpc::ClientContext* context, const Security& security) {
  if (!security.token.empty()) context->AddMetadata(kAuthorization, kBearer + security.token);
}

grpc::Status GuardedFailure(const char* rpc, grpc::StatusCode code, const std::string& what) {
  const std::string message =
      absl::StrCat(rpc, " failed on an unexpected error (please report it): ", what);
  LogError(message);
  return grpc::Status(code, message);
}

std::string AuthorizationOf(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAuthorization);
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

std::string SecurityHint(const absl::Status& status, const Security& security) {
  if (status.code() != absl::StatusCode::kUnavailable &&
      status.code() != absl::StatusCode::kDeadlineExceeded) {
    return "";
  }
  const std::string message = absl::AsciiStrToLower(status.message());
  if (absl::StrContains(message, "connection refused") ||
      absl::StrContains(message, "failed to connect to remote host") ||
      absl::StrContains(message, "dns resolution failed")) {
    return "";  // nothing listens there: not a security problem
  }
  const bool handshake =
      absl::StrContains(message, "ssl") || absl::StrContains(message, "handshake") ||
      absl::StrContains(message, "certificate") || absl::StrContains(message, "tls");
  if (security.client_tls()) {
    return absl::StrCat(
        handshake ? "the TLS handshake failed" : "TLS is on",
        ": check that --tls_ca holds the CA that signed the server's certificate, that the "
        "certificate names the host you connect to (or give --tls_server_name), that the "
        "server serves TLS, and, if it requires client certificates, that --tls_cert/--tls_key "
        "are signed by its CA");
  }
  if (handshake || absl::StrContains(message, "socket closed") ||
      absl::StrContains(message, "connection reset") ||
      absl::StrContains(message, "end of tcp stream") || absl::StrContains(message, "eof")) {
    return "the server may require TLS: give --tls_ca (and --tls_cert/--tls_key for mutual TLS)";
  }
  return "";
}

namespace {

// gRPC answers a request it cannot decode with INTERNAL and an empty message (proto3 has no
// required fields to name). This rewrites exactly that status to InvalidArgument naming the
// method: a malformed request is the caller's error, not the server's.
class DecodeErrorInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit DecodeErrorInterceptor(grpc::experimental::ServerRpcInfo* info)
      : method_(info->method() != nullptr ? info->method() : "?") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::INTERNAL &&
          (status.error_message().empty() || status.error_message() == "No payload")) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("the request to ", method_,
                         status.error_message().empty()
                             ? " could not be decoded: it is not a valid protobuf message of "
                               "the method's request type"
                             : " carried no message")));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
};

class DecodeErrorInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new DecodeErrorInterceptor(info);
  }
};

}  // namespace

void ConfigureServer(grpc::ServerBuilder* builder) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<DecodeErrorInterceptorFactory>());
  builder->experimental().SetInterceptorCreators(std::move(interceptors));
  builder->SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder->SetMaxSendMessageSize(kMaxMessageBytes);
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

void SetTimeout(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
}

std::unique_ptr<grpc::Server> StartHealthServer(const std::string& host, int port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int bound = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", port), grpc::InsecureServerCredentials(),
                           &bound);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) return nullptr;
  return server;
}

absl::StatusOr<bool> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::string& service, absl::Duration timeout) {
  // grpc.health.v1.HealthCheckRequest{string service = 1}, encoded by hand: the health protos are
  // not among Debian's generated headers.
  if (service.size() > 127) return absl::InvalidArgumentError("health service name too long");
  std::string request_bytes;
  if (!service.empty()) {
    request_bytes.push_back('\x0a');
    request_bytes.push_back(static_cast<char>(service.size()));
    request_bytes += service;
  }
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  SetTimeout(&ctx, timeout);
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);  // the deadline bounds this wait
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  // HealthCheckResponse{ServingStatus status = 1}: SERVING = 1 is "\x08\x01".
  return bytes == std::string("\x08\x01", 2);
}

void SetHealth(std::initializer_list<grpc::Server*> servers, const std::string& service,
               bool serving) {
  for (grpc::Server* server : servers) {
    if (server == nullptr || server->GetHealthCheckService() == nullptr) continue;
    if (service.empty()) {
      server->GetHealthCheckService()->SetServingStatus(serving);
    } else {
      server->GetHealthCheckService()->SetServingStatus(service, serving);
    }
  }
}

}  // namespace meshrt
