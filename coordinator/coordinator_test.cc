// Session logic of the coordinator with workers in this process (no sockets): results equal the
// reference interpreter; bad input is refused before dispatch; a failing worker fails its session
// with an error naming it, releases the others, and a replacement lets a new session run.
#include "coordinator/coordinator.h"

#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "client/random_feeds.h"
#include "testing/cluster/in_process_workers.h"
#include "coordinator/test_graphs.h"
#include "core/ops/builder.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "core/train/training_spec.h"
#include "gtest/gtest.h"
#include "rpc/error_origin.h"

namespace meshrt {
namespace {

v1::Graph MlpGraph() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w1 = b.Placeholder("w1", Shape({{"d_in", 16}, {"hidden", 32}}));
  TensorRef w2 = b.Placeholder("w2", Shape({{"hidden", 32}, {"d_out", 8}}));
  TensorRef h = b.Relu(b.Einsum({x, w1}, Shape({{"batch", 8}, {"hidden", 32}}), "h"), "r");
  TensorRef y = b.Einsum({h, w2}, Shape({{"batch", 8}, {"d_out", 8}}), "y");
  b.MarkOutput(y);
  b.MarkOutput(b.ReduceSum(y, {"d_out"}, "s"));
  return b.proto();
}

v1::CreateSessionRequest Request(const std::string& mesh, const std::string& layout,
                                 int64_t timeout_ms = 2000) {
  v1::CreateSessionRequest r;
  *r.mutable_graph() = MlpGraph();
  Mesh m = Mesh::Parse(mesh).value();
  *r.mutable_mesh() = m.ToProto();
  *r.mutable_rules() = LayoutRules::Parse(layout, m).value().ToProto();
  r.set_timeout_ms(timeout_ms);
  return r;
}

// Adds an in-process worker at `address` and registers it with `coordinator`.
absl::Status RegisterWorker(Coordinator& coordinator, InProcessWorkers& workers,
                            const std::string& address) {
  workers.AddWorker(address);
  v1::RegisterWorkerRequest r;
  r.set_address(address);
  r.set_incarnation("inc-" + address);
  r.set_secret("secret-of-" + address + "-0123456789");
  return coordinator.RegisterWorker(r).status();
}

class CoordinatorTest : public ::testing::Test {
 protected:
  CoordinatorTest() : coordinator_(Options(), &workers_) {}

  static CoordinatorOptions Options() {
    CoordinatorOptions o;
    o.heartbeat_timeout = absl::Seconds(60);
    return o;
  }

  void Register(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_OK(RegisterWorker(coordinator_, workers_, absl::StrCat("w", next_++)));
    }
  }

  int FreeWorkers() {
    int free = 0;
    const v1::ListWorkersResponse list = coordinator_.ListWorkers();
    for (const v1::WorkerInfo& w : list.workers()) free += w.session().empty();
    return free;
  }

  InProcessWorkers workers_;
  Coordinator coordinator_;
  int next_ = 0;
};

TEST_F(CoordinatorTest, RunsStepsEqualToTheReference) {
  Register(4);
  const Graph g = Graph::Build(MlpGraph()).value();
  const TensorMap feeds = RandomFeeds(g, 3);
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, feeds));
  for (const char* layout : {"batch:rows,hidden:cols", "d_in:rows,hidden:cols", ""}) {
    SCOPED_TRACE(layout);
    ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s,
                         coordinator_.CreateSession(Request("rows:2,cols:2", layout)));
    EXPECT_EQ(s.workers_size(), 4);
    EXPECT_NE(s.explain().find("tensors:"), std::string::npos);
    EXPECT_EQ(FreeWorkers(), 0);
    for (int step = 0; step < 2; ++step) {
      ASSERT_OK_AND_ASSIGN(TensorMap got, coordinator_.RunStep(s.session(), feeds, {}));
      ASSERT_EQ(got.size(), 2u);  // the graph's outputs, y and s
      EXPECT_LE(MaxRelativeError(got.at("y"), want.at("y")), 1e-5);
      EXPECT_LE(MaxRelativeError(got.at("s"), want.at("s")), 1e-5);
    }
    ASSERT_OK_AND_ASSIGN(TensorMap h, coordinator_.RunStep(s.session(), feeds, {"h"}));
    EXPECT_LE(MaxRelativeError(h.at("h"), want.at("h")), 1e-5);
    ASSERT_OK(coordinator_.CloseSession(s.session()));
    EXPECT_EQ(FreeWorkers(), 4);
  }
}

// The planner re-reads --profile for every auto_layout session: a calibration written later
// changes the choice without a restart.
std::string RulesOf(const v1::CreateSessionResponse& s) {
  return LayoutRules::FromProto(s.rules(), *Mesh::FromProto(s.mesh())).value().ToString();
}

