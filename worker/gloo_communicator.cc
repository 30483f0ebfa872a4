#include "worker/gloo_communicator.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <numeric>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/ir/slicing.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/common/logging.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "runtime/blocked_chunks.h"
#include "runtime/communicator_checks.h"
#include "util/status_macros.h"
#include "worker/gloo_blocked.h"
#include "worker/gloo_pairwise.h"
#include "worker/gloo_reduce.h"
#include "worker/gloo_reduce_scatter.h"
#include "worker/gloo_same_host.h"
#include "worker/gloo_store.h"

namespace meshrt {
namespace {

// Gloo's collectives use slot prefixes 0x01..0x08, PairwiseAllreduce 0x70.
constexpr uint8_t kPermuteSlotPrefix = 0x72;

std::chrono::milliseconds ToMillis(absl::Duration d) {
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

// Gloo reports every transport failure as an IoException; its text is the only classifier.
absl::StatusCode ClassifyIoError(absl::string_view what) {
  std::string text(what);
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // "Timed out waiting ...", "Connect timeout", "Read timeout", and "Application timeout caused
  // pair closure" (another operation on the same context timed out).
  if (absl::StrContains(text, "timed out") || absl::StrContains(text, "timeout")) {
    return absl::StatusCode::kDeadlineExceeded;
  }
  for (const char* closed : {"connection closed", "connection reset", "broken pipe",
                             "socket closed", "unexpectedly closed", "connection refused",
                             "no route to host", "network is unreachable"}) {
    if (absl::StrContains(text, closed)) return absl::StatusCode::kUnavailable;
  }
  return absl::StatusCode::kInternal;
}

// Runs `fn`, turning anything it throws into a Status prefixed with `where` and `peers`.
template <typename F>
absl::Status CatchGloo(const std::string& where, const std::string& peers, F&& fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const SameHostError& e) {
    return absl::Status(e.status().code(), absl::StrCat(where, peers, ": ", e.status().message()));
  } catch (const KeyValueStoreError& e) {
    return absl::Status(e.status().code(), absl::StrCat(where, peers,
                                                        ": rendezvous through the key-value store "
                                                        "failed: ",
                                                        e.status().message()));
  } catch (const gloo::IoException& e) {
    const absl::StatusCode code = ClassifyIoError(e.what());
    const char* what = code == absl::StatusCode::kDeadlineExceeded ? "timed out"
                       : code == absl::StatusCode::kUnavailable    ? "lost a peer"
                                                                   : "transport error";
    return absl::Status(code, absl::StrCat(where, peers, ": ", what, " (gloo: ", e.what(), ")"));
  } catch (const gloo::EnforceNotMet& e) {
    return absl::InternalError(absl::StrCat(where, peers, ": gloo check failed: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(where, peers, ": gloo error: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(where, peers, ": unknown exception from gloo"));
  }
}

// Allreduce for groups of three or more whose count divides by g: PipelinedReduceScatter of `in`
// (each rank's chunk reduced in rank order, as LocalCollectiveHub combines) into its place in
// `out`, then Gloo's ring allgather in place. The traffic of Gloo's ring allreduce, but `in` is
// read where it lies (no copy into `out` first) and the result equals the in-memory hub's. In
// place (`in` == `out`) our reduced chunk goes through `own_scratch` first, since the
// reduce-scatter still reads our copy of it.
void ReduceScatterThenAllGather(const std::shared_ptr<gloo::Context>& context, const void* in,
                                void* out, size_t count, size_t element_size,
                                const gloo::AllreduceOptions::Func& reduce,
                                std::chrono::milliseconds timeout, PairwiseScratch* scratch,
                                PairwiseScratch* own_scratch) {
  const size_t per_rank = count / context->size;
  const size_t chunk = per_rank * element_size;
  char* const own = static_cast<char*>(out) + context->rank * chunk;
  char* reduced = own;
  if (in == out) {
    if (own_scratch->size < chunk) {
      own_scratch->data.reset(new char[chunk]);
      own_scratch->size = chunk;
    }
    reduced = own_scratch->data.get();
  }
  PipelinedReduceScatter(context, in, reduced, per_rank, element_size, reduce, timeout,
                         PipelinedReduceScatterOptions(), scratch);
  if (reduced != own) std::memcpy(own, reduced, chunk);
  gloo::AllgatherOptions ag(context);
  ag.setOutput(static_cast<char*>(out), context->size * chunk);  // no input: in place
  ag.setTimeout(timeout);
  gloo::allgather(ag);
}

void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current;
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

}  // namespace

// One group of mesh axes this processor belongs to.
struct GlooCommunicator::Group {
  int size = 1;
  int rank = 0;
  std::string peers;  // " (peer processor (0,1))" or " (group (0,0) (0,1) (0,2))", for errors
  std::vector<int> members;  // processor numbers by rank
  std::string key_prefix;    // rendezvous keys are <key_prefix>/<key>
  std::unique_ptr<gloo::rendezvous::PrefixStore> store;

