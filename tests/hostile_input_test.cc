// The hostile-input catalogue: a real coordinator and real workers on loopback, called through raw
// gRPC stubs the way an attacker on the same machine would — without the token, with the wrong
// role's token, with another client's sessions, with undecodable bytes, with graphs, meshes,
// feeds and paths built to break or exhaust the daemons. Every case asserts the status code and
// that the message names the culprit; afterwards every daemon must still be alive and serving:
// the workers heartbeat and a session computes the reference interpreter's values.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/local_cluster.h"
#include "client/random_feeds.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/tensor_chunks.h"

namespace meshrt {
namespace {

constexpr char kAlice[] = "alice-0123456789abcdef0123456789";
constexpr char kBob[] = "bob-0123456789abcdef0123456789ab";
constexpr char kOperator[] = "operator-0123456789abcdef012345";
constexpr char kCluster[] = "cluster-0123456789abcdef0123456";
constexpr char kWrong[] = "wrong-0123456789abcdef012345678";

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path) << text;
  return path;
}

// One hostile call: what it does, the code it must get, and words its message must hold.
struct Case {
  std::string name;
  std::function<grpc::Status()> call;
  grpc::StatusCode code;
  std::vector<std::string> needles;
};

class HostileInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LocalClusterOptions o;
    o.workers = 4;
    o.coordinator_command = {"coordinator/meshrt-coordinator"};
    o.worker_command = {"worker/meshrt-worker"};
    const std::string cluster = WriteFile("cluster.token", absl::StrCat(kCluster, "\n"));
    o.operator_token_file = WriteFile("operator.token", absl::StrCat(kOperator, "\n"));
    o.coordinator_flags = {
        "--heartbeat_interval_ms=200", "--heartbeat_timeout_ms=3000",
        "--collective_timeout_ms=5000",
        "--auth_token_file=" +
            WriteFile("clients.token", absl::StrCat("alice ", kAlice, "\nbob ", kBob, "\n")),
        "--operator_token_file=" + o.operator_token_file,
        "--cluster_token_file=" + cluster};
    o.worker_flags = {"--cluster_token_file=" + cluster};
    // What a graph may touch: one data dir holding one file and a symlink out of it; checkpoints
    // under their own root, with a symlink out of it too.
    const std::string tmp = std::getenv("TEST_TMPDIR");
    data_dir_ = tmp + "/data";
    ::mkdir(data_dir_.c_str(), 0755);
    std::ofstream(data_dir_ + "/text") << std::string(4096, 'a');
    ::symlink("/etc/passwd", (data_dir_ + "/passwd").c_str());
    o.data_dirs = {data_dir_};
    o.checkpoint_root = tmp + "/checkpoints";
    ::mkdir(o.checkpoint_root.c_str(), 0755);
    ::mkdir((tmp + "/elsewhere").c_str(), 0755);
    ::symlink((tmp + "/elsewhere").c_str(), (o.checkpoint_root + "/out").c_str());
    if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) o.log_dir = dir;
    auto started = LocalCluster::Start(o);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = started->release();
    channel_ = MakeChannel(cluster_->address());
    stub_ = v1::Coordinator::NewStub(channel_).release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    delete cluster_;
  }

  // A context carrying `token` (none when empty) and a 20 s deadline.
  static std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    SetTimeout(ctx.get(), absl::Seconds(20));
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }

  static v1::ListWorkersResponse ListAsOperator() {
    auto ctx = Ctx(kOperator);
    v1::ListWorkersResponse r;
    grpc::Status s = stub_->ListWorkers(ctx.get(), v1::ListWorkersRequest(), &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r;
  }

  static ClientOptions ClientAs(const std::string& token) {
    ClientOptions o;
    o.address = cluster_->address();
    o.security.auth_token_file = WriteFile(absl::StrCat("tok-", token.substr(0, 5)), token);
    return o;
  }

  static inline std::string data_dir_;
  static inline LocalCluster* cluster_ = nullptr;
  static inline std::shared_ptr<grpc::Channel> channel_;
  static inline v1::Coordinator::Stub* stub_ = nullptr;
};

v1::Graph MlpGraph() {
  GraphBuilder b;
  TensorRef x = b.Placeholder("x", Shape({{"batch", 8}, {"d_in", 16}}));
  TensorRef w = b.Placeholder("w", Shape({{"d_in", 16}, {"hidden", 32}}));
  TensorRef h = b.Einsum({x, w}, Shape({{"batch", 8}, {"hidden", 32}}), "h");
  b.MarkOutput(b.ReduceSum(h, {"hidden"}, "s"));
  return b.proto();
}

