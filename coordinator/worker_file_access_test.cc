// What a graph may read on a worker's host: a program loaded straight onto a Worker (no
// coordinator in between) whose text_windows op names /etc/passwd fails with PermissionDenied
// naming the path and --data_dir; a file inside the data directories is read; a worker without
// data directories (the daemon's default) reads nothing.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "testing/cluster/in_process_workers.h"
#include "core/lowering/lowering.h"
#include "core/ops/builder.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "kernels/cpu_kernels.h"
#include "util/file_access.h"
#include "worker/worker.h"

namespace meshrt {
namespace {

namespace fs = std::filesystem;

// One processor; x = text_windows(step) of `path`, shape [b:2, l:4].
v1::SessionSpec Spec(const std::string& session, const std::string& path) {
  GraphBuilder b;
  TensorRef step = b.Placeholder("step", Shape(), DType::kInt32);
  v1::Op op;
  op.set_type("text_windows");
  (*op.mutable_attrs())["path"].set_s(path);
  *op.mutable_shape() = Shape({{"b", 2}, {"l", 4}}).ToProto();
  op.set_dtype(v1::DT_INT32);
  b.MarkOutput(b.Apply(op, {step}, "x"));
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status();
  auto program = Lower(*graph, *Mesh::Parse("p:1"), LayoutRules());
  EXPECT_TRUE(program.ok()) << program.status();
  v1::SessionSpec spec;
  spec.set_session(session);
  *spec.mutable_program() = *program;
  spec.add_coordinate(0);
  return spec;
}

TensorMap StepFeed() { return {{"step", Tensor::Int(Shape(), {0})}}; }

class WorkerFileAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = fs::canonical(MakeTestTempDir("data")).string();
    std::ofstream(data_ + "/text.txt") << "abcdefghijklmnopqrstuvwxyz";
  }
  std::string data_;
  InProcessWorkers communicators_;  // as the CommunicatorFactory only
};

// Step 1 of `session`, fetching "x".
StepRequest StepOf(const std::string& session) {
  StepRequest request;
  request.session = session;
  request.step = 1;
  request.fetches = {"x"};
  return request;
}

TEST_F(WorkerFileAccessTest, OpsReadOnlyUnderTheDataDirectories) {
  ASSERT_OK_AND_ASSIGN(const FileAccessPolicy data,
                       FileAccessPolicy::Under({data_}, "--data_dir"));
  WorkerFileAccess files;
  files.data = &data;
  Worker worker(&CpuKernels(), &communicators_, files);

  ASSERT_OK(worker.LoadSession(Spec("outside", "/etc/passwd")));
  const absl::Status refused = worker.RunStep(StepOf("outside"), StepFeed()).status();
  EXPECT_TRUE(StatusIs(refused, absl::StatusCode::kPermissionDenied,
                       {"'/etc/passwd'", "--data_dir", data_, "text_windows"}));

  // ".." out of the data directory and a symlink out of it are refused too.
  ASSERT_OK(worker.LoadSession(Spec("dotdot", data_ + "/../../../../../../etc/passwd")));
  EXPECT_TRUE(StatusIs(worker.RunStep(StepOf("dotdot"), StepFeed()).status(),
                       absl::StatusCode::kPermissionDenied, {"--data_dir"}));
  ASSERT_EQ(symlink("/etc/passwd", (data_ + "/passwd").c_str()), 0);
  ASSERT_OK(worker.LoadSession(Spec("symlink", data_ + "/passwd")));
  EXPECT_TRUE(StatusIs(worker.RunStep(StepOf("symlink"), StepFeed()).status(),
                       absl::StatusCode::kPermissionDenied,
                       {data_ + "/passwd", "resolves to '/etc/passwd'", "--data_dir"}));

  // Inside: step 0's rows start at bytes 0 and 4 (n = 26 - 5 = 21).
  ASSERT_OK(worker.LoadSession(Spec("inside", data_ + "/text.txt")));
  ASSERT_OK_AND_ASSIGN(TensorMap out, worker.RunStep(StepOf("inside"), StepFeed()));
  const Tensor& x = out.at("x");
  ASSERT_EQ(x.num_elements(), 8);
  const std::string want = "abcdefgh";
  for (int i = 0; i < 8; ++i) EXPECT_EQ(x.i32()[i], want[i]) << i;
}

TEST_F(WorkerFileAccessTest, NoDataDirectoriesMeansNoFileIsRead) {
  ASSERT_OK_AND_ASSIGN(const FileAccessPolicy none, FileAccessPolicy::Under({}, "--data_dir"));
  WorkerFileAccess files;
  files.data = &none;
  Worker worker(&CpuKernels(), &communicators_, files);
  ASSERT_OK(worker.LoadSession(Spec("s", data_ + "/text.txt")));
  EXPECT_TRUE(StatusIs(worker.RunStep(StepOf("s"), StepFeed()).status(),
                       absl::StatusCode::kPermissionDenied,
                       {data_ + "/text.txt", "without --data_dir"}));
}

}  // namespace
}  // namespace meshrt
