#include "util/flags.h"

#include "gtest/gtest.h"

namespace meshrt {
namespace {

TEST(FlagSetTest, ParsesEveryForm) {
  FlagSet f("prog [flags] FILE", "Does things.");
  std::string s = "dflt";
  int64_t n = 3;
  bool b = false, c = true;
  std::vector<std::string> r;
  double d = 0.5;
  f.String("name", &s, "a name");
  f.Int("count", &n, "a count");
  f.Double("rate", &d, "a rate");
  f.Bool("verbose", &b, "talk more");
  f.Bool("color", &c, "use color");
  f.Repeated("feed", &r, "a feed");
  auto pos = f.Parse({"in.pbtxt", "--name", "x", "--count=7", "--rate=3e-3", "--verbose",
                      "--nocolor", "--feed", "a=1", "--feed=b=2", "--", "--literal"});
  ASSERT_TRUE(pos.ok()) << pos.status();
  EXPECT_EQ(*pos, (std::vector<std::string>{"in.pbtxt", "--literal"}));
  EXPECT_EQ(s, "x");
  EXPECT_EQ(n, 7);
  EXPECT_DOUBLE_EQ(d, 3e-3);
  EXPECT_TRUE(b);
  EXPECT_FALSE(c);
  EXPECT_EQ(r, (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_FALSE(f.help());
}

TEST(FlagSetTest, AnUnknownFlagNearAKnownOneGetsASuggestion) {
  FlagSet f("prog", "");
  int64_t steps = 0, seed = 0;
  f.Int("steps", &steps, "steps");
  f.Int("seed", &seed, "seed");
  EXPECT_EQ(f.Parse({"--step", "3"}).status().message(), "unknown flag --step; did you mean --steps?");
  EXPECT_EQ(f.Parse({"--sede=3"}).status().message(), "unknown flag --sede; did you mean --seed?");
  EXPECT_EQ(f.Parse({"--learning_rate=3"}).status().message(),
            "unknown flag --learning_rate (see --help)");
}

TEST(FlagSetTest, ErrorsNameTheFlag) {
  FlagSet f("prog", "");
  int64_t n = 0;
  f.Int("count", &n, "a count");
  EXPECT_NE(std::string(f.Parse({"--bogus"}).status().message()).find("unknown flag --bogus"),
            std::string::npos);
  EXPECT_NE(std::string(f.Parse({"--count", "many"}).status().message()).find("--count"),
            std::string::npos);
  EXPECT_NE(std::string(f.Parse({"--count"}).status().message()).find("needs a value"),
            std::string::npos);
  double d = 0;
  f.Double("rate", &d, "a rate");
  EXPECT_NE(std::string(f.Parse({"--rate=nan"}).status().message()).find("--rate"),
            std::string::npos);
}

TEST(FlagSetTest, HelpListsFlagsWithDefaults) {
  FlagSet f("prog [flags]", "Does things.");
  int64_t port = 7070;
  f.Int("port", &port, "port to listen on");
  ASSERT_TRUE(f.Parse({"--help"}).ok());
  EXPECT_TRUE(f.help());
  EXPECT_NE(f.Help().find("--port VALUE"), std::string::npos);
  EXPECT_NE(f.Help().find("(default: 7070)"), std::string::npos);
  EXPECT_NE(f.Help().find("usage: prog [flags]"), std::string::npos);
}

}  // namespace
}  // namespace meshrt
