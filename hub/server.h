// HubServer: hubd's gRPC server, assembled once and shared by the binary and
// the in-process tests.
//
// It owns the services, the health service (SERVING while up) and server
// reflection, listens on one address and shuts down in order: health goes
// NOT_SERVING, new calls are refused, in-flight unary calls finish, streams
// are cancelled after a grace.
#ifndef HUB_HUB_SERVER_H_
#define HUB_HUB_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hub/hub_service.h"
#include "registry/clock.h"

namespace hub {

struct HubServerOptions {
  // host:port to listen on; port 0 picks a free port (see HubServer::port()).
  std::string listen = "127.0.0.1:27889";
  // SQLite database file; created (with its directory) when missing.
  std::string db_path = "var/hub.sqlite";
  // Time source; nullptr means the real clock. Must outlive the server.
  const Clock* clock = nullptr;
};

class HubServer {
 public:
  // Opens the database and starts serving. Fails with a clear status when
  // the address cannot be bound (UNAVAILABLE, reason LISTEN_FAILED) or the
  // database is unusable (the store's status).
  static absl::StatusOr<std::unique_ptr<HubServer>> Start(
      const HubServerOptions& options);

  ~HubServer();
  HubServer(const HubServer&) = delete;
  HubServer& operator=(const HubServer&) = delete;

  // The address actually bound, e.g. "127.0.0.1:41234".
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  const HubIdentity& identity() const { return identity_; }

  // Stops serving: in-flight calls get up to `grace` to finish, then are
  // cancelled. Idempotent; also done by the destructor.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  HubServer() = default;

  HubIdentity identity_;
  std::string address_;
  int port_ = 0;
  std::unique_ptr<HubServiceImpl> hub_service_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace hub

#endif  // HUB_HUB_SERVER_H_
