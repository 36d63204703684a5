#include "hub/observability/metrics_http.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub {

struct MetricsHttpServer::TlsKeys {
  X509* cert = nullptr;
  STACK_OF(X509) * chain = nullptr;  // the certificates after the first
  EVP_PKEY* key = nullptr;
  ~TlsKeys() {
    X509_free(cert);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
  }
};

namespace {

absl::Status TlsFilesInvalid(const std::string& cert_file,
                             const std::string& key_file,
                             absl::string_view why) {
  return InvalidArgumentError(
      "TLS_FILES_INVALID", absl::StrCat("cannot serve HTTPS with ", cert_file,
                                        " and ", key_file, ": ", why));
}

std::optional<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The certificate chain and key of the two files, checked to belong
// together.
absl::StatusOr<std::shared_ptr<const MetricsHttpServer::TlsKeys>> LoadTlsKeys(
    const std::string& cert_file, const std::string& key_file) {
  const std::optional<std::string> cert_pem = ReadWhole(cert_file);
  const std::optional<std::string> key_pem = ReadWhole(key_file);
  if (!cert_pem.has_value() || !key_pem.has_value()) {
    return TlsFilesInvalid(cert_file, key_file, "a file cannot be read");
  }
  auto keys = std::make_shared<MetricsHttpServer::TlsKeys>();
  BIO* certs =
      BIO_new_mem_buf(cert_pem->data(), static_cast<int>(cert_pem->size()));
  keys->cert = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
  keys->chain = sk_X509_new_null();
  while (keys->cert != nullptr) {
    X509* more = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
    if (more == nullptr) break;
    sk_X509_push(keys->chain, more);
  }
  BIO_free(certs);
  BIO* key =
      BIO_new_mem_buf(key_pem->data(), static_cast<int>(key_pem->size()));
  keys->key = PEM_read_bio_PrivateKey(key, nullptr, nullptr, nullptr);
  BIO_free(key);
  ERR_clear_error();  // the end of the chain reads as an error
  if (keys->cert == nullptr) {
    return TlsFilesInvalid(cert_file, key_file, "no PEM certificate");
  }
  if (keys->key == nullptr) {
    return TlsFilesInvalid(cert_file, key_file, "no PEM private key");
  }
  if (X509_check_private_key(keys->cert, keys->key) != 1) {
    ERR_clear_error();
    return TlsFilesInvalid(cert_file, key_file,
                           "the key is not the certificate's");
  }
  return std::shared_ptr<const MetricsHttpServer::TlsKeys>(std::move(keys));
}

// What the file watch compares: inode, size and mtime of each file.
std::string FilesSignature(const std::string& a, const std::string& b) {
  std::string out;
  for (const std::string* path : {&a, &b}) {
    struct stat st {};
    if (stat(path->c_str(), &st) != 0) {
      absl::StrAppend(&out, "missing;");
      continue;
    }
    absl::StrAppend(&out, st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec,
                    ".", st.st_mtim.tv_nsec, ";");
  }
  return out;
}

}  // namespace

std::shared_ptr<const MetricsHttpServer::TlsKeys>
MetricsHttpServer::CurrentKeys() const {
  absl::MutexLock lock(&tls_mu_);
  return tls_keys_;
}

absl::Status MetricsHttpServer::ReloadTls() {
  if (tls_cert_file_.empty()) return absl::OkStatus();
  return LoadTls(FilesSignature(tls_cert_file_, tls_key_file_));
}

absl::Status MetricsHttpServer::LoadTls(const std::string& signature) {
  absl::StatusOr<std::shared_ptr<const TlsKeys>> keys =
      LoadTlsKeys(tls_cert_file_, tls_key_file_);
  absl::MutexLock lock(&tls_mu_);
  // Tried once per change: a half-written pair fails now and is tried
  // again when the rest of it lands (the files change again).
  tls_files_read_ = signature;
  if (!keys.ok()) {
    std::cerr << "hubd: the console listener keeps its certificate: "
              << keys.status().message() << "\n";
    return keys.status();
  }
  tls_keys_ = std::move(*keys);
  ++tls_loads_;
  return absl::OkStatus();
}

int64_t MetricsHttpServer::tls_loads() const {
  absl::MutexLock lock(&tls_mu_);
  return tls_loads_;
}

void MetricsHttpServer::WatchTlsFiles(absl::Duration interval) {
  // Compared with what the last load read, not with what this thread saw
  // when it started: a pair swapped before its first look is still a change.
  while (!stop_watch_.WaitForNotificationWithTimeout(interval)) {
    const std::string now = FilesSignature(tls_cert_file_, tls_key_file_);
    {
      absl::MutexLock lock(&tls_mu_);
      if (now == tls_files_read_) continue;
    }
    LoadTls(now).IgnoreError();  // reported on stderr; the old pair stays
  }
}

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
    server->tls_cert_file_ = options.tls_cert_file;
    server->tls_key_file_ = options.tls_key_file;
    if (absl::Status s = server->ReloadTls(); !s.ok()) return s;
    // Each handshake takes the pair loaded last (a reload swaps it), set on
    // the connection's own SSL: the shared context is never written after
    // the listener starts.
    SSL_CTX_set_cert_cb(
        tls->ssl_context(),
        [](SSL* ssl, void* arg) -> int {
          std::shared_ptr<const TlsKeys> keys =
              static_cast<MetricsHttpServer*>(arg)->CurrentKeys();
          if (keys == nullptr) return 1;  // the context's own
          return SSL_use_cert_and_key(ssl, keys->cert, keys->key, keys->chain,
                                      /*override=*/1);
        },
        server.get());
    server->http_ = std::move(tls);
  } else {
    server->http_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& http = *server->http_;
  // A response goes out as its headers, then its body: without TCP_NODELAY
  // the body waited for the client's delayed ACK, 40 ms on about half the
  // console's requests (measured 2026-12-02, commit 6fbeaf2; the run is in
  // git history of docs/BENCHMARKS.md).
  http.set_tcp_nodelay(true);
  http.set_keep_alive_timeout(
      std::max<time_t>(1, absl::ToInt64Seconds(options.keep_alive_timeout)));
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
  if (!server->tls_cert_file_.empty() &&
      options.tls_poll_interval > absl::ZeroDuration()) {
    server->watch_thread_ =
        std::thread([raw, interval = options.tls_poll_interval] {
          pthread_setname_np(pthread_self(), "hub-http-tls");
          raw->WatchTlsFiles(interval);
        });
  }
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  stop_watch_.Notify();
  if (watch_thread_.joinable()) watch_thread_.join();
  // stop() only takes effect once the listener runs.
  while (thread_.joinable() && !finished_ && !http_->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hub
