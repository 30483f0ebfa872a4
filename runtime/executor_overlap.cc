// The executor's communication thread (see "Overlap" in executor.h): how collectives are queued,
// run one at a time in program order, and waited for.
//
// Why it is sound:
//   - Order: the calling thread issues work at each collective's place in the program, and work
//     runs strictly in issue order (one item at a time, on whichever thread takes the front item),
//     so the communicator sees the same calls in the same order as without overlap. A collective's
//     inputs are ready when it is issued: a local op that wrote one ran before (program order), a
//     collective that wrote one runs before (issue order).
//   - Buffers: the calling thread records, per buffer, the last work item that writes and reads it.
//     A local op waits for the writers of what it reads and for every item touching what it
//     writes; a dead buffer that queued work still reads is recycled by a work item queued after
//     it. Work touches buffers_ slots the calling thread leaves alone until it has waited.
//   - Failure: the first failing item's error is kept; later items are skipped, and the calling
//     thread stops at its next instruction or wait. Every wait ends when the awaited item ends,
//     which the communicator bounds by its timeout (or on failure, at once).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ir/slicing.h"
#include "runtime/executor.h"
#include "util/status_macros.h"

namespace meshrt {

Executor::~Executor() {
  {
    absl::MutexLock lock(&comm_mu_);
    comm_stop_ = true;
  }
  if (comm_thread_.joinable()) comm_thread_.join();
}

absl::Status Executor::RunCollectiveInstruction(int index, bool queued) {
  const v1::Instruction& instr = program_.instructions(index);
  int64_t start = 0, bytes = 0;
  if (trace_ != nullptr) {
    start = trace_->Now();
    const int b = instr.inputs_size() > 0 ? instr.inputs(0) : -1;
    if (b >= 0 && b < static_cast<int>(buffers_.size()) && buffers_[b].has_value()) {
      bytes = TensorBytes(*buffers_[b]);  // before an allreduce takes the buffer over
    }
  }
  Tensor out;
  absl::Status s = RunInstructionAt(index, &out);
  if (!s.ok()) return InstructionError(index, s);
  buffers_[instr.output()] = std::move(out);
  if (trace_ != nullptr) {
    trace_->AddSpan(v1::TraceEvent::COLLECTIVE, TraceThread(), index, start, bytes, 1);
  }
  for (int b : plan_->reads[index]) {
    if (!Dead(b, index) || b == instr.output()) continue;
    // Queued work runs after every earlier item; here, an earlier one may still read b.
    if (queued) {
      Recycle(b);
    } else {
      RecycleWhenUnread(b);
    }
  }
  return absl::OkStatus();
}

absl::Status Executor::IssueCollective(int index) {
  const v1::Instruction& instr = program_.instructions(index);
  const std::vector<int> reads(instr.inputs().begin(), instr.inputs().end());
  std::vector<int> writes = {instr.output()};
  for (int b : reads) {
    if (Dead(b, index)) writes.push_back(b);  // an allreduce may take it over (RunCollective)
  }
  // A group of one calls no communicator (a Permute still does): a copy, here.
  const DecodedInstruction& d = decoded_[index];
  const bool local = instr.collective().kind() != v1::Collective::PERMUTE &&
                     d.axes_status.ok() && d.group_size == 1;
  if (local || !overlap_) {
    RETURN_IF_ERROR(WaitForBuffers(index, reads, writes));
    return RunCollectiveInstruction(index, /*queued=*/false);
  }
  return Issue(
      index, [this, index] { return RunCollectiveInstruction(index, /*queued=*/true); }, reads,
      writes);
}

absl::Status Executor::Issue(int index, CommWork work, const std::vector<int>& reads,
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
        return InstructionError(index, absl::AbortedError("the step was aborted before this "
                                                          "collective (its session is being "
                                                          "closed)"));
      }
      return work();
    };
  }
  absl::MutexLock lock(&comm_mu_);
  if (!comm_thread_.joinable()) comm_thread_ = std::thread(&Executor::CommLoop, this);
  comm_queue_.push_back(std::move(work));
  return comm_status_;
}

absl::Status Executor::WaitForBuffers(int index, const std::vector<int>& reads,
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
  return WaitForWork(need, /*drain=*/false, /*resume=*/index);
}

