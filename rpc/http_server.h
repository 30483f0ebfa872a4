// HttpServer: the daemons' small HTTP side door — Prometheus' /metrics on every daemon, the
// dashboard on the coordinator — over Debian's cpp-httplib. GET (and HEAD) only; handlers are
// registered by exact path before Start and return a whole response (no streaming).
//
// Access: a request must carry one of the server's tokens, as `Authorization: Bearer TOKEN`
// (Prometheus' `authorization` scrape setting), a `meshrt_token` cookie, or `?token=TOKEN` in the
// URL (what a browser opens first; the response then sets the cookie, HttpOnly and
// SameSite=Strict, so the pages' own requests carry it). Tokens are compared in constant time. A
// request without a valid token gets 401 naming these three ways; an unknown path 404, another
// method 405. With no tokens at all the server is open: the daemon decides that (HttpAccessFor).
//
// Limits: a fixed pool of `threads` request threads; requests bigger than 64 KiB are refused; a
// connection idle or slow for `io_timeout` is closed, so a stalled client never holds a thread
// for long. A handler must not block for long: the dashboard's and the metrics' handlers read
// snapshots under short locks.
//
// Thread-safety: Handle before Start; Start, port and Stop from one thread; handlers run on the
// server's threads, several at once.
#ifndef MESHRT_RPC_HTTP_SERVER_H_
#define MESHRT_RPC_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "util/flags.h"

namespace httplib {
class Server;
}

namespace meshrt {

struct HttpRequest {
  std::string path;
  // The query parameters (the last value of a repeated one), without `token`.
  std::map<std::string, std::string> params;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Extra response headers, e.g. the dashboard's Content-Security-Policy.
  std::vector<std::pair<std::string, std::string>> headers;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = a free port (HttpServer::port() tells which)
  // Accepted tokens; empty = every request is served (see HttpAccessFor).
  std::vector<std::string> tokens;
  int threads = 2;
  absl::Duration io_timeout = absl::Seconds(5);
};

class HttpServer {
 public:
  HttpServer();
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves GET `path` (exact match, e.g. "/metrics") with `handler`. Before Start.
  void Handle(std::string path, HttpHandler handler);

  // Binds host:port and serves on a thread of its own. Unavailable naming the address when it
  // cannot bind; FailedPrecondition when already started.
  absl::Status Start(const HttpServerOptions& options);
  // The bound port (after a successful Start), else 0.
  int port() const { return port_; }
  // Stops serving and joins the thread; requests in flight finish first. Idempotent.
  void Stop();

 private:
  std::vector<std::pair<std::string, HttpHandler>> handlers_;
  std::vector<std::string> tokens_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// A daemon's HTTP flags: --metrics_port, --metrics_host, --metrics_token_file,
// --metrics_port_file.
struct HttpFlags {
  int64_t port = 0;  // 0 = off, -1 = a free port
  std::string port_file;  // the bound port is written here (atomically), for --metrics_port -1
  std::string host;        // "" = the daemon's --host
  std::string token_file;  // tokens for scrapers and browsers, one per line (auth.h format)
};
void AddHttpFlags(FlagSet* flags, HttpFlags* http, const std::string& what);

// The server options of a daemon listening on `daemon_host`: the host (the flag's, else the
// daemon's), the port, and the tokens — those of --metrics_token_file plus `daemon_tokens` (the
// coordinator's operator tokens; a worker's cluster token). With no token at all, the server is
// open only with `insecure`; else FailedPrecondition naming the flags. InvalidArgument for a
// port out of range or an unreadable token file (naming the flag).
absl::StatusOr<HttpServerOptions> HttpAccessFor(const HttpFlags& flags,
                                                const std::string& daemon_host,
                                                std::vector<std::string> daemon_tokens,
                                                bool insecure);

// A daemon's server from its flags: HttpAccessFor, then `server`->Start, then WriteHttpPortFile.
// Returns the options it serves with (host, tokens; the bound port is server->port()). Handlers
// must be registered before.
absl::StatusOr<HttpServerOptions> StartFromFlags(HttpServer* server, const HttpFlags& flags,
                                                 const std::string& daemon_host,
                                                 std::vector<std::string> daemon_tokens,
                                                 bool insecure);

// Writes `port` and a newline to flags.port_file (via a temporary and a rename), when one is
// given. Internal naming the file when it cannot be written.
absl::Status WriteHttpPortFile(const HttpFlags& flags, int port);

// "http://HOST:PORT" with IPv6 hosts bracketed.
std::string HttpAddress(const std::string& host, int port);

}  // namespace meshrt

#endif  // MESHRT_RPC_HTTP_SERVER_H_