// Workers on two hosts (processors 0, 1 on one, 2, 3 on the other: rows span the hosts, cols do
// not) and a profile whose cross-host links are slow: the planner splits `hidden`, whose partial
// sums are allreduced, over cols, within each host; on one host either order would do.
TEST(CoordinatorProfileTest, AutoLayoutKeepsCollectivesWithinAHost) {
  CoordinatorOptions o;
  o.heartbeat_timeout = absl::Seconds(60);
  ASSERT_OK_AND_ASSIGN(
      o.profile,
      ParseHardwareProfile("gemm_small_flops_per_s 1e6\ngemm_large_flops_per_s 1e6\n"
                           "elementwise_flops_per_s 1e6\nmemory_bytes_per_s 1e9\n"
                           "allreduce.alpha_s 1e-9\nallreduce.beta_bytes_per_s 1e12\n"
                           "cross_host.allreduce.alpha_s 10\n",
                           "two hosts"));
  InProcessWorkers workers;
  Coordinator coordinator(o, &workers);
  for (const char* address : {"10.0.0.1:7000", "10.0.0.1:7001", "10.0.0.2:7000", "10.0.0.2:7001"}) {
    ASSERT_OK(RegisterWorker(coordinator, workers, address));
  }
  v1::CreateSessionRequest request = Request("rows:2,cols:2", "");
  request.set_auto_layout(true);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator.CreateSession(request));
  EXPECT_EQ(RulesOf(s), "batch:rows,hidden:cols") << s.plan();
  ASSERT_OK(coordinator.CloseSession(s.session()));
}

TEST(CoordinatorProfileTest, AutoLayoutRereadsTheProfileFile) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/cluster.profile");
  auto write = [&](double alpha) {
    std::ofstream out(path);
    out << "gemm_small_flops_per_s 1e6\ngemm_large_flops_per_s 1e6\nelementwise_flops_per_s 1e6\n"
           "memory_bytes_per_s 1e9\nallreduce.alpha_s "
        << alpha << "\nallreduce.beta_bytes_per_s 1e12\n";
  };
  write(1e-9);  // communication is free: split the batch and hidden both
  CoordinatorOptions o;
  o.heartbeat_timeout = absl::Seconds(60);
  o.profile = *LoadHardwareProfile(path);
  o.profile_path = path;
  InProcessWorkers workers;
  Coordinator coordinator(o, &workers);
  for (int i = 0; i < 4; ++i) {  // one host: the profile's same-host links
    ASSERT_OK(RegisterWorker(coordinator, workers, absl::StrCat("localhost:", 7000 + i)));
  }
  v1::CreateSessionRequest request = Request("rows:2,cols:2", "");
  request.set_auto_layout(true);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse cheap, coordinator.CreateSession(request));
  EXPECT_TRUE(absl::StrContains(cheap.plan(), absl::StrCat("hardware profile: ", path)))
      << cheap.plan();
  const std::string cheap_rules = RulesOf(cheap);
  EXPECT_TRUE(absl::StrContains(cheap_rules, "hidden:")) << cheap.plan();
  ASSERT_OK(coordinator.CloseSession(cheap.session()));
  write(10);  // a collective costs 10 s: split only the batch, which needs none in this step
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse dear, coordinator.CreateSession(request));
  EXPECT_EQ(RulesOf(dear), "batch:rows") << dear.plan();
  ASSERT_OK(coordinator.CloseSession(dear.session()));
  // A file that no longer parses keeps the last good profile.
  { std::ofstream(path) << "gemm_large_flops_per_s -1\n"; }
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse kept, coordinator.CreateSession(request));
  EXPECT_EQ(RulesOf(kept), "batch:rows") << kept.plan();
}

