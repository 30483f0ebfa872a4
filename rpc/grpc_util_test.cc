// LoadSecurity's flag checks and SecurityHint's diagnoses (the token check and TLS itself run end
// to end in tests/deploy_auth_test and tests/launch_manifests_tls_test).
#include "rpc/grpc_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "rpc/error_origin.h"

namespace meshrt {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(LoadSecurityTest, EmptyOptionsArePlaintextWithoutToken) {
  absl::StatusOr<Security> s = LoadSecurity(SecurityOptions());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->server_tls());
  EXPECT_FALSE(s->client_tls());
  EXPECT_TRUE(s->token.empty());
  EXPECT_EQ(s->Describe(), "plaintext");
}

TEST(LoadSecurityTest, ReadsFilesAndTrimsTheToken) {
  SecurityOptions o;
  o.tls_cert_file = WriteFile("cert.pem", "CERT");
  o.tls_key_file = WriteFile("key.pem", "KEY");
  o.tls_ca_file = WriteFile("ca.pem", "CA");
  o.tls_require_client_cert = true;
  o.auth_token_file = WriteFile("token", "  alice s3cret-s3cret-s3cret\n");
  absl::StatusOr<Security> s = LoadSecurity(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->cert_pem, "CERT");
  EXPECT_EQ(s->key_pem, "KEY");
  EXPECT_EQ(s->ca_pem, "CA");
  EXPECT_EQ(s->token, "s3cret-s3cret-s3cret");
  EXPECT_TRUE(s->server_tls());
  EXPECT_TRUE(s->client_tls());
  EXPECT_EQ(s->Describe(), "TLS (client certificates required), bearer token");
}

TEST(LoadSecurityTest, BadCombinationsAndFilesNameTheFlag) {
  SecurityOptions cert_only;
  cert_only.tls_cert_file = WriteFile("cert2.pem", "CERT");
  EXPECT_TRUE(absl::StrContains(LoadSecurity(cert_only).status().message(), "--tls_key"));

  SecurityOptions no_ca;
  no_ca.tls_cert_file = cert_only.tls_cert_file;
  no_ca.tls_key_file = WriteFile("key2.pem", "KEY");
  no_ca.tls_require_client_cert = true;
  EXPECT_TRUE(absl::StrContains(LoadSecurity(no_ca).status().message(), "needs --tls_ca"));

  SecurityOptions missing;
  missing.tls_ca_file = "/nonexistent/ca.pem";
  absl::Status s = LoadSecurity(missing).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--tls_ca=/nonexistent/ca.pem")) << s;

  SecurityOptions blank;
  blank.auth_token_file = WriteFile("blank", " \n");
  EXPECT_TRUE(absl::StrContains(LoadSecurity(blank).status().message(), "holds no token"));
}

TEST(SecurityHintTest, NamesTheLikelyCause) {
  Security tls;
  tls.ca_pem = "CA";
  const absl::Status handshake = absl::UnavailableError(
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:1.2.3.4:7070: Ssl "
      "handshake failed: SSL_ERROR_SSL: certificate verify failed");
  EXPECT_TRUE(absl::StartsWith(SecurityHint(handshake, tls), "the TLS handshake failed"));
  const absl::Status closed = absl::UnavailableError("ipv4:1.2.3.4:7070: Socket closed");
  EXPECT_TRUE(absl::StrContains(SecurityHint(closed, tls), "--tls_cert/--tls_key"));
  EXPECT_TRUE(absl::StrContains(SecurityHint(closed, Security()), "may require TLS"));
  // Nothing listening, or an error that is not about the connection: no hint.
  EXPECT_EQ(SecurityHint(absl::UnavailableError("Connection refused"), tls), "");
  EXPECT_EQ(SecurityHint(absl::InvalidArgumentError("bad layout"), tls), "");
}

TEST(GuardRpcTest, ExceptionsBecomeErrorsWithTheirMessage) {
  EXPECT_TRUE(GuardRpc("Ok", [] { return grpc::Status::OK; }).ok());
  grpc::Status s = GuardRpc("CreateSession", []() -> grpc::Status {
    throw std::out_of_range("map::at");
  });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "CreateSession")) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "map::at")) << s.error_message();
  s = GuardRpc("RunStep", []() -> grpc::Status { throw std::bad_alloc(); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "out of memory")) << s.error_message();
  s = GuardRpc("KvGet", []() -> grpc::Status { throw 42; });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "unknown exception")) << s.error_message();
}

