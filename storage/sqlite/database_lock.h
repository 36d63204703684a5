// DatabaseLock: makes one process at a time the writer of a SQLite database
// file. hubd keeps leases, streams and indexes in memory as if it were the
// only writer, so a second hubd on the same file must not start.
//
// The lock is an flock(2) on a file beside the database, "<db>.lock", held
// for as long as the DatabaseLock lives. The kernel releases it when the
// holder's last descriptor closes, so a holder that dies (even by SIGKILL)
// never leaves a stale lock: the file may stay, the lock does not. The file
// records who holds it (pid, address, hub_instance_id) so that a refused
// start can name the holder. Not responsible for the database itself, and
// not a lock across machines (flock over NFS is not reliable).
#ifndef HUB_STORAGE_SQLITE_DATABASE_LOCK_H_
#define HUB_STORAGE_SQLITE_DATABASE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hub::storage {

// Who holds a database. Every field may be empty (e.g. a holder that has not
// written its details yet).
struct DatabaseHolder {
  std::string program;  // "hubd", "hubctl", ...
  std::string pid;
  std::string address;  // where the holder serves, if it does
  std::string hub_instance_id;
};

class DatabaseLock {
 public:
  // "<db_path>.lock".
  static std::string LockPathFor(absl::string_view db_path);

  // Takes the lock on `db_path` without waiting and records `self` (its pid
  // filled in) in the lock file. The database's directory must exist.
  // FAILED_PRECONDITION / DATABASE_LOCKED, naming the database and the
  // holder, when another open lock (another process, or another
  // DatabaseLock in this one) holds it; UNAVAILABLE / STORE_UNAVAILABLE when
  // the lock file cannot be opened.
  static absl::StatusOr<std::unique_ptr<DatabaseLock>> Acquire(
      absl::string_view db_path, DatabaseHolder self);

  // Releases the lock. The lock file stays: removing it would let a process
  // that opened the old file and one that creates a new one both "hold" it.
  ~DatabaseLock();
  DatabaseLock(const DatabaseLock&) = delete;
  DatabaseLock& operator=(const DatabaseLock&) = delete;

  // Replaces the recorded holder details (e.g. once the address is bound).
  absl::Status UpdateHolder(DatabaseHolder self);

  const std::string& lock_path() const { return lock_path_; }

  // The holder recorded in a lock file's text (unknown keys are ignored).
  static DatabaseHolder ParseHolder(absl::string_view text);

 private:
  DatabaseLock(std::string lock_path, int fd)
      : lock_path_(std::move(lock_path)), fd_(fd) {}

  const std::string lock_path_;
  const int fd_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_SQLITE_DATABASE_LOCK_H_
