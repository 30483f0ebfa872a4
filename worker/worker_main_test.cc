#include "worker/worker_main.h"

#include "gtest/gtest.h"

namespace meshrt {
namespace {

TEST(MemAvailableBytesTest, ReadsTheMemAvailableLineInKiB) {
  EXPECT_EQ(MemAvailableBytes("MemTotal:       16000000 kB\nMemFree:         1000 kB\n"
                              "MemAvailable:    8000000 kB\nBuffers:  5 kB\n"),
            int64_t{8000000} * 1024);
  EXPECT_EQ(MemAvailableBytes("MemAvailable: 12"), 12);  // no unit: bytes
}

TEST(MemAvailableBytesTest, UnknownIsZero) {
  EXPECT_EQ(MemAvailableBytes(""), 0);
  EXPECT_EQ(MemAvailableBytes("MemTotal: 1000 kB\n"), 0);
  EXPECT_EQ(MemAvailableBytes("MemAvailable: lots kB\n"), 0);
  EXPECT_EQ(MemAvailableBytes("XMemAvailable: 5 kB\n"), 0);
}

TEST(ParseOverlapTest, AutoTrueOrFalse) {
  EXPECT_EQ(*ParseOverlap("auto"), Worker::Overlap::kChoose);
  for (const char* on : {"true", "on", "1"}) EXPECT_EQ(*ParseOverlap(on), Worker::Overlap::kOn);
  for (const char* off : {"false", "off", "0"}) {
    EXPECT_EQ(*ParseOverlap(off), Worker::Overlap::kOff);
  }
  absl::StatusOr<Worker::Overlap> bad = ParseOverlap("sometimes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "--overlap_comm=sometimes: expected auto, true or false");
}

}  // namespace
}  // namespace meshrt
