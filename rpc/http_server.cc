#include "rpc/http_server.h"

#include <cstdio>

#include "httplib.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rpc/auth.h"

namespace meshrt {
namespace {

constexpr char kCookie[] = "meshrt_token";
constexpr size_t kMaxRequestBytes = 64 << 10;

// The token a request carries: the bearer header, else the cookie, else ?token=.
std::string RequestToken(const httplib::Request& req) {
  const std::string authorization = req.get_header_value("Authorization");
  if (absl::string_view bearer = BearerToken(authorization); !bearer.empty()) {
    return std::string(bearer);
  }
  const std::string cookies = req.get_header_value("Cookie");
  for (absl::string_view part : absl::StrSplit(cookies, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, kCookie) && absl::ConsumePrefix(&part, "=")) {
      return std::string(part);
    }
  }
  return req.has_param("token") ? req.get_param_value("token") : "";
}

bool Authorized(const std::vector<std::string>& tokens, const std::string& token) {
  if (tokens.empty()) return true;
  bool ok = false;
  for (const std::string& t : tokens) ok |= ConstantTimeEquals(token, t);  // no early exit
  return ok;
}

void Refuse(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(message + "\n", "text/plain; charset=utf-8");
}

}  // namespace

HttpServer::HttpServer() = default;
HttpServer::~HttpServer() { Stop(); }

void HttpServer::Handle(std::string path, HttpHandler handler) {
  handlers_.emplace_back(std::move(path), std::move(handler));
}

absl::Status HttpServer::Start(const HttpServerOptions& options) {
  if (server_ != nullptr) return absl::FailedPreconditionError("HttpServer: already started");
  tokens_ = options.tokens;
  auto server = std::make_unique<httplib::Server>();
  const int threads = std::max(1, options.threads);
  server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  const int64_t us = absl::ToInt64Microseconds(options.io_timeout);
  server->set_read_timeout(us / 1000000, us % 1000000);
  server->set_write_timeout(us / 1000000, us % 1000000);
  server->set_keep_alive_timeout(std::max<int64_t>(1, us / 1000000));
  server->set_payload_max_length(kMaxRequestBytes);
  // httplib's default sets SO_REUSEPORT, which lets a second server bind a port already served
  // (and share its requests); SO_REUSEADDR only reuses a port in TIME_WAIT.
  server->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server->Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string token = RequestToken(req);
    if (!Authorized(tokens_, token)) {
      res.set_header("WWW-Authenticate", "Bearer");
      Refuse(res, 401,
             "401 unauthorized: give the daemon's token as 'Authorization: Bearer TOKEN', as "
             "the meshrt_token cookie, or once as ?token=TOKEN in the address (the coordinator "
             "accepts its operator token; every daemon accepts --metrics_token_file's tokens)");
      return;
    }
    if (!tokens_.empty() && req.has_param("token")) {
      res.set_header("Set-Cookie", absl::StrCat(kCookie, "=", token,
                                                "; Path=/; HttpOnly; SameSite=Strict"));
    }
    for (const auto& [path, handler] : handlers_) {
      if (path != req.path) continue;
      HttpRequest request;
      request.path = req.path;
      for (const auto& [key, value] : req.params) {
        if (key != "token") request.params[key] = value;
      }
      HttpResponse response = handler(request);
      res.status = response.status;
      res.set_header("Cache-Control", "no-store");
      res.set_header("X-Content-Type-Options", "nosniff");
      for (const auto& [name, value] : response.headers) res.set_header(name, value);
      res.set_content(std::move(response.body), response.content_type.c_str());
      return;
    }
    Refuse(res, 404, absl::StrCat("404 not found: ", req.path));
  });
  const auto not_allowed = [](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Allow", "GET, HEAD");
    Refuse(res, 405, absl::StrCat("405: ", req.method, " is not served; only GET and HEAD"));
  };
  server->Post(".*", not_allowed);
  server->Put(".*", not_allowed);
  server->Patch(".*", not_allowed);
  server->Delete(".*", not_allowed);
  server->Options(".*", not_allowed);

  int port = options.port;
  if (port == 0) {
    port = server->bind_to_any_port(options.host);
    if (port < 0) port = 0;
  } else if (!server->bind_to_port(options.host, port)) {
    port = 0;
  }
  if (port <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", HttpAddress(options.host, options.port),
        ": the port is in use or the address is not this machine's"));
  }
  port_ = port;
  server_ = std::move(server);
  thread_ = std::thread([s = server_.get()] { s->listen_after_bind(); });
  // Stop() is a no-op on a server that has not started listening yet (httplib checks
  // is_running), so wait for it here: Stop right after Start would otherwise never return.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!server_->is_running()) {
    if (absl::Now() > deadline) {
      return absl::InternalError("HttpServer: the listening thread did not start within 10s");
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
  port_ = 0;
}

