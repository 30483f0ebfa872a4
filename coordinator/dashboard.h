// The coordinator's live dashboard, served on its HTTP side door (rpc/http_server.h, behind the
// operator token like every request there):
//   /               the page (coordinator/dashboard/index.html), with a Content-Security-Policy
//                   that allows only its own script and style (no inline code, no other origin)
//   /dashboard.js   its script: polls the JSON below every second and renders it with
//   /dashboard.css  textContent only (every name in the data is user input)
//   /api/cluster    ClusterJson(Coordinator::Snapshot()): workers, sessions, waits, recent errors
//   /api/session?id=ID  SessionJson: one session's row, its loss curve and its client's metrics
//   /api/explain?id=ID  ExplainJson: its layout report (tensors, slices, collectives, bytes, the
//                   cost model's predictions, the planner's report for auto layouts)
// Unknown session: 404 with {"error": ...}; no id: 400.
//
// The JSON functions are pure and exposed for tests. Every string in them is escaped for JSON
// and, besides, '<', '>' and '&' are written as \u escapes, so no byte of user input reads as
// markup even if the JSON were mistaken for HTML.
#ifndef MESHRT_COORDINATOR_DASHBOARD_H_
#define MESHRT_COORDINATOR_DASHBOARD_H_

#include <string>

#include "absl/strings/string_view.h"
#include "coordinator/cluster_snapshot.h"
#include "coordinator/coordinator.h"
#include "rpc/http_server.h"

namespace meshrt {

std::string ClusterJson(const ClusterSnapshot& snapshot);
std::string SessionJson(const SessionDetail& detail);
std::string ExplainJson(const SessionDetail& detail);
// `text` as a JSON string literal (quotes included), with <, > and & as \u escapes.
std::string DashboardQuoted(absl::string_view text);

// Registers the handlers above on `http` (before http->Start). `coordinator` is borrowed and must
// outlive the server's last request (stop the server first).
void RegisterDashboard(Coordinator* coordinator, HttpServer* http);

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_DASHBOARD_H_
