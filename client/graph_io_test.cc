#include "client/graph_io.h"

#include <fstream>

#include "core/ops/graph.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

constexpr char kExample[] = "examples/graphs/mlp_forward.pbtxt";

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(GraphIoTest, LoadsTheExampleGraph) {
  ASSERT_OK_AND_ASSIGN(v1::Graph proto, LoadGraph(kExample));
  EXPECT_EQ(proto.ops_size(), 7);
  ASSERT_OK_AND_ASSIGN(Graph g, Graph::Build(proto));
  EXPECT_EQ(g.Outputs(), (std::vector<std::string>{"y", "s"}));
}

TEST(GraphIoTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = testing::TempDir() + "/missing.pbtxt";
  EXPECT_TRUE(StatusIs(LoadGraph(path).status(), absl::StatusCode::kNotFound, {path}));
}

TEST(GraphIoTest, SyntaxErrorsGiveFileLineColumn) {
  const std::string path = testing::TempDir() + "/broken.pbtxt";
  WriteText(path, "ops {\n  name: \"x\"\n  type: placeholder\"\n}\n");
  EXPECT_TRUE(
      StatusIs(LoadGraph(path).status(), absl::StatusCode::kInvalidArgument, {path + ":3:"}));
  EXPECT_TRUE(StatusIs(ParseGraphText("ops { nmae: \"x\" }", "g.pbtxt").status(),
                       absl::StatusCode::kInvalidArgument, {"g.pbtxt:1:", "nmae"}));
  EXPECT_TRUE(StatusIs(ParseGraphText("ops {\n\n  name: \"x\"", "u.pbtxt").status(),
                       absl::StatusCode::kInvalidArgument, {"u.pbtxt:3:"}));
}

TEST(GraphIoTest, SavesAndReloadsTextAndBinary) {
  ASSERT_OK_AND_ASSIGN(v1::Graph proto, LoadGraph(kExample));
  for (const char* name : {"/saved.pbtxt", "/saved.txt", "/saved.pb"}) {
    SCOPED_TRACE(name);
    const std::string path = testing::TempDir() + name;
    ASSERT_OK(SaveGraph(proto, path));
    ASSERT_OK_AND_ASSIGN(v1::Graph back, LoadGraph(path));
    EXPECT_EQ(back.SerializeAsString(), proto.SerializeAsString());
  }
}

TEST(GraphIoTest, RefusesUnknownExtensionsAndGarbage) {
  EXPECT_TRUE(StatusIs(LoadGraph("graph.json").status(), absl::StatusCode::kInvalidArgument,
                       {"graph.json", ".pbtxt"}));
  EXPECT_TRUE(StatusIs(SaveGraph(v1::Graph(), "graph.yaml"), absl::StatusCode::kInvalidArgument,
                       {"graph.yaml"}));
  const std::string path = testing::TempDir() + "/garbage.pb";
  WriteText(path, "\xff\xff\xff\xff not a proto");
  EXPECT_TRUE(
      StatusIs(LoadGraph(path).status(), absl::StatusCode::kInvalidArgument, {path, "binary"}));
}

}  // namespace
}  // namespace meshrt
