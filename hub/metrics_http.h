// MetricsHttpServer: serves a MetricRegistry at GET /metrics over HTTP/1.1
// (cpp-httplib), for Prometheus to scrape.
//
// Responsible for binding (port 0 picks a free one), the listener thread and
// stopping. Serves nothing but /metrics (and a one-line index at /); every
// other path is 404, every other method 405.
#ifndef HUB_HUB_METRICS_HTTP_H_
#define HUB_HUB_METRICS_HTTP_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "hub/metrics.h"

namespace httplib {
class Server;
}

namespace hub {

class MetricsHttpServer {
 public:
  // Binds `listen` ("host:port", "[v6]:port") and starts serving
  // `registry`, which must outlive the server. INVALID_ARGUMENT
  // (LISTEN_ADDRESS_INVALID) for a malformed address, UNAVAILABLE
  // (LISTEN_FAILED) when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen, const MetricRegistry* registry);
  // Stops serving (finishes the scrape in progress).
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The address actually bound, e.g. "127.0.0.1:9464".
  const std::string& address() const { return address_; }
  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::atomic<bool> finished_{false};  // the listener returned
  std::string address_;
  int port_ = 0;
};

}  // namespace hub

#endif  // HUB_HUB_METRICS_HTTP_H_
