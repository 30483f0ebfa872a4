#include "runtime/communication_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"

namespace meshrt {

CommunicationQueue::~CommunicationQueue() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CommunicationQueue::BeginStep(int num_buffers, bool overlap, StepActivity* activity,
                                   StepTraceRecorder* trace) {
  overlap_ = overlap;
  activity_ = activity;
  trace_ = trace;
  step_thread_ = std::this_thread::get_id();
  last_write_.assign(std::max(num_buffers, 0), -1);
  last_read_.assign(std::max(num_buffers, 0), -1);
  item_instruction_.clear();
  step_first_item_ = issued_;
}

absl::Status CommunicationQueue::Issue(int index, Work work, const std::vector<int>& reads,
                                       const std::vector<int>& writes) {
  if (!overlap_) return work();
  const int64_t seq = issued_++;
  item_instruction_.push_back(index);
  const int n = static_cast<int>(last_write_.size());
  for (int b : reads) {
    if (b >= 0 && b < n) last_read_[b] = seq;
  }
  for (int b : writes) {
    if (b >= 0 && b < n) last_write_[b] = seq;
  }
  if (index >= 0) {
    work = [this, index, work = std::move(work)] {
      if (activity_ != nullptr && activity_->aborted()) {
        return error_(index, absl::AbortedError("the step was aborted before this collective (its "
                                                "session is being closed)"));
      }
      return work();
    };
  }
  absl::MutexLock lock(&mu_);
  if (!thread_.joinable()) thread_ = std::thread(&CommunicationQueue::Loop, this);
  queue_.push_back(std::move(work));
  return status_;
}

absl::Status CommunicationQueue::WaitForBuffers(int index, const std::vector<int>& reads,
                                                const std::vector<int>& writes) {
  int64_t need = -1;
  const int n = static_cast<int>(last_write_.size());
  for (int b : reads) {
    if (b >= 0 && b < n) need = std::max(need, last_write_[b]);
  }
  for (int b : writes) {
    if (b >= 0 && b < n) need = std::max({need, last_write_[b], last_read_[b]});
  }
  if (need < done_seen_) return absl::OkStatus();
  return WaitForItem(need, /*drain=*/false, /*resume=*/index);
}

int CommunicationQueue::InstructionOf(int64_t item) const {
  const int64_t k = item - step_first_item_;
  return k >= 0 && k < static_cast<int64_t>(item_instruction_.size()) ? item_instruction_[k] : -1;
}

absl::Status CommunicationQueue::WaitForItem(int64_t seq, bool drain, int resume) {
  absl::MutexLock lock(&mu_);
  int shown = -1;  // the collective activity_ names
  while (done_ <= seq && (drain || status_.ok())) {
    // The item running or next (the earliest unfinished): what the step waits in.
    const int waited = InstructionOf(done_);
    if (activity_ != nullptr && waited >= 0 && waited != shown) {
      activity_->WaitsIn(waited);
      shown = waited;
    }
    if (!running_ && !queue_.empty()) {
      // The queue's thread has not taken it yet: run it here rather than wait for a wakeup.
      RunFront();
      continue;
    }
    struct Args {
      CommunicationQueue* q;
      int64_t done;
      bool drain;
    } args{this, done_, drain};
    const int64_t wait_start = trace_ != nullptr ? trace_->Now() : 0;
    mu_.Await(absl::Condition(
        +[](Args* a) {
          return a->q->done_ != a->done || (!a->drain && !a->q->status_.ok()) ||
                 (!a->q->running_ && !a->q->queue_.empty());
        },
        &args));
    if (trace_ != nullptr) {
      trace_->AddSpan(v1::TraceEvent::WAIT, v1::TraceEvent::STEP, waited, wait_start);
    }
  }
  if (shown >= 0 && resume >= 0) activity_->WaitsIn(resume);
  done_seen_ = done_;
  return status_;
}

void CommunicationQueue::ReleaseWhenUnread(int b, std::function<void()> release) {
  if (b < 0 || b >= static_cast<int>(last_read_.size()) || last_read_[b] < done_seen_) {
    release();
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    done_seen_ = done_;
  }
  if (last_read_[b] < done_seen_) {
    release();
    return;
  }
  Issue(/*index=*/-1, [release = std::move(release)] {
    release();
    return absl::OkStatus();
  }, {}, {b}).IgnoreError();  // a failure is the step's, reported by Drain
}

absl::Status CommunicationQueue::Drain() {
  if (!overlap_) return absl::OkStatus();
  // At once when nothing is queued.
  WaitForItem(issued_ - 1, /*drain=*/true, /*resume=*/-1).IgnoreError();
  absl::MutexLock lock(&mu_);
  absl::Status s = std::move(status_);
  status_ = absl::OkStatus();
  failed_.store(false, std::memory_order_relaxed);
  return s;
}

void CommunicationQueue::RunFront() {
  Work work = std::move(queue_.front());
  queue_.pop_front();
  running_ = true;
  const bool skip = !status_.ok();  // the step stops at its first failure
  mu_.Unlock();
  absl::Status s = skip ? absl::OkStatus() : work();
  work = nullptr;  // what it captured goes before the item counts as done
  mu_.Lock();
  running_ = false;
  ++done_;
  if (!s.ok() && status_.ok()) {
    status_ = std::move(s);
    failed_.store(true, std::memory_order_relaxed);
  }
}

void CommunicationQueue::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &CommunicationQueue::HasWork));
    if (!running_ && !queue_.empty()) {
      RunFront();
    } else if (stop_) {
      return;  // the destructor's (no step is in progress, so nothing is queued)
    }
  }
}

