// Who may call what: the credentials of meshrt's three roles, how a server tells them apart, and
// the credentials a cluster on one machine generates for itself.
//
//   client    creates sessions and uses the sessions it created (CreateSession, RunStep,
//             CloseSession, checkpoints, ListWorkers without other callers' sessions). Its token
//             is one line of the coordinator's --auth_token_file, "NAME TOKEN" or just "TOKEN";
//             NAME (default "client") owns the sessions that token creates.
//   operator  everything a client may, on every session (list, close). --operator_token_file.
//   member    the cluster's own daemons: RegisterWorker, Heartbeat, DeregisterWorker and the KV
//             store on the coordinator. --cluster_token_file, the same file on every daemon.
// A worker's own service accepts only its coordinator: each worker makes a random secret at start,
// sends it once with RegisterWorker (a member call), and the coordinator presents it on every call
// to that worker. Nobody else learns it.
//
// The roles never mix: a member token is refused on client RPCs and a client or operator token on
// member RPCs (PermissionDenied, naming the flag that holds the right credential).
//
// On one machine nothing needs configuring: a daemon that listens on loopback with no token flags
// generates its tokens (random, 256 bits, files of mode 0600 in a 0700 directory) under
// `<credentials_dir>/<port>/`, and the CLI and workers on the same machine find them there when they
// connect to a loopback address on that port. A daemon listening on any other address without TLS
// or tokens refuses to start unless --insecure (ServeCheck).
//
// No gRPC types in the policy (Authenticator::Check takes the metadata value); the adapters pass
// `authorization` from their ServerContext. Everything here is thread-safe after construction.
#ifndef MESHRT_RPC_AUTH_H_
#define MESHRT_RPC_AUTH_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace meshrt {

enum class Role { kClient, kOperator, kMember };

// The authenticated caller of one RPC.
struct Caller {
  Role role = Role::kOperator;
  // The client's name from its token line ("" for operators and members).
  std::string name;
  // In-process callers (tests, the embedded coordinator) are trusted operators.
  static Caller Trusted() { return Caller{Role::kOperator, ""}; }
  bool may_access_any_session() const { return role == Role::kOperator; }
};

// One credential: a token and the name of its holder.
struct Credential {
  std::string name;
  std::string token;
};

// Parses a token file's text: one credential per line, "TOKEN" or "NAME TOKEN"; blank lines and
// lines starting with '#' are skipped. InvalidArgument naming `flag` and the line for a malformed
// line, a token shorter than 16 characters, or a file with no token.
absl::StatusOr<std::vector<Credential>> ParseTokenFile(absl::string_view text,
                                                       absl::string_view flag,
                                                       absl::string_view default_name);
// The whole file named by flag --`flag`. InvalidArgument "--flag=path: cannot read the file" (and,
// unless `allow_empty`, "...: the file is empty").
absl::StatusOr<std::string> ReadFlagFile(const std::string& path, absl::string_view flag,
                                         bool allow_empty = false);

// Reads and parses `path` (flag names it in errors).
absl::StatusOr<std::vector<Credential>> ReadTokenFile(const std::string& path,
                                                      absl::string_view flag,
                                                      absl::string_view default_name);

// The token a client or daemon sends: the first credential of the file at `path`.
absl::StatusOr<std::string> ReadOwnToken(const std::string& path, absl::string_view flag);

// 64 hex digits from the kernel's random source. Internal when it cannot be read.
absl::StatusOr<std::string> RandomToken();

// The server side: which role, if any, a bearer token has.
class Authenticator {
 public:
  struct Options {
    std::vector<Credential> clients;
    std::vector<Credential> operators;
    std::string member_token;  // empty: no member token configured
    // With no credential of a role configured, accept every caller for that role's RPCs
    // (--insecure). Without it, such RPCs are refused.
    bool open = false;
  };
  explicit Authenticator(Options options) : options_(std::move(options)) {}