  absl::Mutex mu;  // held for a whole collective: one collective per group at a time
  std::shared_ptr<gloo::Context> context ABSL_GUARDED_BY(mu);  // null until connected
  absl::Status failure ABSL_GUARDED_BY(mu);                    // first Gloo failure; sticks
  PairwiseScratch pairwise_scratch ABSL_GUARDED_BY(mu);        // groups of two only
  PairwiseScratch blocked_scratch ABSL_GUARDED_BY(mu);  // packing for the blocked calls over TCP
  // Groups of two on one host (see gloo_same_host.h); null otherwise.
  std::unique_ptr<SameHostPeer> same_host ABSL_GUARDED_BY(mu);
};

struct GlooCommunicator::Call {
  std::vector<int> axes;  // sorted, without axes of size 1 (they do not change the group)
  int g = 1;
  int rank = 0;
  std::string context;  // "AllReduce over mesh axes [rows] at processor (0,1)"
};

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(Options options) {
  if (options.store == nullptr) {
    return absl::InvalidArgumentError("GlooCommunicator: Options::store must be set");
  }
  if (options.prefix.empty()) {
    return absl::InvalidArgumentError(
        "GlooCommunicator: Options::prefix must be non-empty (and fresh for every session)");
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GlooCommunicator: Options::timeout must be "
                     "positive, got ",
                     absl::FormatDuration(options.timeout)));
  }
  const Mesh& mesh = options.mesh;
  bool in_range = static_cast<int>(options.coordinate.size()) == mesh.ndims();
  for (int d = 0; in_range && d < mesh.ndims(); ++d) {
    in_range = options.coordinate[d] >= 0 && options.coordinate[d] < mesh.size(d);
  }
  if (!in_range) {
    return absl::InvalidArgumentError(absl::StrCat("GlooCommunicator: coordinate ",
                                                   CoordinateString(options.coordinate),
                                                   " is not in mesh ", mesh.ToString()));
  }
  if (options.hostname.empty() && options.interface.empty()) {
    return absl::InvalidArgumentError(
        "GlooCommunicator: set Options::hostname (address to bind) or Options::interface");
  }
  IgnoreSigpipeOnce();
  gloo::transport::tcp::attr attr;
  if (!options.hostname.empty()) {
    attr.hostname = options.hostname;
  } else {
    attr.iface = options.interface;
  }
  std::shared_ptr<gloo::transport::Device> device;
  const std::string where = absl::StrCat(
      "GlooCommunicator at processor ", CoordinateString(options.coordinate),
      ": cannot create a TCP device on ",
      options.hostname.empty() ? "interface " + options.interface : "host " + options.hostname);
  absl::Status status =
      CatchGloo(where, "", [&] { device = gloo::transport::tcp::CreateDevice(attr); });
  if (!status.ok()) return absl::UnavailableError(status.message());
  return std::unique_ptr<GlooCommunicator>(
      new GlooCommunicator(std::move(options), std::move(device)));
}

GlooCommunicator::GlooCommunicator(Options options, std::shared_ptr<gloo::transport::Device> device)
    : options_(std::move(options)),
      device_(std::move(device)),
      gloo_store_(std::make_unique<GlooStore>(options_.store, options_.timeout)) {}

