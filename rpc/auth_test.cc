#include "rpc/auth.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-0123456789ab";
constexpr char kOperator[] = "operator-token-0123456789";
constexpr char kMember[] = "member-token-0123456789";

std::string Bearer(const std::string& token) { return "Bearer " + token; }

Authenticator Configured() {
  Authenticator::Options o;
  o.clients = {{"alice", kAlice}, {"bob", kBob}};
  o.operators = {{"", kOperator}};
  o.member_token = kMember;
  return Authenticator(o);
}

TEST(ParseTokenFileTest, NamesAndBareTokens) {
  auto parsed = ParseTokenFile(absl::StrCat("# comment\n\nalice ", kAlice, "\n  ", kBob, "  \n"),
                               "auth_token_file", "client");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].name, "alice");
  EXPECT_EQ((*parsed)[0].token, kAlice);
  EXPECT_EQ((*parsed)[1].name, "client");
  EXPECT_EQ((*parsed)[1].token, kBob);
}

TEST(ParseTokenFileTest, RefusesShortEmptyAndMalformed) {
  absl::Status s = ParseTokenFile("short\n", "auth_token_file", "c").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--auth_token_file")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "shorter than 16")) << s;
  s = ParseTokenFile(" \n# only a comment\n", "cluster_token_file", "c").status();
  EXPECT_TRUE(absl::StrContains(s.message(), "--cluster_token_file: the file holds no token")) << s;
  s = ParseTokenFile("a b c\n", "auth_token_file", "c").status();
  EXPECT_TRUE(absl::StrContains(s.message(), "line 1 has 3 fields")) << s;
}

TEST(AuthenticatorTest, ClientsOperatorsAndMembersAreToldApart) {
  const Authenticator auth = Configured();
  auto alice = auth.CheckClient(Bearer(kAlice));
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ(alice->role, Role::kClient);
  EXPECT_EQ(alice->name, "alice");
  EXPECT_FALSE(alice->may_access_any_session());
  auto op = auth.CheckClient(Bearer(kOperator));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->role, Role::kOperator);
  EXPECT_TRUE(op->may_access_any_session());
  EXPECT_TRUE(auth.CheckMember(Bearer(kMember)).ok());
}

TEST(AuthenticatorTest, RolesNeverMix) {
  const Authenticator auth = Configured();
  absl::Status s = auth.CheckClient(Bearer(kMember)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(s.message(), "--cluster_token_file")) << s;
  for (const char* token : {kAlice, kOperator}) {
    s = auth.CheckMember(Bearer(token));
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << token;
    EXPECT_TRUE(absl::StrContains(s.message(), "member RPCs")) << s;
  }
}

