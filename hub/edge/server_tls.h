// hubd's TLS credentials, reloadable without a restart (docs/design/auth.md,
// "Reloading certificates").
//
// gRPC 1.51 offers two certificate providers: static data (never reloads)
// and FileWatcherCertificateProvider, which re-reads a key, a certificate
// and a root bundle every N seconds and checks only that the files' mtimes
// did not change while it read them (not that the key matches the
// certificate). ServerTls therefore never points the watcher at the
// operator's files. It keeps a private, checked copy in a 0700 directory
// ("generations" gen-1, gen-2, ... behind a `live` symlink) and points the
// watcher at live/*.pem: Reload() (SIGHUP) reads and checks the configured
// files, writes a new generation with its own mtimes and swaps the symlink
// with one rename(), so the watcher sees either the whole old set or the
// whole new one. New connections use it after the watcher's next pass
// (within kRefreshSeconds); open connections keep theirs.
#ifndef HUB_HUB_EDGE_SERVER_TLS_H_
#define HUB_HUB_EDGE_SERVER_TLS_H_

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "hub/edge/auth.h"

namespace hub {

class ServerTls {
 public:
  // How often gRPC's watcher looks at the private copy.
  static constexpr unsigned kRefreshSeconds = 1;

  // Reads and checks the files (ReadTlsFiles) and publishes generation 1.
  // `tls.cert_file` must be set. The private directory is made under
  // $TMPDIR (default /tmp) and removed by the destructor.
  static absl::StatusOr<std::unique_ptr<ServerTls>> Create(TlsOptions tls);
  ~ServerTls();
  ServerTls(const ServerTls&) = delete;
  ServerTls& operator=(const ServerTls&) = delete;

  // TLS server credentials fed by the watcher (mutual TLS when a client CA
  // is configured).
  std::shared_ptr<grpc::ServerCredentials> credentials() const {
    return credentials_;
  }
  // Re-reads and checks the configured files and publishes them as the next
  // generation. On failure the previous certificates stay in force and the
  // error (naming the file) is returned and printed on stderr.
  absl::Status Reload();
  // Generations published so far (1 after Create).
  int64_t generation() const;
  // The private directory (tests).
  const std::string& directory() const { return dir_; }

 private:
  ServerTls(TlsOptions tls, std::string dir)
      : tls_(std::move(tls)), dir_(std::move(dir)) {}
  absl::Status Publish(const TlsFiles& files)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TlsOptions tls_;
  const std::string dir_;
  std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> provider_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  mutable absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hub

#endif  // HUB_HUB_EDGE_SERVER_TLS_H_
