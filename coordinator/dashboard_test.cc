// The dashboard's data and endpoints with in-process workers: the snapshot shows the workers, a
// real training session with its loss curve as the steps fetched it, its explain, the errors of a
// lost worker; hostile names reach the JSON escaped (and parse back to themselves); the HTTP
// endpoints need the token and the page carries a Content-Security-Policy.
#include "coordinator/dashboard.h"

#include "absl/strings/match.h"
#include "coordinator/coordinator.h"
#include "testing/cluster/in_process_workers.h"
#include "coordinator/test_graphs.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace meshrt {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

v1::CreateSessionRequest TrainingRequest() {
  v1::CreateSessionRequest r;
  *r.mutable_graph() = RegressionGraph().proto();
  const Mesh m = Mesh::Parse("x:2").value();
  *r.mutable_mesh() = m.ToProto();
  *r.mutable_rules() = LayoutRules::Parse("batch:x", m).value().ToProto();
  r.set_timeout_ms(2000);
  r.mutable_training()->set_loss("loss");
  r.mutable_training()->set_optimizer("adam");
  r.mutable_training()->mutable_learning_rate()->set_base(0.05f);
  return r;
}

// What a client could name itself (its token file's NAME): markup, quotes, control characters.
constexpr char kHostile[] = "<script>alert(\"x\")</script>&\\\n\x01'</td>";

Struct Parse(const std::string& json) {
  Struct s;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &s);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return s;
}

const Value& Field(const Struct& s, const std::string& name) {
  static const Value* none = new Value();
  auto it = s.fields().find(name);
  EXPECT_NE(it, s.fields().end()) << name;
  return it == s.fields().end() ? *none : it->second;
}

class DashboardTest : public ::testing::Test {
 protected:
  DashboardTest() : coordinator_(Options(), &workers_) {
    for (int i = 0; i < 2; ++i) {
      const std::string address = absl::StrCat("w", i);
      workers_.AddWorker(address);
      v1::RegisterWorkerRequest r;
      r.set_address(address);
      r.set_incarnation("inc");
      r.set_secret("secret-0123456789abcdef");
      r.set_rank(i);
      auto registered = coordinator_.RegisterWorker(r);
      EXPECT_TRUE(registered.ok());
      ids_.push_back(registered->worker_id());
    }
  }
  static CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(60);
    return o;
  }
  // In-process workers send no heartbeats: one by hand, so that they are not stale.
  void Heartbeat(int draining_id = -1) {
    for (int id : ids_) {
      v1::HeartbeatRequest h;
      h.set_worker_id(id);
      h.set_incarnation("inc");
      h.set_draining(id == draining_id);
      ASSERT_TRUE(coordinator_.Heartbeat(h).ok());
    }
  }
  InProcessWorkers workers_;
  Coordinator coordinator_;
  std::vector<int> ids_;
};

