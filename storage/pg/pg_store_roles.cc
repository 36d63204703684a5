// PostgresStore: roles. IN PROGRESS: placeholders to be replaced.
#include <utility>

#include "status/status.h"
#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_store.h"

namespace hub::storage::pg {
namespace {

absl::Status NotYet() {
  return ReasonError(absl::StatusCode::kUnimplemented, "NOT_YET",
                     "not implemented yet");
}

}  // namespace

absl::StatusOr<RoleWrite> PostgresStore::ReserveRole(
    const RoleReservation& reservation) {
  return NotYet();
}

absl::StatusOr<RoleWrite> PostgresStore::CompareAndSetRole(const RoleCas& cas) {
  return NotYet();
}

void PostgresStore::ReserveRoleAsync(const RoleReservation& reservation,
                                     Callback<RoleWrite> done) {
  std::move(done)(NotYet());
}

void PostgresStore::CompareAndSetRoleAsync(const RoleCas& cas,
                                           Callback<RoleWrite> done) {
  std::move(done)(NotYet());
}

absl::StatusOr<RecoveryResult> PostgresStore::RecoverRoles(int64_t now_ms) {
  return NotYet();
}

absl::StatusOr<RoleOutcome> PostgresStore::DeleteRole(absl::string_view wire) {
  return NotYet();
}

absl::StatusOr<RoleRecord> PostgresStore::GetRole(absl::string_view wire) {
  return NotYet();
}

absl::StatusOr<std::vector<RoleRecord>> PostgresStore::ListRoles(
    const RoleFilter& filter) {
  return NotYet();
}

absl::StatusOr<std::vector<RoleRecord>>
PostgresStore::ListRolesWithExpiredHolder(int64_t now_ms) {
  return NotYet();
}

}  // namespace hub::storage::pg