TEST(ToGrpcStatusTest, LongMessagesAreCutToFitTheWire) {
  const grpc::Status short_one = ToGrpcStatus(absl::InvalidArgumentError("tensor 'x'"));
  EXPECT_EQ(short_one.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(short_one.error_message(), "tensor 'x'");
  const std::string huge = "worker 3: " + std::string(99990, 'e') + " (the cause)";
  const grpc::Status cut = ToGrpcStatus(absl::UnavailableError(huge));
  EXPECT_EQ(cut.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_LE(cut.error_message().size(), kMaxWireMessageBytes);
  EXPECT_TRUE(absl::StartsWith(cut.error_message(), "worker 3: eee")) << cut.error_message();
  EXPECT_TRUE(absl::StrContains(cut.error_message(), "cut from 100012 bytes"));
  EXPECT_TRUE(absl::EndsWith(cut.error_message(), "eee (the cause)")) << cut.error_message();
  EXPECT_TRUE(absl::StrContains(cut.error_message(), "log of the daemon"));
}

// A daemon whose stderr goes to a file names that file where a cut message says the whole text is.
TEST(ToGrpcStatusTest, ACutMessageNamesTheDaemonsLogFile) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/worker.log");
  const int saved = dup(2);
  ASSERT_GE(saved, 0);
  FILE* log = std::fopen(path.c_str(), "w");
  ASSERT_NE(log, nullptr);
  ASSERT_GE(dup2(fileno(log), 2), 0);
  SetDaemonLogName("worker");
  const grpc::Status cut = ToGrpcStatus(absl::InternalError(std::string(9000, 'x')));
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(log);
  EXPECT_TRUE(absl::StrContains(cut.error_message(),
                                absl::StrCat("the whole text is in the worker log ", path)))
      << cut.error_message();
  EXPECT_LE(cut.error_message().size(), kMaxWireMessageBytes);
  // Not a file (here: a pipe): the note still says whose log.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const int saved2 = dup(2);
  dup2(fds[1], 2);
  SetDaemonLogName("coordinator");
  dup2(saved2, 2);
  close(saved2);
  close(fds[0]);
  close(fds[1]);
  const grpc::Status piped = ToGrpcStatus(absl::InternalError(std::string(9000, 'x')));
  EXPECT_TRUE(absl::StrContains(piped.error_message(), "the coordinator log (its stderr)"))
      << piped.error_message();
}

TEST(ErrorOriginTest, MarksOnlyErrors) {
  EXPECT_TRUE(IsWorkerReported(MarkWorkerReported(absl::UnavailableError("peer died"))));
  EXPECT_FALSE(IsWorkerReported(absl::UnavailableError("step 1: peer died")));
  EXPECT_TRUE(MarkWorkerReported(absl::OkStatus()).ok());
  EXPECT_FALSE(IsWorkerReported(MarkWorkerReported(absl::OkStatus())));
}

TEST(StatusConversionTest, PayloadsSurviveTheRoundTrip) {
  absl::Status sent = MarkWorkerReported(absl::UnavailableError("step 3: peer 2 closed"));
  sent.SetPayload("type.meshrt.dev/Other", absl::Cord(std::string("a\0b", 3)));
  const grpc::Status wire = ToGrpcStatus(sent);
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(wire.error_message(), "step 3: peer 2 closed");
  EXPECT_FALSE(wire.error_details().empty());
  const absl::Status got = FromGrpcStatus(wire);
  EXPECT_EQ(got.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(got.message(), "step 3: peer 2 closed");
  EXPECT_TRUE(IsWorkerReported(got));
  EXPECT_EQ(got.GetPayload("type.meshrt.dev/Other"), absl::Cord(std::string("a\0b", 3)));
  EXPECT_EQ(got, sent);
}

TEST(StatusConversionTest, AnUnmarkedErrorArrivesUnmarked) {
  const grpc::Status wire = ToGrpcStatus(absl::DeadlineExceededError("step 3: too slow"));
  EXPECT_TRUE(wire.error_details().empty());
  const absl::Status got = FromGrpcStatus(wire);
  EXPECT_EQ(got, absl::DeadlineExceededError("step 3: too slow"));
  EXPECT_FALSE(IsWorkerReported(got));
}

TEST(StatusConversionTest, ACutMessageKeepsItsMark) {
  const absl::Status got =
      FromGrpcStatus(ToGrpcStatus(MarkWorkerReported(absl::InternalError(std::string(9000, 'x')))));
  EXPECT_EQ(got.code(), absl::StatusCode::kInternal);
  EXPECT_LE(got.message().size(), kMaxWireMessageBytes);
  EXPECT_TRUE(IsWorkerReported(got));
}

TEST(StatusConversionTest, DetailsThatDoNotParseAreIgnored) {
  for (const std::string& details : {std::string("\xff\xff\xff"), std::string("\x1a\x05" "ab")}) {
    const absl::Status got =
        FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone", details));
    EXPECT_EQ(got, absl::UnavailableError("gone"));
  }
}

}  // namespace
}  // namespace meshrt