void AddHttpFlags(FlagSet* flags, HttpFlags* http, const std::string& what) {
  flags->Int("metrics_port", &http->port,
             absl::StrCat("serve ", what, " over HTTP on this port (0 = off, -1 = a free one, "
                          "see --metrics_port_file); requests need a token (see "
                          "--metrics_token_file)"));
  flags->String("metrics_port_file", &http->port_file,
                "write the bound --metrics_port to this file once serving");
  flags->String("metrics_host", &http->host,
                "address of the --metrics_port server (default: --host's); beyond loopback it "
                "needs a token or --insecure");
  flags->String("metrics_token_file", &http->token_file,
                "tokens (one per line) that scrapers and browsers may present on --metrics_port, "
                "as 'Authorization: Bearer TOKEN', a meshrt_token cookie or ?token=TOKEN");
}

absl::StatusOr<HttpServerOptions> HttpAccessFor(const HttpFlags& flags,
                                                const std::string& daemon_host,
                                                std::vector<std::string> daemon_tokens,
                                                bool insecure) {
  if (flags.port < -1 || flags.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_port=", flags.port, " is not a port (1-65535; 0 = off, -1 = a free one)"));
  }
  HttpServerOptions options;
  options.host = flags.host.empty() ? daemon_host : flags.host;
  options.port = flags.port < 0 ? 0 : static_cast<int>(flags.port);
  for (std::string& t : daemon_tokens) {
    if (!t.empty()) options.tokens.push_back(std::move(t));
  }
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::vector<Credential>> file =
        ReadTokenFile(flags.token_file, "metrics_token_file", "metrics");
    if (!file.ok()) return file.status();
    for (const Credential& c : *file) options.tokens.push_back(c.token);
  }
  if (options.tokens.empty() && !insecure) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--metrics_port: no token to check requests with; give --metrics_token_file, or "
        "--insecure to serve ", HttpAddress(options.host, options.port), " to anyone"));
  }
  return options;
}

absl::StatusOr<HttpServerOptions> StartFromFlags(HttpServer* server, const HttpFlags& flags,
                                                 const std::string& daemon_host,
                                                 std::vector<std::string> daemon_tokens,
                                                 bool insecure) {
  absl::StatusOr<HttpServerOptions> options =
      HttpAccessFor(flags, daemon_host, std::move(daemon_tokens), insecure);
  if (!options.ok()) return options.status();
  if (absl::Status s = server->Start(*options); !s.ok()) return s;
  if (absl::Status s = WriteHttpPortFile(flags, server->port()); !s.ok()) return s;
  return options;
}

absl::Status WriteHttpPortFile(const HttpFlags& flags, int port) {
  if (flags.port_file.empty()) return absl::OkStatus();
  const std::string tmp = flags.port_file + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f != nullptr && std::fprintf(f, "%d\n", port) > 0;
  if (f != nullptr) ok &= std::fclose(f) == 0;
  if (!ok || std::rename(tmp.c_str(), flags.port_file.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("--metrics_port_file=", flags.port_file, ": cannot write the file"));
  }
  return absl::OkStatus();
}

std::string HttpAddress(const std::string& host, int port) {
  const bool v6 = absl::StrContains(host, ':') && !absl::StartsWith(host, "[");
  return absl::StrCat("http://", v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

}  // namespace meshrt
