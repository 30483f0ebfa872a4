// Every example graph parses, validates, and runs on a 2x2 simulated mesh exactly as the reference
// interpreter runs it.
#include <dirent.h>

#include <fstream>
#include <random>
#include <sstream>

#include "client/random_feeds.h"
#include "core/lowering/lowering.h"
#include "core/ops/graph.h"
#include "core/reference/interpreter.h"
#include "core/testing/test_util.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/simulated_mesh.h"

namespace meshrt {
namespace {

std::vector<std::string> ExampleFiles() {
  std::vector<std::string> files;
  const std::string dir = "examples/graphs";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 6 && n.substr(n.size() - 6) == ".pbtxt") files.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  return files;
}

TEST(ExamplesTest, MlpForwardHasTheDocumentedTensors) {
  std::ifstream in("examples/graphs/mlp_forward.pbtxt");
  std::stringstream text;
  text << in.rdbuf();
  v1::Graph proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &proto));
  ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(proto));
  EXPECT_EQ(g.type("x").shape, Shape({{"batch", 8}, {"d_in", 16}}));
  EXPECT_EQ(g.type("w1").shape, Shape({{"d_in", 16}, {"hidden", 32}}));
  EXPECT_EQ(g.type("w2").shape, Shape({{"hidden", 32}, {"d_out", 8}}));
  EXPECT_EQ(g.type("y").shape, Shape({{"batch", 8}, {"d_out", 8}}));
  EXPECT_EQ(g.type("s").shape, Shape({{"batch", 8}}));
}

TEST(ExamplesTest, EveryExampleRunsOnASimulatedMesh) {
  std::vector<std::string> files = ExampleFiles();
  ASSERT_FALSE(files.empty());
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    v1::Graph proto;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &proto));
    ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(proto));
    const TensorMap feeds = RandomFeeds(g, 1);
    ASSERT_OK_AND_ASSIGN(TensorMap want, Interpret(g, feeds));
    ASSERT_OK_AND_ASSIGN(Mesh mesh, Mesh::Parse("rows:2,cols:2"));
    ASSERT_OK_AND_ASSIGN(LayoutRules rules, LayoutRules::Parse("batch:rows,hidden:cols", mesh));
    ASSERT_OK_AND_ASSIGN(v1::Program program, Lower(g, mesh, rules));
    SimulatedMeshOptions options;
    options.kernels = &ReferenceKernels();
    ASSERT_OK_AND_ASSIGN(TensorMap got, RunOnSimulatedMesh(program, feeds, options));
    for (const std::string& out : g.Outputs()) {
      EXPECT_LE(MaxRelativeError(got.at(out), want.at(out)), 1e-5) << out;
    }
  }
}

}  // namespace
}  // namespace meshrt