// Groups (and their contexts and prefix stores) go before gloo_store_ and device_, by member order.
GlooCommunicator::~GlooCommunicator() = default;

absl::Status GlooCommunicator::Begin(const char* kind, const std::vector<int>& mesh_axes,
                                     int64_t size, const void* buffer, Call* call) const {
  std::vector<int> sorted;
  RETURN_IF_ERROR(NormalizeMeshAxes(mesh(), kind, mesh_axes, &sorted));
  call->context = CollectiveContext(mesh(), kind, sorted, coordinate());
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::FailedPreconditionError(
          absl::StrCat(call->context, ": the communicator was shut down"));
    }
  }
  RETURN_IF_ERROR(CheckBuffer(call->context, size, buffer));
  call->axes.clear();
  for (int a : sorted) {
    if (mesh().size(a) > 1) call->axes.push_back(a);
  }
  call->g = mesh().GroupSize(call->axes);
  call->rank = mesh().RankInGroup(call->axes, coordinate());
  return absl::OkStatus();
}

GlooCommunicator::Group* GlooCommunicator::FindGroup(const Call& call) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Group>& group = groups_[call.axes];
  if (group == nullptr) {
    group = std::make_unique<Group>();
    group->size = call.g;
    group->rank = call.rank;
    group->members = mesh().GroupMembers(call.axes, coordinate());
    std::vector<std::string> coords;
    for (int p : group->members) {
      if (call.g > 2 || p != mesh().ProcessorNumber(coordinate())) {
        coords.push_back(CoordinateString(mesh().Coordinate(p)));
      }
    }
    group->peers = absl::StrCat(call.g == 2 ? " (peer processor " : " (group ",
                                absl::StrJoin(coords, " "), ")");
    std::vector<std::string> names;
    for (int a : call.axes) names.push_back(mesh().dims()[a].name);
    group->key_prefix =
        absl::StrCat(options_.prefix, "/", absl::StrJoin(names, ","), "/", group->members[0]);
    group->store = std::make_unique<gloo::rendezvous::PrefixStore>(group->key_prefix, *gloo_store_);
  }
  return group.get();
}

// Gloo's rendezvous (connectFullMesh) publishes this rank's pair addresses and then connects the
// pairs, waiting up to 5x the timeout for a peer to connect to a listening pair: a peer that
// published its addresses and then failed (its session's other ranks failed, the coordinator
// deleted the session's keys under it) would hold this rank there for minutes. So the members
// first meet here, through the store, each once its device is bound: a member that failed before
// never arrives, and the store releases the waiting ones at once when the session's prefix is
// deleted. (A connection that fails after every member arrived still waits Gloo's own limit.)
absl::Status GlooCommunicator::AwaitMembersLocked(const Call& call, const Group& group) {
  const std::string base = absl::StrCat(group.key_prefix, "/arrived/");
  const absl::Time deadline = absl::Now() + options_.timeout;
  absl::Status status = options_.store->Set(absl::StrCat(base, group.rank), "1");
  for (int r = 0; status.ok() && r < group.size; ++r) {
    if (r == group.rank) continue;
    status = options_.store->Get(absl::StrCat(base, r), deadline - absl::Now()).status();
  }
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(call.context, ": waiting in the key-value store for the group",
                                   group.peers, " to arrive: ", status.message()));
}

absl::Status GlooCommunicator::ConnectLocked(const Call& call, Group* group) {
  RETURN_IF_ERROR(AwaitMembersLocked(call, *group));
  auto context = std::make_shared<gloo::rendezvous::Context>(group->rank, group->size);
  context->setTimeout(ToMillis(options_.timeout));
  std::shared_ptr<gloo::transport::Device> device = device_;
  absl::Status status =
      CatchGloo(absl::StrCat(call.context, ": connecting the group"), group->peers,
                [&] { context->connectFullMesh(*group->store, device); });
  if (!status.ok()) return status;
  if (group->size == 2 && options_.same_host_copy) {
    absl::StatusOr<std::unique_ptr<SameHostPeer>> same_host =
        SameHostPeer::Probe(options_.store, group->key_prefix, group->rank, options_.timeout);
    if (!same_host.ok()) {
      return absl::Status(same_host.status().code(),
                          absl::StrCat(call.context, ": probing whether the peer", group->peers,
                                       " runs on this host: ", same_host.status().message()));
    }
    group->same_host = std::move(same_host).value();
  }
  group->context = std::move(context);
  if (group->size > 2) PublishSocketAddresses(group);
  return absl::OkStatus();
}

