#include "rpc/auth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/file.h"

namespace meshrt {
namespace {

constexpr char kBearer[] = "Bearer ";
constexpr size_t kMinTokenLength = 16;

}  // namespace

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (b.empty()) return false;
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i % b.size()];
  return diff == 0;
}

absl::string_view BearerToken(absl::string_view authorization) {
  if (!absl::StartsWith(authorization, kBearer)) return "";
  return authorization.substr(sizeof(kBearer) - 1);
}

namespace {

bool Matches(const std::vector<Credential>& list, absl::string_view token, std::string* name) {
  bool found = false;
  for (const Credential& c : list) {  // no early exit: every entry is compared
    if (ConstantTimeEquals(token, c.token) && !found) {
      found = true;
      *name = c.name;
    }
  }
  return found;
}

absl::Status WritePrivateFile(const std::string& path, const std::string& contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create credential file ", tmp, ": ", std::strerror(errno)));
  }
  const bool written = ::write(fd, contents.data(), contents.size()) ==
                           static_cast<ssize_t>(contents.size()) &&
                       ::fchmod(fd, 0600) == 0 && ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write credential file ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

// A directory of this user's that nobody else can enter, created if missing.
absl::Status EnsurePrivateDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create credentials directory ", dir, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat("credentials directory ", dir, " is not a directory"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "credentials directory ", dir, " belongs to another user; give --credentials_dir"));
  }
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot make credentials directory ", dir, " private: ",
                     std::strerror(errno)));
  }
  return absl::OkStatus();
}

// True when `path` is a regular file of this user's that only this user can read.
bool IsPrivateFile(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
         (st.st_mode & 077) == 0;
}

}  // namespace

absl::StatusOr<std::vector<Credential>> ParseTokenFile(absl::string_view text,
                                                       absl::string_view flag,
                                                       absl::string_view default_name) {
  std::vector<Credential> out;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": line ", line_number, " has ", fields.size(),
          " fields; expected \"TOKEN\" or \"NAME TOKEN\""));
    }
    Credential c;
    c.name = fields.size() == 2 ? std::string(fields[0]) : std::string(default_name);
    c.token = std::string(fields.back());
    if (c.token.size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": the token on line ",
                                                     line_number, " is shorter than ",
                                                     kMinTokenLength, " characters"));
    }
    out.push_back(std::move(c));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": the file holds no token"));
  }
  return out;
}

absl::StatusOr<std::string> ReadFlagFile(const std::string& path, absl::string_view flag,
                                         bool allow_empty) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", path, ": cannot read the file"));
  }
  if (!allow_empty && text->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", path, ": the file is empty"));
  }
  return text;
}

absl::StatusOr<std::vector<Credential>> ReadTokenFile(const std::string& path,
                                                      absl::string_view flag,
                                                      absl::string_view default_name) {
  absl::StatusOr<std::string> text = ReadFlagFile(path, flag, /*allow_empty=*/true);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<Credential>> parsed = ParseTokenFile(*text, flag, default_name);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(parsed.status().message(), " (", path, ")"));
  }
  return parsed;
}

absl::StatusOr<std::string> ReadOwnToken(const std::string& path, absl::string_view flag) {
  absl::StatusOr<std::vector<Credential>> list = ReadTokenFile(path, flag, "");
  if (!list.ok()) return list.status();
  return list->front().token;
}

absl::StatusOr<std::string> RandomToken() {
  unsigned char bytes[32];
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::read(fd, bytes, sizeof(bytes)) == sizeof(bytes);
  if (fd >= 0) ::close(fd);
  if (!ok) return absl::InternalError("cannot read /dev/urandom for a new token");
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

absl::StatusOr<Caller> Authenticator::CheckClient(absl::string_view authorization) const {
  const absl::string_view token = BearerToken(authorization);
  std::string name;
  if (!token.empty()) {
    if (Matches(options_.operators, token, &name)) return Caller{Role::kOperator, ""};
    if (Matches(options_.clients, token, &name)) return Caller{Role::kClient, name};
    if (ConstantTimeEquals(token, options_.member_token)) {
      return absl::PermissionDeniedError(
          "this is the cluster's member credential (--cluster_token_file), which only daemons "
          "use; clients call with a token of the coordinator's --auth_token_file");
    }
  }
  if (options_.open && options_.clients.empty() && options_.operators.empty()) {
    return Caller::Trusted();  // --insecure without client tokens: anyone may do anything
  }
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "missing bearer token: this coordinator requires a client token (the meshrt CLI sends "
        "the one in --auth_token_file; on the coordinator's own machine it finds a generated "
        "one by itself)");
  }
  return absl::UnauthenticatedError(
      "bearer token rejected: it is none of the coordinator's client (--auth_token_file) or "
      "operator (--operator_token_file) tokens");
}

