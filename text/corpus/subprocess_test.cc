#include "text/corpus/subprocess.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "text/corpus/corpus_test_util.h"

namespace meshrt {
namespace text {
namespace {

TEST(RunProcessTest, CollectsOutputAndExitCode) {
  absl::StatusOr<ProcessResult> r = RunProcess({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_text, "out\n");
  EXPECT_EQ(r->stderr_text, "err\n");
}

TEST(RunProcessTest, ArgumentsAreNotInterpretedByAShell) {
  absl::StatusOr<ProcessResult> r = RunProcess({"/bin/echo", "a; echo b", "$(id)"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_text, "a; echo b $(id)\n");
}

TEST(RunProcessTest, LargeOutputOnBothStreamsDoesNotDeadlock) {
  absl::StatusOr<ProcessResult> r =
      RunProcess({"/bin/sh", "-c", "head -c 300000 /dev/zero; head -c 200000 /dev/zero >&2"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text.size(), 300000u);
  EXPECT_EQ(r->stderr_text.size(), 200000u);
}

TEST(RunProcessTest, MissingProgramIsNotFound) {
  EXPECT_TRUE(StatusIs(RunProcess({"/nonexistent/program"}).status(), absl::StatusCode::kNotFound,
                       {"/nonexistent/program"}));
  EXPECT_TRUE(StatusIs(RunProcess({}).status(), absl::StatusCode::kInvalidArgument));
}

TEST(RunProcessTest, TimeoutKillsTheProgram) {
  EXPECT_TRUE(StatusIs(RunProcess({"/bin/sleep", "5"}, absl::Milliseconds(100)).status(),
                       absl::StatusCode::kDeadlineExceeded, {"/bin/sleep"}));
}

}  // namespace
}  // namespace text
}  // namespace meshrt
