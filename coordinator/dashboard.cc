#include "coordinator/dashboard.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/dashboard_page.h"
#include "util/logging.h"

namespace meshrt {
namespace {

// What the page may load: its own script and style from this origin, the JSON from it, nothing
// inline, no frames around it.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";  // JSON has no NaN or infinity (a diverged loss)
  return absl::StrFormat("%.6g", v);
}

int64_t UnixMillis(absl::Time t) { return absl::ToUnixMillis(t); }

void AppendActivity(std::string* out, const v1::WorkerActivity& a) {
  absl::StrAppend(out, "{\"step\":", a.step(), ",\"running\":", a.running() ? "true" : "false",
                  ",\"instruction\":", a.instruction(), ",\"op\":", DashboardQuoted(a.op()),
                  ",\"kind\":", DashboardQuoted(a.kind()),
                  ",\"collective\":", DashboardQuoted(a.collective()), ",\"mesh_dims\":[");
  for (int i = 0; i < a.mesh_dims_size(); ++i) {
    absl::StrAppend(out, i ? "," : "", DashboardQuoted(a.mesh_dims(i)));
  }
  absl::StrAppend(out, "],\"instruction_ms\":", a.instruction_ms(), ",\"step_ms\":", a.step_ms(),
                  ",\"note\":", DashboardQuoted(a.note()), "}");
}

void AppendWorker(std::string* out, const WorkerSnapshot& w) {
  absl::StrAppend(out, "{\"id\":", w.id, ",\"rank\":", w.rank,
                  ",\"address\":", DashboardQuoted(w.address),
                  ",\"gloo_address\":", DashboardQuoted(w.gloo_address),
                  ",\"state\":", DashboardQuoted(w.state), ",\"session\":", DashboardQuoted(w.session),
                  ",\"coordinate\":[", absl::StrJoin(w.coordinate, ","),
                  "],\"heartbeat_age_ms\":", w.heartbeat_age_ms, ",\"activity\":");
  if (w.activity.has_value()) {
    AppendActivity(out, *w.activity);
  } else {
    absl::StrAppend(out, "null");
  }
  absl::StrAppend(out, ",\"lost_why\":", DashboardQuoted(w.lost_why), ",\"lost_at_ms\":",
                  w.lost_why.empty() ? 0 : UnixMillis(w.lost_at), "}");
}

void AppendSession(std::string* out, const SessionSnapshot& s) {
  absl::StrAppend(out, "{\"id\":", DashboardQuoted(s.id), ",\"owner\":", DashboardQuoted(s.owner),
                  ",\"mesh\":", DashboardQuoted(s.mesh), ",\"layout\":", DashboardQuoted(s.layout),
                  ",\"state\":", DashboardQuoted(s.state), ",\"step\":", s.step,
                  ",\"steps_per_s\":", Number(s.steps_per_second), ",\"age_ms\":", s.age_ms,
                  ",\"last_error\":", DashboardQuoted(s.last_error),
                  ",\"loss_tensor\":", DashboardQuoted(s.loss_tensor), ",\"last_loss\":",
                  s.last_loss.has_value() ? Number(*s.last_loss) : "null", ",\"workers\":[",
                  absl::StrJoin(s.worker_ids, ","), "]}");
}

HttpResponse Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json; charset=utf-8";
  r.body = std::move(body);
  r.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  return r;
}

HttpResponse Static(const char* content_type, const char* body) {
  HttpResponse r;
  r.content_type = content_type;
  r.body = body;
  r.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");  // the address may carry the token
  return r;
}

// The session a /api/session or /api/explain request names, or the error response.
absl::StatusOr<SessionDetail> Describe(Coordinator* coordinator, const HttpRequest& request,
                                       bool explain, HttpResponse* error) {
  auto id = request.params.find("id");
  if (id == request.params.end() || id->second.empty()) {
    *error = Json(400, "{\"error\":\"give the session as ?id=SESSION\"}");
    return absl::InvalidArgumentError("no id");
  }
  absl::StatusOr<SessionDetail> detail = coordinator->DescribeSession(id->second, explain);
  if (!detail.ok()) {
    *error = Json(detail.status().code() == absl::StatusCode::kNotFound ? 404 : 500,
                  absl::StrCat("{\"error\":", DashboardQuoted(detail.status().message()), "}"));
  }
  return detail;
}

}  // namespace