absl::Status Executor::WaitForWork(int64_t seq, bool drain, int resume) {
  absl::MutexLock lock(&comm_mu_);
  int shown = -1;  // the collective activity_ names
  auto show = [&](int64_t item) {
    const int64_t k = item - step_first_item_;
    if (activity_ == nullptr || k < 0 || k >= static_cast<int64_t>(item_instruction_.size())) {
      return;
    }
    const int instruction = item_instruction_[k];
    if (instruction < 0 || instruction == shown) return;
    activity_->WaitsIn(instruction);
    shown = instruction;
  };
  while (comm_done_ <= seq && (drain || comm_status_.ok())) {
    show(comm_done_);  // the item running or next: the earliest unfinished
    // For the trace: the collective waited for (a recycle item names none).
    const int64_t k = comm_done_ - step_first_item_;
    const int waited =
        k >= 0 && k < static_cast<int64_t>(item_instruction_.size()) ? item_instruction_[k] : -1;
    if (!comm_running_ && !comm_queue_.empty()) {
      // The communication thread has not taken it yet: run it here rather than wait for a wakeup.
      RunFrontWork();
      continue;
    }
    struct Args {
      Executor* e;
      int64_t done;
      bool drain;
    } args{this, comm_done_, drain};
    const int64_t wait_start = trace_ != nullptr ? trace_->Now() : 0;
    comm_mu_.Await(absl::Condition(
        +[](Args* a) {
          return a->e->comm_done_ != a->done || (!a->drain && !a->e->comm_status_.ok()) ||
                 (!a->e->comm_running_ && !a->e->comm_queue_.empty());
        },
        &args));
    if (trace_ != nullptr) {
      trace_->AddSpan(v1::TraceEvent::WAIT, v1::TraceEvent::STEP, waited, wait_start);
    }
  }
  if (shown >= 0 && resume >= 0) activity_->WaitsIn(resume);
  done_seen_ = comm_done_;
  return comm_status_;
}

void Executor::RecycleWhenUnread(int b) {
  if (b < 0 || b >= static_cast<int>(last_read_.size()) || last_read_[b] < done_seen_) {
    Recycle(b);
    return;
  }
  {
    absl::MutexLock lock(&comm_mu_);
    done_seen_ = comm_done_;
  }
  if (last_read_[b] < done_seen_) {
    Recycle(b);
    return;
  }
  Issue(/*index=*/-1, [this, b] {
    Recycle(b);
    return absl::OkStatus();
  }, {}, {b}).IgnoreError();  // a failure is the step's, reported by DrainComm
}

absl::Status Executor::DrainComm() {
  if (!overlap_) return absl::OkStatus();
  // At once when nothing is queued.
  WaitForWork(issued_ - 1, /*drain=*/true, /*resume=*/-1).IgnoreError();
  absl::MutexLock lock(&comm_mu_);
  absl::Status s = std::move(comm_status_);
  comm_status_ = absl::OkStatus();
  comm_failed_.store(false, std::memory_order_relaxed);
  return s;
}

void Executor::RunFrontWork() {
  CommWork work = std::move(comm_queue_.front());
  comm_queue_.pop_front();
  comm_running_ = true;
  const bool skip = !comm_status_.ok();  // the step stops at its first failure
  comm_mu_.Unlock();
  absl::Status s = skip ? absl::OkStatus() : work();
  work = nullptr;  // what it captured goes before the item counts as done
  comm_mu_.Lock();
  comm_running_ = false;
  ++comm_done_;
  if (!s.ok() && comm_status_.ok()) {
    comm_status_ = std::move(s);
    comm_failed_.store(true, std::memory_order_relaxed);
  }
}

void Executor::CommLoop() {
  absl::MutexLock lock(&comm_mu_);
  while (true) {
    comm_mu_.Await(absl::Condition(this, &Executor::CommHasWork));
    if (!comm_running_ && !comm_queue_.empty()) {
      RunFrontWork();
    } else if (comm_stop_) {
      return;  // the destructor's (no Run is in progress, so nothing is queued)
    }
  }
}

}  // namespace meshrt