v1::CreateSessionRequest Request(const v1::Graph& graph, const std::string& mesh,
                                 const std::string& layout) {
  v1::CreateSessionRequest r;
  *r.mutable_graph() = graph;
  Mesh m = Mesh::Parse(mesh).value();
  *r.mutable_mesh() = m.ToProto();
  *r.mutable_rules() = LayoutRules::Parse(layout, m).value().ToProto();
  r.set_timeout_ms(5000);
  return r;
}

// A CreateSessionRequest from protobuf text (graph, mesh and rules written out by hand, so that
// what no parser would produce can be sent).
v1::CreateSessionRequest FromText(const std::string& text) {
  v1::CreateSessionRequest r;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &r)) << text;
  r.set_timeout_ms(3000);
  return r;
}

// Sends raw bytes to a unary method with `token`.
grpc::Status RawUnary(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                      const std::string& bytes, const std::string& token) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  SetTimeout(&ctx, absl::Seconds(20));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

// RunStep's stream with a header (and `feeds`) sent as `token`.
grpc::Status RawRunStep(v1::Coordinator::Stub* stub, const std::string& token,
                        const v1::RunStepRequest& header, const TensorMap& feeds = {}) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  SetTimeout(ctx.get(), absl::Seconds(20));
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  auto stream = stub->RunStep(ctx.get());
  stream->Write(header);
  for (const auto& [name, t] : feeds) {
    absl::Status s = ForEachChunk(name, t, [&](v1::TensorChunk& c) {
      v1::RunStepRequest m;
      *m.mutable_feed() = std::move(c);
      stream->Write(m);
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
  }
  stream->WritesDone();
  v1::RunStepResponse r;
  while (stream->Read(&r)) {
  }
  return stream->Finish();
}

TEST_F(HostileInputTest, EveryCaseIsRefusedByNameAndEveryDaemonSurvives) {
  ASSERT_NE(cluster_, nullptr);
  // Alice's session, the target of other callers.
  auto alice = Client::Connect(ClientAs(kAlice));
  ASSERT_TRUE(alice.ok()) << alice.status();
  const v1::Graph mlp = MlpGraph();
  ASSERT_OK_AND_ASSIGN(Mesh mesh2, Mesh::Parse("rows:2"));
  ASSERT_OK_AND_ASSIGN(LayoutRules batch_rows, LayoutRules::Parse("batch:rows", mesh2));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> session,
                       (*alice)->CreateSession(mlp, mesh2, batch_rows));
  const std::string sid = session->id();
  const v1::ListWorkersResponse workers = ListAsOperator();
  ASSERT_EQ(workers.workers_size(), 4);

  std::vector<Case> cases;
  auto add = [&](std::string name, std::function<grpc::Status()> call, grpc::StatusCode code,
                 std::vector<std::string> needles) {
    cases.push_back({std::move(name), std::move(call), code, std::move(needles)});
  };

  // 1. Credentials on the coordinator: every RPC without a token, with a wrong one, and with the
  //    other role's.
  struct Rpc {
    std::string name;
    bool member;
    std::function<grpc::Status(const std::string& token)> call;
  };
  std::vector<Rpc> rpcs = {
      {"RegisterWorker", true,
       [&](const std::string& t) {
         v1::RegisterWorkerRequest r;  // a fake worker that would receive programs
         r.set_address("127.0.0.1:1");
         r.set_incarnation("fake");
         r.set_secret("fake-secret-0123456789");
         v1::RegisterWorkerResponse out;
         return stub_->RegisterWorker(Ctx(t).get(), r, &out);
       }},
      {"Heartbeat", true,
       [&](const std::string& t) {
         v1::HeartbeatRequest r;
         r.set_worker_id(workers.workers(0).worker_id());
         r.set_incarnation(workers.workers(0).incarnation());
         v1::HeartbeatResponse out;
         return stub_->Heartbeat(Ctx(t).get(), r, &out);
       }},
      {"DeregisterWorker", true,
       [&](const std::string& t) {
         v1::DeregisterWorkerRequest r;  // would drop a real worker
         r.set_worker_id(workers.workers(0).worker_id());
         r.set_incarnation(workers.workers(0).incarnation());
         v1::DeregisterWorkerResponse out;
         return stub_->DeregisterWorker(Ctx(t).get(), r, &out);
       }},
      {"KvSet", true,
       [&](const std::string& t) {
         v1::KvSetRequest r;
         r.set_key("session/x/y");
         r.set_value("v");
         v1::KvSetResponse out;
         return stub_->KvSet(Ctx(t).get(), r, &out);
       }},
      {"KvGet", true,
       [&](const std::string& t) {
         v1::KvGetRequest r;
         r.set_key("session/x/y");
         v1::KvGetResponse out;
         return stub_->KvGet(Ctx(t).get(), r, &out);
       }},
      {"ListWorkers", false,
       [&](const std::string& t) {
         v1::ListWorkersResponse out;
         return stub_->ListWorkers(Ctx(t).get(), v1::ListWorkersRequest(), &out);
       }},
      {"CreateSession", false,
       [&](const std::string& t) {
         v1::CreateSessionResponse out;
         return stub_->CreateSession(Ctx(t).get(), Request(mlp, "rows:2", "batch:rows"), &out);
       }},
      {"RunStep", false,
       [&](const std::string& t) {
         v1::RunStepRequest h;
         h.set_session(sid);
         return RawRunStep(stub_, t, h);
       }},
      {"CloseSession", false,
       [&](const std::string& t) {
         v1::CloseSessionRequest r;
         r.set_session(sid);
         v1::CloseSessionResponse out;
         return stub_->CloseSession(Ctx(t).get(), r, &out);
       }},
      {"KeepAlive", false,
       [&](const std::string& t) {
         v1::KeepAliveRequest r;
         r.add_sessions(sid);
         v1::KeepAliveResponse out;
         return stub_->KeepAlive(Ctx(t).get(), r, &out);
       }},
      {"SaveCheckpoint", false,
       [&](const std::string& t) {
         v1::SaveCheckpointRequest r;
         r.set_session(sid);
         r.set_directory("ck");
         v1::SaveCheckpointResponse out;
         return stub_->SaveCheckpoint(Ctx(t).get(), r, &out);
       }},
      {"RestoreCheckpoint", false,
       [&](const std::string& t) {
         v1::RestoreCheckpointRequest r;
         r.set_session(sid);
         r.set_directory("ck");
         v1::RestoreCheckpointResponse out;
         return stub_->RestoreCheckpoint(Ctx(t).get(), r, &out);
       }},
  };
  for (const Rpc& rpc : rpcs) {
    add(rpc.name + " without a token", [&rpc] { return rpc.call(""); },
        grpc::StatusCode::UNAUTHENTICATED, {rpc.member ? "missing cluster token" : "missing bearer token"});
    add(rpc.name + " with a wrong token", [&rpc] { return rpc.call(kWrong); },
        grpc::StatusCode::UNAUTHENTICATED, {"rejected"});
    if (rpc.member) {
      add(rpc.name + " with a client token", [&rpc] { return rpc.call(kAlice); },
          grpc::StatusCode::PERMISSION_DENIED, {"member RPCs", "--cluster_token_file"});
      add(rpc.name + " with the operator token", [&rpc] { return rpc.call(kOperator); },
          grpc::StatusCode::PERMISSION_DENIED, {"member RPCs"});
    } else {
      add(rpc.name + " with the cluster token", [&rpc] { return rpc.call(kCluster); },
          grpc::StatusCode::PERMISSION_DENIED, {"member credential", "--auth_token_file"});
    }
  }

  // 2. Another client's session: bob can neither use, save, restore nor close alice's, and does
  //    not see it listed. Unknown sessions are NotFound, by name.
  for (const Rpc& rpc : rpcs) {
    if (rpc.member || rpc.name == "ListWorkers" || rpc.name == "CreateSession" ||
        rpc.name == "KeepAlive") {
      continue;
    }
    add(rpc.name + " on another client's session", [&rpc] { return rpc.call(kBob); },
        grpc::StatusCode::PERMISSION_DENIED, {sid, "belongs to another client"});
  }
  add("CloseSession of an unknown session", [&] {
        v1::CloseSessionRequest r;
        r.set_session("s-00000000000000000000000000000000");
        v1::CloseSessionResponse out;
        return stub_->CloseSession(Ctx(kOperator).get(), r, &out);
      },
      grpc::StatusCode::NOT_FOUND, {"s-00000000000000000000000000000000"});
  // KeepAlive answers OK and lists what it did not renew (a client renews several sessions at
  // once): bob's renewal of alice's session is refused inside the response.
  add("KeepAlive of another client's session", [&] {
        v1::KeepAliveRequest r;
        r.add_sessions(sid);
        v1::KeepAliveResponse out;
        grpc::Status s = stub_->KeepAlive(Ctx(kBob).get(), r, &out);
        if (!s.ok() || out.lost_size() != 1) return s;
        return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, out.lost(0).reason());
      },
      grpc::StatusCode::PERMISSION_DENIED, {sid, "belongs to another client"});
  add("KeepAlive of too many sessions", [&] {
        v1::KeepAliveRequest r;
        for (int i = 0; i < 10001; ++i) r.add_sessions(sid);
        v1::KeepAliveResponse out;
        return stub_->KeepAlive(Ctx(kAlice).get(), r, &out);
      },
      grpc::StatusCode::INVALID_ARGUMENT, {"KeepAlive names 10001 sessions", "at most 10000"});
  add("RunStep of the old sequential id s1", [&] {
        v1::RunStepRequest h;
        h.set_session("s1");
        return RawRunStep(stub_, kBob, h);
      },
      grpc::StatusCode::NOT_FOUND, {"no session 's1'"});

  // 3. The workers' own service: nobody but the coordinator, whatever token they hold.
  for (int w = 0; w < 2; ++w) {
    const std::string address = workers.workers(w).address();
    auto worker_stub = std::shared_ptr<v1::Worker::Stub>(v1::Worker::NewStub(MakeChannel(address)));
    for (const char* token : {"", kAlice, kOperator, kCluster}) {
      const std::string who = *token == '\0' ? "no token" : std::string(token).substr(0, 5);
      add(absl::StrCat("worker ", w, " LoadSession with ", who), [worker_stub, token, sid] {
            v1::SessionSpec spec;
            spec.set_session(sid + "-evil");
            v1::LoadSessionResponse out;
            return worker_stub->LoadSession(Ctx(token).get(), spec, &out);
          },
          grpc::StatusCode::PERMISSION_DENIED, {"accepts calls only from its coordinator"});
      add(absl::StrCat("worker ", w, " SaveCheckpoint with ", who), [worker_stub, token, sid] {
            v1::WorkerSaveCheckpointRequest r;  // would read alice's weights
            r.set_session(sid);
            r.set_directory("/tmp/stolen");
            v1::WorkerSaveCheckpointResponse out;
            return worker_stub->SaveCheckpoint(Ctx(token).get(), r, &out);
          },
          grpc::StatusCode::PERMISSION_DENIED, {"accepts calls only from its coordinator"});
    }
    for (const char* token : {"", kCluster}) {
      const std::string who = *token == '\0' ? "no token" : "the cluster token";
      add(absl::StrCat("worker ", w, " RestoreCheckpoint with ", who), [worker_stub, token, sid] {
            v1::WorkerRestoreCheckpointRequest r;  // would overwrite alice's weights
            r.set_session(sid);
            r.set_phase(v1::WorkerRestoreCheckpointRequest::COMMIT);
            v1::WorkerRestoreCheckpointResponse out;
            return worker_stub->RestoreCheckpoint(Ctx(token).get(), r, &out);
          },
          grpc::StatusCode::PERMISSION_DENIED, {"accepts calls only from its coordinator"});
      add(absl::StrCat("worker ", w, " CloseSession with ", who), [worker_stub, token, sid] {
            v1::CloseSessionRequest r;
            r.set_session(sid);
            v1::CloseSessionResponse out;
            return worker_stub->CloseSession(Ctx(token).get(), r, &out);
          },
          grpc::StatusCode::PERMISSION_DENIED, {"accepts calls only from its coordinator"});
    }
    add(absl::StrCat("worker ", w, " undecodable LoadSession"), [address] {
          return RawUnary(MakeChannel(address), "/meshrt.v1.Worker/LoadSession",
                          std::string("\xff\xff\xff\xff", 4), kCluster);
        },
        grpc::StatusCode::INVALID_ARGUMENT, {"/meshrt.v1.Worker/LoadSession", "could not be decoded"});
  }

  // 4. Undecodable requests to every unary coordinator method (truncated varint / bad wire type).
  for (const char* method : {"RegisterWorker", "Heartbeat", "DeregisterWorker", "KvSet", "KvGet",
                             "ListWorkers", "CreateSession", "CloseSession", "KeepAlive",
                             "SaveCheckpoint", "RestoreCheckpoint"}) {
    const std::string full = absl::StrCat("/meshrt.v1.Coordinator/", method);
    add(absl::StrCat(method, " undecodable"), [this, full] {
          return RawUnary(channel_, full, std::string("\x0a\xff\xff\xff\xff\x0f", 6), kOperator);
        },
        grpc::StatusCode::INVALID_ARGUMENT, {full, "could not be decoded"});
  }

  // 5. Graphs, meshes and layouts built to break validation or lowering.
  auto create = [&](std::string name, v1::CreateSessionRequest request, grpc::StatusCode code,
                    std::vector<std::string> needles) {
    add("CreateSession: " + name, [request] {
          v1::CreateSessionResponse out;
          return stub_->CreateSession(Ctx(kBob).get(), request, &out);
        },
        code, std::move(needles));
  };
  const grpc::StatusCode kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  create("empty request", v1::CreateSessionRequest(), kInvalid, {"graph is empty"});
  {
    v1::CreateSessionRequest no_mesh = Request(mlp, "rows:2", "batch:rows");
    no_mesh.clear_mesh();
    create("no mesh", no_mesh, kInvalid, {"mesh is empty"});
  }
  const std::string x_op =
      R"(ops { name: "x" type: "placeholder" shape { dims { name: "b" size: 4 } } })";
  const std::string rows2 = R"( mesh { dims { name: "rows" size: 2 } })";
  create("unknown op type",
         FromText(R"(graph { ops { name: "evil" type: "system" } })" + rows2), kInvalid,
         {"system"});
  create("dangling input",
         FromText("graph { " + x_op +
                  R"( ops { name: "y" type: "relu" inputs: "nowhere" } })" + rows2),
         kInvalid, {"nowhere"});
  create("cycle",
         FromText(R"(graph { ops { name: "a" type: "relu" inputs: "b" }
                           ops { name: "b" type: "relu" inputs: "a" } })" + rows2),
         kInvalid, {"cycle"});
  create("repeated dim",
         FromText(R"(graph { ops { name: "x" type: "placeholder"
                  shape { dims { name: "b" size: 4 } dims { name: "b" size: 4 } } } })" + rows2),
         kInvalid, {"b"});
  create("one dim name, two sizes",
         FromText(R"(graph { ops { name: "x" type: "placeholder" shape { dims { name: "b" size: 4 } } }
                  ops { name: "y" type: "placeholder" shape { dims { name: "b" size: 6 } } } })" +
                  rows2),
         kInvalid, {"b"});
  create("duplicate op name",
         FromText("graph { " + x_op + x_op + " }" + rows2), kInvalid, {"x"});
  create("negative dim size",
         FromText(R"(graph { ops { name: "x" type: "placeholder" shape { dims { name: "b" size: -4 } } } })" +
                  rows2),
         kInvalid, {"b"});
  create("zero-size mesh dim",
         FromText("graph { " + x_op + R"( } mesh { dims { name: "rows" size: 0 } })"), kInvalid,
         {"rows"});
  create("negative mesh dim",
         FromText("graph { " + x_op + R"( } mesh { dims { name: "rows" size: -2 } })"), kInvalid,
         {"rows"});
  create("repeated mesh dim",
         FromText("graph { " + x_op +
                  R"( } mesh { dims { name: "rows" size: 2 } dims { name: "rows" size: 2 } })"),
         kInvalid, {"rows"});
  create("rule naming an unknown mesh dim",
         FromText("graph { " + x_op + " }" + rows2 +
                  R"( rules { rules { tensor_dim: "b" mesh_dim: "nowhere" } })"),
         kInvalid, {"nowhere"});
  create("split dim not divisible",
         FromText(R"(graph { ops { name: "x" type: "placeholder" shape { dims { name: "b" size: 3 } } } })" +
                  rows2 + R"( rules { rules { tensor_dim: "b" mesh_dim: "rows" } })"),
         kInvalid, {"x", "b"});
  create("mesh of 2^32 processors",
         FromText("graph { " + x_op +
                  R"( } mesh { dims { name: "a" size: 65536 } dims { name: "b" size: 65536 } })"),
         grpc::StatusCode::RESOURCE_EXHAUSTED, {"a:65536,b:65536", "--max_mesh_processors"});
  create("mesh bigger than the cluster",
         FromText("graph { " + x_op + R"( } mesh { dims { name: "rows" size: 64 } })"), kInvalid,
         {"needs 64 worker(s)"});
  create("reduction over a dim the input lacks",
         FromText("graph { " + x_op +
                  R"( ops { name: "r" type: "reduce_sum" inputs: "x" dims: "nope" } })" + rows2),
         kInvalid, {"nope"});
  create("relu of nothing",
         FromText(R"(graph { ops { name: "r" type: "relu" } })" + rows2), kInvalid, {"r"});

  // 6. Steps with bad feeds, fetches and counts (alice's own session: only the input is wrong).
  auto step = [&](std::string name, v1::RunStepRequest header, TensorMap feeds,
                  grpc::StatusCode code, std::vector<std::string> needles) {
    header.set_session(sid);
    add("RunStep: " + name, [header, feeds] { return RawRunStep(stub_, kAlice, header, feeds); },
        code, std::move(needles));
  };
  const Graph mlp_graph = Graph::Build(mlp).value();
  const TensorMap good = RandomFeeds(mlp_graph, 1);
  {
    TensorMap missing = good;
    missing.erase("w");
    step("missing feed", v1::RunStepRequest(), missing, kInvalid, {"w"});
    TensorMap extra = good;
    extra.emplace("intruder", Tensor(DType::kFloat32, Shape({{"b", 2}})));
    step("unknown feed", v1::RunStepRequest(), extra, kInvalid, {"intruder"});
    TensorMap shape = good;
    shape.erase("x");
    shape.emplace("x", Tensor(DType::kFloat32, Shape({{"batch", 4}, {"d_in", 16}})));
    step("wrong feed shape", v1::RunStepRequest(), shape, kInvalid, {"x"});
    TensorMap dtype = good;
    dtype.erase("x");
    dtype.emplace("x", Tensor(DType::kInt32, Shape({{"batch", 8}, {"d_in", 16}})));
    step("wrong feed dtype", v1::RunStepRequest(), dtype, kInvalid, {"x"});
    v1::RunStepRequest fetch;
    fetch.add_fetches("/etc/passwd");
    step("unknown fetch", fetch, good, kInvalid, {"/etc/passwd"});
    v1::RunStepRequest long_fetch;  // its error would pass gRPC's 8 KiB metadata limit
    long_fetch.add_fetches(std::string(20000, 'f'));
    step("a 20,000-byte fetch name", long_fetch, good, kInvalid, {"names no tensor", "cut from"});
    v1::RunStepRequest negative;
    negative.set_num_steps(-5);
    step("negative num_steps", negative, good, kInvalid, {"num_steps -5"});
    v1::RunStepRequest huge;
    huge.set_num_steps(int64_t{1} << 40);
    step("huge num_steps", huge, good, kInvalid, {"num_steps"});
  }

  // 7. Request caps (core/ir/limits.h), checked before anything is built.
  {
    v1::CreateSessionRequest many = Request(mlp, "rows:2", "batch:rows");
    for (int i = 0; i < 250000; ++i) {
      v1::Op* op = many.mutable_graph()->add_ops();
      op->set_name(absl::StrCat("r", i));
      op->set_type("relu");
      op->add_inputs("h");
    }
    create("250,000 ops", many, grpc::StatusCode::RESOURCE_EXHAUSTED, {"ops", "--max_ops"});
    v1::CreateSessionRequest big = Request(mlp, "rows:2", "batch:rows");
    v1::Op* fat = big.mutable_graph()->add_ops();
    fat->set_name("fat");
    fat->set_type("constant");
    fat->mutable_value()->set_content(std::string(20 << 20, 'x'));
    create("a 20 MiB request", big, grpc::StatusCode::RESOURCE_EXHAUSTED, {"--max_graph_bytes"});
    create("a name of 5000 bytes",
           FromText(R"(graph { ops { name: ")" + std::string(5000, 'n') +
                    R"(" type: "placeholder" shape { dims { name: "b" size: 4 } } } })" + rows2),
           kInvalid, {"--max_name_length"});
    std::string dims;
    for (int i = 0; i < 40; ++i) absl::StrAppend(&dims, "dims { name: \"d", i, "\" size: 1 } ");
    create("a shape of 40 dims",
           FromText(R"(graph { ops { name: "x" type: "placeholder" shape { )" + dims + "} } }" +
                    rows2),
           kInvalid, {"40 dims", "--max_dims_per_shape"});
    create("a tensor of 2^40 elements",
           FromText(R"(graph { ops { name: "x" type: "placeholder" shape {
                    dims { name: "a" size: 1048576 } dims { name: "b" size: 1048576 } } } })" + rows2),
           grpc::StatusCode::RESOURCE_EXHAUSTED, {"'x'", "--max_elements_per_tensor"});
    std::string mesh_dims;
    for (int i = 0; i < 10; ++i) absl::StrAppend(&mesh_dims, "dims { name: \"m", i, "\" size: 1 } ");
    create("a mesh of 10 dims", FromText("graph { " + x_op + " } mesh { " + mesh_dims + "}"),
           kInvalid, {"10 dims", "--max_mesh_dims"});
    create("a mesh of 10^9 processors",
           FromText("graph { " + x_op + R"( } mesh { dims { name: "p" size: 1000000000 } })"),
           grpc::StatusCode::RESOURCE_EXHAUSTED, {"--max_mesh_processors"});
    // A loop nested 20 deep, and a loop of 10^12 trips (lowering would unroll it).
    const std::string x4 =
        "ops { name: \"x\" type: \"placeholder\" shape { dims { name: \"b\" size: 4 } } } ";
    std::string nested = x4;
    for (int i = 0; i < 20; ++i) {
      nested = absl::StrCat(x4, "ops { name: \"l", i,
                            "\" type: \"while_loop\" inputs: \"x\" "
                            "attrs { key: \"carried\" value { strings { values: \"x\" } } } "
                            "attrs { key: \"trip_count\" value { i: 1 } } "
                            "attrs { key: \"output\" value { i: 0 } } body { ",
                            nested, " outputs: \"x\" } } ");
    }
    create("while_loops nested 20 deep", FromText("graph { " + nested + " }" + rows2), kInvalid,
           {"--max_while_loop_depth"});
    create("a while_loop of 10^12 trips",
           FromText(R"(graph { ops { name: "x" type: "placeholder" shape { dims { name: "b" size: 4 } } }
             ops { name: "forever" type: "while_loop" inputs: "x"
               attrs { key: "carried" value { strings { values: "x" } } }
               attrs { key: "trip_count" value { i: 1000000000000 } }
               attrs { key: "output" value { i: 0 } }
               body { ops { name: "x" type: "placeholder" shape { dims { name: "b" size: 4 } } }
                      ops { name: "y" type: "relu" inputs: "x" } outputs: "y" } } })" + rows2),
           grpc::StatusCode::RESOURCE_EXHAUSTED, {"'forever'", "--max_ops"});
    create("a while_loop naming carried tensors without inputs (fuzzer finding)",
           FromText(R"(graph { ops { name: "loop" type: "while_loop"
               attrs { key: "carried" value { strings { values: "x" } } }
               attrs { key: "trip_count" value { i: 1 } } attrs { key: "output" value { i: 0 } }
               body { ops { name: "x" type: "placeholder" shape { dims { name: "d" size: 2 } } }
                      outputs: "x" } } })" + rows2),
           kInvalid, {"loop", "0 inputs", "1 carried"});
  }

  // 8. Files a graph may read: only under the workers' --data_dir (the step fails on the workers,
  //    PermissionDenied naming the path and the flag; nothing is read).
  auto read_file = [&](std::string name, const std::string& path, grpc::StatusCode code,
                       std::vector<std::string> needles) {
    add("text_windows: " + name, [path] {
          GraphBuilder b;
          TensorRef step = b.Placeholder("step", Shape({}));
          v1::Op op;
          op.set_type("text_windows");
          *op.mutable_shape() = Shape({{"batch", 2}, {"len", 4}}).ToProto();
          op.set_dtype(v1::DT_INT32);
          (*op.mutable_attrs())["path"].set_s(path);
          b.MarkOutput(b.Apply(op, {step}, "t"));
          v1::CreateSessionResponse created;
          grpc::Status s = stub_->CreateSession(Ctx(kBob).get(),
                                                Request(b.proto(), "rows:2", "batch:rows"), &created);
          if (!s.ok()) return s;
          v1::RunStepRequest h;
          h.set_session(created.session());
          h.add_fetches("t");
          TensorMap feeds;
          feeds.emplace("step", Tensor(DType::kFloat32, Shape({})));
          const grpc::Status ran = RawRunStep(stub_, kBob, h, feeds);
          v1::CloseSessionRequest close;
          close.set_session(created.session());
          v1::CloseSessionResponse closed;
          stub_->CloseSession(Ctx(kBob).get(), close, &closed);
          return ran;
        },
        code, std::move(needles));
  };
  const grpc::StatusCode kDenied = grpc::StatusCode::PERMISSION_DENIED;
  read_file("/etc/passwd", "/etc/passwd", kDenied, {"/etc/passwd", "--data_dir"});
  read_file("the token files beside the data dir", data_dir_ + "/../clients.token", kDenied,
            {"clients.token", "--data_dir"});
  read_file("a symlink out of the data dir", data_dir_ + "/passwd", kDenied,
            {"passwd", "--data_dir"});
  read_file("/proc/self/environ", "/proc/self/environ", kDenied, {"/proc/self/environ", "--data_dir"});
  read_file("a file that does not exist, outside", "/root/.ssh/id_rsa", kDenied,
            {"/root/.ssh/id_rsa", "--data_dir"});

  // 9. Checkpoints only under --checkpoint_root, named relative to it.
  auto checkpoint = [&](std::string name, const std::string& directory, grpc::StatusCode code,
                        std::vector<std::string> needles) {
    add("SaveCheckpoint to " + name, [directory, sid] {
          v1::SaveCheckpointRequest r;
          r.set_session(sid);
          r.set_directory(directory);
          v1::SaveCheckpointResponse out;
          return stub_->SaveCheckpoint(Ctx(kAlice).get(), r, &out);
        },
        code, needles);
    add("RestoreCheckpoint from " + name, [directory, sid] {
          v1::RestoreCheckpointRequest r;
          r.set_session(sid);
          r.set_directory(directory);
          v1::RestoreCheckpointResponse out;
          return stub_->RestoreCheckpoint(Ctx(kAlice).get(), r, &out);
        },
        code, needles);
  };
  checkpoint("an absolute path", "/etc", kInvalid, {"/etc", "--checkpoint_root"});
  checkpoint("a path with ..", "../../etc", kInvalid, {"../../etc", "--checkpoint_root"});
  checkpoint("a symlink out of the root", "out/ck", kDenied, {"out", "--checkpoint_root"});
  checkpoint("an empty name", "", kInvalid, {"--checkpoint_root"});

  // 10. The KV store, even for members, only holds live sessions' keys, within their quotas.
  add("KvSet outside every session's prefix", [] {
        v1::KvSetRequest r;
        r.set_key("/etc/evil");
        r.set_value("v");
        v1::KvSetResponse out;
        return stub_->KvSet(Ctx(kCluster).get(), r, &out);
      },
      grpc::StatusCode::FAILED_PRECONDITION, {"/etc/evil"});
  add("KvSet of a 8 MiB value", [] {
        v1::KvSetRequest r;
        r.set_key("session/none/big");
        r.set_value(std::string(8 << 20, 'v'));
        v1::KvSetResponse out;
        return stub_->KvSet(Ctx(kCluster).get(), r, &out);
      },
      grpc::StatusCode::RESOURCE_EXHAUSTED, {"--max_kv_value_bytes"});
  add("KvGet waiting a year", [] {
        v1::KvGetRequest r;
        r.set_key("session/none/never");
        r.set_timeout_ms(int64_t{365} * 24 * 3600 * 1000);
        v1::KvGetResponse out;
        return stub_->KvGet(Ctx(kCluster).get(), r, &out);
      },
      grpc::StatusCode::INVALID_ARGUMENT, {"timeout_ms", "session/none/never"});

  // Run every case; report each failure by name.
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const grpc::Status got = c.call();
    EXPECT_EQ(got.error_code(), c.code)
        << c.name << ": got " << got.error_code() << " " << got.error_message();
    for (const std::string& needle : c.needles) {
      EXPECT_TRUE(absl::StrContains(got.error_message(), needle))
          << c.name << ": '" << needle << "' not in: " << got.error_message();
    }
  }
  EXPECT_GE(cases.size(), 100u);
  std::cerr << "hostile-input catalogue: " << cases.size() << " cases\n";

  // Every daemon is alive and serving: processes running, the four workers heartbeating, and
  // alice's session (never touched by the others) still computes the reference's values.
  for (int i = 0; i < cluster_->num_workers(); ++i) {
    EXPECT_EQ(::waitpid(cluster_->worker_pid(i), nullptr, WNOHANG), 0) << "worker " << i << " died";
  }
  const v1::ListWorkersResponse after = ListAsOperator();
  ASSERT_EQ(after.workers_size(), 4);
  for (const v1::WorkerInfo& w : after.workers()) {
    EXPECT_LT(w.last_heartbeat_ms_ago(), 2000) << w.address();
  }
  ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(mlp_graph, good));
  ASSERT_OK_AND_ASSIGN(TensorMap got, session->Run(good, {"s"}));
  EXPECT_LE(MaxRelativeError(got.at("s"), want.at("s")), 1e-5);
  ASSERT_OK(session->Close());
}

}  // namespace
}  // namespace meshrt
