// The dashboard page's files (coordinator/dashboard/*), compiled into the binary by the
// `dashboard_page` genrule (coordinator/BUILD.bazel) as NUL-terminated strings.
#ifndef MESHRT_COORDINATOR_DASHBOARD_PAGE_H_
#define MESHRT_COORDINATOR_DASHBOARD_PAGE_H_

namespace meshrt {

extern const char kDashboardHtml[];  // index.html
extern const char kDashboardJs[];    // dashboard.js
extern const char kDashboardCss[];   // dashboard.css

}  // namespace meshrt

#endif  // MESHRT_COORDINATOR_DASHBOARD_PAGE_H_