// Gloo names the peer of a failed connection by that connection's remote socket address, which
// only the peer knows as its local address. So each member publishes its local address for every
// connection once connected ("<peer rank>=<address>" lines under <key_prefix>/sockets/<rank>), and
// on an error we look for our connection in the other members' lists. Best effort: messages only.
void GlooCommunicator::PublishSocketAddresses(Group* group) {
  std::vector<std::string> lines;
  CatchGloo("", "", [&] {
    for (int r = 0; r < group->size; ++r) {
      if (r == group->rank) continue;
      lines.push_back(absl::StrCat(r, "=", group->context->getPair(r)->address().str()));
    }
  }).IgnoreError();
  options_.store
      ->Set(absl::StrCat(group->key_prefix, "/sockets/", group->rank), absl::StrJoin(lines, "\n"))
      .IgnoreError();
}

std::string GlooCommunicator::NamePeer(const Group& group, absl::string_view message) const {
  const std::string mine = absl::StrCat(group.rank, "=");
  for (int r = 0; r < group.size; ++r) {
    if (r == group.rank) continue;
    std::vector<std::string> addresses;
    absl::StatusOr<std::string> lines =
        options_.store->Get(absl::StrCat(group.key_prefix, "/sockets/", r), absl::ZeroDuration());
    if (lines.ok()) {
      for (absl::string_view line : absl::StrSplit(*lines, '\n')) {
        if (absl::ConsumePrefix(&line, mine)) addresses.emplace_back(line);
      }
    }
    // Also the address r advertised for our connection at rendezvous (connectFullMesh stores,
    // under "<r>", r's listening addresses for every other rank, in rank order, equal sizes).
    absl::StatusOr<std::string> all =
        options_.store->Get(absl::StrCat(group.key_prefix, "/", r), absl::ZeroDuration());
    if (all.ok() && all->size() % (group.size - 1) == 0) {
      const size_t width = all->size() / (group.size - 1);
      const size_t index = group.rank > r ? group.rank - 1 : group.rank;
      const std::vector<char> bytes(all->begin() + index * width,
                                    all->begin() + (index + 1) * width);
      CatchGloo("", "", [&] {
        addresses.push_back(gloo::transport::tcp::Address(bytes).str());
      }).IgnoreError();
    }
    for (const std::string& address : addresses) {
      if (!address.empty() && absl::StrContains(message, address)) {
        return absl::StrCat("; ", address, " is processor ",
                            CoordinateString(mesh().Coordinate(group.members[r])));
      }
    }
  }
  return "";
}

absl::Status GlooCommunicator::RunOnGroup(const Call& call,
                                          const std::function<void(Group*)>& body) {
  Group* group = FindGroup(call);
  absl::MutexLock lock(&group->mu);
  if (!group->failure.ok()) {
    return absl::Status(
        group->failure.code(),
        absl::StrCat(call.context, ": the group failed earlier: ", group->failure.message()));
  }
  absl::Status status;
  if (group->context == nullptr) status = ConnectLocked(call, group);
  if (status.ok()) {
    status = CatchGloo(call.context, group->peers, [&] { body(group); });
  }
  if (status.ok()) return status;
  if (group->size > 2 && group->context != nullptr) {
    const std::string peer = NamePeer(*group, status.message());
    if (!peer.empty()) status = absl::Status(status.code(), absl::StrCat(status.message(), peer));
  }
  group->failure = status;
  return status;
}

