// The communication queue (communication_queue.h): work runs in issue order, waits end when the
// work touching a buffer has, the first failure wins and stops the rest, an abort stops queued
// collectives (one in progress ends as it would), a collective that never completes ends within the communicator's timeout; the
// allreduce bucket's due positions and groups, and one packed allreduce of several tensors.
#include "runtime/communication_queue.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/testing/test_util.h"
#include "gtest/gtest.h"
#include "runtime/local_communicator.h"
#include "runtime/step_activity.h"

namespace meshrt {
namespace {

// Errors named as the executor names them, so tests can see which instruction an error is for.
absl::Status Named(int index, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("instruction ", index, ": ", s.message()));
}

// A thread-safe log of the work items that ran.
class Log {
 public:
  CommunicationQueue::Work Append(int item) {
    return [this, item] {
      absl::MutexLock lock(&mu_);
      items_.push_back(item);
      return absl::OkStatus();
    };
  }
  std::vector<int> items() {
    absl::MutexLock lock(&mu_);
    return items_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int> items_;
};

TEST(CommunicationQueueTest, QueuedWorkRunsInIssueOrder) {
  CommunicationQueue queue(&Named);
  Log log;
  for (int step = 0; step < 2; ++step) {  // a second step reuses the thread
    queue.BeginStep(/*num_buffers=*/4, /*overlap=*/true, nullptr, nullptr);
    for (int i = 0; i < 50; ++i) ASSERT_OK(queue.Issue(i, log.Append(i), {i % 4}, {(i + 1) % 4}));
    ASSERT_OK(queue.Drain());
  }
  std::vector<int> want;
  for (int step = 0; step < 2; ++step) {
    for (int i = 0; i < 50; ++i) want.push_back(i);
  }
  EXPECT_EQ(log.items(), want);
}

TEST(CommunicationQueueTest, WithoutOverlapWorkRunsAtOnceAndReturnsItsError) {
  CommunicationQueue queue(&Named);
  queue.BeginStep(2, /*overlap=*/false, nullptr, nullptr);
  EXPECT_FALSE(queue.overlap());
  Log log;
  ASSERT_OK(queue.Issue(0, log.Append(0), {0}, {1}));
  EXPECT_EQ(log.items(), std::vector<int>{0});  // before Issue returned
  const absl::Status s =
      queue.Issue(1, [] { return absl::InternalError("boom"); }, {0}, {1});
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kInternal, {"boom"})) << s;
  ASSERT_OK(queue.WaitForBuffers(2, {0, 1}, {0, 1}));
  ASSERT_OK(queue.Drain());  // nothing queued: the error was Issue's
  EXPECT_EQ(queue.CurrentThread(), v1::TraceEvent::STEP);
}

TEST(CommunicationQueueTest, WaitsOnlyForTheWorkTouchingItsBuffers) {
  CommunicationQueue queue(&Named);
  queue.BeginStep(4, /*overlap=*/true, nullptr, nullptr);
  absl::Notification release, started;
  std::atomic<bool> done{false};
  std::atomic<bool> on_step_thread{true};
  // Item 0 writes buffer 1 (reads 0) and blocks until released.
  ASSERT_OK(queue.Issue(0, [&] {
    on_step_thread = queue.CurrentThread() == v1::TraceEvent::STEP;
    started.Notify();
    release.WaitForNotification();
    done = true;
    return absl::OkStatus();
  }, {0}, {1}));
  started.WaitForNotification();  // on the queue's thread
  EXPECT_FALSE(on_step_thread);
  // Buffers 2 and 3 are untouched, and reading 0 (which item 0 only reads) needs no wait.
  ASSERT_OK(queue.WaitForBuffers(5, {2, 0}, {3}));
  EXPECT_FALSE(done);
  // Reading buffer 1 (or writing 0, which item 0 reads) waits for item 0.
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    release.Notify();
  });
  ASSERT_OK(queue.WaitForBuffers(6, {1}, {}));
  EXPECT_TRUE(done);
  releaser.join();
  ASSERT_OK(queue.Drain());
}

