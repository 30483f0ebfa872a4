#include "runtime/local_communicator.h"

#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/ir/slicing.h"
#include "runtime/communicator_checks.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace meshrt {

// The communicator of one processor. Holds only its coordinate and its per-group sequence
// numbers; all shared state lives in the hub.
class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(LocalCollectiveHub* hub, int pnum)
      : hub_(hub), coord_(hub->mesh().Coordinate(pnum)) {}

  const Mesh& mesh() const override { return hub_->mesh(); }
  const std::vector<int64_t>& coordinate() const override { return coord_; }

  absl::Status AllReduce(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                         void* data, int64_t count) override {
    Call call;
    RETURN_IF_ERROR(Begin("AllReduce", mesh_axes, count, data, &call));
    RETURN_IF_ERROR(CheckReduceOp(call.context, op));
    const int64_t bytes = count * DTypeSize(dtype);
    if (call.g == 1) return absl::OkStatus();
    ASSIGN_OR_RETURN(auto round, Exchange(call, Signature(op, dtype, bytes, 0), data, bytes));
    std::memcpy(data, round->inputs[0].data(), bytes);
    for (int r = 1; r < call.g; ++r) {
      RETURN_IF_ERROR(ReduceInto(op, dtype, round->inputs[r].data(), data, count));
    }
    return absl::OkStatus();
  }

  absl::Status AllGather(const std::vector<int>& mesh_axes, const void* in, int64_t bytes,
                         void* out) override {
    Call call;
    RETURN_IF_ERROR(Begin("AllGather", mesh_axes, bytes, out, &call));
    if (call.g == 1) {
      std::memcpy(out, in, bytes);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(auto round, Exchange(call, Signature(bytes, 0), in, bytes));
    for (int r = 0; r < call.g; ++r) {
      std::memcpy(static_cast<char*>(out) + r * bytes, round->inputs[r].data(), bytes);
    }
    return absl::OkStatus();
  }

  absl::Status AllToAll(const std::vector<int>& mesh_axes, const void* in, void* out,
                        int64_t bytes_per_rank) override {
    Call call;
    RETURN_IF_ERROR(Begin("AllToAll", mesh_axes, bytes_per_rank, out, &call));
    const int64_t total = call.g * bytes_per_rank;
    if (call.g == 1) {
      std::memcpy(out, in, total);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(auto round, Exchange(call, Signature(bytes_per_rank, 0), in, total));
    for (int r = 0; r < call.g; ++r) {
      std::memcpy(static_cast<char*>(out) + r * bytes_per_rank,
                  round->inputs[r].data() + call.rank * bytes_per_rank, bytes_per_rank);
    }
    return absl::OkStatus();
  }

  absl::Status ReduceScatter(const std::vector<int>& mesh_axes, v1::ReduceOp op, DType dtype,
                             const void* in, int64_t count_per_rank, void* out) override {
    Call call;
    RETURN_IF_ERROR(Begin("ReduceScatter", mesh_axes, count_per_rank, out, &call));
    RETURN_IF_ERROR(CheckReduceOp(call.context, op));
    const int64_t chunk = count_per_rank * DTypeSize(dtype);
    if (call.g == 1) {
      std::memcpy(out, in, chunk);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(auto round,
                     Exchange(call, Signature(op, dtype, chunk, 0), in, call.g * chunk));
    std::memcpy(out, round->inputs[0].data() + call.rank * chunk, chunk);
    for (int r = 1; r < call.g; ++r) {
      RETURN_IF_ERROR(
          ReduceInto(op, dtype, round->inputs[r].data() + call.rank * chunk, out, count_per_rank));
    }
    return absl::OkStatus();
  }

  absl::Status Broadcast(const std::vector<int>& mesh_axes, int root_rank, void* data,
                         int64_t bytes) override {
    Call call;
    RETURN_IF_ERROR(Begin("Broadcast", mesh_axes, bytes, data, &call));
    RETURN_IF_ERROR(CheckRoot(call.context, root_rank, call.g));
    if (call.g == 1) return absl::OkStatus();
    const bool root = call.rank == root_rank;
    ASSIGN_OR_RETURN(auto round, Exchange(call, Signature(bytes, root_rank), root ? data : nullptr,
                                          root ? bytes : 0));
    if (!root) std::memcpy(data, round->inputs[root_rank].data(), bytes);
    return absl::OkStatus();
  }

  absl::Status Permute(int mesh_axis, int shift, bool wrap, const void* in, void* out,
                       int64_t bytes) override {
    Call call;
    RETURN_IF_ERROR(Begin("Permute", {mesh_axis}, bytes, out, &call));
    RETURN_IF_ERROR(CheckInput(call.context, bytes, in));
    const int src = PermuteSource(call.rank, call.g, shift, wrap);
    const int dst = PermuteTarget(call.rank, call.g, shift, wrap);
    if (call.g > 1) {
      // Every member takes part in the round (keeping the group's sequence numbers aligned), but
      // only those whose data lands somewhere contribute it.
      ASSIGN_OR_RETURN(
          auto round,
          Exchange(call, absl::StrCat("shift=", shift, " wrap=", wrap, " bytes=", bytes), in,
                   dst >= 0 ? bytes : 0));
      if (src >= 0) {
        std::memcpy(out, round->inputs[src].data(), bytes);
        return absl::OkStatus();
      }
    } else if (src == 0) {
      std::memcpy(out, in, bytes);
      return absl::OkStatus();
    }
    if (bytes > 0) std::memset(out, 0, bytes);
    return absl::OkStatus();
  }

  absl::Status Barrier(const std::vector<int>& mesh_axes) override {
    Call call;
    RETURN_IF_ERROR(Begin("Barrier", mesh_axes, 0, nullptr, &call));
    if (call.g == 1) return absl::OkStatus();
    return Exchange(call, Signature(0, 0), nullptr, 0).status();
  }

 private:
  struct Call {
    std::string kind;
    std::vector<int> axes;  // sorted
    int g = 1;
    int rank = 0;
    std::string context;
  };

  // What every member of a round must agree on besides the kind.
  static std::string Signature(v1::ReduceOp op, DType dtype, int64_t bytes, int root) {
    return absl::StrCat("op=", v1::ReduceOp_Name(op), " dtype=", DTypeName(dtype), " bytes=", bytes,
                        " root=", root);
  }
  static std::string Signature(int64_t bytes, int root) {
    return absl::StrCat("bytes=", bytes, " root=", root);
  }

  // Validates the arguments common to every collective and fills `call`.
  absl::Status Begin(const char* kind, const std::vector<int>& mesh_axes, int64_t size,
                     const void* buffer, Call* call) {
    call->kind = kind;
    RETURN_IF_ERROR(NormalizeMeshAxes(mesh(), kind, mesh_axes, &call->axes));
    call->context = CollectiveContext(mesh(), kind, call->axes, coord_);
    RETURN_IF_ERROR(CheckBuffer(call->context, size, buffer));
    call->g = mesh().GroupSize(call->axes);
    call->rank = mesh().RankInGroup(call->axes, coord_);
    return absl::OkStatus();
  }


  absl::StatusOr<std::shared_ptr<const LocalCollectiveHub::Round>> Exchange(
      const Call& call, const std::string& signature, const void* data, int64_t bytes) {
    LocalCollectiveHub::Arrival a;
    a.members = mesh().GroupMembers(call.axes, coord_);
    int64_t seq;
    {
      absl::MutexLock lock(&mu_);
      seq = next_seq_[call.axes]++;
    }
    a.key = LocalCollectiveHub::RoundKey(call.axes, a.members[0], seq);
    a.rank = call.rank;
    a.signature = absl::StrCat(call.kind, " ", signature);
    a.context = call.context;
    a.data = data;
    a.bytes = bytes;
    return hub_->Rendezvous(a);
  }

  LocalCollectiveHub* const hub_;
  const std::vector<int64_t> coord_;
  absl::Mutex mu_;
  // Collectives made so far on each group (keyed by its sorted mesh axes).
  std::map<std::vector<int>, int64_t> next_seq_ ABSL_GUARDED_BY(mu_);
};

LocalCollectiveHub::LocalCollectiveHub(Mesh mesh, Options options)
    : mesh_(std::move(mesh)), options_(options) {
  for (int p = 0; p < mesh_.num_processors(); ++p) {
    communicators_.push_back(std::make_unique<LocalCommunicator>(this, p));
  }
}

LocalCollectiveHub::~LocalCollectiveHub() = default;

Communicator* LocalCollectiveHub::communicator(int pnum) {
  MESHRT_CHECK(pnum >= 0 && pnum < static_cast<int>(communicators_.size()), "processor ", pnum,
               " not in mesh ", mesh_.ToString());
  return communicators_[pnum].get();
}

void LocalCollectiveHub::Abort(absl::Status status) {
  MESHRT_CHECK(!status.ok(), "Abort needs an error status");
  absl::MutexLock lock(&mu_);
  if (!abort_status_.ok()) return;
  abort_status_ = std::move(status);
  cv_.SignalAll();
}

absl::Status LocalCollectiveHub::abort_status() const {
  absl::MutexLock lock(&mu_);
  return abort_status_;
}

absl::StatusOr<std::shared_ptr<const LocalCollectiveHub::Round>> LocalCollectiveHub::Rendezvous(
    const Arrival& a) {
  const int g = static_cast<int>(a.members.size());
  absl::MutexLock lock(&mu_);
  if (!abort_status_.ok()) return abort_status_;
  std::shared_ptr<Round>& slot = rounds_[a.key];
  if (slot == nullptr) {
    slot = std::make_shared<Round>();
    slot->signature = a.signature;
    slot->present.assign(g, false);
    slot->inputs.resize(g);
  }
  std::shared_ptr<Round> round = slot;
  if (!round->failed.ok()) {
    return absl::Status(
        round->failed.code(),
        absl::StrCat(a.context, ": the group already failed: ", round->failed.message()));
  }
  if (round->signature != a.signature) {
    round->failed = absl::InvalidArgumentError(absl::StrCat(
        a.context, ": group members disagree on the collective (this member: '", a.signature,
        "', another: '", round->signature, "'); every member must make the same calls"));
    cv_.SignalAll();
    return round->failed;
  }
  MESHRT_CHECK(!round->present[a.rank], a.context, ": rank ", a.rank, " arrived twice");
  round->present[a.rank] = true;
  round->inputs[a.rank].assign(static_cast<const char*>(a.data), a.bytes);
  if (++round->arrived == g) {
    // Every member holds the shared_ptr; the next collective on this group has a new key.
    rounds_.erase(a.key);
    cv_.SignalAll();
    return std::shared_ptr<const Round>(round);
  }
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (round->arrived < g && round->failed.ok() && abort_status_.ok()) {
    if (cv_.WaitWithDeadline(&mu_, deadline) && round->arrived < g && round->failed.ok() &&
        abort_status_.ok()) {
      std::vector<std::string> missing;
      for (int r = 0; r < g; ++r) {
        if (!round->present[r]) {
          missing.push_back(CoordinateString(mesh_.Coordinate(a.members[r])));
        }
      }
      round->failed = absl::DeadlineExceededError(
          absl::StrCat(a.context, ": timed out after ", absl::FormatDuration(options_.timeout),
                       " waiting for the group (", round->arrived, " of ", g,
                       " members arrived; missing processors ", absl::StrJoin(missing, " "), ")"));
      cv_.SignalAll();
      return round->failed;
    }
  }
  if (round->arrived == g) return std::shared_ptr<const Round>(round);
  if (!round->failed.ok()) {
    return absl::Status(
        round->failed.code(),
        absl::StrCat(a.context, ": another member failed: ", round->failed.message()));
  }
  return abort_status_;
}

std::vector<absl::Status> LocalCollectiveHub::RunOnAll(
    const std::function<absl::Status(int, Communicator*)>& fn) {
  const int n = mesh_.num_processors();
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int p = 0; p < n; ++p) {
    threads.emplace_back([&, p] { statuses[p] = fn(p, communicator(p)); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

}  // namespace meshrt
