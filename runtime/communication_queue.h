// CommunicationQueue: the executor's communication thread (see "Overlap" in executor.h). The step
// thread issues work (a collective, a bucket of allreduces, giving a buffer back once nothing reads
// it) at its place in the program; the work runs one item at a time, in issue order, on the
// queue's thread, while the step thread goes on with what does not need it. AllReduceBucket and
// AllReduceTogether are the allreduce bucketing the executor issues through it.
//
// Why it is sound:
//   - Order: work runs strictly in issue order (one item at a time, on whichever thread takes the
//     front item), so a communicator sees the same calls in the same order as without overlap.
//   - Buffers: the queue records, per buffer, the last item that writes and that reads it. The
//     step thread waits (WaitForBuffers) for the writers of what it reads and for every item
//     touching what it writes; ReleaseWhenUnread queues a release after the items reading a buffer.
//   - Failure: the first failing item's error is kept; later items are skipped, Issue and every
//     wait return it at once. Every wait ends when the awaited item ends, which the communicator
//     bounds by its timeout.
//
// Without overlap (BeginStep's `overlap` false) Issue runs the work at once on the calling thread,
// and the waits return at once.
//
// Activity: while the step thread waits for an item, StepActivity::WaitsIn names the item's
// instruction, then the instruction it waits for again. Once the activity is aborted no queued item
// of an instruction starts: it fails with Aborted (through the ErrorFn, naming its instruction).
// Trace: the step thread's waits are WAIT spans naming the awaited item's instruction.
//
// Thread-safety: BeginStep, Issue, WaitForBuffers, ReleaseWhenUnread and Drain are called by one
// step thread at a time; failed() and CurrentThread() by any thread. The work items run on the
// queue's thread or on the step thread (when it waits for an item the queue's thread has not taken:
// it runs it itself rather than wait for a wakeup), never two at once.
#ifndef MESHRT_RUNTIME_COMMUNICATION_QUEUE_H_
#define MESHRT_RUNTIME_COMMUNICATION_QUEUE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/ir/tensor.h"
#include "proto/program.pb.h"
#include "runtime/communicator.h"
#include "runtime/step_activity.h"
#include "runtime/step_trace.h"

namespace meshrt {

class CommunicationQueue {
 public:
  // A work item: returns its error (naming its instruction).
  using Work = std::function<absl::Status()>;
  // `s` as the error of instruction `index` (the executor's InstructionError): for the Aborted
  // error of an item that does not start.
  using ErrorFn = std::function<absl::Status(int index, const absl::Status& s)>;

  explicit CommunicationQueue(ErrorFn error) : error_(std::move(error)) {}
  // Joins the thread (started by the first queued item). No step may be in progress.
  ~CommunicationQueue();
  CommunicationQueue(const CommunicationQueue&) = delete;
  CommunicationQueue& operator=(const CommunicationQueue&) = delete;

  // Starts a step on the calling thread (the step thread) over buffers 0..num_buffers-1: queue
  // (`overlap`) or run work at once. `activity` and `trace` are borrowed for the step (null: none).
  // The previous step must have been drained.
  void BeginStep(int num_buffers, bool overlap, StepActivity* activity, StepTraceRecorder* trace);
  bool overlap() const { return overlap_; }

  // Runs `work` now (overlap off: returns its error) or queues it; `reads` and `writes` are the
  // buffers it touches (out-of-range ones are ignored). `index`: its instruction (-1: none, e.g.
  // a release; such work also runs after an abort). With overlap, returns the first failure of the
  // step's work so far (the step must stop), else OK.
  absl::Status Issue(int index, Work work, const std::vector<int>& reads,
                     const std::vector<int>& writes);
  // Blocks until no queued or running work writes a buffer of `reads` or touches one of `writes`,
  // for instruction `index` (-1: none; what activity shows after the wait). The first failure of
  // the step's work, if any (then it stops waiting at once).
  absl::Status WaitForBuffers(int index, const std::vector<int>& reads,
                              const std::vector<int>& writes);
  // Calls `release` now when no unfinished work reads buffer `b`, else queues it after the work
  // that does (skipped, like any item, once an item failed: the caller frees what is left).
  void ReleaseWhenUnread(int b, std::function<void()> release);
  // Waits for every issued item; returns the step's first failure among them and forgets it.
  absl::Status Drain();

