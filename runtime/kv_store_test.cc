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

namespace meshrt {
namespace {

using ::testing::HasSubstr;

// Bytes charged for one key of the store.
int64_t Charge(const std::string& key, const std::string& value) {
  return static_cast<int64_t>(key.size() + value.size()) +
         InMemoryKeyValueStore::kEntryOverheadBytes;
}

TEST(KeyValueQuotaTest, PrefixKeyQuotaAtAndOverTheLimit) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.RegisterPrefix("session/s1/ab", {/*max_keys=*/3, /*max_bytes=*/1 << 20}).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store.Set(absl::StrCat("session/s1/ab/", i), "v").ok()) << i;
  }
  absl::Status s = store.Set("session/s1/ab/3", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("session prefix 'session/s1/ab'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("quota of 3 keys"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max_kv_keys_per_processor"));
  EXPECT_TRUE(store.Set("session/s1/ab/0", "v").ok()) << "re-setting the same value is free";
  EXPECT_TRUE(store.Set("elsewhere", "v").ok()) << "keys under no prefix have no quota";
  EXPECT_EQ(store.size(), 4u);
}

TEST(KeyValueQuotaTest, PrefixByteQuotaCountsKeysValuesAndOverhead) {
  InMemoryKeyValueStore store;
  const std::string key = "p/k", value(100, 'x');
  ASSERT_TRUE(store.RegisterPrefix("p", {10, 2 * Charge(key, value)}).ok());
  ASSERT_TRUE(store.Set("p/k", value).ok());
  ASSERT_TRUE(store.Set("p/l", value).ok());  // exactly at the quota
  absl::Status s = store.Set("p/m", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("prefix 'p'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat(2 * Charge(key, value), " bytes")));
  EXPECT_EQ(store.bytes(), 2 * Charge(key, value));
}

TEST(KeyValueQuotaTest, ValueKeyAndStoreCaps) {
  KeyValueStoreOptions options;
  options.max_value_bytes = 8;
  options.max_key_bytes = 4;
  options.max_keys = 2;
  InMemoryKeyValueStore store(options);
  ASSERT_TRUE(store.Set("a", std::string(8, 'v')).ok());
  absl::Status s = store.Set("b", std::string(9, 'v'));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("key 'b' is 9 bytes, over the limit of 8"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max_kv_value_bytes"));
  ASSERT_TRUE(store.Set("abcd", "v").ok());
  s = store.Set("abcde", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'abcde' is 5 bytes"));
  s = store.Set("c", "v");  // a third key
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("limit of 2 keys"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max_kv_keys"));

  KeyValueStoreOptions small;
  small.max_bytes = Charge("a", "12345");
  InMemoryKeyValueStore tiny(small);
  ASSERT_TRUE(tiny.Set("a", "12345").ok());
  s = tiny.Set("b", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max_kv_bytes"));
}

TEST(KeyValueQuotaTest, RequirePrefixRefusesKeysOfNoLiveSession) {
  KeyValueStoreOptions options;
  options.require_prefix = true;
  InMemoryKeyValueStore store(options);
  absl::Status s = store.Set("session/s9/x/k", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'session/s9/x/k' is under no live session"));
  EXPECT_EQ(store.Get("session/s9/x/k", absl::Seconds(10)).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "refused at once, not after the timeout";
  ASSERT_TRUE(store.RegisterPrefix("session/s9/x", {10, 1 << 20}).ok());
  EXPECT_TRUE(store.Set("session/s9/x/k", "v").ok());
  // The prefix itself, and names that only start with it, are not under it.
  EXPECT_EQ(store.Set("session/s9/x", "v").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Set("session/s9/xy/k", "v").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(KeyValueQuotaTest, PrefixesMustNotNest) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.RegisterPrefix("s/1", {1, 1000}).ok());
  ASSERT_TRUE(store.RegisterPrefix("s/1.5", {1, 1000}).ok());  // "s/1.5/" sorts before "s/1/"
  ASSERT_TRUE(store.RegisterPrefix("s/10", {1, 1000}).ok());
  EXPECT_EQ(store.RegisterPrefix("s/1", {1, 1000}).code(), absl::StatusCode::kAlreadyExists);
  absl::Status s = store.RegisterPrefix("s/1/inner", {1, 1000});
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(s.message()), HasSubstr("overlaps registered prefix 's/1'"));
  EXPECT_EQ(store.RegisterPrefix("s", {1, 1000}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store.RegisterPrefix("", {1, 1000}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.RegisterPrefix("t/", {1, 1000}).code(), absl::StatusCode::kInvalidArgument);
  // Each key counts against its own prefix only.
  ASSERT_TRUE(store.Set("s/1/k", "v").ok());
  ASSERT_TRUE(store.Set("s/1.5/k", "v").ok());
  ASSERT_TRUE(store.Set("s/10/k", "v").ok());
  EXPECT_EQ(store.Set("s/1/l", "v").code(), absl::StatusCode::kResourceExhausted);
}

TEST(KeyValueQuotaTest, DeletePrefixRemovesItsKeysOnly) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.RegisterPrefix("session/s1/a", {2, 1 << 20}).ok());
  ASSERT_TRUE(store.RegisterPrefix("session/s2/b", {2, 1 << 20}).ok());
  ASSERT_TRUE(store.Set("session/s1/a/0", "x").ok());
  ASSERT_TRUE(store.Set("session/s1/a/1", "y").ok());
  ASSERT_TRUE(store.Set("session/s2/b/0", "z").ok());
  EXPECT_EQ(store.DeletePrefix("session/s1/a"), 2);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.bytes(), Charge("session/s2/b/0", "z"));
  EXPECT_EQ(*store.Get("session/s2/b/0", absl::ZeroDuration()), "z");
  EXPECT_EQ(store.Get("session/s1/a/0", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store.DeletePrefix("session/s1/a"), 0);
  // The prefix can be registered again, with a fresh quota.
  ASSERT_TRUE(store.RegisterPrefix("session/s1/a", {2, 1 << 20}).ok());
  EXPECT_TRUE(store.Set("session/s1/a/0", "other").ok());
  EXPECT_TRUE(store.Set("session/s1/a/1", "other").ok());
}

TEST(KeyValueQuotaTest, DeletePrefixWakesItsWaitersPromptly) {
  InMemoryKeyValueStore store;
  ASSERT_TRUE(store.RegisterPrefix("session/s1/a", {10, 1 << 20}).ok());
  ASSERT_TRUE(store.RegisterPrefix("session/s2/b", {10, 1 << 20}).ok());
  absl::StatusOr<std::string> deleted, other;
  const absl::Time start = absl::Now();
  std::thread waiter([&] { deleted = store.Get("session/s1/a/never", absl::Seconds(30)); });
  std::thread bystander([&] { other = store.Get("session/s2/b/late", absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(50));
  store.DeletePrefix("session/s1/a");
  waiter.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(deleted.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(deleted.status().message()), HasSubstr("'session/s1/a' was deleted"));
  // The other session's waiter keeps waiting and gets its key.
  ASSERT_TRUE(store.Set("session/s2/b/late", "v").ok());
  bystander.join();
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*other, "v");
}

}  // namespace
}  // namespace meshrt
