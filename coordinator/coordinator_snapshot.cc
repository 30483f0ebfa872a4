// The dashboard's view of the coordinator (Coordinator::Snapshot, DescribeSession): copies of the
// registry and sessions under mu_ for microseconds; the expensive part (the cost model's explain
// of a session) runs outside mu_, once per session.
#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_internal.h"
#include "core/planning/explain.h"

namespace meshrt {

SessionSnapshot Coordinator::SnapshotSessionLocked(const Session& s, absl::Time now) const {
  SessionSnapshot out;
  out.id = s.id;
  out.owner = s.owner.name;
  out.mesh = s.mesh.ToString();
  out.layout = s.layout;
  out.state = s.expired        ? "expired"
              : !s.failed.ok() ? "failed"
              : s.cancel != nullptr ? "running"
                                    : "ready";
  out.step = s.step.load();
  out.steps_per_second = s.history.StepsPerSecond(now);
  out.age_ms = absl::ToInt64Milliseconds(now - s.created);
  out.last_error = std::string(s.failed.message());
  out.loss_tensor = s.loss_tensor;
  out.worker_ids = s.worker_ids;
  return out;
}

ClusterSnapshot Coordinator::Snapshot() {
  ClusterSnapshot snap;
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    snap.at = now;
    const absl::Duration stale = StaleHeartbeat();
    for (const auto& [id, w] : workers_) {
      WorkerSnapshot& ws = snap.workers.emplace_back();
      ws.id = id;
      ws.rank = w->rank;
      ws.address = w->address;
      ws.gloo_address = w->gloo_address;
      ws.session = w->session;
      ws.coordinate = w->coordinate;
      ws.heartbeat_age_ms = absl::ToInt64Milliseconds(now - w->last_heartbeat);
      ws.activity = w->activity;
      if (w->draining) {
        ws.state = "draining";  // its heartbeats stop while it finishes its step in flight
      } else if (now - w->last_heartbeat > stale) {
        ws.state = "lost";
        ws.lost_why = absl::StrCat("no heartbeat for ", absl::FormatDuration(now - w->last_heartbeat));
      } else {
        ws.state = w->session.empty() ? "idle" : "busy";
      }
    }
    for (const WorkerSnapshot& lost : lost_workers_) {
      if (now - lost.lost_at > options_.lost_worker_retention) continue;
      snap.workers.push_back(lost);
    }
    for (const auto& [id, s] : sessions_) {
      snap.sessions.push_back(SnapshotSessionLocked(*s, now));
      sessions.push_back(s);
    }
    for (const auto& [id, what] : waiting_) snap.waiting.push_back(what);
  }
  // The last losses outside mu_ (StepHistory has a lock of its own).
  for (size_t i = 0; i < sessions.size(); ++i) {
    if (sessions[i]->loss_tensor.empty()) continue;
    const std::vector<LossPoint> loss = sessions[i]->history.Loss();
    if (!loss.empty()) snap.sessions[i].last_loss = loss.back().loss;
  }
  snap.errors = errors_.Recent();
  return snap;
}

absl::StatusOr<SessionDetail> Coordinator::DescribeSession(const std::string& id, bool explain) {
  std::shared_ptr<Session> session;
  SessionDetail detail;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
    session = it->second;
    detail.session = SnapshotSessionLocked(*session, absl::Now());
  }
  detail.loss = session->history.Loss();
  detail.metrics = session->history.Metrics();
  if (!detail.loss.empty()) detail.session.last_loss = detail.loss.back().loss;
  detail.plan_text = session->plan_text;
  detail.planned_step_seconds = session->planned_step_seconds;
  if (!explain) return detail;
  detail.explain_text = session->explain_text;
  HardwareProfile profile;
  {
    absl::MutexLock lock(&profile_mu_);
    profile = profile_;
  }
  absl::MutexLock lock(&session->explain_mu);
  if (!session->explain_json.has_value()) {
    // The program is constant once the session is listed; costing it takes milliseconds.
    absl::StatusOr<std::string> json = ExplainProgramJson(session->program, profile);
    session->explain_json = json.ok() ? *json : "";
    if (!json.ok()) session->explain_error = std::string(json.status().message());
  }
  detail.explain_json = *session->explain_json;
  detail.explain_error = session->explain_error;
  return detail;
}

absl::Status Coordinator::RecordMetrics(const std::string& id,
                                        const v1::RecordMetricsRequest& request) {
  constexpr int kMaxPoints = 64;
  if (request.points_size() > kMaxPoints) {
    return absl::InvalidArgumentError(absl::StrCat("RecordMetrics carries ", request.points_size(),
                                                   " points; at most ", kMaxPoints, " per call"));
  }
  std::shared_ptr<Session> session;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("no session '", id, "'"));
    session = it->second;
  }
  std::vector<StepHistory::MetricValue> points;
  for (const v1::MetricPoint& p : request.points()) points.push_back({p.name(), p.step(), p.value()});
  return session->history.RecordMetrics(points);  // its own lock
}

}  // namespace meshrt
