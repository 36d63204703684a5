// Role rows and closed lead scopes on PostgreSQL: the reads and locks that
// pg_store_roles.cc and pg_store_candidates.cc share, and the closed-scope
// check every write that could bring a scope back makes inside its own
// transaction (a role-addressed message insert too). Internal to the
// PostgreSQL store; see docs/design/postgres.md, "Roles, candidates and
// closed scopes".
#ifndef HUB_STORAGE_PG_PG_ROLE_ROWS_H_
#define HUB_STORAGE_PG_PG_ROLE_ROWS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/pg/pg_conn.h"
#include "storage/store.h"

namespace hub::storage::pg {

// How a read locks the row it returns until the transaction ends.
enum class RowLock { kNone, kShare, kUpdate };

// The role row of `wire`, if any, locked as asked.
absl::StatusOr<std::optional<RoleRecord>> LoadRole(Connection& conn,
                                                   absl::string_view wire,
                                                   RowLock lock);

// A role's transaction-scoped advisory lock (by wire), which orders a lead
// scope's close against every write that could bring it back or touch its
// rows: CloseLeadScope takes it exclusively; ReserveRole,
// CompareAndSetRole, UpsertCandidate, UpdateCandidateReachability (and a
// role-addressed message insert) take it shared, before any row lock of
// the role and before the closed-scope check, so a close either committed
// before the check (and is seen by it) or waits until the write committed
// (and then removes its rows).
absl::Status LockScopeWire(Connection& conn, absl::string_view wire,
                           bool exclusive);
// The text LockScopeWire hashes into its advisory lock's key.
std::string ScopeWireKey(absl::string_view wire);
// LockScopeWire(conn, wire, false), then LoadRole(conn, wire,
// RowLock::kUpdate), in one statement (one round trip): the scope's lock is
// a filter the executor evaluates once before it reads the role's row, so
// it is taken first, and taken when there is no row.
absl::StatusOr<std::optional<RoleRecord>> LockScopeAndLoadRole(
    Connection& conn, absl::string_view wire);
// A CompareAndSetRole in one statement: LockScopeWire(conn, wire, false),
// then `cas.patch` applied (as roles::PlanCas would) by an UPDATE whose
// WHERE clause carries the whole fence the CAS expects; the updated row, or
// nullopt when no row of the wire matched that fence (the caller reads why).
// REQUIRES: the CAS names all four guards and a valid state, if any.
absl::StatusOr<std::optional<RoleRecord>> LockScopeAndCasRole(
    Connection& conn, const RoleCas& cas);

// The closed-scope record whose wire is `wire`, or whose project and scope
// are `project_id` and `scope_id` ("" matches by wire only).
absl::StatusOr<std::optional<ClosedScopeRecord>> LoadClosedScope(
    Connection& conn, absl::string_view wire, absl::string_view project_id = "",
    absl::string_view scope_id = "");
// ScopeClosedError when `wire` (or the project and scope) is closed.
absl::Status RefuseClosedScope(Connection& conn, absl::string_view wire,
                               absl::string_view project_id = "",
                               absl::string_view scope_id = "");

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_ROLE_ROWS_H_