TEST_F(CoordinatorTest, AutoLayoutPlansTheMeshAndRulesAndRunsEqualToTheReference) {
  Register(4);
  const Graph g = Graph::Build(MlpGraph()).value();
  const TensorMap feeds = RandomFeeds(g, 5);
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, feeds));
  v1::CreateSessionRequest r;
  *r.mutable_graph() = MlpGraph();
  r.set_auto_layout(true);
  r.set_auto_mesh_processors(4);
  r.set_timeout_ms(2000);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(r));
  // The whole batch over the four processors: a quarter of the products, no communication.
  ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::FromProto(s.mesh()));
  ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::FromProto(s.rules(), mesh));
  EXPECT_EQ(mesh.ToString(), "x:4");
  EXPECT_EQ(rules.ToString(), "batch:x");
  EXPECT_TRUE(absl::StrContains(s.plan(), "planner: chose mesh x:4  layout batch:x")) << s.plan();
  EXPECT_TRUE(absl::StrContains(s.plan(), "next 1:")) << s.plan();
  EXPECT_EQ(s.workers_size(), 4);
  ASSERT_OK_AND_ASSIGN(TensorMap got, coordinator_.RunStep(s.session(), feeds, {}));
  EXPECT_LE(MaxRelativeError(got.at("y"), want.at("y")), 1e-5);
  ASSERT_OK(coordinator_.CloseSession(s.session()));
  // A fixed mesh with auto rules: the response names what was chosen, on that mesh.
  v1::CreateSessionRequest fixed = Request("rows:2,cols:2", "");
  fixed.set_auto_layout(true);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse f, coordinator_.CreateSession(fixed));
  ASSERT_OK_AND_ASSIGN(Mesh fixed_mesh, Mesh::FromProto(f.mesh()));
  EXPECT_EQ(fixed_mesh.ToString(), "rows:2,cols:2");
  ASSERT_OK_AND_ASSIGN(got, coordinator_.RunStep(f.session(), feeds, {}));
  EXPECT_LE(MaxRelativeError(got.at("y"), want.at("y")), 1e-5);
  ASSERT_OK(coordinator_.CloseSession(f.session()));
  // Requests that contradict themselves are refused before anything is lowered or dispatched.
  v1::CreateSessionRequest both = Request("rows:2,cols:2", "batch:rows");
  both.set_auto_layout(true);
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(both).status(),
                       absl::StatusCode::kInvalidArgument, {"both layout rules and auto_layout"}));
  v1::CreateSessionRequest mesh_only = r;
  mesh_only.set_auto_layout(false);
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(mesh_only).status(),
                       absl::StatusCode::kInvalidArgument, {"set auto_layout"}));
  v1::CreateSessionRequest two_meshes = Request("rows:2,cols:2", "");
  two_meshes.set_auto_layout(true);
  two_meshes.set_auto_mesh_processors(4);
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(two_meshes).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"both a mesh and auto_mesh_processors"}));
  v1::CreateSessionRequest tiny = r;
  tiny.set_memory_limit_bytes(64);
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(tiny).status(), absl::StatusCode::kNotFound,
                       {"auto_layout: no layout", "over the limit"}));
  EXPECT_EQ(FreeWorkers(), 4);
}

// Training is a request: CreateSession's TrainingSpec adds the gradients and Adam's updates on the
// coordinator; the losses of every step equal the reference interpreter's on the same trained
// graph, under dp and dp x mp; the response names the training tensors; a bad spec is refused
// before any worker is taken.
TEST_F(CoordinatorTest, ATrainingSpecTrainsTheGraphEqualToTheReference) {
  Register(4);
  const Graph forward = RegressionGraph();
  v1::TrainingSpec spec;
  spec.set_loss("loss");
  spec.add_variables("w1");
  spec.add_variables("w2");
  spec.set_optimizer("adam");
  spec.mutable_learning_rate()->set_base(0.05f);
  ASSERT_OK_AND_ASSIGN(const TrainedGraph reference, AddTraining(forward, spec));
  for (const auto& [mesh, layout] : std::vector<std::pair<std::string, std::string>>{
           {"x:2", "batch:x"}, {"rows:2,cols:2", "batch:rows,hidden:cols"}}) {
    SCOPED_TRACE(mesh);
    v1::CreateSessionRequest r;
    *r.mutable_graph() = forward.proto();
    const Mesh m = Mesh::Parse(mesh).value();
    *r.mutable_mesh() = m.ToProto();
    *r.mutable_rules() = LayoutRules::Parse(layout, m).value().ToProto();
    r.set_timeout_ms(2000);
    *r.mutable_training() = spec;
    ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(r));
    EXPECT_EQ(s.training().loss(), "loss");
    EXPECT_EQ(s.training().learning_rate(), reference.outputs.learning_rate());
    EXPECT_FALSE(s.training().global_step().empty());
    TensorMap state;
    std::vector<float> losses;
    for (int step = 0; step < 4; ++step) {
      ASSERT_OK_AND_ASSIGN(TensorMap want, InterpretStep(reference.graph, {}, {"loss"}, &state));
      ASSERT_OK_AND_ASSIGN(TensorMap got, coordinator_.RunStep(s.session(), {}, {"loss"}));
      EXPECT_LE(MaxRelativeError(got.at("loss"), want.at("loss")), 1e-5) << "step " << step;
      losses.push_back(got.at("loss").f32()[0]);
    }
    EXPECT_LT(losses.back(), losses.front());  // it trains
    ASSERT_OK(coordinator_.CloseSession(s.session()));
  }
  v1::CreateSessionRequest bad = Request("x:2", "batch:x");
  *bad.mutable_graph() = forward.proto();
  bad.mutable_training()->set_loss("h");
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(bad).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"training: the loss 'h' must be a scalar float32"}));
  EXPECT_EQ(FreeWorkers(), 4);
}