TEST(CommunicationQueueTest, ReleasesABufferOnlyAfterTheWorkReadingIt) {
  CommunicationQueue queue(&Named);
  queue.BeginStep(3, /*overlap=*/true, nullptr, nullptr);
  std::atomic<int> released{0};
  queue.ReleaseWhenUnread(2, [&] { released = 2; });  // nothing reads it: now
  EXPECT_EQ(released, 2);
  absl::Notification release;
  std::atomic<bool> read_done{false};
  ASSERT_OK(queue.Issue(0, [&] {
    release.WaitForNotification();
    read_done = true;
    return absl::OkStatus();
  }, {1}, {0}));
  std::atomic<bool> released_after_read{false};
  queue.ReleaseWhenUnread(1, [&] { released_after_read = read_done.load(); });
  release.Notify();
  ASSERT_OK(queue.Drain());
  EXPECT_TRUE(released_after_read);
}

TEST(CommunicationQueueTest, TheFirstFailureWinsAndStopsLaterWork) {
  CommunicationQueue queue(&Named);
  Log log;
  queue.BeginStep(2, /*overlap=*/true, nullptr, nullptr);
  ASSERT_OK(queue.Issue(0, log.Append(0), {0}, {1}));
  (void)queue.Issue(1, [] { return Named(1, absl::DeadlineExceededError("first")); }, {0}, {1});
  (void)queue.Issue(2, [] { return Named(2, absl::InternalError("second")); }, {0}, {1});
  (void)queue.Issue(3, log.Append(3), {0}, {1});
  // A wait returns the failure as soon as it is known.
  const absl::Status waited = queue.WaitForBuffers(4, {1}, {});
  EXPECT_TRUE(StatusIs(waited, absl::StatusCode::kDeadlineExceeded, {"instruction 1", "first"}))
      << waited;
  EXPECT_TRUE(queue.failed());
  // Issue reports it too, without running anything more.
  const absl::Status issued = queue.Issue(5, log.Append(5), {}, {});
  EXPECT_TRUE(StatusIs(issued, absl::StatusCode::kDeadlineExceeded, {"first"})) << issued;
  const absl::Status drained = queue.Drain();
  EXPECT_TRUE(StatusIs(drained, absl::StatusCode::kDeadlineExceeded, {"instruction 1", "first"}))
      << drained;
  EXPECT_EQ(log.items(), std::vector<int>{0});
  // Drain forgot it: the next step runs.
  EXPECT_FALSE(queue.failed());
  queue.BeginStep(2, /*overlap=*/true, nullptr, nullptr);
  ASSERT_OK(queue.Issue(0, log.Append(10), {0}, {1}));
  ASSERT_OK(queue.Drain());
  EXPECT_EQ(log.items(), (std::vector<int>{0, 10}));
}

TEST(CommunicationQueueTest, AnAbortStopsQueuedCollectives) {
  CommunicationQueue queue(&Named);
  StepActivity activity;
  activity.BeginStep(1);
  queue.BeginStep(2, /*overlap=*/true, &activity, nullptr);
  absl::Notification release, started;
  ASSERT_OK(queue.Issue(0, [&] {
    started.Notify();
    release.WaitForNotification();  // in progress: not interrupted
    return absl::OkStatus();
  }, {0}, {1}));
  started.WaitForNotification();
  Log log;
  (void)queue.Issue(7, log.Append(7), {1}, {0});
  activity.Abort();
  release.Notify();
  const absl::Status s = queue.Drain();
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kAborted, {"instruction 7", "aborted"})) << s;
  EXPECT_TRUE(log.items().empty());
  activity.EndStep();
}

// A collective whose peer never comes fails with the communicator's DeadlineExceeded, and the
// step's waits end with it, within the timeout (not hang).
TEST(CommunicationQueueTest, AWaitForACollectiveThatNeverCompletesEndsWithItsTimeout) {
  LocalCollectiveHub::Options options;
  options.timeout = absl::Milliseconds(200);
  LocalCollectiveHub hub(*Mesh::Parse("x:2"), options);
  CommunicationQueue queue(&Named);
  queue.BeginStep(2, /*overlap=*/true, nullptr, nullptr);
  std::vector<float> data(4, 1.0f);
  Communicator* alone = hub.communicator(0);  // processor 1 never calls
  ASSERT_OK(queue.Issue(3, [&] {
    absl::Status s = alone->AllReduce({0}, v1::REDUCE_SUM, DType::kFloat32, data.data(), 4);
    return s.ok() ? s : Named(3, s);
  }, {0}, {1}));
  const absl::Time start = absl::Now();
  const absl::Status s = queue.WaitForBuffers(4, {1}, {});
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(StatusIs(s, absl::StatusCode::kDeadlineExceeded, {"instruction 3"})) << s;
  EXPECT_TRUE(StatusIs(queue.Drain(), absl::StatusCode::kDeadlineExceeded));
}

