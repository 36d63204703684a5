// SqliteStore: closed lead scopes (hub_closed_scopes, hub_schema_version 3;
// dead_lettered_count since 4). Closing a scope is one transaction: the role
// row and its candidates, the scope's pending role messages, dead-lettered
// with reason ROLE_SCOPE_CLOSED, and the record. See docs/design/roles.md,
// "Closing a lead scope".
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/role_updates.h"
#include "storage/sqlite/sqlite_rows.h"
#include "storage/sqlite/sqlite_store.h"

namespace hub::storage {

namespace rows {

absl::StatusOr<std::optional<ClosedScopeRecord>> LoadClosedScope(
    Connection& conn, absl::string_view wire, absl::string_view project_id,
    absl::string_view scope_id) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "SELECT " HUB_CLOSED_SCOPE_COLUMNS
      " FROM hub_closed_scopes "
      "WHERE role_key_wire = ?1 OR (project_id = ?2 AND scope_id = ?3) "
      "LIMIT 1");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire).Bind(2, project_id).Bind(3, scope_id);
  return ReadOne<ClosedScopeRecord>(*stmt, ReadClosedScope);
}

const char kClosedScopesPageSql[] = "SELECT " HUB_CLOSED_SCOPE_COLUMNS
                                    " FROM hub_closed_scopes "
                                    "WHERE role_key_wire > ?3 "
                                    "AND (?1 IS NULL OR project_id = ?1) "
                                    "AND (?2 IS NULL OR scope_id = ?2) "
                                    "AND (?4 IS NULL OR project_id IN "
                                    "(SELECT value FROM json_each(?4))) "
                                    "ORDER BY role_key_wire LIMIT ?5";

ClosedScopeRecord ReadClosedScope(const Stmt& s) {
  return ReadClosedScopeRow(s);
}

absl::Status RefuseClosedScope(Connection& conn, absl::string_view wire,
                               absl::string_view project_id,
                               absl::string_view scope_id) {
  absl::StatusOr<std::optional<ClosedScopeRecord>> closed =
      LoadClosedScope(conn, wire, project_id, scope_id);
  if (!closed.ok()) return closed.status();
  if (closed->has_value()) return ScopeClosedError((*closed)->role_key_wire);
  return absl::OkStatus();
}

}  // namespace rows

absl::StatusOr<ScopeCloseResult> SqliteStore::CloseScopeIn(
    Connection& conn, const ScopeClose& c) {
  ScopeCloseResult result;
  absl::StatusOr<std::optional<ClosedScopeRecord>> earlier =
      rows::LoadClosedScope(conn, c.role_key_wire, c.project_id, c.scope_id);
  if (!earlier.ok()) return earlier.status();
  if (earlier->has_value()) {
    result.closed = std::move(**earlier);
    result.already_closed = true;
    return result;
  }
  // The role row and its candidates (deleted explicitly, so the count does
  // not depend on the foreign key's cascade).
  absl::StatusOr<std::optional<RoleRecord>> role =
      rows::LoadRole(conn, c.role_key_wire);
  if (!role.ok()) return role.status();
  absl::StatusOr<Stmt> candidates =
      conn.Prepare("DELETE FROM role_candidates WHERE role_key_wire = ?");
  if (!candidates.ok()) return candidates.status();
  candidates->Bind(1, c.role_key_wire);
  if (absl::Status s = candidates->Run(); !s.ok()) return s;
  result.candidates_removed = conn.Changes();
  if (role->has_value()) {
    absl::StatusOr<Stmt> remove =
        conn.Prepare("DELETE FROM role_registry WHERE role_key_wire = ?");
    if (!remove.ok()) return remove.status();
    remove->Bind(1, c.role_key_wire);
    if (absl::Status s = remove->Run(); !s.ok()) return s;
    result.removed_role = std::move(*role);
  }

  // Every pending message of the role, expired or not: none can be
  // delivered any more.
  absl::StatusOr<Stmt> pending = conn.Prepare(rows::kScopeBacklogSql);
  if (!pending.ok()) return pending.status();
  pending->Bind(1, c.role_key_wire);
  absl::StatusOr<std::vector<MessageRecord>> messages =
      rows::ReadAll<MessageRecord>(*pending, rows::ReadMessage);
  if (!messages.ok()) return messages.status();
  const std::optional<std::string> last_error = roles::ScopeClosedLastError(c);
  for (MessageRecord& m : *messages) {
    absl::StatusOr<std::optional<bool>> inserted = DeadLetterIfStatus(
        conn, m.id, m.status, kScopeClosedReason, c.now_ms, last_error);
    if (!inserted.ok()) return inserted.status();
    if (!inserted->has_value()) continue;  // fence lost (cannot happen here)
    result.dead_lettered.push_back(
        roles::ScopeClosedClaim(std::move(m), c.now_ms, **inserted));
  }

  // The record, last, so it carries the count (the order inside the
  // transaction is invisible to every other write).
  result.closed = roles::ClosedScopeOf(
      c, static_cast<int64_t>(result.dead_lettered.size()));
  absl::StatusOr<Stmt> insert = conn.Prepare(
      "INSERT INTO hub_closed_scopes (project_id, scope_id, role_key_wire, "
      "closed_at_ms, closed_by, reason, dead_lettered_count) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)");
  if (!insert.ok()) return insert.status();
  insert->Bind(1, c.project_id)
      .Bind(2, c.scope_id)
      .Bind(3, c.role_key_wire)
      .Bind(4, c.now_ms)
      .Bind(5, c.closed_by)
      .Bind(6, c.reason)
      .Bind(7, *result.closed.dead_lettered_count);
  if (absl::Status s = insert->Run(); !s.ok()) return s;
  return result;
}

absl::StatusOr<ScopeCloseResult> SqliteStore::CloseLeadScope(
    const ScopeClose& close) {
  return Write<ScopeCloseResult>(
      [&](Connection& conn) -> absl::StatusOr<ScopeCloseResult> {
        absl::StatusOr<ScopeCloseResult> result = CloseScopeIn(conn, close);
        // Claims may have adjusted the pending counts before a later
        // statement failed; the operation is rolled back, so drop them.
        if (!result.ok()) pending_.Clear();
        return result;
      });
}

absl::StatusOr<std::optional<ClosedScopeRecord>> SqliteStore::GetClosedScope(
    absl::string_view wire) {
  using Result = std::optional<ClosedScopeRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    return rows::LoadClosedScope(conn, wire);
  });
}

absl::StatusOr<std::vector<ClosedScopeRecord>> SqliteStore::ListClosedScopes(
    const ClosedScopeFilter& f) {
  using Result = std::vector<ClosedScopeRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    absl::StatusOr<Stmt> stmt = conn.Prepare(rows::kClosedScopesPageSql);
    if (!stmt.ok()) return stmt.status();
    // As ListRoles: the UNIQUE index on role_key_wire drives range and order.
    stmt->Bind(1, f.project_id).Bind(2, f.scope_id);
    stmt->Bind(3, absl::string_view(f.after_wire ? *f.after_wire : ""));
    rows::BindList(*stmt, 4, f.projects);
    stmt->Bind(5, rows::SqlLimit(f.limit));
    return rows::ReadAll<ClosedScopeRecord>(*stmt, rows::ReadClosedScope);
  });
}

}  // namespace hub::storage
