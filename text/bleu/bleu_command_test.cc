// `meshrt bleu` on files. The scores expected are sacreBLEU's published ones (README.md's example,
// test/test_bleu.py's 'tokenize': 'none' case), as in bleu_test.cc.
#include "text/bleu/bleu_command.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "text/bleu/bleu_testing.h"

namespace meshrt {
namespace text {
namespace {

constexpr char kReadmeLine[] =
    "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)";

class BleuCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("bleu");
    hyp_ = Write("hyp.en",
                 "The dog bit the man.\nIt wasn't surprising.\nThe man had just bitten him.\n");
    ref1_ =
        Write("ref1.en", "The dog bit the man.\nIt was not unexpected.\nThe man bit him first.\n");
    ref2_ = Write("ref2.en",
                  "The dog had bit the man.\nNo one was surprised.\nThe man had bitten the dog.\n");
  }

  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }

  // Runs the command; returns its output lines (empty on error, with the status in `status_`).
  std::vector<std::string> Run(const std::vector<std::string>& args) {
    std::ostringstream out;
    status_ = BleuCommand(args, out);
    if (!status_.ok()) return {};
    return absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
  }

  std::string dir_, hyp_, ref1_, ref2_;
  absl::Status status_;
};

TEST_F(BleuCommandTest, ReadmeExample) {
  const std::vector<std::string> lines = Run({hyp_, ref1_, ref2_});
  ASSERT_TRUE(status_.ok()) << status_;
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "BLEU = 48.53");
  EXPECT_EQ(lines[1], kReadmeLine);
  EXPECT_EQ(lines[2], "signature: nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp");
}

TEST_F(BleuCommandTest, CrlfAndMissingFinalNewlineReadAsSacreBleuDoes) {
  // sacreBLEU splits at "\n" and right-strips each line, so "\r" and trailing blanks go; a file
  // without a final newline still has its last line.
  const std::string hyp =
      Write("hyp_crlf.en",
            "The dog bit the man. \r\nIt wasn't surprising.\r\nThe man had just bitten him.");
  const std::vector<std::string> lines = Run({hyp, ref1_, ref2_});
  ASSERT_TRUE(status_.ok()) << status_;
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[1], kReadmeLine);
}

TEST_F(BleuCommandTest, TokenizeNone) {
  // test/test_bleu.py: 'tokenize': 'none' scores 49.1919566.
  const std::vector<std::string> lines = Run({hyp_, ref1_, ref2_, "--tokenize", "none"});
  ASSERT_TRUE(status_.ok()) << status_;
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "BLEU = 49.19");
  EXPECT_EQ(lines.back(), "signature: nrefs:2|case:mixed|eff:no|tok:none|smooth:exp");
}

TEST_F(BleuCommandTest, EmptyReferenceLine) {
  // README.md, "Variable Number of References": the first reference of the first segment is ''.
  const std::string ref1 =
      Write("ref1_gap.en", "\nIt was not unexpected.\nThe man bit him first.\n");
  const std::vector<std::string> lines = Run({hyp_, ref1, ref2_});
  ASSERT_TRUE(status_.ok()) << status_;
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "BLEU = 29.44");
}

TEST_F(BleuCommandTest, HelpPrintsUsageAndFlags) {
  std::ostringstream out;
  ASSERT_TRUE(BleuCommand({"--help"}, out).ok());
  for (const char* part : {"usage: meshrt bleu HYP REF", "--lowercase", "--tokenize",
                           "--smooth_method", "--smooth_value"}) {
    EXPECT_NE(out.str().find(part), std::string::npos) << part << " in\n" << out.str();
  }
}

TEST_F(BleuCommandTest, MissingFileIsNotFoundNamingThePath) {
  const std::string missing = dir_ + "/no_such.en";
  Run({hyp_, missing});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kNotFound, {missing}));
  Run({missing, ref1_});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kNotFound, {missing}));
}

TEST_F(BleuCommandTest, DifferentLineCountsNameBothFiles) {
  const std::string short_ref = Write("short.en", "The dog bit the man.\nIt was not unexpected.\n");
  Run({hyp_, ref1_, short_ref});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kInvalidArgument,
                       {hyp_, "has 3 lines", short_ref, "has 2"}));
}

TEST_F(BleuCommandTest, UsageErrors) {
  Run({hyp_});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kInvalidArgument, {"reference file"}));
  Run({hyp_, ref1_, "--tokenize", "intl"});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kInvalidArgument, {"--tokenize", "intl"}));
  Run({hyp_, ref1_, "--smooth_method", "exp", "--smooth_value", "0.5"});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kInvalidArgument, {"--smooth_value"}));
  Run({hyp_, ref1_, "--smooth_method", "floor", "--smooth_value", "abc"});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kInvalidArgument, {"--smooth_value", "abc"}));
  Run({hyp_, ref1_, "--no_such_flag"});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kInvalidArgument, {"no_such_flag"}));
}

TEST_F(BleuCommandTest, BadInputFiles) {
  const std::string empty = Write("empty.en", "");
  Run({empty, ref1_});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kInvalidArgument, {empty, "no lines"}));
  const std::string latin1 = Write("latin1.en", "ok\ncaf\xe9\nok\n");
  Run({hyp_, latin1});
  EXPECT_TRUE(StatusIs(status_, absl::StatusCode::kInvalidArgument, {latin1, "line 2", "UTF-8"}));
}

}  // namespace
}  // namespace text
}  // namespace meshrt