// Feeds are sliced per worker (workers with the same slices share them; replicated feeds are
// passed whole) and fetches assembled from the owners' slices: odd slice sizes, inputs split on
// one mesh dim, the other or both, and replicated, against the reference.
TEST_F(CoordinatorTest, FeedsAndFetchesOfOddSplitTensorsEqualTheReference) {
  Register(4);
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"a", 6}, {"b", 5}}));
  TensorRef w = b.Placeholder("w", Shape({{"b", 5}, {"c", 6}}));
  b.MarkOutput(b.Einsum({x, w}, Shape({{"a", 6}, {"c", 6}}), "y"));
  b.MarkOutput(b.Neg(x, "n"));
  b.MarkOutput(b.Neg(w, "m"));
  const v1::Graph proto = b.proto();
  const Graph g = Graph::Build(proto).value();
  const TensorMap feeds = RandomFeeds(g, 11);
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, feeds));
  for (const char* layout : {"a:rows,c:cols", "a:cols", "c:rows", "a:cols,c:rows", ""}) {
    SCOPED_TRACE(layout);
    v1::CreateSessionRequest r;
    *r.mutable_graph() = proto;
    const Mesh m = Mesh::Parse("rows:2,cols:2").value();
    *r.mutable_mesh() = m.ToProto();
    *r.mutable_rules() = LayoutRules::Parse(layout, m).value().ToProto();
    r.set_timeout_ms(2000);
    ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(r));
    ASSERT_OK_AND_ASSIGN(TensorMap got, coordinator_.RunStep(s.session(), feeds, {}));
    EXPECT_LE(MaxRelativeError(got.at("y"), want.at("y")), 1e-5);
    EXPECT_EQ(MaxRelativeError(got.at("n"), want.at("n")), 0.0);
    EXPECT_EQ(MaxRelativeError(got.at("m"), want.at("m")), 0.0);
    ASSERT_OK_AND_ASSIGN(TensorMap only, coordinator_.RunStep(s.session(), feeds, {"n"}));
    ASSERT_EQ(only.size(), 1u);
    EXPECT_EQ(MaxRelativeError(only.at("n"), want.at("n")), 0.0);
    ASSERT_OK(coordinator_.CloseSession(s.session()));
  }
}

TEST_F(CoordinatorTest, BadInputIsRefusedBeforeDispatch) {
  Register(4);
  EXPECT_TRUE(StatusIs(
      coordinator_.CreateSession(Request("rows:2,cols:2", "batch:rows,hidden:rows")).status(),
      absl::StatusCode::kInvalidArgument, {"tensor 'h'", "'batch' and 'hidden'"}));
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("rows:4,cols:2", "batch:rows")).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"needs 8 worker(s) but 4 are registered", "smaller mesh"}));
  // A typo in a rule would split nothing: refused, with the dim it probably meant.
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("rows:2,cols:2", "batchh:rows")).status(),
                       absl::StatusCode::kInvalidArgument,
                       {"layout rule 'batchh:rows'", "did you mean 'batch'?"}));
  v1::CreateSessionRequest malformed = Request("rows:2,cols:2", "");
  malformed.mutable_graph()->mutable_ops(3)->set_type("frobnicate");
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(malformed).status(),
                       absl::StatusCode::kInvalidArgument, {"unknown type 'frobnicate'"}));
  EXPECT_EQ(workers_.loads(), 0);

  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s,
                       coordinator_.CreateSession(Request("rows:2,cols:2", "batch:rows")));
  const Graph g = Graph::Build(MlpGraph()).value();
  TensorMap feeds = RandomFeeds(g, 3);
  TensorMap unknown = feeds;
  unknown["nope"] = feeds.at("x");
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), unknown, {}).status(),
                       absl::StatusCode::kInvalidArgument, {"feed 'nope'"}));
  TensorMap wrong_shape = feeds;
  wrong_shape["x"] = Tensor(DType::kFloat32, Shape({{"batch", 8}, {"d_in", 15}}));
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), wrong_shape, {}).status(),
                       absl::StatusCode::kInvalidArgument, {"feed 'x'", "d_in:15"}));
  TensorMap wrong_dtype = feeds;
  wrong_dtype["x"] = Tensor(DType::kInt32, Shape({{"batch", 8}, {"d_in", 16}}));
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), wrong_dtype, {}).status(),
                       absl::StatusCode::kInvalidArgument, {"feed 'x'", "int32"}));
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), feeds, {"zz"}).status(),
                       absl::StatusCode::kInvalidArgument, {"fetch 'zz'"}));
  EXPECT_TRUE(
      StatusIs(coordinator_.RunStep("s999", feeds, {}).status(), absl::StatusCode::kNotFound));
  // The session survived all of that.
  EXPECT_TRUE(coordinator_.RunStep(s.session(), feeds, {}).ok());
}

