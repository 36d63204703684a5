// Column lists, queries and row readers shared by the SqliteStore source
// files. Internal to storage/ (its tests read the queries).
#ifndef HUB_STORAGE_SQLITE_SQLITE_ROWS_H_
#define HUB_STORAGE_SQLITE_SQLITE_ROWS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/record_rows.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/store.h"

namespace hub::storage::rows {

// The keyset page queries, shared with the tests that check their plans
// (EXPLAIN QUERY PLAN) so the plans checked are the ones run.
extern const char kAgentsPageSql[];          // AgentStore::ListAgentsPage
extern const char kRolesPageSql[];           // RoleStore::ListRoles
extern const char kClosedScopesPageSql[];    // RoleStore::ListClosedScopes
extern const char kCandidatesPageSql[];      // RoleStore::ListCandidatesPage
extern const char kRoleCandidatesPageSql[];  // ... of one role
extern const char kPendingPageSql[];         // MessageStore::ListPendingPage
extern const char kTracePageSql[];           // MessageStore::ListTraceMessages
extern const char kDeadLettersPageSql[];     // MessageStore::ListDeadLetters
// The expiry sweep's claim (§6.6). It runs on the writer every sweep, so it
// must be a range on idx_messages_expiry_pending, never a scan of every
// pending message.
extern const char kExpiredMessagesSql[];  // MessageStore::SweepExpiredMessages
// A role's pending backlog (?1 the wire, ?2 now), read when a holder becomes
// active: a range of idx_messages_role_pending, which holds pending role
// messages only. kAllRoleBacklogsSql (?1 now) is every role's, at start.
extern const char kRoleBacklogSql[];  // MessageStore::ListPendingRoleMessages
extern const char kAllRoleBacklogsSql[];  // RoleStore::RecoverRoles
// Every pending message of one role, expired or not (?1 the wire): what a
// lead scope's close dead-letters.
extern const char kScopeBacklogSql[];  // RoleStore::CloseLeadScope

AgentRecord ReadAgent(const Stmt& s);
RoleRecord ReadRole(const Stmt& s);
CandidateRecord ReadCandidate(const Stmt& s);
MessageRecord ReadMessage(const Stmt& s);
ClosedScopeRecord ReadClosedScope(const Stmt& s);

// `values` as a JSON array of strings, for `x IN (SELECT value FROM
// json_each(?))`: one cached statement whatever the list's length.
std::string JsonStringArray(const std::vector<std::string>& values);
// Binds JsonStringArray(*values), or NULL when `values` is unset.
void BindList(Stmt& stmt, int index,
              const std::optional<std::vector<std::string>>& values);
// A LIMIT value: `limit` when > 0, else -1 (SQLite: no limit).
inline int64_t SqlLimit(int64_t limit) { return limit > 0 ? limit : -1; }

// Runs a prepared statement and reads every row with `read`.
template <typename T, typename F>
absl::StatusOr<std::vector<T>> ReadAll(Stmt& stmt, F read) {
  std::vector<T> out;
  while (true) {
    absl::StatusOr<bool> row = stmt.Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.push_back(read(stmt));
  }
}

// Reads at most one row.
template <typename T, typename F>
absl::StatusOr<std::optional<T>> ReadOne(Stmt& stmt, F read) {
  absl::StatusOr<bool> row = stmt.Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<T>();
  return std::optional<T>(read(stmt));
}

absl::StatusOr<std::vector<MessageRecord>> PendingRoleMessages(
    Connection& conn, std::optional<std::string> wire, int64_t now_ms);

}  // namespace hub::storage::rows

#endif  // HUB_STORAGE_SQLITE_SQLITE_ROWS_H_
