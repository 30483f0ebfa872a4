#include "rpc/http_server.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "httplib.h"

namespace meshrt {
namespace {

constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

class HttpServerTest : public ::testing::Test {
 protected:
  void StartWith(std::vector<std::string> tokens) {
    server_.Handle("/hello", [](const HttpRequest& req) {
      HttpResponse r;
      r.body = "hello";
      for (const auto& [k, v] : req.params) r.body += " " + k + "=" + v;
      return r;
    });
    server_.Handle("/teapot", [](const HttpRequest&) {
      HttpResponse r;
      r.status = 418;
      r.content_type = "application/json";
      r.body = "{}";
      return r;
    });
    HttpServerOptions options;
    options.tokens = std::move(tokens);
    ASSERT_TRUE(server_.Start(options).ok());
    ASSERT_GT(server_.port(), 0);
  }
  httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_.port());
    c.set_connection_timeout(5);
    c.set_read_timeout(5);
    return c;
  }
  HttpServer server_;
};

TEST_F(HttpServerTest, RefusesRequestsWithoutTheToken) {
  StartWith({kToken});
  httplib::Client c = Client();
  auto none = c.Get("/hello");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_NE(none->body.find("Authorization: Bearer"), std::string::npos);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  auto wrong = c.Get("/hello", {{"Authorization", "Bearer 0123456789abcdef0123456789abcdeX"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  // The path is not disclosed either: an unknown path without the token is 401, not 404.
  auto unknown = c.Get("/nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 401);
}

TEST_F(HttpServerTest, AcceptsBearerCookieAndQueryToken) {
  StartWith({"another-token-of-enough-length", kToken});
  httplib::Client c = Client();
  auto bearer = c.Get("/hello?x=1", {{"Authorization", std::string("Bearer ") + kToken}});
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200);
  EXPECT_EQ(bearer->body, "hello x=1");
  EXPECT_EQ(bearer->get_header_value("Cache-Control"), "no-store");
  EXPECT_FALSE(bearer->has_header("Set-Cookie"));

  auto cookie = c.Get("/hello", {{"Cookie", std::string("a=b; meshrt_token=") + kToken}});
  ASSERT_TRUE(cookie);
  EXPECT_EQ(cookie->status, 200);

  // The query token is not passed to the handler, and becomes a cookie.
  auto query = c.Get(std::string("/hello?token=") + kToken + "&y=2");
  ASSERT_TRUE(query);
  EXPECT_EQ(query->status, 200);
  EXPECT_EQ(query->body, "hello y=2");
  const std::string set_cookie = query->get_header_value("Set-Cookie");
  EXPECT_NE(set_cookie.find(std::string("meshrt_token=") + kToken), std::string::npos);
  EXPECT_NE(set_cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set_cookie.find("SameSite=Strict"), std::string::npos);
}

TEST_F(HttpServerTest, StatusContentTypeUnknownPathsAndMethods) {
  StartWith({kToken});
  httplib::Client c = Client();
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kToken}};
  auto teapot = c.Get("/teapot", auth);
  ASSERT_TRUE(teapot);
  EXPECT_EQ(teapot->status, 418);
  EXPECT_EQ(teapot->get_header_value("Content-Type"), "application/json");
  auto unknown = c.Get("/nope", auth);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  auto post = c.Post("/hello", auth, "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
}

TEST_F(HttpServerTest, OpenWithoutTokens) {
  StartWith({});
  httplib::Client c = Client();
  auto r = c.Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServer, StopIsIdempotentAndAPortInUseIsNamed) {
  HttpServer a;
  ASSERT_TRUE(a.Start(HttpServerOptions()).ok());
  HttpServer b;
  HttpServerOptions same;
  same.port = a.port();
  absl::Status s = b.Start(same);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find(std::to_string(a.port())), std::string::npos) << s;
  EXPECT_EQ(a.Start(HttpServerOptions()).code(), absl::StatusCode::kFailedPrecondition);
  a.Stop();
  a.Stop();
  EXPECT_EQ(a.port(), 0);
}

TEST(HttpAccessFor, TokensHostAndRefusals) {
  HttpFlags flags;
  flags.port = 9100;
  // No token and not insecure: refused, naming the flags.
  absl::StatusOr<HttpServerOptions> none = HttpAccessFor(flags, "127.0.0.1", {}, false);
  ASSERT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("--metrics_token_file"), std::string::npos);
  EXPECT_NE(none.status().message().find("--insecure"), std::string::npos);
  absl::StatusOr<HttpServerOptions> open = HttpAccessFor(flags, "0.0.0.0", {}, true);
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->tokens.empty());
  EXPECT_EQ(open->host, "0.0.0.0");
  EXPECT_EQ(open->port, 9100);

  const std::string path = ::testing::TempDir() + "/metrics.token";
  {
    std::ofstream f(path);
    f << "# scrapers\nprometheus fedcba9876543210fedcba9876543210\n";
  }
  flags.token_file = path;
  flags.host = "127.0.0.2";
  absl::StatusOr<HttpServerOptions> both = HttpAccessFor(flags, "127.0.0.1", {kToken, ""}, false);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->host, "127.0.0.2");
  EXPECT_EQ(both->tokens,
            (std::vector<std::string>{kToken, "fedcba9876543210fedcba9876543210"}));

  flags.token_file = path + ".missing";
  absl::StatusOr<HttpServerOptions> missing = HttpAccessFor(flags, "127.0.0.1", {kToken}, false);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("metrics_token_file"), std::string::npos);

  flags.port = -1;  // a free port
  flags.token_file = "";
  absl::StatusOr<HttpServerOptions> free_port = HttpAccessFor(flags, "127.0.0.1", {kToken}, false);
  ASSERT_TRUE(free_port.ok());
  EXPECT_EQ(free_port->port, 0);
  flags.port_file = ::testing::TempDir() + "/metrics.port";
  ASSERT_TRUE(WriteHttpPortFile(flags, 4321).ok());
  std::ifstream port_file(flags.port_file);
  int written = 0;
  port_file >> written;
  EXPECT_EQ(written, 4321);
  flags.port_file = "/nonexistent-dir/metrics.port";
  EXPECT_NE(WriteHttpPortFile(flags, 1).message().find("--metrics_port_file"), std::string::npos);

  flags.port = -2;
  EXPECT_EQ(HttpAccessFor(flags, "127.0.0.1", {kToken}, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  flags.port = 70000;
  EXPECT_EQ(HttpAccessFor(flags, "127.0.0.1", {kToken}, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpAddress("::1", 80), "http://[::1]:80");
  EXPECT_EQ(HttpAddress("10.0.0.1", 80), "http://10.0.0.1:80");
}

}  // namespace
}  // namespace meshrt