  // The caller of a client RPC (clients and operators; members are refused) from the
  // `authorization` metadata value, "" when absent. Unauthenticated when missing or unknown,
  // PermissionDenied for a member token.
  absl::StatusOr<Caller> CheckClient(absl::string_view authorization) const;
  // OK for a member of the cluster; Unauthenticated / PermissionDenied otherwise.
  absl::Status CheckMember(absl::string_view authorization) const;

  // One line for logs, e.g. "2 client token(s), operator token, cluster token".
  std::string Describe() const;

 private:
  const Options options_;
};

// Accepts `authorization` only when it is "Bearer <secret>" (constant-time comparison). The
// worker's check that its caller is its coordinator.
absl::Status CheckSecret(absl::string_view authorization, absl::string_view secret,
                         absl::string_view what);

// Equal without an early exit, so a wrong token's timing does not reveal its matching prefix;
// false when `b` (the secret) is empty.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);
// The token of "Bearer <token>", or "" when the value has another form.
absl::string_view BearerToken(absl::string_view authorization);

// True for 127.0.0.0/8, ::1 and "localhost" (the host part of an address; brackets allowed).
bool IsLoopbackHost(absl::string_view host);
// The host of "HOST:PORT" / "[V6]:PORT" (the whole string when there is no port).
std::string HostOf(absl::string_view address);
// The port of "HOST:PORT", or -1.
int PortOf(absl::string_view address);

// The directory generated credentials live under: $MESHRT_HOME, else $HOME/.meshrt, else
// /tmp/meshrt-<uid>.
std::string DefaultCredentialsDir();

// Names of the generated files in `<credentials_dir>/<port>/`.
inline constexpr char kClientTokenFile[] = "client.token";
inline constexpr char kOperatorTokenFile[] = "operator.token";
inline constexpr char kClusterTokenFile[] = "cluster.token";

// `<credentials_dir>/<port>/<file>`.
std::string GeneratedTokenPath(const std::string& credentials_dir, int port, const char* file);

// Makes sure `<credentials_dir>/<port>/` holds the three token files, creating what is missing
// (directory 0700, files 0600, written atomically). Existing files are kept (a restarted
// coordinator keeps its workers and clients) when they are private to this user; a file readable
// by others is replaced. Errors name the path.
absl::Status EnsureGeneratedTokens(const std::string& credentials_dir, int port);

// The generated token file for a connection to `address`, when its host is loopback and the file
// exists: the CLI's and workers' default. nullopt otherwise.
std::optional<std::string> FindGeneratedToken(const std::string& credentials_dir,
                                              const std::string& address, const char* file);

// The coordinator's credential flags.
struct CoordinatorCredentialFlags {
  std::string auth_token_file;      // clients, "NAME TOKEN" lines
  std::string operator_token_file;  // operators
  std::string cluster_token_file;   // the daemons
  std::string credentials_dir;      // where generated tokens go; "" = DefaultCredentialsDir()
  bool insecure = false;
  bool any_token() const {
    return !auth_token_file.empty() || !operator_token_file.empty() ||
           !cluster_token_file.empty();
  }
};

// The coordinator's credentials on `port`. With no token flag and not `insecure`: the tokens
// generated in `<credentials_dir>/<port>/` (EnsureGeneratedTokens), and `*generated` is set to that
// directory. Otherwise the files given; without `insecure`, both --auth_token_file and
// --cluster_token_file are required (InvalidArgument naming the missing one).
absl::StatusOr<Authenticator::Options> LoadCoordinatorCredentials(
    const CoordinatorCredentialFlags& flags, int port, std::string* generated);

// Whether a daemon may listen on `host` with this configuration. OK on loopback; elsewhere OK
// with TLS or a configured token, or with `insecure` (the caller logs a warning). Otherwise
// FailedPrecondition naming `daemon`, the address and the flags that fix it.
absl::Status ServeCheck(absl::string_view daemon, absl::string_view host, bool tls,
                        bool has_token, bool insecure);

}  // namespace meshrt

#endif  // MESHRT_RPC_AUTH_H_