TEST_F(CoordinatorTest, DeadWorkerFailsItsSessionOnlyAndCanBeReplaced) {
  Register(4);
  const Graph g = Graph::Build(MlpGraph()).value();
  const TensorMap feeds = RandomFeeds(g, 3);
  ASSERT_OK_AND_ASSIGN(
      v1::CreateSessionResponse s,
      coordinator_.CreateSession(Request("rows:2,cols:2", "batch:rows,hidden:cols")));
  ASSERT_TRUE(coordinator_.RunStep(s.session(), feeds, {}).ok());
  workers_.Break("w2", absl::UnavailableError("Socket closed"));
  absl::Status failed = coordinator_.RunStep(s.session(), feeds, {}).status();
  EXPECT_TRUE(
      StatusIs(failed, absl::StatusCode::kUnavailable,
               {"step 2", "worker 2 (w2, mesh coordinate (1,0)) is unreachable", "Socket closed"}));
  // The session stays failed; the dead worker is gone; the others are free again.
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), feeds, {}).status(),
                       absl::StatusCode::kFailedPrecondition, {"worker 2"}));
  EXPECT_EQ(coordinator_.ListWorkers().workers_size(), 3);
  EXPECT_EQ(FreeWorkers(), 3);
  // Not enough workers for a 2x2 mesh until a replacement registers.
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("rows:2,cols:2", "", 100)).status(),
                       absl::StatusCode::kInvalidArgument, {"3 are registered"}));
  Register(1);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s2,
                       coordinator_.CreateSession(Request("rows:2,cols:2", "d_in:rows")));
  ASSERT_OK_AND_ASSIGN(TensorMap got, coordinator_.RunStep(s2.session(), feeds, {"s"}));
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, feeds, {"s"}));
  EXPECT_LE(MaxRelativeError(got.at("s"), want.at("s")), 1e-5);
  ASSERT_OK(coordinator_.CloseSession(s.session()));
}

// The origin travels as a status payload (rpc/error_origin.h): a worker's own Unavailable (here a
// peer's connection closed under its collective) fails the step but leaves the worker registered;
// the same code without the mark is a transport failure and drops the worker.
TEST_F(CoordinatorTest, WorkerReportedUnavailableIsNotATransportFailure) {
  Register(4);
  const Graph g = Graph::Build(MlpGraph()).value();
  const TensorMap feeds = RandomFeeds(g, 3);
  ASSERT_OK_AND_ASSIGN(
      v1::CreateSessionResponse s,
      coordinator_.CreateSession(Request("rows:2,cols:2", "batch:rows,hidden:cols")));
  workers_.Break("w2", MarkWorkerReported(absl::UnavailableError("step 1: peer 0 closed")));
  const absl::Status reported = coordinator_.RunStep(s.session(), feeds, {}).status();
  EXPECT_TRUE(StatusIs(reported, absl::StatusCode::kUnavailable,
                       {"worker 2 (w2, mesh coordinate (1,0)): step 1: peer 0 closed"}));
  EXPECT_FALSE(absl::StrContains(reported.message(), "unreachable")) << reported;
  EXPECT_EQ(coordinator_.ListWorkers().workers_size(), 4);
  workers_.Break("w2", absl::OkStatus());
  ASSERT_OK(coordinator_.CloseSession(s.session()));

  ASSERT_OK_AND_ASSIGN(
      v1::CreateSessionResponse s2,
      coordinator_.CreateSession(Request("rows:2,cols:2", "batch:rows,hidden:cols")));
  workers_.Break("w2", absl::UnavailableError("step 1: peer 0 closed"));  // the text alone: gone
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s2.session(), feeds, {}).status(),
                       absl::StatusCode::kUnavailable,
                       {"worker 2 (w2, mesh coordinate (1,0)) is unreachable"}));
  EXPECT_EQ(coordinator_.ListWorkers().workers_size(), 3);
}

// The same while loading: a worker's own DeadlineExceeded (its peers never joined) fails the
// session but keeps the worker; the transport's drops every worker it failed on.
TEST_F(CoordinatorTest, WorkerReportedLoadFailureKeepsTheWorker) {
  Register(4);
  workers_.Break("w1", MarkWorkerReported(absl::DeadlineExceededError("peers never joined")));
  EXPECT_TRUE(StatusIs(
      coordinator_.CreateSession(Request("rows:2,cols:2", "batch:rows")).status(),
      absl::StatusCode::kDeadlineExceeded,
      {"loading session", "worker 1 (w1, mesh coordinate (0,1)): peers never joined"}));
  EXPECT_EQ(coordinator_.ListWorkers().workers_size(), 4);

  workers_.Break("w1", absl::UnavailableError("connection refused"));
  workers_.Break("w3", absl::UnavailableError("connection refused"));
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(Request("rows:2,cols:2", "batch:rows")).status(),
                       absl::StatusCode::kUnavailable, {"loading session", "connection refused"}));
  EXPECT_EQ(coordinator_.ListWorkers().workers_size(), 2);
}