TEST_F(DashboardTest, SnapshotShowsWorkersATrainingSessionAndItsLossCurve) {
  Heartbeat();
  ClusterSnapshot idle = coordinator_.Snapshot();
  ASSERT_EQ(idle.workers.size(), 2u);
  for (const WorkerSnapshot& w : idle.workers) {
    EXPECT_EQ(w.state, "idle");
    EXPECT_TRUE(w.session.empty());
  }
  EXPECT_EQ(idle.workers[1].rank, 1);
  EXPECT_EQ(idle.workers[1].address, "w1");
  EXPECT_TRUE(idle.sessions.empty());

  const Caller owner{Role::kClient, kHostile};
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s,
                       coordinator_.CreateSession(TrainingRequest(), owner));
  std::vector<float> fetched;
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK_AND_ASSIGN(TensorMap out, coordinator_.RunStep(s.session(), {}, {"loss"}));
    fetched.push_back(out.at("loss").f32()[0]);
  }
  // Two steps in one request: one point, at the request's last step.
  ASSERT_OK_AND_ASSIGN(TensorMap out, coordinator_.RunStep(s.session(), {}, {"loss"}, 2));
  fetched.push_back(out.at("loss").f32()[0]);
  // A step that does not fetch the loss adds no point.
  ASSERT_OK(coordinator_.RunStep(s.session(), {}, {"h"}).status());
  Heartbeat();

  const ClusterSnapshot snap = coordinator_.Snapshot();
  ASSERT_EQ(snap.workers.size(), 2u);
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(snap.workers[p].state, "busy");
    EXPECT_EQ(snap.workers[p].session, s.session());
    EXPECT_EQ(snap.workers[p].coordinate, std::vector<int64_t>({p}));
  }
  ASSERT_EQ(snap.sessions.size(), 1u);
  const SessionSnapshot& row = snap.sessions[0];
  EXPECT_EQ(row.id, s.session());
  EXPECT_EQ(row.owner, kHostile);
  EXPECT_EQ(row.mesh, "x:2");
  EXPECT_EQ(row.layout, "batch:x");
  EXPECT_EQ(row.state, "ready");
  EXPECT_EQ(row.step, 9);
  EXPECT_EQ(row.loss_tensor, "loss");
  EXPECT_GT(row.steps_per_second, 0);
  ASSERT_TRUE(row.last_loss.has_value());
  EXPECT_EQ(*row.last_loss, fetched.back());

  ASSERT_OK_AND_ASSIGN(SessionDetail detail, coordinator_.DescribeSession(s.session(), true));
  ASSERT_EQ(detail.loss.size(), 7u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(detail.loss[i].step, i + 1);
    EXPECT_EQ(detail.loss[i].loss, fetched[i]);
  }
  EXPECT_EQ(detail.loss[6].step, 8);
  EXPECT_LT(detail.loss.back().loss, detail.loss.front().loss);  // it trains
  EXPECT_EQ(detail.explain_text, s.explain());
  EXPECT_TRUE(detail.explain_error.empty()) << detail.explain_error;

  // The JSON parses back to the same values, the hostile name included, and holds no markup.
  const std::string cluster_json = ClusterJson(snap);
  EXPECT_FALSE(absl::StrContains(cluster_json, "<")) << cluster_json;
  EXPECT_FALSE(absl::StrContains(cluster_json, "</script>"));
  const Struct cluster = Parse(cluster_json);
  const auto& sessions = Field(cluster, "sessions").list_value();
  ASSERT_EQ(sessions.values_size(), 1);
  EXPECT_EQ(Field(sessions.values(0).struct_value(), "owner").string_value(), kHostile);
  EXPECT_EQ(Field(sessions.values(0).struct_value(), "state").string_value(), "ready");
  EXPECT_EQ(Field(cluster, "workers").list_value().values_size(), 2);
  EXPECT_EQ(Field(Field(cluster, "workers").list_value().values(0).struct_value(), "state")
                .string_value(),
            "busy");

  const Struct session = Parse(SessionJson(detail));
  const auto& loss = Field(session, "loss").list_value();
  ASSERT_EQ(loss.values_size(), 7);
  EXPECT_EQ(loss.values(6).list_value().values(0).number_value(), 8);
  EXPECT_NEAR(loss.values(6).list_value().values(1).number_value(), fetched.back(), 1e-5);
  EXPECT_EQ(Field(session, "metrics").list_value().values_size(), 0);

  // The client's own measurements (a dev BLEU it decoded) appear on the session's page.
  v1::RecordMetricsRequest metrics;
  for (auto [step, bleu] : {std::pair<int64_t, double>{1, 0.25}, {8, 12.5}}) {
    v1::MetricPoint* p = metrics.add_points();
    p->set_name("dev_bleu");
    p->set_step(step);
    p->set_value(bleu);
  }
  ASSERT_OK(coordinator_.RecordMetrics(s.session(), metrics));
  metrics.mutable_points(0)->set_name("bad name");
  EXPECT_EQ(coordinator_.RecordMetrics(s.session(), metrics).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(coordinator_.RecordMetrics("s-none", metrics).code(), absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(SessionDetail with_metrics, coordinator_.DescribeSession(s.session(), false));
  const Struct page = Parse(SessionJson(with_metrics));
  const auto& curves = Field(page, "metrics").list_value();
  ASSERT_EQ(curves.values_size(), 1);
  const Struct& bleu = curves.values(0).struct_value();
  EXPECT_EQ(Field(bleu, "name").string_value(), "dev_bleu");
  const auto& points = Field(bleu, "points").list_value();
  ASSERT_EQ(points.values_size(), 2);  // the refused request kept nothing
  EXPECT_EQ(points.values(1).list_value().values(0).number_value(), 8);
  EXPECT_EQ(points.values(1).list_value().values(1).number_value(), 12.5);

  const Struct explain = Parse(ExplainJson(detail));
  const Struct& cost = Field(explain, "cost").struct_value();
  EXPECT_EQ(Field(cost, "mesh").string_value(), "x:2");
  EXPECT_GT(Field(cost, "tensors").list_value().values_size(), 5);
  // Data parallel training: the gradients are summed over x, so there is a collective.
  EXPECT_GT(Field(cost, "collectives").list_value().values_size(), 0);
  EXPECT_GT(Field(Field(cost, "totals").struct_value(), "predicted_s").number_value(), 0);
  EXPECT_EQ(Field(explain, "text").string_value(), s.explain());
}

TEST_F(DashboardTest, ALostWorkerAndTheFailedStepAreRecentErrors) {
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(TrainingRequest()));
  ASSERT_OK(coordinator_.RunStep(s.session(), {}, {"loss"}).status());
  workers_.Break("w1", absl::UnavailableError("connection reset <b>by peer</b>"));
  EXPECT_FALSE(coordinator_.RunStep(s.session(), {}, {"loss"}).ok());
  Heartbeat();  // worker 1's is refused: it was dropped

  const ClusterSnapshot snap = coordinator_.Snapshot();
  ASSERT_EQ(snap.workers.size(), 2u);  // w0 live, w1 lost
  EXPECT_EQ(snap.workers[0].address, "w0");
  EXPECT_EQ(snap.workers[0].state, "idle");
  EXPECT_EQ(snap.workers[1].address, "w1");
  EXPECT_EQ(snap.workers[1].state, "lost");
  EXPECT_TRUE(absl::StrContains(snap.workers[1].lost_why, "unreachable")) << snap.workers[1].lost_why;
  EXPECT_EQ(snap.workers[1].session, s.session());
  EXPECT_FALSE(snap.workers[1].lost_why.empty());
  ASSERT_EQ(snap.sessions.size(), 1u);
  EXPECT_EQ(snap.sessions[0].state, "failed");
  EXPECT_TRUE(absl::StrContains(snap.sessions[0].last_error, "worker 1 (w1"))
      << snap.sessions[0].last_error;
  ASSERT_GE(snap.errors.size(), 2u);
  bool step_error = false, lost_error = false;
  for (const ErrorEvent& e : snap.errors) {
    EXPECT_EQ(e.session, s.session());
    step_error |= absl::StrContains(e.message, "step 2 of session");
    lost_error |= absl::StrContains(e.message, "worker 1 (w1) dropped");
  }
  EXPECT_TRUE(step_error);
  EXPECT_TRUE(lost_error);
  const std::string json = ClusterJson(snap);
  EXPECT_FALSE(absl::StrContains(json, "<b>"));
  EXPECT_TRUE(absl::StrContains(json, "\\u003cb\\u003eby peer"));
  Parse(json);

  // A worker back at the lost one's address replaces it.
  v1::RegisterWorkerRequest again;
  again.set_address("w1");
  again.set_incarnation("inc2");
  again.set_secret("secret-0123456789abcdef");
  workers_.Break("w1", absl::OkStatus());
  ASSERT_OK(coordinator_.RegisterWorker(again).status());
  const ClusterSnapshot back = coordinator_.Snapshot();
  ASSERT_EQ(back.workers.size(), 2u);
  for (const WorkerSnapshot& w : back.workers) EXPECT_NE(w.state, "lost") << w.address;
}