absl::Status Authenticator::CheckMember(absl::string_view authorization) const {
  const absl::string_view token = BearerToken(authorization);
  if (!options_.member_token.empty() && ConstantTimeEquals(token, options_.member_token)) {
    return absl::OkStatus();
  }
  std::string name;
  if (!token.empty() &&
      (Matches(options_.clients, token, &name) || Matches(options_.operators, token, &name))) {
    return absl::PermissionDeniedError(
        "a client or operator token cannot call the cluster's member RPCs (worker registration, "
        "heartbeats, the KV store): daemons use --cluster_token_file");
  }
  if (options_.open && options_.member_token.empty()) return absl::OkStatus();
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "missing cluster token: only the cluster's daemons may call this, with "
        "--cluster_token_file");
  }
  return absl::UnauthenticatedError(
      "cluster token rejected: it does not match the coordinator's --cluster_token_file");
}

std::string Authenticator::Describe() const {
  std::vector<std::string> parts;
  if (!options_.clients.empty()) parts.push_back(absl::StrCat(options_.clients.size(), " client token(s)"));
  if (!options_.operators.empty()) parts.push_back("operator token");
  if (!options_.member_token.empty()) parts.push_back("cluster token");
  if (options_.open) parts.push_back("INSECURE: roles without a token are open to anyone");
  return parts.empty() ? "no credentials" : absl::StrJoin(parts, ", ");
}

absl::Status CheckSecret(absl::string_view authorization, absl::string_view secret,
                         absl::string_view what) {
  if (ConstantTimeEquals(BearerToken(authorization), secret)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " accepts calls only from its coordinator"));
}

bool IsLoopbackHost(absl::string_view host) {
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  const std::string h(host);
  in_addr v4;
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (::inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    static const unsigned char kOne[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return std::memcmp(v6.s6_addr, kOne, 16) == 0;
  }
  return false;
}

std::string HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return std::string(address.substr(0, close == absl::string_view::npos ? address.size()
                                                                          : close + 1));
  }
  const size_t colon = address.rfind(':');
  return std::string(colon == absl::string_view::npos ? address : address.substr(0, colon));
}

int PortOf(absl::string_view address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return -1;
  }
  return port;
}

std::string DefaultCredentialsDir() {
  if (const char* home = std::getenv("MESHRT_HOME"); home != nullptr && *home != '\0') return home;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.meshrt");
  }
  return absl::StrCat("/tmp/meshrt-", ::geteuid());
}

std::string GeneratedTokenPath(const std::string& credentials_dir, int port, const char* file) {
  return absl::StrCat(credentials_dir, "/", port, "/", file);
}

