// The Store: every durable thing in hub goes through it, by concern:
// agents() (storage/agent_store.h), roles() (role_store.h), messages()
// (message_store.h), reservations() (reservation_store.h), jobs()
// (job_store.h) and, where hubs
// share the database, membership() (membership.h).
//
// A Store persists agents, roles, role candidates, messages and
// reservations and offers the fenced primitives the registry decides
// authority with. It does not decide anything itself: no role
// transitions, no eligibility, no wire decoding (the caller passes decoded
// fields). Plain C++ types and absl::Status only; SQLite (sqlite_store.h)
// and PostgreSQL (pg/pg_store.h) implement it.
//
// Contracts shared by every method:
//  - Thread-safe. A write that returns (OK or a fence outcome) is committed
//    with the configured durability; a write that returns a storage error
//    changed nothing, except STORE_COMMIT_UNKNOWN: the connection to the
//    database broke while the write was committing and whether it committed
//    could not be learned (PostgreSQL; docs/design/postgres.md).
//  - A fenced write carries its fence in the SQL WHERE clause and checks the
//    changed-row count; losing the fence is an outcome value (with the latest
//    row), not a storage error, and changes nothing.
//  - Storage errors carry a reason (status/status.h): STORE_BUSY,
//    STORE_READ_ONLY, STORE_UNAVAILABLE, STORE_COMMIT_UNKNOWN (UNAVAILABLE);
//    STORE_FULL (RESOURCE_EXHAUSTED); STORE_CONSTRAINT (FAILED_PRECONDITION,
//    a row broke a schema constraint); STORE_CORRUPT, STORE_NOT_SQLITE,
//    SCHEMA_TOO_NEW, STORE_UNRECOGNIZED (FAILED_PRECONDITION, at open).
#ifndef HUB_STORAGE_STORE_H_
#define HUB_STORAGE_STORE_H_

#include <string>

#include "absl/status/status.h"
#include "storage/agent_store.h"
#include "storage/job_store.h"
#include "storage/membership.h"
#include "storage/message_store.h"
#include "storage/reservation_store.h"
#include "storage/role_store.h"
#include "storage/signals.h"
#include "storage/store_types.h"

namespace hub::storage {

// One database, seen by concern: each accessor answers the same object for
// the store's lifetime, and every concern's writes share the store's
// writer (one group commit, one durability setting).
class Store {
 public:
  virtual ~Store() = default;

  virtual AgentStore& agents() = 0;
  virtual RoleStore& roles() = 0;
  virtual MessageStore& messages() = 0;
  virtual ReservationStore& reservations() = 0;
  virtual JobStore& jobs() = 0;
  // The hubs sharing this database, or nullptr when one hub holds it
  // (SQLite: the lock file).
  virtual Membership* membership() { return nullptr; }
  // Hints between the hubs sharing this database (storage/signals.h), or
  // nullptr when one hub holds it.
  virtual Signals* signals() { return nullptr; }

  virtual StoreInfo Info() const = 0;
  // Group-commit counters (metrics).
  virtual WriteStats write_stats() const = 0;
  // Writes a consistent copy of the database, as of one moment, to `path`
  // (which must not exist), for AdminService.BackupStore. A store that
  // cannot (PostgreSQL: use its own tools) answers FAILED_PRECONDITION /
  // BACKUP_UNSUPPORTED.
  virtual absl::Status BackupTo(const std::string& path);
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_STORE_H_
