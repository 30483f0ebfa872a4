#include "runtime/communicator_checks.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

constexpr char kContext[] = "AllReduce over mesh axes [rows] at processor (1,0)";

void ExpectInvalid(const absl::Status& s, const std::string& says) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), kContext)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), says)) << s;
}

TEST(CommunicatorChecksTest, ContextNamesTheCallTheAxesAndTheProcessor) {
  const Mesh mesh = Mesh::Parse("rows:2,cols:2").value();
  EXPECT_EQ(CollectiveContext(mesh, "AllReduce", {0}, {1, 0}), kContext);
}

TEST(CommunicatorChecksTest, Buffers) {
  int x = 0;
  EXPECT_TRUE(CheckBuffer(kContext, 4, &x).ok());
  EXPECT_TRUE(CheckBuffer(kContext, 0, nullptr).ok());
  ExpectInvalid(CheckBuffer(kContext, -1, &x), "invalid buffer (size -1)");
  ExpectInvalid(CheckBuffer(kContext, 4, nullptr), "invalid buffer (size 4)");
  EXPECT_TRUE(CheckInput(kContext, 0, nullptr).ok());
  ExpectInvalid(CheckInput(kContext, 4, nullptr), "input buffer is null");
}

TEST(CommunicatorChecksTest, ReduceOpsAndRoots) {
  EXPECT_TRUE(CheckReduceOp(kContext, v1::REDUCE_SUM).ok());
  EXPECT_TRUE(CheckReduceOp(kContext, v1::REDUCE_PROD).ok());
  ExpectInvalid(CheckReduceOp(kContext, v1::REDUCE_INVALID), "invalid reduce op 0");
  EXPECT_TRUE(CheckRoot(kContext, 1, 2).ok());
  ExpectInvalid(CheckRoot(kContext, 2, 2), "root rank 2 is not in a group of 2");
  ExpectInvalid(CheckRoot(kContext, -1, 2), "root rank -1");
}

}  // namespace
}  // namespace meshrt