// A worker shutting down says so in its last heartbeat: "draining", until it deregisters.
TEST_F(DashboardTest, AWorkerShuttingDownIsDraining) {
  Heartbeat(/*draining_id=*/ids_[1]);
  ClusterSnapshot snap = coordinator_.Snapshot();
  ASSERT_EQ(snap.workers.size(), 2u);
  EXPECT_EQ(snap.workers[0].state, "idle");
  EXPECT_EQ(snap.workers[1].state, "draining");
  v1::DeregisterWorkerRequest leave;
  leave.set_worker_id(ids_[1]);
  leave.set_incarnation("inc");
  leave.set_reason("shutting down (SIGTERM)");
  ASSERT_OK(coordinator_.DeregisterWorker(leave));
  snap = coordinator_.Snapshot();
  ASSERT_EQ(snap.workers.size(), 2u);
  EXPECT_EQ(snap.workers[1].state, "lost");
  EXPECT_TRUE(absl::StrContains(snap.workers[1].lost_why, "left the cluster: shutting down"));
}

TEST_F(DashboardTest, EndpointsNeedTheTokenAndThePageHasAContentSecurityPolicy) {
  constexpr char kToken[] = "0123456789abcdef0123456789abcdef";
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(TrainingRequest()));
  ASSERT_OK(coordinator_.RunStep(s.session(), {}, {"loss"}).status());
  ASSERT_OK(coordinator_.RunStep(s.session(), {}, {"loss"}).status());
  HttpServer http;
  RegisterDashboard(&coordinator_, &http);
  HttpServerOptions options;
  options.tokens = {kToken};
  ASSERT_OK(http.Start(options));
  httplib::Client c("127.0.0.1", http.port());
  c.set_connection_timeout(5);
  c.set_read_timeout(5);
  const httplib::Headers auth = {{"Authorization", absl::StrCat("Bearer ", kToken)}};

  for (const char* path : {"/", "/dashboard.js", "/api/cluster"}) {
    auto none = c.Get(path);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << path;
    EXPECT_FALSE(absl::StrContains(none->body, s.session())) << path;
  }
  auto page = c.Get("/", auth);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_TRUE(absl::StrContains(page->get_header_value("Content-Type"), "text/html"));
  const std::string csp = page->get_header_value("Content-Security-Policy");
  EXPECT_TRUE(absl::StrContains(csp, "default-src 'self'")) << csp;
  EXPECT_TRUE(absl::StrContains(csp, "script-src 'self'")) << csp;
  EXPECT_FALSE(absl::StrContains(csp, "unsafe-inline")) << csp;
  EXPECT_TRUE(absl::StrContains(page->body, "<script src=\"dashboard.js\""));
  EXPECT_FALSE(absl::StrContains(page->body, "<script>"));  // no inline script
  auto js = c.Get("/dashboard.js", auth);
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_TRUE(absl::StrContains(js->body, "textContent"));
  EXPECT_FALSE(absl::StrContains(js->body, "innerHTML"));

  auto cluster = c.Get("/api/cluster", auth);
  ASSERT_TRUE(cluster);
  EXPECT_EQ(cluster->status, 200);
  EXPECT_TRUE(absl::StrContains(cluster->get_header_value("Content-Type"), "application/json"));
  EXPECT_TRUE(absl::StrContains(cluster->body, s.session()));
  Parse(cluster->body);
  auto session = c.Get(absl::StrCat("/api/session?id=", s.session()), auth);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->status, 200);
  EXPECT_EQ(Field(Parse(session->body), "loss").list_value().values_size(), 2);
  auto explain = c.Get(absl::StrCat("/api/explain?id=", s.session()), auth);
  ASSERT_TRUE(explain);
  EXPECT_EQ(explain->status, 200);
  Parse(explain->body);
  auto unknown = c.Get("/api/session?id=s-nope", auth);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_TRUE(absl::StrContains(unknown->body, "no session 's-nope'"));
  auto missing = c.Get("/api/explain", auth);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400);
  http.Stop();
}

}  // namespace
}  // namespace meshrt
