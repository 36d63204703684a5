// MetricsHttpServer: hubd's HTTP listener (cpp-httplib): a MetricRegistry at
// GET /metrics for Prometheus to scrape, and the routes of whoever installs
// more (the console, hub/console/console_http.h).
//
// Responsible for binding (port 0 picks a free one), TLS when given a
// certificate, the listener thread and stopping. Without installed routes it
// serves nothing but /metrics (and a one-line index at /); every other path
// is 404, and PUT and DELETE are 405 (POST too, unless a route takes it).
#ifndef HUB_HUB_METRICS_HTTP_H_
#define HUB_HUB_METRICS_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "hub/metrics.h"

namespace httplib {
class Server;
}

namespace hub {

struct HttpServeOptions {
  // PEM certificate chain and key to serve HTTPS with; empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Adds routes before serving (then "/" is theirs); must outlive the
  // server's handlers.
  std::function<void(httplib::Server*)> install;
  // Worker threads: each request (and each open event stream) holds one.
  int threads = 2;
};

class MetricsHttpServer {
 public:
  // Binds `listen` ("host:port", "[v6]:port") and starts serving
  // `registry`, which must outlive the server. INVALID_ARGUMENT
  // (LISTEN_ADDRESS_INVALID) for a malformed address, UNAVAILABLE
  // (LISTEN_FAILED) when it cannot be bound, INVALID_ARGUMENT
  // (TLS_FILES_INVALID) when the TLS files do not load.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen, const MetricRegistry* registry,
      HttpServeOptions options = {});
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