std::string DashboardQuoted(absl::string_view text) {
  const std::string quoted = JsonQuoted(text);
  std::string out;
  out.reserve(quoted.size());
  for (char c : quoted) {
    // None of these occurs inside a JSON escape sequence, so replacing them is always safe.
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out += c;
    }
  }
  return out;
}

std::string ClusterJson(const ClusterSnapshot& snapshot) {
  std::string out = absl::StrCat("{\"now_ms\":", UnixMillis(snapshot.at), ",\"workers\":[");
  for (size_t i = 0; i < snapshot.workers.size(); ++i) {
    if (i) out += ",";
    AppendWorker(&out, snapshot.workers[i]);
  }
  out += "],\"sessions\":[";
  for (size_t i = 0; i < snapshot.sessions.size(); ++i) {
    if (i) out += ",";
    AppendSession(&out, snapshot.sessions[i]);
  }
  out += "],\"waiting\":[";
  for (size_t i = 0; i < snapshot.waiting.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", DashboardQuoted(snapshot.waiting[i]));
  }
  out += "],\"errors\":[";
  for (size_t i = 0; i < snapshot.errors.size(); ++i) {
    const ErrorEvent& e = snapshot.errors[i];
    absl::StrAppend(&out, i ? "," : "", "{\"at_ms\":", UnixMillis(e.at),
                    ",\"session\":", DashboardQuoted(e.session),
                    ",\"message\":", DashboardQuoted(e.message), "}");
  }
  out += "]}";
  return out;
}

std::string SessionJson(const SessionDetail& detail) {
  std::string out = "{\"session\":";
  AppendSession(&out, detail.session);
  out += ",\"loss\":[";
  for (size_t i = 0; i < detail.loss.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", "[", detail.loss[i].step, ",",
                    Number(detail.loss[i].loss), "]");
  }
  out += "],\"metrics\":[";
  for (size_t i = 0; i < detail.metrics.size(); ++i) {
    const MetricCurve& m = detail.metrics[i];
    absl::StrAppend(&out, i ? "," : "", "{\"name\":", DashboardQuoted(m.name), ",\"points\":[");
    for (size_t j = 0; j < m.points.size(); ++j) {
      absl::StrAppend(&out, j ? "," : "", "[", m.points[j].step, ",", Number(m.points[j].value),
                      "]");
    }
    out += "]}";
  }
  absl::StrAppend(&out, "],\"plan\":", DashboardQuoted(detail.plan_text),
                  ",\"planned_step_s\":", Number(detail.planned_step_seconds), "}");
  return out;
}

std::string ExplainJson(const SessionDetail& detail) {
  // explain_json is core/planning/explain.h's own JSON (protobuf's printer escapes it); embedded as is.
  return absl::StrCat("{\"id\":", DashboardQuoted(detail.session.id),
                      ",\"text\":", DashboardQuoted(detail.explain_text),
                      ",\"cost\":", detail.explain_json.empty() ? "null" : detail.explain_json,
                      ",\"cost_error\":", DashboardQuoted(detail.explain_error),
                      ",\"plan\":", DashboardQuoted(detail.plan_text),
                      ",\"planned_step_s\":", Number(detail.planned_step_seconds), "}");
}

void RegisterDashboard(Coordinator* coordinator, HttpServer* http) {
  http->Handle("/", [](const HttpRequest&) {
    return Static("text/html; charset=utf-8", kDashboardHtml);
  });
  http->Handle("/dashboard.js", [](const HttpRequest&) {
    return Static("text/javascript; charset=utf-8", kDashboardJs);
  });
  http->Handle("/dashboard.css", [](const HttpRequest&) {
    return Static("text/css; charset=utf-8", kDashboardCss);
  });
  http->Handle("/api/cluster", [coordinator](const HttpRequest&) {
    return Json(200, ClusterJson(coordinator->Snapshot()));
  });
  http->Handle("/api/session", [coordinator](const HttpRequest& request) {
    HttpResponse error;
    absl::StatusOr<SessionDetail> detail = Describe(coordinator, request, false, &error);
    return detail.ok() ? Json(200, SessionJson(*detail)) : error;
  });
  http->Handle("/api/explain", [coordinator](const HttpRequest& request) {
    HttpResponse error;
    absl::StatusOr<SessionDetail> detail = Describe(coordinator, request, true, &error);
    return detail.ok() ? Json(200, ExplainJson(*detail)) : error;
  });
}

}  // namespace meshrt
