// MetricsHttpServer: hubd's HTTP listener (cpp-httplib): a MetricRegistry at
// GET /metrics for Prometheus to scrape, and the routes of whoever installs
// more (the console, hub/console/console_http.h).
//
// Responsible for binding (port 0 picks a free one), TLS when given a
// certificate (re-read, for new connections, when its files change or on
// ReloadTls: the listener and open connections stay), the listener thread
// and stopping. Without installed routes it
// serves nothing but /metrics (and a one-line index at /); every other path
// is 404, and PUT and DELETE are 405 (POST too, unless a route takes it).
#ifndef HUB_HUB_OBSERVABILITY_METRICS_HTTP_H_
#define HUB_HUB_OBSERVABILITY_METRICS_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "hub/observability/metrics.h"

namespace httplib {
class Server;
}

namespace hub {

struct HttpServeOptions {
  // PEM certificate chain and key to serve HTTPS with; empty: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // How often the two files are looked at (mtime, size, inode); a change
  // since the pair in force was read reloads them. Zero: only ReloadTls()
  // does.
  absl::Duration tls_poll_interval = absl::Seconds(1);
  // How long an open connection may wait for its next request (HTTP
  // keep-alive) before the server closes it; whole seconds, at least 1.
  absl::Duration keep_alive_timeout = absl::Seconds(5);
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

  // Re-reads the certificate chain and key (SIGHUP; the file watch): new
  // connections are served with them, open ones keep theirs, the listener
  // stays. On failure (unreadable, not PEM, a key that is not the
  // certificate's: INVALID_ARGUMENT / TLS_FILES_INVALID) the previous pair
  // stays in force. OK without TLS.
  absl::Status ReloadTls();
  // Certificate pairs loaded so far (1 after Start with TLS).
  int64_t tls_loads() const;

  struct TlsKeys;  // a parsed chain and key

 private:
  MetricsHttpServer() = default;
  std::shared_ptr<const TlsKeys> CurrentKeys() const;
  void WatchTlsFiles(absl::Duration interval);
  // Loads the pair in force now; `signature`: the files' as taken before
  // reading them.
  absl::Status LoadTls(const std::string& signature);

  std::string tls_cert_file_;
  std::string tls_key_file_;
  mutable absl::Mutex tls_mu_;
  std::shared_ptr<const TlsKeys> tls_keys_ ABSL_GUARDED_BY(tls_mu_);
  // The files' signature (inode, size, mtime) as read for the last load
  // tried, taken before reading them: the watch reloads when it differs.
  std::string tls_files_read_ ABSL_GUARDED_BY(tls_mu_);
  int64_t tls_loads_ ABSL_GUARDED_BY(tls_mu_) = 0;
  absl::Notification stop_watch_;
  std::thread watch_thread_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::atomic<bool> finished_{false};  // the listener returned
  std::string address_;
  int port_ = 0;
};

}  // namespace hub

#endif  // HUB_HUB_OBSERVABILITY_METRICS_HTTP_H_
