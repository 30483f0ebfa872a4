#include "text/corpus/corpus_command.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "text/corpus/corpus_test_util.h"
#include "text/corpus/sha256.h"
#include "util/file.h"

namespace meshrt {
namespace text {
namespace {

absl::Status RunData(const std::vector<std::string>& args, std::string* output = nullptr) {
  std::ostringstream out;
  absl::Status s = DataCommand(args, out);
  if (output != nullptr) *output = out.str();
  return s;
}

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> s = ReadFile(path);
  return s.ok() ? *s : absl::StrCat("<", s.status().ToString(), ">");
}

int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(DataCommandTest, TsvToSplitsAndSources) {
  const std::string dir = MakeTempDir();
  std::string tsv;
  for (int i = 0; i < 200; ++i) absl::StrAppend(&tsv, "Sentence ", i, ".\tSatz ", i, ".\n");
  absl::StrAppend(&tsv, "Sentence 0.\tSatz 0.\n");   // duplicate
  absl::StrAppend(&tsv, "Same\tSame\n");             // untranslated
  absl::StrAppend(&tsv, "a b c d e f\tein zwei\n");  // too long for --max_words 5
  const std::string input = dir + "/pairs.tsv";
  WriteTestFile(input, tsv);
  const std::string out_dir = dir + "/out";
  std::string output;
  ASSERT_TRUE(RunData({"translations", "--source", "tsv", "--input", input, "--lang", "de", "--out",
                       out_dir, "--max_words", "5", "--dev_percent", "10", "--test_percent", "10"},
                      &output)
                  .ok())
      << output;
  const std::string train_en = Read(out_dir + "/train.en"), train_de = Read(out_dir + "/train.de");
  const std::string dev_en = Read(out_dir + "/dev.en"), test_en = Read(out_dir + "/test.en");
  EXPECT_EQ(Lines(train_en), Lines(train_de));
  EXPECT_EQ(Lines(dev_en), Lines(Read(out_dir + "/dev.de")));
  EXPECT_EQ(Lines(test_en), Lines(Read(out_dir + "/test.de")));
  EXPECT_EQ(Lines(train_en) + Lines(dev_en) + Lines(test_en), 200);
  EXPECT_GT(Lines(dev_en), 5);
  EXPECT_GT(Lines(test_en), 5);
  // Line i of X.en translates line i of X.de.
  std::vector<std::string> en_lines = absl::StrSplit(train_en, '\n');
  std::vector<std::string> de_lines = absl::StrSplit(train_de, '\n');
  for (size_t i = 0; i + 1 < en_lines.size(); ++i) {
    EXPECT_EQ(en_lines[i].substr(9), de_lines[i].substr(5)) << i;
  }
  const std::string sources = Read(out_dir + "/SOURCES");
  for (const std::string& want :
       {absl::StrCat("input: ", input, "\n  bytes ", tsv.size(), ", sha256 ", Sha256Hex(tsv)),
        std::string("source: tsv"), std::string("date: 20"),
        absl::StrCat("command: meshrt data translations --source tsv --input ", input),
        std::string("input pairs 203; dropped: invalid UTF-8 0, double-encoded UTF-8 0, empty 0, "
                    "untranslated (de equal "
                    "to English) 1, more than 5 words 1, duplicate pairs 1; kept 200"),
        absl::StrCat("output: train.en: lines ", Lines(train_en), ", bytes ", train_en.size(),
                     ", sha256 ", Sha256Hex(train_en)),
        std::string("median words per sentence: en 2, de 2")}) {
    EXPECT_TRUE(absl::StrContains(sources, want)) << "SOURCES lacks '" << want << "':\n" << sources;
  }
  EXPECT_TRUE(absl::StrContains(output, "200 pairs, 200 distinct English")) << output;

  // A rerun gives the same files.
  ASSERT_TRUE(RunData({"translations", "--source=tsv", "--input", input, "--lang=de", "--out",
                       out_dir, "--max_words=5", "--dev_percent=10", "--test_percent=10"})
                  .ok());
  EXPECT_EQ(Read(out_dir + "/train.en"), train_en);
  EXPECT_EQ(Read(out_dir + "/test.en"), test_en);
}

TEST(DataCommandTest, AlignedInput) {
  const std::string dir = MakeTempDir();
  WriteTestFile(dir + "/x.en", "Good morning.\nGood night.\n");
  WriteTestFile(dir + "/x.es",
                "Buenos d\xC3\xAD"
                "as.\nBuenas noches.\n");
  ASSERT_TRUE(RunData({"translations", "--source", "aligned", "--input", dir + "/x.en", "--input",
                       dir + "/x.es", "--lang", "es", "--out", dir + "/o", "--dev_percent", "0",
                       "--test_percent", "0"})
                  .ok());
  EXPECT_EQ(Read(dir + "/o/train.en"), "Good morning.\nGood night.\n");
  EXPECT_EQ(Read(dir + "/o/train.es"),
            "Buenos d\xC3\xAD"
            "as.\nBuenas noches.\n");
  EXPECT_EQ(Read(dir + "/o/test.es"), "");
}

TEST(DataCommandTest, BadInputsNameTheProblem) {
  const std::string dir = MakeTempDir();
  WriteTestFile(dir + "/a.en", "One.\nTwo.\n");
  WriteTestFile(dir + "/a.fr", "Un.\n");
  WriteTestFile(dir + "/bad.tsv", "One.\tUn.\nTwo. Deux.\n");
  const std::string out = dir + "/out";
  EXPECT_TRUE(StatusIs(RunData({"translations", "--source", "aligned", "--input", dir + "/a.en",
                                "--input", dir + "/a.fr", "--lang", "fr", "--out", out}),
                       absl::StatusCode::kInvalidArgument,
                       {dir + "/a.en has 2 lines", dir + "/a.fr has 1"}));
  EXPECT_TRUE(StatusIs(RunData({"translations", "--source", "tsv", "--input", dir + "/bad.tsv",
                                "--lang", "fr", "--out", out}),
                       absl::StatusCode::kInvalidArgument, {"bad.tsv line 2", "no tab"}));
  EXPECT_TRUE(StatusIs(RunData({"translations", "--source", "tsv", "--input", dir + "/bad.tsv",
                                "--lang", "fr;rm -rf", "--out", out}),
                       absl::StatusCode::kInvalidArgument, {"--lang 'fr;rm -rf'"}));
  EXPECT_TRUE(StatusIs(RunData({"translations", "--source", "tsv", "--lang", "fr", "--out", out}),
                       absl::StatusCode::kInvalidArgument, {"one --input"}));
  EXPECT_TRUE(StatusIs(
      RunData({"translations", "--source", "ddtp", "--input", "x", "--lang", "fr", "--out", out}),
      absl::StatusCode::kInvalidArgument, {"--input"}));
  EXPECT_TRUE(StatusIs(RunData({"translations", "--source", "web", "--lang", "fr", "--out", out}),
                       absl::StatusCode::kInvalidArgument, {"--source 'web'"}));
  EXPECT_TRUE(StatusIs(RunData({"translations", "--lang", "fr"}),
                       absl::StatusCode::kInvalidArgument, {"--out"}));
  EXPECT_TRUE(StatusIs(RunData({"translations", "--out", out}), absl::StatusCode::kInvalidArgument,
                       {"--lang"}));
  EXPECT_TRUE(StatusIs(RunData({"translations", "--lang", "fr", "--out", out, "--dev_percent", "99",
                                "--test_percent", "2"}),
                       absl::StatusCode::kInvalidArgument, {"more than 100"}));
  EXPECT_TRUE(StatusIs(
      RunData({"translations", "--lang", "fr", "--out", out, "--test_percent", "5000000000"}),
      absl::StatusCode::kInvalidArgument, {"--test_percent 5000000000"}));
  EXPECT_TRUE(StatusIs(RunData({"sentences"}), absl::StatusCode::kInvalidArgument,
                       {"data sentences", "translations"}));
  EXPECT_TRUE(StatusIs(RunData({}), absl::StatusCode::kInvalidArgument, {"subcommand"}));
  EXPECT_FALSE(ReadFile(out + "/SOURCES").ok());  // nothing was written
}

TEST(DataCommandTest, HelpPrintsUsage) {
  std::string output;
  ASSERT_TRUE(RunData({"translations", "--help"}, &output).ok());
  EXPECT_TRUE(absl::StrContains(output, "usage: meshrt data translations")) << output;
  EXPECT_TRUE(absl::StrContains(output, "--test_percent")) << output;
  ASSERT_TRUE(RunData({"--help"}, &output).ok());
  EXPECT_TRUE(absl::StrContains(output, "translations")) << output;
}

}  // namespace
}  // namespace text
}  // namespace meshrt
