// Serving a MetricsRegistry on a daemon's HTTP server (rpc/http_server.h).
#ifndef MESHRT_MONITORING_METRICS_HTTP_H_
#define MESHRT_MONITORING_METRICS_HTTP_H_

#include "monitoring/metrics.h"
#include "rpc/http_server.h"

namespace meshrt {

// GET /metrics on `server` renders `registry` (which must outlive the server) in the text format.
inline void ServeMetrics(HttpServer* server, const MetricsRegistry* registry) {
  server->Handle("/metrics", [registry](const HttpRequest&) {
    HttpResponse response;
    response.content_type = MetricsRegistry::kContentType;
    response.body = registry->Render();
    return response;
  });
}

}  // namespace meshrt

#endif  // MESHRT_MONITORING_METRICS_HTTP_H_