absl::Status GlooCommunicator::Connect(const std::vector<std::vector<int>>& axis_sets) {
  for (const std::vector<int>& axes : axis_sets) {
    Call call;
    RETURN_IF_ERROR(Begin("Connect", axes, 0, nullptr, &call));
    if (call.g == 1) continue;
    RETURN_IF_ERROR(RunOnGroup(call, [](Group*) {}));
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::Shutdown() {
  std::vector<int> all(mesh().ndims());
  std::iota(all.begin(), all.end(), 0);
  absl::Status status = Barrier(all);
  std::vector<Group*> groups;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (auto& entry : groups_) groups.push_back(entry.second.get());
  }
  for (Group* group : groups) {
    absl::MutexLock lock(&group->mu);
    // Closes this group's connections now rather than at destruction.
    group->same_host.reset();
    group->context.reset();
  }
  return status;
}

absl::Status GlooCommunicator::AllReduce(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                         DType dtype, void* data, int64_t count) {
  Call call;
  RETURN_IF_ERROR(Begin("AllReduce", mesh_axes, count, data, &call));
  const gloo::AllreduceOptions::Func reduce = GlooReduceFunction(op, dtype);
  if (reduce == nullptr) return InvalidReduceOp(call.context, op);
  if (call.g == 1 || count == 0) return absl::OkStatus();
  return RunOnGroup(call, [&](Group* group) {
    const std::shared_ptr<gloo::Context>& context = group->context;
    if (group->same_host != nullptr) {
      group->same_host->AllReduce(data, data, count, DTypeSize(dtype), reduce,
                                  ToMillis(options_.timeout), &group->pairwise_scratch);
      return;
    }
    if (call.g == 2) {
      PairwiseAllreduce(context, data, count, DTypeSize(dtype), reduce, ToMillis(options_.timeout),
                        PairwiseAllreduceOptions(), &group->pairwise_scratch);
      return;
    }
    if (count % call.g == 0) {
      ReduceScatterThenAllGather(context, data, data, count, DTypeSize(dtype), reduce,
                                 ToMillis(options_.timeout), &group->pairwise_scratch,
                                 &group->blocked_scratch);
      return;
    }
    gloo::AllreduceOptions opts(context);
    if (dtype == DType::kFloat32) {
      opts.setOutput(static_cast<float*>(data), count);
    } else {
      opts.setOutput(static_cast<int32_t*>(data), count);
    }
    opts.setReduceFunction(reduce);
    opts.setTimeout(ToMillis(options_.timeout));
    gloo::allreduce(opts);
  });
}

absl::Status GlooCommunicator::AllReduceInto(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                             DType dtype, const void* in, void* out,
                                             int64_t count) {
  if (in == out) return AllReduce(mesh_axes, op, dtype, out, count);
  Call call;
  RETURN_IF_ERROR(Begin("AllReduceInto", mesh_axes, count, out, &call));
  const gloo::AllreduceOptions::Func reduce = GlooReduceFunction(op, dtype);
  if (reduce == nullptr) return InvalidReduceOp(call.context, op);
  RETURN_IF_ERROR(CheckInput(call.context, count, in));
  if (count == 0) return absl::OkStatus();
  if (call.g == 1) {
    std::memcpy(out, in, count * DTypeSize(dtype));
    return absl::OkStatus();
  }
  return RunOnGroup(call, [&](Group* group) {
    const std::shared_ptr<gloo::Context>& context = group->context;
    if (group->same_host != nullptr) {
      group->same_host->AllReduce(in, out, count, DTypeSize(dtype), reduce,
                                  ToMillis(options_.timeout), &group->pairwise_scratch);
      return;
    }
    if (call.g == 2) {
      PairwiseAllreduceInto(context, in, out, count, DTypeSize(dtype), reduce,
                            ToMillis(options_.timeout), PairwiseAllreduceOptions(),
                            &group->pairwise_scratch);
      return;
    }
    if (count % call.g == 0) {
      ReduceScatterThenAllGather(context, in, out, count, DTypeSize(dtype), reduce,
                                 ToMillis(options_.timeout), &group->pairwise_scratch, nullptr);
      return;
    }
    // Counts that do not divide: Gloo's ring, reading `in` (it copies into `out` itself).
    gloo::AllreduceOptions opts(context);
    if (dtype == DType::kFloat32) {
      opts.setInput(const_cast<float*>(static_cast<const float*>(in)), count);
      opts.setOutput(static_cast<float*>(out), count);
    } else {
      opts.setInput(const_cast<int32_t*>(static_cast<const int32_t*>(in)), count);
      opts.setOutput(static_cast<int32_t*>(out), count);
    }
    opts.setReduceFunction(reduce);
    opts.setTimeout(ToMillis(options_.timeout));
    gloo::allreduce(opts);
  });
}

absl::Status GlooCommunicator::AllGather(const std::vector<int>& mesh_axes, const void* in,
                                         int64_t bytes, void* out) {
  Call call;
  RETURN_IF_ERROR(Begin("AllGather", mesh_axes, bytes, out, &call));
  if (call.g == 1) {
    if (bytes > 0) std::memcpy(out, in, bytes);
    return absl::OkStatus();
  }
  if (bytes == 0) return absl::OkStatus();
  return RunOnGroup(call, [&](Group* group) {
    const std::shared_ptr<gloo::Context>& context = group->context;
    if (group->same_host != nullptr) {
      group->same_host->AllGather(in, bytes, out, ToMillis(options_.timeout));
      return;
    }
    gloo::AllgatherOptions opts(context);
    // Gloo only reads the input; its API is not const-correct.
    opts.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
    opts.setOutput(static_cast<char*>(out), call.g * bytes);
    opts.setTimeout(ToMillis(options_.timeout));
    gloo::allgather(opts);
  });
}

absl::Status GlooCommunicator::AllToAll(const std::vector<int>& mesh_axes, const void* in,
                                        void* out, int64_t bytes_per_rank) {
  Call call;
  RETURN_IF_ERROR(Begin("AllToAll", mesh_axes, bytes_per_rank, out, &call));
  const int64_t total = call.g * bytes_per_rank;
  if (call.g == 1) {
    if (total > 0) std::memcpy(out, in, total);
    return absl::OkStatus();
  }
  if (total == 0) return absl::OkStatus();
  return RunOnGroup(call, [&](Group* group) {
    const std::shared_ptr<gloo::Context>& context = group->context;
    if (group->same_host != nullptr) {
      group->same_host->AllToAll(in, out, bytes_per_rank, ToMillis(options_.timeout));
      return;
    }
    gloo::AlltoallOptions opts(context);
    opts.setInput(const_cast<char*>(static_cast<const char*>(in)), total);
    opts.setOutput(static_cast<char*>(out), total);
    opts.setTimeout(ToMillis(options_.timeout));
    gloo::alltoall(opts);
  });
}

absl::Status GlooCommunicator::ReduceScatter(const std::vector<int>& mesh_axes, v1::ReduceOp op,
                                             DType dtype, const void* in, int64_t count_per_rank,
                                             void* out) {
  Call call;
  RETURN_IF_ERROR(Begin("ReduceScatter", mesh_axes, count_per_rank, out, &call));
  if (GlooReduceFunction(op, dtype) == nullptr) return InvalidReduceOp(call.context, op);
  const int64_t chunk = count_per_rank * DTypeSize(dtype);
  if (call.g == 1) {
    if (chunk > 0) std::memcpy(out, in, chunk);
    return absl::OkStatus();
  }
  if (chunk == 0) return absl::OkStatus();
  // Rank-order reduction of every member's chunk <my rank>, without a whole-size scratch: read
  // from the peer's buffer in pieces (same host), or received a few pieces at a time.
  const gloo::AllreduceOptions::Func reduce = GlooReduceFunction(op, dtype);
  return RunOnGroup(call, [&](Group* group) {
    if (group->same_host != nullptr) {
      group->same_host->ReduceScatter(in, out, count_per_rank, DTypeSize(dtype), reduce,
                                      ToMillis(options_.timeout), &group->pairwise_scratch);
      return;
    }
    PipelinedReduceScatter(group->context, in, out, count_per_rank, DTypeSize(dtype), reduce,
                           ToMillis(options_.timeout), PipelinedReduceScatterOptions(),
                           &group->pairwise_scratch);
  });
}

absl::Status GlooCommunicator::AllToAllBlocked(const std::vector<int>& mesh_axes, const void* in,
                                               int64_t in_blocks, void* out, int64_t out_blocks,
                                               int64_t bytes_per_rank) {
  if (in_blocks == 1 && out_blocks == 1) return AllToAll(mesh_axes, in, out, bytes_per_rank);
  Call call;
  RETURN_IF_ERROR(Begin("AllToAllBlocked", mesh_axes, bytes_per_rank, out, &call));
  RETURN_IF_ERROR(CheckBlocks(call.context, "the input", in_blocks, bytes_per_rank));
  RETURN_IF_ERROR(CheckBlocks(call.context, "the output", out_blocks, bytes_per_rank));
  if (bytes_per_rank == 0) return absl::OkStatus();
  if (call.g == 1) {
    CopyChunk({static_cast<const char*>(in), in_blocks, 1, 0},
              {static_cast<char*>(out), out_blocks, 1, 0}, bytes_per_rank);
    return absl::OkStatus();
  }
  return RunOnGroup(call, [&](Group* group) {
    if (group->same_host != nullptr) {
      group->same_host->AllToAllBlocked(in, in_blocks, out, out_blocks, bytes_per_rank,
                                        ToMillis(options_.timeout));
      return;
    }
    BlockedAllToAll(group->context, in, in_blocks, out, out_blocks, bytes_per_rank,
                    ToMillis(options_.timeout), &group->blocked_scratch);
  });
}

absl::Status GlooCommunicator::AllGatherBlocked(const std::vector<int>& mesh_axes, const void* in,
                                                int64_t bytes, void* out, int64_t out_blocks) {
  if (out_blocks == 1) return AllGather(mesh_axes, in, bytes, out);
  Call call;
  RETURN_IF_ERROR(Begin("AllGatherBlocked", mesh_axes, bytes, out, &call));
  RETURN_IF_ERROR(CheckBlocks(call.context, "the output", out_blocks, bytes));
  if (bytes == 0) return absl::OkStatus();
  if (call.g == 1) {
    std::memcpy(out, in, bytes);
    return absl::OkStatus();
  }
  return RunOnGroup(call, [&](Group* group) {
    if (group->same_host != nullptr) {
      group->same_host->AllGatherBlocked(in, bytes, out, out_blocks, ToMillis(options_.timeout));
      return;
    }
    // Gloo's ring into the scratch, then every chunk to its runs.
    const size_t total = call.g * bytes;
    PairwiseScratch& scratch = group->blocked_scratch;
    if (scratch.size < total) {
      scratch.data.reset(new char[total]);
      scratch.size = total;
    }
    gloo::AllgatherOptions opts(group->context);
    opts.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
    opts.setOutput(scratch.data.get(), total);
    opts.setTimeout(ToMillis(options_.timeout));
    gloo::allgather(opts);
    UnpackBlocked(scratch.data.get(), out_blocks, call.g, bytes, out);
  });
}

absl::Status GlooCommunicator::ReduceScatterBlocked(const std::vector<int>& mesh_axes,
                                                    v1::ReduceOp op, DType dtype, const void* in,
                                                    int64_t in_blocks, int64_t count_per_rank,
                                                    void* out) {
  if (in_blocks == 1) return ReduceScatter(mesh_axes, op, dtype, in, count_per_rank, out);
  Call call;
  RETURN_IF_ERROR(Begin("ReduceScatterBlocked", mesh_axes, count_per_rank, out, &call));
  RETURN_IF_ERROR(CheckBlocks(call.context, "the input", in_blocks, count_per_rank, "elements"));
  const gloo::AllreduceOptions::Func reduce = GlooReduceFunction(op, dtype);
  if (reduce == nullptr) return InvalidReduceOp(call.context, op);
  const int64_t chunk = count_per_rank * DTypeSize(dtype);
  if (chunk == 0) return absl::OkStatus();
  if (call.g == 1) {
    std::memcpy(out, in, chunk);
    return absl::OkStatus();
  }
  return RunOnGroup(call, [&](Group* group) {
    if (group->same_host != nullptr) {
      group->same_host->ReduceScatterBlocked(in, in_blocks, out, count_per_rank, DTypeSize(dtype),
                                             reduce, ToMillis(options_.timeout),
                                             &group->pairwise_scratch);
      return;
    }
    // Packed in storage order, then the pipelined point-to-point reduce-scatter.
    const size_t total = call.g * chunk;
    PairwiseScratch& scratch = group->blocked_scratch;
    if (scratch.size < total) {
      scratch.data.reset(new char[total]);
      scratch.size = total;
    }
    PackBlocked(in, in_blocks, call.g, chunk, scratch.data.get());
    PipelinedReduceScatter(group->context, scratch.data.get(), out, count_per_rank,
                           DTypeSize(dtype), reduce, ToMillis(options_.timeout),
                           PipelinedReduceScatterOptions(), &group->pairwise_scratch);
  });
}

absl::Status GlooCommunicator::Broadcast(const std::vector<int>& mesh_axes, int root_rank,
                                         void* data, int64_t bytes) {
  Call call;
  RETURN_IF_ERROR(Begin("Broadcast", mesh_axes, bytes, data, &call));
  RETURN_IF_ERROR(CheckRoot(call.context, root_rank, call.g));
  if (call.g == 1 || bytes == 0) return absl::OkStatus();
  return RunOnGroup(call, [&](Group* group) {
    const std::shared_ptr<gloo::Context>& context = group->context;
    if (group->same_host != nullptr) {
      group->same_host->Broadcast(root_rank, data, bytes, ToMillis(options_.timeout));
      return;
    }
    gloo::BroadcastOptions opts(context);
    opts.setOutput(static_cast<char*>(data), bytes);
    opts.setRoot(root_rank);
    opts.setTimeout(ToMillis(options_.timeout));
    gloo::broadcast(opts);
  });
}

absl::Status GlooCommunicator::Permute(int mesh_axis, int shift, bool wrap, const void* in,
                                       void* out, int64_t bytes) {
  Call call;
  RETURN_IF_ERROR(Begin("Permute", {mesh_axis}, bytes, out, &call));
  RETURN_IF_ERROR(CheckInput(call.context, bytes, in));
  const int src = PermuteSource(call.rank, call.g, shift, wrap);
  const int dst = PermuteTarget(call.rank, call.g, shift, wrap);
  if (src < 0 && bytes > 0) std::memset(out, 0, bytes);
  if (src == call.rank && bytes > 0) std::memcpy(out, in, bytes);
  // Nothing crosses processes for a group of one, an empty buffer, or a shift by a multiple of g.
  if (call.g == 1 || bytes == 0 || (src == call.rank && dst == call.rank)) {
    return absl::OkStatus();
  }
  return RunOnGroup(call, [&](Group* group) {
    if (group->same_host != nullptr) {
      group->same_host->Permute(src, in, out, bytes, ToMillis(options_.timeout));
      return;
    }
    const std::shared_ptr<gloo::Context>& context = group->context;
    const uint64_t slot = gloo::Slot::build(kPermuteSlotPrefix, 0);
    std::unique_ptr<gloo::transport::UnboundBuffer> send, recv;
    if (src >= 0 && src != call.rank) {
      recv = context->createUnboundBuffer(out, bytes);
      recv->recv(src, slot);
    }
    if (dst >= 0 && dst != call.rank) {
      send = context->createUnboundBuffer(const_cast<void*>(in), bytes);
      send->send(dst, slot);
    }
    if (recv != nullptr) recv->waitRecv(nullptr, ToMillis(options_.timeout));
    if (send != nullptr) send->waitSend(nullptr, ToMillis(options_.timeout));
  });
}

absl::Status GlooCommunicator::Barrier(const std::vector<int>& mesh_axes) {
  Call call;
  RETURN_IF_ERROR(Begin("Barrier", mesh_axes, 0, nullptr, &call));
  if (call.g == 1) return absl::OkStatus();
  return RunOnGroup(call, [&](Group* group) {
    const std::shared_ptr<gloo::Context>& context = group->context;
    if (group->same_host != nullptr) {
      group->same_host->Barrier(ToMillis(options_.timeout));
      return;
    }
    gloo::BarrierOptions opts(context);
    opts.setTimeout(ToMillis(options_.timeout));
    gloo::barrier(opts);
  });
}

}  // namespace meshrt