  // Whether an item of this step failed (a hint without the lock: Drain reports the failure).
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // The calling thread for trace events: STEP on the step thread, COMM otherwise.
  v1::TraceEvent::Thread CurrentThread() const {
    return std::this_thread::get_id() == step_thread_ ? v1::TraceEvent::STEP
                                                      : v1::TraceEvent::COMM;
  }

 private:
  // Blocks until item `seq` has finished, or (unless `drain`) any item failed; see WaitForBuffers.
  absl::Status WaitForItem(int64_t seq, bool drain, int resume) ABSL_LOCKS_EXCLUDED(mu_);
  // The instruction of item `item` of this step (-1: none, or not of this step).
  int InstructionOf(int64_t item) const;
  // Takes the front item (running_ false, the queue non-empty), runs it without the lock (skipped
  // once a failure is recorded) and records its end.
  void RunFront() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (!running_ && !queue_.empty());
  }

  const ErrorFn error_;
  bool overlap_ = false;
  StepActivity* activity_ = nullptr;
  StepTraceRecorder* trace_ = nullptr;
  std::thread::id step_thread_;

  // The step thread's: which item last wrote / read each buffer (-1: none), how many items were
  // issued (numbered 0, 1, ...; never reset), a lower bound of done_, and the instruction of each
  // item issued in this step (from item step_first_item_ on).
  std::vector<int64_t> last_write_, last_read_;
  int64_t issued_ = 0;
  int64_t done_seen_ = 0;
  std::vector<int> item_instruction_;
  int64_t step_first_item_ = 0;

  // Shared with the queue's thread. Items run one at a time in issue order, so item k has
  // finished once done_ > k.
  absl::Mutex mu_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;       // items finished or skipped
  bool running_ ABSL_GUARDED_BY(mu_) = false;   // an item runs (on either thread)
  absl::Status status_ ABSL_GUARDED_BY(mu_);    // the step's first failure
  bool stop_ ABSL_GUARDED_BY(mu_) = false;      // the destructor's
  std::atomic<bool> failed_{false};             // !status_.ok(), without the lock
  std::thread thread_;                          // started by the first queued item
};

// Small allreduces deferred to go out together, as DDP buckets gradients (executor.h: a deferred
// ALLREDUCE, StepPlan::due, waits until its due position, or until the waiting ones hold
// kBucketBytes: a full bucket goes out right after the allreduce that filled it). Not thread-safe:
// the step thread's.
class AllReduceBucket {
 public:
  static constexpr int64_t kBucketBytes = 1 << 20;

  // What one collective may combine: same sorted mesh axes, reduce op and dtype.
  struct Key {
    std::vector<int> axes;
    v1::ReduceOp op = v1::REDUCE_SUM;
    v1::DType dtype = v1::DT_FLOAT32;
    bool operator==(const Key& o) const {
      return axes == o.axes && op == o.op && dtype == o.dtype;
    }
  };
  struct Group {
    Key key;
    std::vector<int> members;  // instruction positions, in the order they were added
  };

  // Adds allreduce instruction `index`, due before position `due`, of `bytes`.
  void Add(int index, int due, int64_t bytes);
  // Whether the waiting allreduces must go out before position `position`: one is due there (or
  // earlier), or the bucket filled at an earlier position.
  bool DueAt(int position) const { return next_due_ <= position; }
  bool empty() const { return waiting_.empty(); }
  // The waiting allreduces grouped by `key_of` (one group per distinct key, in the order of their
  // first members); empties the bucket.
  std::vector<Group> Take(const std::function<Key(int index)>& key_of);

 private:
  std::vector<int> waiting_;
  int next_due_ = std::numeric_limits<int>::max();
  int64_t bytes_ = 0;
};

// Allreduces `tensors` (one dtype, `op`, over mesh axes `axes`) as one communicator call: packed
// into one buffer, reduced, unpacked in place. The communicator's error as it is; InvalidArgument
// when the tensors are empty or of different dtypes.
absl::Status AllReduceTogether(Communicator& communicator, const std::vector<int>& axes,
                               v1::ReduceOp op, const std::vector<Tensor*>& tensors);

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_COMMUNICATION_QUEUE_H_