void AllReduceBucket::Add(int index, int due, int64_t bytes) {
  waiting_.push_back(index);
  next_due_ = std::min(next_due_, due);
  bytes_ += bytes;
  if (bytes_ >= kBucketBytes) next_due_ = std::min(next_due_, index + 1);  // a full bucket
}

std::vector<AllReduceBucket::Group> AllReduceBucket::Take(
    const std::function<Key(int index)>& key_of) {
  std::vector<Group> groups;
  for (int i : waiting_) {
    Key key = key_of(i);
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return x.key == key; });
    if (g == groups.end()) {
      groups.push_back({std::move(key), {}});
      g = groups.end() - 1;
    }
    g->members.push_back(i);
  }
  waiting_.clear();
  next_due_ = std::numeric_limits<int>::max();
  bytes_ = 0;
  return groups;
}

absl::Status AllReduceTogether(Communicator& communicator, const std::vector<int>& axes,
                               v1::ReduceOp op, const std::vector<Tensor*>& tensors) {
  if (tensors.empty()) return absl::InvalidArgumentError("no tensors to allreduce together");
  const DType dtype = tensors.front()->dtype();
  int64_t total = 0;
  for (const Tensor* t : tensors) {
    if (t->dtype() != dtype) {
      return absl::InvalidArgumentError(absl::StrCat("allreduced together: ", DTypeName(dtype),
                                                     " and ", DTypeName(t->dtype())));
    }
    total += TensorBytes(*t);
  }
  std::vector<char> packed(total);
  int64_t at = 0;
  for (const Tensor* t : tensors) {
    std::memcpy(packed.data() + at, TensorData(*t), TensorBytes(*t));
    at += TensorBytes(*t);
  }
  const int64_t elements = total / (dtype == DType::kFloat32 ? sizeof(float) : sizeof(int32_t));
  absl::Status s = communicator.AllReduce(axes, op, dtype, packed.data(), elements);
  if (!s.ok()) return s;
  at = 0;
  for (Tensor* t : tensors) {
    std::memcpy(TensorData(t), packed.data() + at, TensorBytes(*t));
    at += TensorBytes(*t);
  }
  return absl::OkStatus();
}

}  // namespace meshrt
