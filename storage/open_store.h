// Opens the database a hub serves, whichever engine its name picks: a
// SQLite file path, or a PostgreSQL URL (postgres:// or postgresql://).
// The one place above the engines that names them; hubd and the tools open
// a database through it.
#ifndef HUB_STORAGE_OPEN_STORE_H_
#define HUB_STORAGE_OPEN_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/store.h"

namespace hub::storage {

// What an acknowledged write survives.
enum class Durability {
  // A power loss: SQLite syncs the WAL at every commit (synchronous=FULL),
  // PostgreSQL waits for its WAL flush (synchronous_commit=on).
  kPowerLoss,
  // A crash of the process, not of the machine (NORMAL; off).
  kProcessCrash,
};

struct OpenStoreOptions {
  // A SQLite file path (its directory is created) or a PostgreSQL URL.
  std::string database;
  Durability durability = Durability::kPowerLoss;
  // This hub's instance id: its seat in a shared PostgreSQL database, and
  // what SQLite's lock file names.
  std::string hub_id;
  // What SQLite's lock file says of the process besides its id.
  std::string program;
  std::string address;
  // PostgreSQL: a transaction idle longer than this is ended by the server
  // (0: never); shorter than the membership lease, so a stalled hub cannot
  // hold rows past the time its seat is taken over.
  absl::Duration idle_in_transaction_timeout = absl::ZeroDuration();
  // Activation ids; default UUIDv7.
  std::function<std::string()> new_id;
  // Wall clock in ms; default the system clock.
  std::function<int64_t()> now_ms;
  // Told about every group commit (metrics); default nothing.
  std::function<void(int ops, absl::Duration took)> on_group_committed;
};

// Where the database names the process that holds it: SQLite's lock file.
class DatabaseHolderNote {
 public:
  virtual ~DatabaseHolderNote() = default;
  // Rewrites the address the note gives (once the bound port is known).
  virtual absl::Status SetAddress(absl::string_view address) = 0;
};

struct OpenedStore {
  std::unique_ptr<Store> store;
  // SQLite: the database's lock, held while the hub runs; PostgreSQL, which
  // several hubs share: null. Release it after the store is closed.
  std::unique_ptr<DatabaseHolderNote> holder;
};

// Whether `database` is a PostgreSQL URL.
bool IsPostgresUrl(absl::string_view database);

// INVALID_ARGUMENT / DATABASE_URL_UNSUPPORTED (metadata scheme) for a URL of
// any other scheme: taking "mysql://..." as a path would create a directory
// "mysql:" and serve an empty database in it. The message names only the
// scheme, since the rest of a URL may carry a password.
absl::Status CheckDatabaseName(absl::string_view database);

// Opens and migrates the database. SQLite: creates its directory and takes
// its lock (DATABASE_LOCKED, naming the holder) before anything writes to
// the file. Every failure names the database (a URL without its password).
absl::StatusOr<OpenedStore> OpenStore(const OpenStoreOptions& options);

}  // namespace hub::storage

#endif  // HUB_STORAGE_OPEN_STORE_H_