absl::Status EnsureGeneratedTokens(const std::string& credentials_dir, int port) {
  if (absl::Status s = EnsurePrivateDir(credentials_dir); !s.ok()) return s;
  const std::string dir = absl::StrCat(credentials_dir, "/", port);
  if (absl::Status s = EnsurePrivateDir(dir); !s.ok()) return s;
  for (const char* file : {kClientTokenFile, kOperatorTokenFile, kClusterTokenFile}) {
    const std::string path = GeneratedTokenPath(credentials_dir, port, file);
    if (IsPrivateFile(path) && ReadOwnToken(path, "credentials_dir").ok()) continue;
    absl::StatusOr<std::string> token = RandomToken();
    if (!token.ok()) return token.status();
    if (absl::Status s = WritePrivateFile(path, *token + "\n"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::optional<std::string> FindGeneratedToken(const std::string& credentials_dir,
                                              const std::string& address, const char* file) {
  const int port = PortOf(address);
  if (port <= 0 || !IsLoopbackHost(HostOf(address))) return std::nullopt;
  const std::string path = GeneratedTokenPath(credentials_dir, port, file);
  if (!IsPrivateFile(path)) return std::nullopt;
  return path;
}

absl::StatusOr<Authenticator::Options> LoadCoordinatorCredentials(
    const CoordinatorCredentialFlags& flags, int port, std::string* generated) {
  Authenticator::Options o;
  o.open = flags.insecure;
  if (!flags.any_token() && !flags.insecure) {
    const std::string dir =
        flags.credentials_dir.empty() ? DefaultCredentialsDir() : flags.credentials_dir;
    if (absl::Status s = EnsureGeneratedTokens(dir, port); !s.ok()) return s;
    auto clients = ReadTokenFile(GeneratedTokenPath(dir, port, kClientTokenFile),
                                 "credentials_dir", "client");
    if (!clients.ok()) return clients.status();
    auto operators = ReadTokenFile(GeneratedTokenPath(dir, port, kOperatorTokenFile),
                                   "credentials_dir", "");
    if (!operators.ok()) return operators.status();
    auto member = ReadOwnToken(GeneratedTokenPath(dir, port, kClusterTokenFile), "credentials_dir");
    if (!member.ok()) return member.status();
    o.clients = *std::move(clients);
    o.operators = *std::move(operators);
    o.member_token = *std::move(member);
    if (generated != nullptr) *generated = absl::StrCat(dir, "/", port);
    return o;
  }
  if (!flags.insecure) {
    if (flags.auth_token_file.empty()) {
      return absl::InvalidArgumentError(
          "--auth_token_file is required with the other token flags: clients authenticate with "
          "it (or give --insecure to let any client in)");
    }
    if (flags.cluster_token_file.empty()) {
      return absl::InvalidArgumentError(
          "--cluster_token_file is required with --auth_token_file: workers authenticate with it "
          "(or give --insecure to let any worker register)");
    }
  }
  if (!flags.auth_token_file.empty()) {
    auto clients = ReadTokenFile(flags.auth_token_file, "auth_token_file", "client");
    if (!clients.ok()) return clients.status();
    o.clients = *std::move(clients);
  }
  if (!flags.operator_token_file.empty()) {
    auto operators = ReadTokenFile(flags.operator_token_file, "operator_token_file", "");
    if (!operators.ok()) return operators.status();
    o.operators = *std::move(operators);
  }
  if (!flags.cluster_token_file.empty()) {
    auto member = ReadOwnToken(flags.cluster_token_file, "cluster_token_file");
    if (!member.ok()) return member.status();
    o.member_token = *std::move(member);
  }
  // One token in two roles would let a client act as a worker (or the reverse).
  std::string unused;
  if (!o.member_token.empty() && (Matches(o.clients, o.member_token, &unused) ||
                                  Matches(o.operators, o.member_token, &unused))) {
    return absl::InvalidArgumentError(
        "--cluster_token_file holds a token that is also a client or operator token: the roles "
        "must use different tokens");
  }
  for (const Credential& c : o.clients) {
    if (Matches(o.operators, c.token, &unused)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "client '", c.name, "' in --auth_token_file has the operator's token: use another"));
    }
  }
  return o;
}

absl::Status ServeCheck(absl::string_view daemon, absl::string_view host, bool tls,
                        bool has_token, bool insecure) {
  if (IsLoopbackHost(host) || tls || has_token || insecure) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      daemon, ": refusing to listen on ", host,
      ", which other machines can reach, without TLS or a token: give --tls_cert/--tls_key/"
      "--tls_ca (mutual TLS with --tls_require_client_cert) and/or the token files "
      "(--auth_token_file and --cluster_token_file on the coordinator, --cluster_token_file on "
      "workers), or --insecure to accept anyone who can reach the port"));
}

}  // namespace meshrt