TEST_F(CoordinatorTest, WorkerErrorNamesTheWorkerAndStep) {
  Register(2);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s,
                       coordinator_.CreateSession(Request("p:2", "hidden:p")));
  const Graph g = Graph::Build(MlpGraph()).value();
  workers_.Break("w1", absl::InternalError("step 1: instruction 3 (source_op 'y'): boom"));
  absl::Status st = coordinator_.RunStep(s.session(), RandomFeeds(g, 3), {}).status();
  EXPECT_TRUE(
      StatusIs(st, absl::StatusCode::kInternal,
               {"step 1 of session", "worker 1 (w1, mesh coordinate (1))", "source_op 'y'"}));
}

TEST_F(CoordinatorTest, SilentWorkerIsDroppedAfterHeartbeatTimeout) {
  CoordinatorOptions o;
  o.heartbeat_timeout = absl::Milliseconds(300);
  InProcessWorkers workers;
  Coordinator c(o, &workers);
  workers.AddWorker("a");
  v1::RegisterWorkerRequest r;
  r.set_address("a");
  r.set_incarnation("1");
  r.set_secret("secret-0123456789abcdef");
  ASSERT_OK_AND_ASSIGN(v1::RegisterWorkerResponse reg, c.RegisterWorker(r));
  EXPECT_EQ(c.ListWorkers().workers_size(), 1);
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(c.ListWorkers().workers_size(), 0);
  v1::HeartbeatRequest hb;
  hb.set_worker_id(reg.worker_id());
  hb.set_incarnation("1");
  ASSERT_OK_AND_ASSIGN(v1::HeartbeatResponse again, c.Heartbeat(hb));
  EXPECT_TRUE(again.reregister());
}

}  // namespace
}  // namespace meshrt

namespace meshrt {
namespace {

// Variables stay on the workers between steps; one request can run several steps there.
TEST_F(CoordinatorTest, VariablesLiveOnTheWorkersAcrossSteps) {
  Register(4);
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 4}, {"d", 4}}));
  TensorRef acc = b.Variable("acc", Shape({{"batch", 4}, {"d", 4}}));
  TensorRef n = b.Variable("n", Shape({}));
  b.AssignAdd(acc, x, "acc_next");
  b.AssignAdd(n,
              b.Apply(
                  [] {
                    v1::Op op;
                    op.set_type("ones");
                    return op;
                  }(),
                  {}),
              "n_next");
  v1::CreateSessionRequest r = Request("rows:2,cols:2", "batch:rows,d:cols");
  *r.mutable_graph() = b.proto();
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s, coordinator_.CreateSession(r));
  const Graph g = Graph::Build(b.proto()).value();
  const TensorMap feeds = RandomFeeds(g, 5);
  ASSERT_OK_AND_ASSIGN(TensorMap one, coordinator_.RunStep(s.session(), feeds, {"acc", "n"}));
  EXPECT_EQ(one.at("n").f32()[0], 0);  // the value at the start of step 1
  ASSERT_OK_AND_ASSIGN(TensorMap got,
                       coordinator_.RunStep(s.session(), feeds, {"acc", "n_next"}, 6));
  EXPECT_EQ(got.at("n_next").f32()[0], 7);  // 1 + 6 steps
  for (int i = 0; i < 16; ++i) {
    // acc at the start of the 7th step holds 6 additions of x.
    EXPECT_NEAR(got.at("acc").f32()[i], 6 * feeds.at("x").f32()[i], 1e-5) << i;
  }
  EXPECT_TRUE(StatusIs(coordinator_.RunStep(s.session(), feeds, {}, -1).status(),
                       absl::StatusCode::kInvalidArgument, {"num_steps -1"}));
  ASSERT_OK(coordinator_.CloseSession(s.session()));
}