TEST(AllReduceBucketTest, GoesOutAtTheEarliestDuePositionOrWhenFull) {
  AllReduceBucket bucket;
  EXPECT_TRUE(bucket.empty());
  EXPECT_FALSE(bucket.DueAt(1000000));
  bucket.Add(/*index=*/3, /*due=*/9, /*bytes=*/100);
  bucket.Add(4, 7, 100);
  EXPECT_FALSE(bucket.DueAt(6));
  EXPECT_TRUE(bucket.DueAt(7));
  auto key = [](int i) { return AllReduceBucket::Key{{0}, v1::REDUCE_SUM, v1::DT_FLOAT32}; };
  std::vector<AllReduceBucket::Group> groups = bucket.Take(key);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].members, (std::vector<int>{3, 4}));
  EXPECT_TRUE(bucket.empty());
  EXPECT_FALSE(bucket.DueAt(7));  // emptied: nothing due
  // One byte short of a full bucket waits for its due position; the byte that fills it makes the
  // bucket due right after the allreduce that filled it.
  bucket.Add(10, 50, AllReduceBucket::kBucketBytes - 1);
  EXPECT_FALSE(bucket.DueAt(11));
  bucket.Add(12, 50, 1);
  EXPECT_FALSE(bucket.DueAt(12));
  EXPECT_TRUE(bucket.DueAt(13));
}

TEST(AllReduceBucketTest, GroupsByAxesOpAndDtypeInFirstMemberOrder) {
  AllReduceBucket bucket;
  for (int i = 0; i < 6; ++i) bucket.Add(i, 100, 4);
  auto key = [](int i) {
    switch (i) {
      case 0:
      case 3:
        return AllReduceBucket::Key{{1}, v1::REDUCE_SUM, v1::DT_FLOAT32};
      case 1:
        return AllReduceBucket::Key{{0, 1}, v1::REDUCE_SUM, v1::DT_FLOAT32};
      case 2:
        return AllReduceBucket::Key{{1}, v1::REDUCE_MAX, v1::DT_FLOAT32};
      default:
        return AllReduceBucket::Key{{1}, v1::REDUCE_SUM, v1::DT_INT32};
    }
  };
  const std::vector<AllReduceBucket::Group> groups = bucket.Take(key);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].members, (std::vector<int>{0, 3}));
  EXPECT_EQ(groups[1].members, (std::vector<int>{1}));
  EXPECT_EQ(groups[2].members, (std::vector<int>{2}));
  EXPECT_EQ(groups[3].members, (std::vector<int>{4, 5}));
  EXPECT_EQ(groups[3].key.dtype, v1::DT_INT32);
}

// Two processors as two threads: tensors of different sizes summed with one communicator call.
TEST(AllReduceTogetherTest, SumsEveryTensorInOneCall) {
  LocalCollectiveHub hub(*Mesh::Parse("x:2"));
  std::vector<std::vector<Tensor>> tensors(2);
  for (int p = 0; p < 2; ++p) {
    tensors[p].push_back(Tensor::Float(Shape{{"a", 3}}, {1.0f * p, 2, 3}));
    tensors[p].push_back(Tensor::Float(Shape{{"b", 1}}, {10.0f + p}));
  }
  std::vector<absl::Status> statuses(2);
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      std::vector<Tensor*> ptrs = {&tensors[p][0], &tensors[p][1]};
      statuses[p] = AllReduceTogether(*hub.communicator(p), {0}, v1::REDUCE_SUM, ptrs);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int p = 0; p < 2; ++p) {
    ASSERT_OK(statuses[p]);
    EXPECT_EQ(std::vector<float>(tensors[p][0].floats().begin(), tensors[p][0].floats().end()),
              (std::vector<float>{1, 4, 6}));
    EXPECT_EQ(tensors[p][1].f32()[0], 21.0f);
  }
  LocalCollectiveHub one(*Mesh::Parse("x:1"));
  Tensor f = Tensor::Float(Shape{{"a", 1}}, {1});
  Tensor i = Tensor::Int(Shape{{"a", 1}}, {1});
  EXPECT_TRUE(StatusIs(AllReduceTogether(*one.communicator(0), {0}, v1::REDUCE_SUM, {&f, &i}),
                       absl::StatusCode::kInvalidArgument, {"float32", "int32"}));
  EXPECT_TRUE(StatusIs(AllReduceTogether(*one.communicator(0), {0}, v1::REDUCE_SUM, {}),
                       absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace meshrt
