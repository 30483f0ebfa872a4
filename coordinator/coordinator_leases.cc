// Session leases (coordinator.h): Coordinator::KeepAlive and the reaper's expiry of sessions whose
// client went silent.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_internal.h"
#include "util/logging.h"

namespace meshrt {
namespace {

// "12.1s" (rounded up: never below the lease it exceeded).
std::string Rounded(absl::Duration d) {
  return absl::FormatDuration(absl::Ceil(d, absl::Milliseconds(100)));
}

std::string Owner(const Caller& owner) {
  return owner.name.empty() ? std::string("an operator or in-process caller")
                            : absl::StrCat("client '", owner.name, "'");
}

}  // namespace

void Coordinator::ExpireLeasesLocked(absl::Time now,
                                     std::vector<std::shared_ptr<Session>>* expired) {
  const absl::Duration lease = options_.session_lease;
  std::vector<std::string> forget;
  for (auto& [id, s] : sessions_) {
    if (s->expired) {
      if (now - s->expired_at > options_.expired_session_retention) forget.push_back(id);
      continue;
    }
    if (lease <= absl::ZeroDuration() || s->creating) continue;
    const absl::Duration silent = now - s->lease_renewed;
    if (silent <= lease) continue;
    const std::string why =
        absl::StrCat("session ", id, " expired: its client (", Owner(s->owner), ") was silent for ",
                     Rounded(silent), " (> --session_lease ", absl::FormatDuration(lease),
                     "); its workers were freed; create a new session");
    const bool had_failed = !s->failed.ok();
    LogWarning("coordinator: session ", id, " of ", Owner(s->owner), " on mesh ",
               s->mesh.ToString(), " expired: its client was silent for ", Rounded(silent),
               " (> --session_lease ", absl::FormatDuration(lease), "); ",
               had_failed ? "it had failed already" : "closing it on its workers",
               s->cancel != nullptr ? " and cancelling its step in flight" : "");
    // The expiry replaces an earlier failure as the reason (and keeps it in the message): the
    // session is gone either way, and "expired" is what its client must learn.
    s->failed = absl::FailedPreconditionError(
        had_failed ? absl::StrCat(why, " (it had failed before: ", s->failed.message(), ")") : why);
    if (s->cancel != nullptr) s->cancel->Cancel();
    s->expired = true;
    s->expired_at = now;
    errors_.Add(id, why, now);
    expired->push_back(s);
  }
  for (const std::string& id : forget) {
    sessions_.erase(id);
    metrics_.SessionEnded(id);
  }
}

v1::KeepAliveResponse Coordinator::KeepAlive(const std::vector<std::string>& sessions,
                                             const Caller& caller) {
  v1::KeepAliveResponse response;
  response.set_lease_ms(absl::ToInt64Milliseconds(options_.session_lease));
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  for (const std::string& id : sessions) {
    auto lost = [&](std::string reason) {
      v1::LostSession* l = response.add_lost();
      l->set_session(id);
      l->set_reason(std::move(reason));
    };
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      lost(absl::StrCat("no session '", id,
                        "' (closed, expired long ago, or from before a coordinator restart)"));
    } else if (!caller.may_access_any_session() && it->second->owner.name != caller.name) {
      lost(absl::StrCat("session '", id, "' belongs to another client"));
    } else if (it->second->expired) {
      lost(std::string(it->second->failed.message()));
    } else {
      it->second->lease_renewed = now;
    }
  }
  return response;
}

}  // namespace meshrt