TEST_F(CoordinatorTest, SessionsBelongToTheirCreatorAndHaveUnguessableIds) {
  Register(4);
  const Caller alice{Role::kClient, "alice"};
  const Caller bob{Role::kClient, "bob"};
  const Caller op{Role::kOperator, ""};
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse a,
                       coordinator_.CreateSession(Request("rows:2", "batch:rows"), alice));
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse b,
                       coordinator_.CreateSession(Request("rows:2", "batch:rows"), bob));
  // 128 random bits, not a counter.
  EXPECT_EQ(a.session().size(), 34u) << a.session();
  EXPECT_TRUE(absl::StartsWith(a.session(), "s-"));
  EXPECT_NE(a.session(), b.session());
  EXPECT_TRUE(coordinator_.CheckSessionAccess(a.session(), alice).ok());
  EXPECT_TRUE(StatusIs(coordinator_.CheckSessionAccess(a.session(), bob),
                       absl::StatusCode::kPermissionDenied, {a.session(), "another client"}));
  EXPECT_TRUE(coordinator_.CheckSessionAccess(a.session(), op).ok());
  EXPECT_TRUE(StatusIs(coordinator_.CheckSessionAccess("s-unknown", op),
                       absl::StatusCode::kNotFound, {"s-unknown"}));
  // A client lists only its own sessions; a worker busy in another's shows no id.
  const v1::ListWorkersResponse seen_by_bob = coordinator_.ListWorkers(bob);
  ASSERT_EQ(seen_by_bob.sessions_size(), 1);
  EXPECT_EQ(seen_by_bob.sessions(0), b.session());
  ASSERT_EQ(seen_by_bob.session_infos_size(), 1);
  const v1::SessionInfo& info = seen_by_bob.session_infos(0);
  EXPECT_EQ(info.session(), b.session());
  EXPECT_EQ(info.owner(), "bob");
  EXPECT_EQ(info.mesh(), "rows:2");
  EXPECT_EQ(info.layout(), "batch:rows");
  EXPECT_EQ(info.state(), "ready");
  EXPECT_EQ(info.step(), 0);
  EXPECT_TRUE(info.last_error().empty());
  for (const v1::WorkerInfo& w : seen_by_bob.workers()) {
    EXPECT_NE(w.session(), a.session());
  }
  EXPECT_EQ(coordinator_.ListWorkers(op).sessions_size(), 2);
  ASSERT_OK(coordinator_.CloseSession(a.session()));
  ASSERT_OK(coordinator_.CloseSession(b.session()));
}

TEST_F(CoordinatorTest, RegistrationNeedsTheWorkersSecretAndEmptyRequestsAreNamed) {
  v1::RegisterWorkerRequest r;
  r.set_address("w-nosecret");
  r.set_incarnation("inc");
  EXPECT_TRUE(StatusIs(coordinator_.RegisterWorker(r).status(), absl::StatusCode::kInvalidArgument,
                       {"secret"}));
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(v1::CreateSessionRequest()).status(),
                       absl::StatusCode::kInvalidArgument, {"graph is empty"}));
  v1::CreateSessionRequest no_mesh = Request("rows:2", "");
  no_mesh.clear_mesh();
  EXPECT_TRUE(StatusIs(coordinator_.CreateSession(no_mesh).status(),
                       absl::StatusCode::kInvalidArgument, {"mesh is empty"}));
}

}  // namespace
}  // namespace meshrt

namespace meshrt {
namespace {

// A session's KV keys live under its kv_prefix and are deleted when it is closed or fails; keys of
// no live session are refused; a Get blocked on a closed session's key returns at once.
TEST_F(CoordinatorTest, SessionKvKeysAreGoneAfterCloseSessionOrFailure) {
  Register(4);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s1,
                       coordinator_.CreateSession(Request("p:2", "batch:p")));
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s2,
                       coordinator_.CreateSession(Request("p:2", "batch:p")));
  const std::string p1 = workers_.KvPrefix(s1.session()), p2 = workers_.KvPrefix(s2.session());
  ASSERT_FALSE(p1.empty());
  ASSERT_NE(p1, p2);
  KeyValueStore& kv = coordinator_.kv();
  ASSERT_OK(kv.Set(p1 + "/rank/0", "a"));
  ASSERT_OK(kv.Set(p1 + "/rank/1", "b"));
  ASSERT_OK(kv.Set(p2 + "/rank/0", "c"));
  EXPECT_TRUE(StatusIs(kv.Set("session/s999/00000000/k", "x"),
                       absl::StatusCode::kFailedPrecondition,
                       {"'session/s999/00000000/k' is under no live session's prefix"}));

