#include "bench/peer_cores.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace meshrt {
namespace bench {
namespace {

TEST(ParsePeerProbeTest, ReadsTheResultLine) {
  kernels::CoreMeasurement m = ParsePeerProbe(
      "SkylakeX",
      "some warning\ncorename=SkylakeX correct=1 error=2.9e-07 gflops=151.3 library=/x.so\n");
  EXPECT_EQ(m.requested, "SkylakeX");
  EXPECT_EQ(m.corename, "SkylakeX");
  EXPECT_TRUE(m.correct);
  EXPECT_DOUBLE_EQ(m.gflops, 151.3);
  EXPECT_EQ(m.error, "");
}

TEST(ParsePeerProbeTest, WrongResultsAreAnError) {
  kernels::CoreMeasurement m =
      ParsePeerProbe("Zen", "corename=Zen correct=0 error=0.25 gflops=300.0 library=/x.so\n");
  EXPECT_FALSE(m.correct);
  EXPECT_NE(m.error.find("wrong results (relative error 0.25)"), std::string::npos) << m.error;
}

TEST(ParsePeerProbeTest, ReportsWhatTheProbeSaid) {
  kernels::CoreMeasurement m = ParsePeerProbe("Haswell", "error=cannot import torch (x)\n");
  EXPECT_EQ(m.corename, "");
  EXPECT_NE(m.error.find("cannot import torch"), std::string::npos) << m.error;
  m = ParsePeerProbe("Haswell", "Traceback (most recent call last):\n  ...\n");
  EXPECT_NE(m.error.find("no result line; the probe said: Traceback"), std::string::npos)
      << m.error;
  m = ParsePeerProbe("Haswell", "");
  EXPECT_EQ(m.error, "the probe printed nothing");
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A stand-in for python + peer_core_probe.py: /bin/sh running a script that answers per core,
// counts its runs, and fails when the presets it must not see are set.
class PeerCoresForTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/peer_cores-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    script_ = dir_ + "/probe.sh";
    runs_ = dir_ + "/runs";
    std::ofstream(script_) << "echo run >> " << runs_ << "\n"
                           << "if [ -n \"$OPENBLAS_L2_SIZE\" ]; then echo error=L2 preset; exit 0; fi\n"
                           << "case $OPENBLAS_CORETYPE in\n"
                           << "  Fast) echo corename=Fast correct=1 error=1e-7 gflops=200.0 ;;\n"
                           << "  Wrong) echo corename=Wrong correct=0 error=0.5 gflops=400.0 ;;\n"
                           << "  Slow) echo corename=Slow correct=1 error=1e-7 gflops=50.0 ;;\n"
                           << "  *) kill -SEGV $$ ;;\n"
                           << "esac\n";
    setenv("OPENBLAS_L2_SIZE", "1048576", 1);
  }
  void TearDown() override { unsetenv("OPENBLAS_L2_SIZE"); }

  int Runs() {
    std::string text = ReadAll(runs_);
    int n = 0;
    for (size_t p = text.find("run"); p != std::string::npos; p = text.find("run", p + 1)) ++n;
    return n;
  }

  std::string dir_, script_, runs_;
};

TEST_F(PeerCoresForTest, TheFastestCorrectCoreWinsAndIsCached) {
  const std::vector<std::string> candidates = {"Slow", "Wrong", "Crash", "Fast"};
  PeerCores first = PeerCoresFor("/bin/sh", script_, candidates, dir_);
  EXPECT_FALSE(first.from_cache);
  ASSERT_EQ(first.cores.size(), 4u);
  EXPECT_EQ(Runs(), 4);
  const kernels::CoreMeasurement* best = kernels::FastestCorrect(first.cores);
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->requested, "Fast");  // not Wrong, though faster: its results are wrong
  EXPECT_NE(first.cores[1].error.find("wrong results"), std::string::npos) << first.cores[1].error;
  EXPECT_NE(first.cores[2].error.find("killed"), std::string::npos) << first.cores[2].error;
  EXPECT_NE(first.cache_file.find(dir_ + "/peer-cores-"), std::string::npos) << first.cache_file;

  PeerCores second = PeerCoresFor("/bin/sh", script_, candidates, dir_);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(Runs(), 4);  // nothing measured again
  best = kernels::FastestCorrect(second.cores);
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->requested, "Fast");
  EXPECT_DOUBLE_EQ(best->gflops, 200.0);
  EXPECT_EQ(kernels::FastestCorrect({second.cores[1]}), nullptr);  // Wrong stays wrong

  // Another candidate list is another cache entry.
  PeerCores other = PeerCoresFor("/bin/sh", script_, {"Slow"}, dir_);
  EXPECT_FALSE(other.from_cache);
  EXPECT_EQ(Runs(), 5);
}

TEST_F(PeerCoresForTest, AnotherUsersDirectoryIsNotACache) {
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);  // writable by others: not trusted
  PeerCores r = PeerCoresFor("/bin/sh", script_, {"Fast"}, dir_);
  EXPECT_EQ(r.cache_file, "");
  EXPECT_FALSE(r.from_cache);
  r = PeerCoresFor("/bin/sh", script_, {"Fast"}, dir_);
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(Runs(), 2);
  ASSERT_EQ(r.cores.size(), 1u);
  EXPECT_EQ(r.cores[0].error, "");  // and the L2 preset was removed for the probe
}

}  // namespace
}  // namespace bench
}  // namespace meshrt
