#include "worker/gloo_store.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kv_store.h"

namespace meshrt {
namespace {

using ::testing::HasSubstr;

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

// Runs `fn`, which must throw KeyValueStoreError; returns its status.
template <typename F>
absl::Status ThrownStatus(F&& fn) {
  try {
    fn();
  } catch (const KeyValueStoreError& e) {
    // Gloo sees an IoException carrying our message.
    const gloo::IoException& io = e;
    EXPECT_THAT(std::string(io.what()), HasSubstr(std::string(e.status().message())));
    return e.status();
  }
  ADD_FAILURE() << "no exception";
  return absl::OkStatus();
}

TEST(GlooStoreTest, SetGetWaitGoThroughTheKeyValueStore) {
  InMemoryKeyValueStore kv;
  GlooStore store(&kv, absl::Seconds(5));
  store.set("a", Bytes(std::string("\0\1x", 3)));
  EXPECT_EQ(store.get("a"), Bytes(std::string("\0\1x", 3)));
  EXPECT_EQ(*kv.Get("a", absl::ZeroDuration()), std::string("\0\1x", 3));
  store.wait({"a"});
  store.wait({"a"}, std::chrono::milliseconds(10));
}

TEST(GlooStoreTest, GetAndWaitBlockUntilTheKeyIsSet) {
  InMemoryKeyValueStore kv;
  GlooStore store(&kv, absl::Seconds(10));
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(kv.Set("x", "1").ok());
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(kv.Set("y", "2").ok());
  });
  store.wait({"x", "y"}, std::chrono::milliseconds(10000));
  EXPECT_EQ(store.get("y"), Bytes("2"));
  writer.join();
}

TEST(GlooStoreTest, FailuresThrowWithTheStatus) {
  InMemoryKeyValueStore kv;
  GlooStore store(&kv, absl::Milliseconds(50));
  store.set("k", Bytes("v"));
  store.set("k", Bytes("v"));  // same value: fine
  absl::Status s = ThrownStatus([&] { store.set("k", Bytes("other")); });
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);

  const absl::Time start = absl::Now();
  s = ThrownStatus([&] { store.get("missing"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));

  s = ThrownStatus([&] { store.wait({"k", "absent"}, std::chrono::milliseconds(30)); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("absent"));

  // Zero means "no timeout" to Gloo; we still stop after the construction timeout.
  s = ThrownStatus([&] { store.wait({"absent"}, std::chrono::milliseconds(0)); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(GlooStoreTest, AbortReachesWaiters) {
  InMemoryKeyValueStore kv;
  GlooStore store(&kv, absl::Seconds(30));
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    kv.Abort(absl::AbortedError("session aborted"));
  });
  absl::Status s = ThrownStatus([&] { store.get("never"); });
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
}

TEST(GlooStoreTest, WorksUnderGloosPrefixStore) {
  InMemoryKeyValueStore kv;
  GlooStore store(&kv, absl::Seconds(5));
  gloo::rendezvous::PrefixStore prefixed("sess/rows/0", store);
  prefixed.set("1", Bytes("addr"));
  EXPECT_EQ(*kv.Get("sess/rows/0/1", absl::ZeroDuration()), "addr");
  EXPECT_EQ(prefixed.get("1"), Bytes("addr"));
}

}  // namespace
}  // namespace meshrt