TEST(AuthenticatorTest, MissingAndWrongTokensAreUnauthenticated) {
  const Authenticator auth = Configured();
  absl::Status s = auth.CheckClient("").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(s.message(), "missing bearer token")) << s;
  s = auth.CheckClient(Bearer("not-a-token-of-this-cluster")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(s.message(), "rejected")) << s;
  s = auth.CheckClient(kAlice).status();  // without "Bearer "
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  s = auth.CheckMember("");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(s.message(), "--cluster_token_file")) << s;
  // A prefix of a valid token is not valid.
  s = auth.CheckMember(Bearer(std::string(kMember).substr(0, 10)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
}

TEST(AuthenticatorTest, NothingConfiguredRefusesUnlessOpen) {
  Authenticator closed({});
  EXPECT_EQ(closed.CheckClient("").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(closed.CheckMember("").code(), absl::StatusCode::kUnauthenticated);
  Authenticator::Options o;
  o.open = true;
  Authenticator open(o);
  EXPECT_TRUE(open.CheckClient("").ok());
  EXPECT_TRUE(open.CheckMember("").ok());
  // Open with a client token configured: clients still need it; members are open.
  o.clients = {{"alice", kAlice}};
  Authenticator half(o);
  EXPECT_EQ(half.CheckClient("").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(half.CheckMember("").ok());
}

TEST(CheckSecretTest, OnlyTheSecret) {
  EXPECT_TRUE(CheckSecret(Bearer("worker-secret-0123456789"), "worker-secret-0123456789", "w").ok());
  absl::Status s = CheckSecret(Bearer("worker-secret-012345678X"), "worker-secret-0123456789",
                               "worker 3");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(s.message(), "worker 3 accepts calls only from its coordinator"));
  EXPECT_FALSE(CheckSecret("", "", "w").ok());
}

TEST(AddressTest, LoopbackHostsAndPorts) {
  for (const char* h : {"127.0.0.1", "127.5.6.7", "localhost", "LocalHost", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"0.0.0.0", "10.0.0.1", "::", "[::]", "example.com", "", "128.0.0.1"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
  EXPECT_EQ(HostOf("127.0.0.1:7070"), "127.0.0.1");
  EXPECT_EQ(HostOf("[::1]:7070"), "[::1]");
  EXPECT_EQ(PortOf("[::1]:7070"), 7070);
  EXPECT_EQ(PortOf("host"), -1);
}

TEST(ServeCheckTest, NonLoopbackNeedsTlsTokenOrInsecure) {
  EXPECT_TRUE(ServeCheck("d", "127.0.0.1", false, false, false).ok());
  absl::Status s = ServeCheck("meshrt-worker", "0.0.0.0", false, false, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  for (const char* flag : {"--tls_cert", "--cluster_token_file", "--insecure"}) {
    EXPECT_TRUE(absl::StrContains(s.message(), flag)) << s;
  }
  EXPECT_TRUE(ServeCheck("d", "0.0.0.0", true, false, false).ok());
  EXPECT_TRUE(ServeCheck("d", "0.0.0.0", false, true, false).ok());
  EXPECT_TRUE(ServeCheck("d", "0.0.0.0", false, false, true).ok());
}

TEST(GeneratedTokensTest, PrivateFilesKeptAcrossRestartsAndFoundOnLoopbackOnly) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/creds");
  ASSERT_TRUE(EnsureGeneratedTokens(dir, 7070).ok());
  const std::string client = GeneratedTokenPath(dir, 7070, kClientTokenFile);
  struct stat st;
  ASSERT_EQ(::stat(client.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(absl::StrCat(dir, "/7070").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto first = ReadOwnToken(client, "x");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 64u);
  ASSERT_TRUE(EnsureGeneratedTokens(dir, 7070).ok());  // a restart keeps the tokens
  EXPECT_EQ(*ReadOwnToken(client, "x"), *first);
  EXPECT_NE(*ReadOwnToken(GeneratedTokenPath(dir, 7070, kClusterTokenFile), "x"), *first);

  EXPECT_EQ(FindGeneratedToken(dir, "127.0.0.1:7070", kClientTokenFile), client);
  EXPECT_EQ(FindGeneratedToken(dir, "10.1.2.3:7070", kClientTokenFile), std::nullopt);
  EXPECT_EQ(FindGeneratedToken(dir, "127.0.0.1:7071", kClientTokenFile), std::nullopt);

  ASSERT_EQ(::chmod(client.c_str(), 0644), 0);  // readable by others: replaced, not trusted
  EXPECT_EQ(FindGeneratedToken(dir, "127.0.0.1:7070", kClientTokenFile), std::nullopt);
  ASSERT_TRUE(EnsureGeneratedTokens(dir, 7070).ok());
  EXPECT_NE(*ReadOwnToken(client, "x"), *first);
  ASSERT_EQ(::stat(client.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(LoadCoordinatorCredentialsTest, GivenFilesNeedBothRolesAndDistinctTokens) {
  CoordinatorCredentialFlags f;
  f.auth_token_file = Write("clients", absl::StrCat("alice ", kAlice, "\n"));
  absl::Status s = LoadCoordinatorCredentials(f, 7070, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--cluster_token_file is required")) << s;
  f.cluster_token_file = Write("cluster-same", absl::StrCat(kAlice, "\n"));
  s = LoadCoordinatorCredentials(f, 7070, nullptr).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "roles must use different tokens")) << s;
  f.cluster_token_file = Write("cluster", absl::StrCat(kMember, "\n"));
  auto o = LoadCoordinatorCredentials(f, 7070, nullptr);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->member_token, kMember);
  ASSERT_EQ(o->clients.size(), 1u);
  EXPECT_FALSE(o->open);
  // --insecure alone: no generated files, every role open.
  CoordinatorCredentialFlags insecure;
  insecure.insecure = true;
  insecure.credentials_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/never");
  auto open = LoadCoordinatorCredentials(insecure, 7070, nullptr);
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->open);
  struct stat st;
  EXPECT_NE(::stat(insecure.credentials_dir.c_str(), &st), 0);
}

TEST(LoadCoordinatorCredentialsTest, NoFlagsGenerateTokens) {
  CoordinatorCredentialFlags f;
  f.credentials_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/gen");
  std::string generated;
  auto o = LoadCoordinatorCredentials(f, 7171, &generated);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(generated, f.credentials_dir + "/7171");
  ASSERT_EQ(o->clients.size(), 1u);
  EXPECT_EQ(o->clients[0].name, "client");
  EXPECT_EQ(o->operators.size(), 1u);
  EXPECT_EQ(o->member_token.size(), 64u);
  EXPECT_NE(o->member_token, o->clients[0].token);
}

}  // namespace
}  // namespace meshrt