  absl::StatusOr<std::string> blocked;
  const absl::Time start = absl::Now();
  std::thread waiter([&] { blocked = kv.Get(p1 + "/never", absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_OK(coordinator_.CloseSession(s1.session()));
  waiter.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(StatusIs(blocked.status(), absl::StatusCode::kAborted, {p1, "was deleted"}));
  EXPECT_TRUE(StatusIs(kv.Get(p1 + "/rank/0", absl::ZeroDuration()).status(),
                       absl::StatusCode::kFailedPrecondition, {"no live session"}));
  EXPECT_TRUE(StatusIs(kv.Set(p1 + "/rank/2", "late"), absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(coordinator_.kv().size(), 1u);  // only s2's key
  ASSERT_OK_AND_ASSIGN(std::string c, kv.Get(p2 + "/rank/0", absl::ZeroDuration()));
  EXPECT_EQ(c, "c");

  // A failed session's keys go at the failure, before it is closed.
  const Graph g = Graph::Build(MlpGraph()).value();
  const v1::ListWorkersResponse list = coordinator_.ListWorkers();
  for (const v1::WorkerInfo& w : list.workers()) {
    if (w.session() == s2.session()) workers_.Break(w.address(), absl::UnavailableError("gone"));
  }
  EXPECT_FALSE(coordinator_.RunStep(s2.session(), RandomFeeds(g, 3), {}).ok());
  EXPECT_EQ(coordinator_.kv().size(), 0u);
  EXPECT_TRUE(StatusIs(kv.Set(p2 + "/rank/1", "x"), absl::StatusCode::kFailedPrecondition));
}

// Coordinator with `options` and `n` registered in-process workers w0..w{n-1}.
struct SmallCluster {
  SmallCluster(CoordinatorOptions options, int n) : coordinator(options, &workers) {
    for (int i = 0; i < n; ++i) {
      const std::string address = absl::StrCat("w", i);
      workers.AddWorker(address);
      v1::RegisterWorkerRequest r;
      r.set_address(address);
      r.set_incarnation("1");
      r.set_secret("secret-0123456789abcdef");
      EXPECT_TRUE(coordinator.RegisterWorker(r).ok());
    }
  }
  InProcessWorkers workers;
  Coordinator coordinator;
};

TEST(CoordinatorKvQuotaTest, SessionQuotaIsPerProcessorOfItsMesh) {
  CoordinatorOptions o;
  o.kv_keys_per_processor = 2;
  SmallCluster cluster(o, 2);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse s,
                       cluster.coordinator.CreateSession(Request("p:2", "batch:p")));
  const std::string prefix = cluster.workers.KvPrefix(s.session());
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(cluster.coordinator.kv().Set(absl::StrCat(prefix, "/", i), "v"));
  }
  EXPECT_TRUE(StatusIs(cluster.coordinator.kv().Set(prefix + "/4", "v"),
                       absl::StatusCode::kResourceExhausted,
                       {absl::StrCat("session prefix '", prefix, "'"), "quota of 4 keys",
                        "--max_kv_keys_per_processor"}));
}

// Requests over the limits are refused before the graph is built or a worker is asked; the
// coordinator stays usable.
TEST(CoordinatorLimitsTest, OversizedRequestsAreRefusedBeforeBuild) {
  CoordinatorOptions o;
  o.limits.max_ops = 7;  // MlpGraph has 7 ops
  o.limits.max_graph_bytes = 1 << 20;
  SmallCluster cluster(o, 2);
  Coordinator& c = cluster.coordinator;
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse ok, c.CreateSession(Request("p:2", "batch:p")));
  ASSERT_OK(c.CloseSession(ok.session()));
  const int loads = cluster.workers.loads();

  v1::CreateSessionRequest many = Request("p:2", "batch:p");
  v1::Op extra = many.graph().ops(0);
  extra.set_name("x2");
  *many.mutable_graph()->add_ops() = extra;
  EXPECT_TRUE(StatusIs(c.CreateSession(many).status(), absl::StatusCode::kResourceExhausted,
                       {"at least 8 ops", "--max_ops"}));
  // 2^32 processors (an int cast made that a session on 0 workers) and 10^9 processors.
  for (const char* mesh : {"a:65536,b:65536", "a:1000,b:1000,c:1000"}) {
    SCOPED_TRACE(mesh);
    v1::CreateSessionRequest huge = Request("p:2", "");
    huge.clear_mesh();
    const std::vector<Dim> dims = ParseDimList(mesh).value();
    for (const Dim& d : dims) {
      v1::Dim* pd = huge.mutable_mesh()->add_dims();
      pd->set_name(d.name);
      pd->set_size(d.size);
    }
    EXPECT_TRUE(StatusIs(c.CreateSession(huge).status(), absl::StatusCode::kResourceExhausted,
                         {"more than 4096 processors", "--max_mesh_processors"}));
  }
  v1::CreateSessionRequest big = Request("p:2", "batch:p");
  big.mutable_graph()->mutable_ops(0)->set_name(std::string(2 << 20, 'x'));
  EXPECT_TRUE(StatusIs(c.CreateSession(big).status(), absl::StatusCode::kResourceExhausted,
                       {"the CreateSession request is", "--max_graph_bytes"}));
  EXPECT_EQ(cluster.workers.loads(), loads);
  EXPECT_EQ(c.ListWorkers().sessions_size(), 0);
  ASSERT_OK_AND_ASSIGN(v1::CreateSessionResponse again, c.CreateSession(Request("p:2", "batch:p")));
  ASSERT_OK(c.CloseSession(again.session()));
}

}  // namespace
}  // namespace meshrt
