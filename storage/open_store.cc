#include "storage/open_store.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/pg/pg_store.h"
#include "storage/sqlite/database_lock.h"
#include "storage/sqlite/sqlite_store.h"

namespace hub::storage {
namespace {

// The lock file's holder details.
DatabaseHolder HolderOf(const OpenStoreOptions& options,
                        absl::string_view address) {
  DatabaseHolder holder;
  holder.program = options.program;
  holder.address = std::string(address);
  holder.hub_instance_id = options.hub_id;
  return holder;
}

class LockFileNote final : public DatabaseHolderNote {
 public:
  LockFileNote(std::unique_ptr<DatabaseLock> lock, OpenStoreOptions options)
      : lock_(std::move(lock)), options_(std::move(options)) {}
  absl::Status SetAddress(absl::string_view address) override {
    return lock_->UpdateHolder(HolderOf(options_, address));
  }

 private:
  const std::unique_ptr<DatabaseLock> lock_;
  const OpenStoreOptions options_;
};

// Connects to a PostgreSQL database and migrates it. Several hubs may
// share it: no lock file; every failure names the database without its
// password.
absl::StatusOr<OpenedStore> OpenPostgres(const OpenStoreOptions& options) {
  pg::PostgresStoreOptions store_options;
  store_options.conninfo = options.database;
  store_options.hub_id = options.hub_id;
  store_options.idle_in_transaction_timeout_ms =
      absl::ToInt64Milliseconds(options.idle_in_transaction_timeout);
  store_options.synchronous_commit =
      options.durability == Durability::kPowerLoss ? "on" : "off";
  store_options.new_id = options.new_id;
  store_options.now_ms = options.now_ms;
  store_options.on_group_committed = options.on_group_committed;
  absl::StatusOr<std::unique_ptr<pg::PostgresStore>> store =
      pg::PostgresStore::Open(store_options);
  if (!store.ok()) {
    absl::StatusOr<std::string> named = pg::RedactedConnInfo(options.database);
    return ReasonError(
        store.status().code(),
        ReasonOf(store.status()).empty() ? "STORE_UNAVAILABLE"
                                         : ReasonOf(store.status()),
        absl::StrCat("database ", named.ok() ? *named : "(unparsable URL)",
                     " is unusable: ", store.status().message()));
  }
  OpenedStore opened;
  opened.store = std::move(*store);
  return opened;
}

// Creates the database's directory, takes the database's lock (before
// anything, migrations and recovery included, writes to the file), then
// opens and migrates it. Every failure names the file.
absl::StatusOr<OpenedStore> OpenSqlite(const OpenStoreOptions& options) {
  auto unusable = [&options](const absl::Status& cause) {
    return ReasonError(
        cause.code(),
        ReasonOf(cause).empty() ? "STORE_UNAVAILABLE" : ReasonOf(cause),
        absl::StrCat("database ", options.database,
                     " is unusable: ", cause.message()));
  };
  std::error_code error;
  const std::filesystem::path parent =
      std::filesystem::path(options.database).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (error) {
    return unusable(
        UnavailableError("STORE_UNAVAILABLE",
                         absl::StrCat("cannot create directory ",
                                      parent.string(), ": ", error.message())));
  }
  absl::StatusOr<std::unique_ptr<DatabaseLock>> locked = DatabaseLock::Acquire(
      options.database, HolderOf(options, options.address));
  if (!locked.ok()) {
    // Already a whole sentence naming the database and its holder.
    if (ReasonOf(locked.status()) == "DATABASE_LOCKED") return locked.status();
    return unusable(locked.status());
  }
  SqliteStoreOptions store_options;
  store_options.path = options.database;
  store_options.synchronous = options.durability == Durability::kPowerLoss
                                  ? SqliteStoreOptions::Synchronous::kFull
                                  : SqliteStoreOptions::Synchronous::kNormal;
  store_options.new_id = options.new_id;
  store_options.now_ms = options.now_ms;
  store_options.on_group_committed = options.on_group_committed;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(store_options);
  if (!store.ok()) return unusable(store.status());
  OpenedStore opened;
  opened.store = std::move(*store);
  opened.holder = std::make_unique<LockFileNote>(std::move(*locked), options);
  return opened;
}

}  // namespace

bool IsPostgresUrl(absl::string_view database) {
  return absl::StartsWith(database, "postgres://") ||
         absl::StartsWith(database, "postgresql://");
}

absl::Status CheckDatabaseName(absl::string_view database) {
  if (IsPostgresUrl(database)) return absl::OkStatus();
  const size_t colon = database.find(':');
  if (colon == absl::string_view::npos || colon == 0) return absl::OkStatus();
  const absl::string_view scheme = database.substr(0, colon);
  const bool scheme_like =
      absl::ascii_isalpha(scheme[0]) &&
      std::all_of(scheme.begin(), scheme.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '+' || c == '-' || c == '.';
      });
  const bool file_uri = absl::EqualsIgnoreCase(scheme, "file");
  if (!scheme_like ||
      (!file_uri && !absl::StartsWith(database.substr(colon + 1), "//"))) {
    return absl::OkStatus();
  }
  return WithMetadata(
      InvalidArgumentError(
          "DATABASE_URL_UNSUPPORTED",
          absl::StrCat(
              "the database must be a SQLite file path, relative or absolute "
              "(e.g. var/hub.sqlite or /var/lib/hub/hub.sqlite), or a "
              "PostgreSQL URL (postgresql://...): hubd serves no '",
              scheme, ":' databases",
              file_uri ? "; give the path without the file: prefix" : "")),
      "scheme", scheme);
}

absl::StatusOr<OpenedStore> OpenStore(const OpenStoreOptions& options) {
  if (absl::Status s = CheckDatabaseName(options.database); !s.ok()) return s;
  return IsPostgresUrl(options.database) ? OpenPostgres(options)
                                         : OpenSqlite(options);
}

}  // namespace hub::storage
