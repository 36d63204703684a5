// A throw-away PostgreSQL 15 server for tests: initdb into a fresh
// directory under /tmp, listening only on a Unix socket in that directory
// (no TCP port to collide with), stopped and removed when destroyed. Tests
// never need a server someone started by hand.
//
// PostgreSQL refuses to run as root: when the test runs as root (CI, a
// developer's container), the server runs as the unprivileged `nobody`
// through setpriv, which needs the test to run outside Bazel's sandbox
// (tags = ["no-sandbox"]). Test only.
#ifndef HUB_STORAGE_PG_PG_TEST_SERVER_H_
#define HUB_STORAGE_PG_PG_TEST_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hub::storage::pg::testing {

struct PgTestOptions {
  // fsync and full-page writes off, for speed, unless a crash test needs
  // real durability.
  bool durable = false;
  // Extra `-c name=value` settings for the server.
  std::vector<std::string> settings;
};

class PgTestServer {
 public:
  static absl::StatusOr<std::unique_ptr<PgTestServer>> Create(
      const PgTestOptions& options = {});
  ~PgTestServer();
  PgTestServer(const PgTestServer&) = delete;
  PgTestServer& operator=(const PgTestServer&) = delete;

  // A libpq connection string for `database` as the superuser `hub`.
  std::string ConnInfo(const std::string& database = "postgres") const;
  // Creates an empty database (a fresh one per test).
  absl::Status CreateDatabase(const std::string& name);
  // Initializes and starts a server (Create), or stops it with `mode`
  // (smart, fast, immediate) and starts it again (Stop, Start).
  absl::Status Stop(const std::string& mode = "fast");
  absl::Status Start();
  const std::string& directory() const { return dir_; }

 private:
  PgTestServer(std::string dir, PgTestOptions options)
      : dir_(std::move(dir)), options_(std::move(options)) {}
  // Runs a PostgreSQL program as the server's user; its output on failure.
  absl::Status Run(const std::vector<std::string>& argv);

  const std::string dir_;
  const PgTestOptions options_;
  bool running_ = false;
};

}  // namespace hub::storage::pg::testing

#endif  // HUB_STORAGE_PG_PG_TEST_SERVER_H_
