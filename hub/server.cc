#include "hub/server.h"

#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <sqlite3.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "hub/store_identity.h"
#include "registry/status.h"
#include "registry/uuid.h"

namespace hub {
namespace {

// Creates the database's directory and checks that SQLite can open the file
// for writing and that it is sound. Writes nothing to an existing database.
// TODO(storage): replaced by the Store's own open once storage/ lands.
absl::Status CheckDatabase(const std::string& path) {
  std::error_code error;
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (error) {
    return UnavailableError(
        "STORE_UNAVAILABLE",
        absl::StrCat("database ", path,
                     " is unusable: cannot create directory ", parent.string(),
                     ": ", error.message()));
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  std::string problem;
  if (rc != SQLITE_OK) {
    problem = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  } else {
    sqlite3_stmt* stmt = nullptr;
    rc = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &stmt, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
    if (rc != SQLITE_ROW) {
      problem = sqlite3_errmsg(db);
    } else {
      const char* result =
          reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      if (result == nullptr || absl::string_view(result) != "ok") {
        problem = absl::StrCat("quick_check: ", result ? result : "(null)");
      }
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  if (!problem.empty()) {
    return UnavailableError(
        "STORE_UNAVAILABLE",
        absl::StrCat("database ", path, " is unusable: ", problem));
  }
  return absl::OkStatus();
}

// "host:port" with the port replaced by `port`.
std::string WithPort(absl::string_view listen, int port) {
  const size_t colon = listen.rfind(':');
  return absl::StrCat(listen.substr(0, colon), ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HubServer>> HubServer::Start(
    const HubServerOptions& options) {
  const Clock* clock =
      options.clock != nullptr ? options.clock : RealClock::Default();
  if (options.listen.rfind(':') == std::string::npos) {
    return InvalidArgumentError(
        "LISTEN_ADDRESS_INVALID",
        absl::StrCat("listen address must be host:port, got '", options.listen,
                     "'"));
  }
  absl::StatusOr<std::string> path = AbsoluteDatabasePath(options.db_path);
  if (!path.ok()) return path.status();
  if (absl::Status s = CheckDatabase(*path); !s.ok()) return s;

  std::unique_ptr<HubServer> server(new HubServer());
  UuidV7Generator ids(clock);
  server->identity_ = HubIdentity{ids.Next(), "sqlite", *path,
                                  SqliteStoreFingerprint(*path), clock->Now()};
  server->hub_service_ =
      std::make_unique<HubServiceImpl>(server->identity_, clock);

  // Both are process-wide switches read when a builder is created.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which would let a second hubd share
  // the port silently. One hub per address: turn it off.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->hub_service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    server->server_.reset();
    return UnavailableError("LISTEN_FAILED",
                            absl::StrCat("cannot listen on ", options.listen,
                                         " (address in use or not available)"));
  }
  server->address_ = WithPort(options.listen, server->port_);
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  return server;
}

HubServer::~HubServer() { Shutdown(absl::ZeroDuration()); }

void HubServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  server_->GetHealthCheckService()->Shutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
}

}  // namespace hub
