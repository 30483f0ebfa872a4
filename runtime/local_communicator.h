// LocalCollectiveHub: an in-memory Communicator for N processors running as N threads of one
// process. Used by unit tests and by the simulated mesh (simulated_mesh.h); the worker uses a Gloo
// communicator with the same contract instead.
//
// How it works: a collective is a *round* keyed by (group, sequence number). Each member copies its
// input into the round and waits until all g members have arrived; then each member computes its
// own output from the g inputs, always combining them in rank order so every member gets bitwise
// the same reduction. Each communicator numbers the collectives it makes on each group, so
// consecutive collectives on one group never mix and collectives on different groups (say the row
// and column groups of a 2x2 mesh) proceed independently. A Permute is a round of its one-axis
// group too: every member arrives (those whose data falls off the end bring none) and each copies
// its source's input, so it costs a group-wide rendezvous here, unlike Gloo's point-to-point one.
//
// Failure: every wait ends after Options::timeout with DeadlineExceeded naming the collective, the
// mesh axes, this processor's coordinate and the processors that never arrived; the round is then
// marked failed so its other members stop too. Abort(status) fails every pending and later call on
// every communicator with `status`, so one failing processor releases the rest.
//
// Thread-safety: the hub is thread-safe. Each communicator is meant to have one call at a time,
// from any thread (see communicator.h; a communicator keeps no per-thread state, and its sequence
// numbers are under a lock); as an extension, concurrent calls on *different* groups from several
// threads are also fine. The hub must outlive its communicators' use; it owns them.
#ifndef MESHRT_RUNTIME_LOCAL_COMMUNICATOR_H_
#define MESHRT_RUNTIME_LOCAL_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/ir/mesh.h"
#include "runtime/communicator.h"

namespace meshrt {

class LocalCollectiveHub {
 public:
  struct Options {
    // Longest a member waits for the rest of its group in one collective.
    absl::Duration timeout = absl::Seconds(30);
  };

  // One communicator per processor of `mesh` is created up front.
  explicit LocalCollectiveHub(Mesh mesh) : LocalCollectiveHub(std::move(mesh), Options()) {}
  LocalCollectiveHub(Mesh mesh, Options options);
  ~LocalCollectiveHub();

  LocalCollectiveHub(const LocalCollectiveHub&) = delete;
  LocalCollectiveHub& operator=(const LocalCollectiveHub&) = delete;

  const Mesh& mesh() const { return mesh_; }

  // The communicator of processor number `pnum` (row-major; CHECKed to be in range). Owned by the
  // hub; the same pointer on every call.
  Communicator* communicator(int pnum);

  // Wakes every waiting member with `status` and makes every later collective return it at once.
  // `status` must not be OK. The first abort wins; later ones are ignored.
  void Abort(absl::Status status);
  // OK unless Abort was called.
  absl::Status abort_status() const;

  // Runs fn(pnum, communicator(pnum)) on one thread per processor and waits for all; the
  // statuses by processor number.
  std::vector<absl::Status> RunOnAll(const std::function<absl::Status(int, Communicator*)>& fn);

 private:
  friend class LocalCommunicator;

  // One collective on one group. Fields are guarded by mu_ until the round is complete (all
  // members arrived); after that `inputs` is immutable and read without the lock.
  struct Round {
    std::string signature;  // kind and sizes; every member must agree
    int arrived = 0;
    std::vector<bool> present;        // by rank
    std::vector<std::string> inputs;  // by rank
    absl::Status failed;              // a member timed out or disagreed
  };
  // (sorted mesh axes, processor number of rank 0, sequence number).
  using RoundKey = std::tuple<std::vector<int>, int, int64_t>;

  // What a member brings to a round.
  struct Arrival {
    RoundKey key;
    int rank = 0;
    std::vector<int> members;  // processor numbers in rank order
    std::string signature;
    std::string context;  // "AllReduce over mesh axes [rows] at processor (0,1)"
    const void* data = nullptr;
    int64_t bytes = 0;
  };

  // Adds `arrival`'s input to its round and blocks until every member has arrived. Returns the
  // completed round (inputs by rank), or the abort status, a DeadlineExceeded, or the error that
  // failed the round.
  absl::StatusOr<std::shared_ptr<const Round>> Rendezvous(const Arrival& arrival);

  const Mesh mesh_;
  const Options options_;
  std::vector<std::unique_ptr<Communicator>> communicators_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // signalled when a round completes or fails, and on Abort
  std::map<RoundKey, std::shared_ptr<Round>> rounds_ ABSL_GUARDED_BY(mu_);
  absl::Status abort_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace meshrt

#endif  // MESHRT_RUNTIME_LOCAL_COMMUNICATOR_H_
