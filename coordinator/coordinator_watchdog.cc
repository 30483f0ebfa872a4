// The coordinator's stuck-step watchdog (coordinator/stuck_step.h): the step in progress of a
// request, from the activities the workers send with their heartbeats, and the verdict when it runs
// over the limit: slow (a WARNING) or stuck (the diagnosis).
#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "coordinator/coordinator_internal.h"
#include "util/logging.h"

namespace meshrt {

absl::Duration Coordinator::StaleHeartbeat() const {
  return std::max(options_.heartbeat_interval * 3, absl::Seconds(2));
}

std::vector<ProcessorView> Coordinator::ProcessorViewsLocked(const Session& session) const {
  const absl::Time now = absl::Now();
  std::vector<ProcessorView> views;
  for (int p = 0; p < static_cast<int>(session.worker_ids.size()); ++p) {
    ProcessorView v;
    v.processor = p;
    v.worker_id = session.worker_ids[p];
    v.address = session.addresses[p];
    v.coordinate = session.mesh.Coordinate(p);
    auto it = workers_.find(v.worker_id);
    if (it == workers_.end() || it->second->session != session.id) {
      v.registered = false;
    } else {
      v.heartbeat_age = now - it->second->last_heartbeat;
      v.activity = it->second->activity;
    }
    views.push_back(std::move(v));
  }
  return views;
}

absl::Status Coordinator::CheckStuckStep(Session* session, StepProgress* progress,
                                         ComputeWatch* compute) {
  if (options_.stuck_step.min <= absl::ZeroDuration()) return absl::OkStatus();
  std::vector<ProcessorView> views;
  {
    absl::MutexLock lock(&mu_);
    views = ProcessorViewsLocked(*session);
  }
  const absl::Time now = absl::Now();
  progress->Update(views, now, &session->durations);
  compute->Update(&views, now, StaleHeartbeat());
  if (!progress->reported()) return absl::OkStatus();
  const StepVerdict v = JudgeStep(progress->step(), progress->elapsed(now),
                                  StuckStepLimit(options_.stuck_step, session->durations),
                                  DescribeStuckStepLimit(options_.stuck_step, session->durations),
                                  views, StaleHeartbeat());
  switch (v.kind) {
    case StepVerdict::Kind::kWithinLimit:
      return absl::OkStatus();
    case StepVerdict::Kind::kSlow:
      if (progress->FirstSlowWarning()) {
        LogWarning("coordinator: session ", session->id, ": ", v.message);
      }
      return absl::OkStatus();
    case StepVerdict::Kind::kStuck:
      break;
  }
  return absl::DeadlineExceededError(v.message);
}

}  // namespace meshrt
