#include "hub/metrics_http.h"

#include <httplib.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub {

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, const MetricRegistry* registry,
    HttpServeOptions options) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return InvalidArgumentError(
        "LISTEN_ADDRESS_INVALID",
        absl::StrCat("metrics address must be host:port, got '", listen, "'"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }

  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  if (!options.tls_cert_file.empty()) {
    auto tls = std::make_unique<httplib::SSLServer>(
        options.tls_cert_file.c_str(), options.tls_key_file.c_str());
    if (!tls->is_valid()) {
      return InvalidArgumentError(
          "TLS_FILES_INVALID",
          absl::StrCat("cannot serve HTTPS on ", listen, " with ",
                       options.tls_cert_file, " and ", options.tls_key_file));
    }
    server->http_ = std::move(tls);
  } else {
    server->http_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& http = *server->http_;
  // Scrapes are rare and cheap: two workers, not one per core, unless the
  // installed routes hold connections open.
  http.new_task_queue = [threads = std::max(1, options.threads)] {
    return new httplib::ThreadPool(threads);
  };
  http.Get("/metrics",
           [registry](const httplib::Request&, httplib::Response& response) {
             response.set_content(registry->Render(), kMetricsContentType);
           });
  if (options.install) {
    options.install(&http);
  } else {
    http.Get("/", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("hubd metrics: GET /metrics\n", "text/plain");
    });
  }
  auto not_allowed = [](const httplib::Request&, httplib::Response& response) {
    response.status = 405;
  };
  http.Post("/.*", not_allowed);
  http.Put("/.*", not_allowed);
  http.Delete("/.*", not_allowed);

  int bound = port;
  if (port == 0) {
    bound = http.bind_to_any_port(host);
  } else if (!http.bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    return UnavailableError("LISTEN_FAILED",
                            absl::StrCat("cannot serve metrics on ", listen,
                                         " (address in use or not available)"));
  }
  server->port_ = bound;
  server->address_ = absl::StrCat(listen.substr(0, colon), ":", bound);
  MetricsHttpServer* raw = server.get();
  server->thread_ = std::thread([raw] {
    pthread_setname_np(pthread_self(), "hub-http");  // top -H, perf
    raw->http_->listen_after_bind();
    raw->finished_ = true;
  });
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  // stop() only takes effect once the listener runs.
  while (thread_.joinable() && !finished_ && !http_->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hub
