#include "runtime/kv_store.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace meshrt {
namespace {

using ::testing::HasSubstr;

TEST(InMemoryKeyValueStoreTest, SetThenGet) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  ASSERT_TRUE(store.Set("b", std::string("\0x\0", 3)).ok());
  absl::StatusOr<std::string> a = store.Get("a", absl::ZeroDuration());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "1");
  absl::StatusOr<std::string> b = store.Get("b", absl::Seconds(1));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, std::string("\0x\0", 3));  // binary values survive
  EXPECT_EQ(store.size(), 2u);
}

TEST(InMemoryKeyValueStoreTest, KeysAreWriteOnce) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("k", "v").ok());
  EXPECT_TRUE(store.Set("k", "v").ok()) << "same value again is allowed";
  absl::Status s = store.Set("k", "w");
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'k'"));
  EXPECT_EQ(*store.Get("k", absl::ZeroDuration()), "v") << "the first value stays";
  EXPECT_EQ(store.size(), 1u);
}

TEST(InMemoryKeyValueStoreTest, EmptyKeyIsInvalid) {
  InMemoryKeyValueStore store;
  EXPECT_EQ(store.Set("", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Get("", absl::Seconds(1)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InMemoryKeyValueStoreTest, GetTimesOutNamingTheKey) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("other", "x").ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> v = store.Get("missing/key", absl::Milliseconds(100));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("missing/key"));
  EXPECT_GE(waited, absl::Milliseconds(95));
  EXPECT_LT(waited, absl::Seconds(5));
}

TEST(InMemoryKeyValueStoreTest, GetBlocksUntilSet) {
  InMemoryKeyValueStore store;
  absl::StatusOr<std::string> got;
  std::thread reader([&] { got = store.Get("late", absl::Seconds(10)); });
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(store.Set("unrelated", "u").ok());  // wakes the reader, which must keep waiting
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(store.Set("late", "value").ok());
  reader.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "value");
}

TEST(InMemoryKeyValueStoreTest, ManyWritersAndReaders) {
  InMemoryKeyValueStore store;
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> seen(kThreads);
  std::vector<absl::Status> statuses(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread publishes its key, then reads its neighbour's (which may not exist yet).
      absl::Status s = store.Set(absl::StrCat("rank/", t), absl::StrCat("v", t));
      absl::StatusOr<std::string> v =
          store.Get(absl::StrCat("rank/", (t + 1) % kThreads), absl::Seconds(10));
      statuses[t] = s.ok() ? v.status() : s;
      if (v.ok()) seen[t] = *v;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(statuses[t].ok()) << statuses[t];
    EXPECT_EQ(seen[t], absl::StrCat("v", (t + 1) % kThreads));
  }
  EXPECT_EQ(store.size(), static_cast<size_t>(kThreads));
}

TEST(InMemoryKeyValueStoreTest, AbortWakesWaitersAndSticks) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.Set("k", "v").ok());
  absl::StatusOr<std::string> got;
  const absl::Time start = absl::Now();
  std::thread reader([&] { got = store.Get("never", absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(50));
  store.Abort(absl::CancelledError("session torn down"));
  reader.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("session torn down"));
  // Later calls fail with the abort status too, even for keys that exist; the first abort wins.
  store.Abort(absl::InternalError("second"));
  EXPECT_EQ(store.Get("k", absl::Seconds(1)).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(store.Set("x", "y").code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace meshrt
