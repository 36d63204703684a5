// SqliteStore: role candidates (TRIFLUX-HUB.md §5.6). Absent fields keep
// the stored value; explicit clears write NULL.
#include <utility>

#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/role_updates.h"
#include "storage/sqlite/sqlite_rows.h"
#include "storage/sqlite/sqlite_store.h"

namespace hub::storage {

namespace rows {

// Every role's candidates: the primary key (role_key_wire, agent_id) gives
// the wire order and seeks to the page's first wire; each wire's rows are
// sorted into the activator's order ("TEMP B-TREE FOR RIGHT PART OF ORDER
// BY"), so a page costs at most the candidates of the roles it touches.
const char kCandidatesPageSql[] =
    "SELECT c.role_key_wire, c.agent_id, c.source, c.priority, "
    "c.transport_locators_json, c.consecutive_probe_failures, "
    "c.excluded_until_ms, c.last_probe_ms, c.last_probe_code, "
    "c.updated_at_ms "
    "FROM role_candidates c "
    "JOIN role_registry r ON r.role_key_wire = c.role_key_wire "
    "WHERE c.role_key_wire >= ?1 "
    "AND (c.role_key_wire > ?1 OR c.priority < ?2 OR (c.priority = ?2 "
    "AND (c.updated_at_ms < ?3 OR (c.updated_at_ms = ?3 "
    "AND c.agent_id > ?4)))) "
    "AND (?5 IS NULL OR c.agent_id = ?5) "
    "AND (?6 IS NULL OR r.project_id IN (SELECT value FROM json_each(?6))) "
    "ORDER BY c.role_key_wire, c.priority DESC, c.updated_at_ms DESC, "
    "c.agent_id LIMIT ?7";

// One role's candidates, found by the primary key's prefix and sorted.
const char kRoleCandidatesPageSql[] =
    "SELECT c.role_key_wire, c.agent_id, c.source, c.priority, "
    "c.transport_locators_json, c.consecutive_probe_failures, "
    "c.excluded_until_ms, c.last_probe_ms, c.last_probe_code, "
    "c.updated_at_ms "
    "FROM role_candidates c "
    "WHERE c.role_key_wire = ?1 "
    "AND (c.priority < ?2 OR (c.priority = ?2 "
    "AND (c.updated_at_ms < ?3 OR (c.updated_at_ms = ?3 "
    "AND c.agent_id > ?4)))) "
    "AND (?5 IS NULL OR c.agent_id = ?5) "
    "AND (?6 IS NULL OR EXISTS (SELECT 1 FROM role_registry r "
    "WHERE r.role_key_wire = c.role_key_wire "
    "AND r.project_id IN (SELECT value FROM json_each(?6)))) "
    "ORDER BY c.priority DESC, c.updated_at_ms DESC, c.agent_id LIMIT ?7";

CandidateRecord ReadCandidate(const Stmt& s) { return ReadCandidateRow(s); }

}  // namespace rows

// ---- candidates
// --------------------------------------------------------------

namespace {

absl::StatusOr<std::optional<CandidateRecord>> LoadCandidate(
    Connection& conn, absl::string_view wire, absl::string_view agent_id) {
  absl::StatusOr<Stmt> stmt =
      conn.Prepare("SELECT " HUB_CANDIDATE_COLUMNS
                   " FROM role_candidates "
                   "WHERE role_key_wire = ? AND agent_id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire).Bind(2, agent_id);
  return rows::ReadOne<CandidateRecord>(*stmt, rows::ReadCandidate);
}

absl::StatusOr<CandidateRecord> SaveCandidate(Connection& conn,
                                              const CandidateRecord& c) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "INSERT INTO role_candidates (" HUB_CANDIDATE_COLUMNS
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
      "ON CONFLICT(role_key_wire, agent_id) DO UPDATE SET "
      "source = excluded.source, priority = excluded.priority, "
      "transport_locators_json = excluded.transport_locators_json, "
      "consecutive_probe_failures = excluded.consecutive_probe_failures, "
      "excluded_until_ms = excluded.excluded_until_ms, "
      "last_probe_ms = excluded.last_probe_ms, "
      "last_probe_code = excluded.last_probe_code, "
      "updated_at_ms = excluded.updated_at_ms "
      "RETURNING " HUB_CANDIDATE_COLUMNS);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(c.role_key_wire))
      .Bind(2, absl::string_view(c.agent_id))
      .Bind(3, absl::string_view(c.source))
      .Bind(4, c.priority)
      .Bind(5, absl::string_view(c.transport_locators_json))
      .Bind(6, c.consecutive_probe_failures)
      .Bind(7, c.excluded_until_ms)
      .Bind(8, c.last_probe_ms)
      .Bind(9, c.last_probe_code)
      .Bind(10, c.updated_at_ms);
  absl::StatusOr<std::optional<CandidateRecord>> row =
      rows::ReadOne<CandidateRecord>(*stmt, rows::ReadCandidate);
  if (!row.ok()) return row.status();
  return std::move(**row);
}

}  // namespace

absl::StatusOr<bool> SqliteStore::DeleteCandidate(absl::string_view wire,
                                                  absl::string_view agent_id) {
  const std::string w(wire);
  const std::string a(agent_id);
  return Write<bool>([w, a](Connection& conn) -> absl::StatusOr<bool> {
    absl::StatusOr<Stmt> stmt = conn.Prepare(
        "DELETE FROM role_candidates WHERE role_key_wire = ?1 AND "
        "agent_id = ?2");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, absl::string_view(w)).Bind(2, absl::string_view(a));
    if (absl::Status s = stmt->Run(); !s.ok()) return s;
    return conn.Changes() > 0;
  });
}

absl::StatusOr<CandidateRecord> SqliteStore::UpsertCandidate(
    const CandidateUpsert& u) {
  return Write<CandidateRecord>(
      [&](Connection& conn) -> absl::StatusOr<CandidateRecord> {
        absl::StatusOr<std::optional<RoleRecord>> role =
            rows::LoadRole(conn, u.role_key_wire);
        if (!role.ok()) return role.status();
        if (!role->has_value()) {
          if (absl::Status s = rows::RefuseClosedScope(conn, u.role_key_wire);
              !s.ok()) {
            return s;
          }
          return NotFoundError("ROLE_NOT_FOUND",
                               absl::StrCat("role '", u.role_key_wire,
                                            "' not found for candidate"));
        }
        absl::StatusOr<std::optional<CandidateRecord>> current =
            LoadCandidate(conn, u.role_key_wire, u.agent_id);
        if (!current.ok()) return current.status();
        CandidateRecord c;
        if (current->has_value()) {
          c = **current;
        } else {
          c.role_key_wire = u.role_key_wire;
          c.agent_id = u.agent_id;
          c.source = "operator";
        }
        if (u.source) c.source = *u.source;
        if (u.priority) c.priority = *u.priority;
        if (u.transport_locators_json) {
          c.transport_locators_json = *u.transport_locators_json;
        }
        if (u.consecutive_probe_failures) {
          c.consecutive_probe_failures = *u.consecutive_probe_failures;
        }
        c.excluded_until_ms = u.excluded_until_ms.ApplyTo(c.excluded_until_ms);
        c.last_probe_ms = u.last_probe_ms.ApplyTo(c.last_probe_ms);
        c.last_probe_code = u.last_probe_code.ApplyTo(c.last_probe_code);
        c.updated_at_ms = u.now_ms;
        return SaveCandidate(conn, c);
      });
}

absl::StatusOr<CandidateRecord> SqliteStore::UpdateCandidateReachability(
    const ReachabilityUpdate& u) {
  return Write<CandidateRecord>(
      [&](Connection& conn) -> absl::StatusOr<CandidateRecord> {
        absl::StatusOr<std::optional<CandidateRecord>> current =
            LoadCandidate(conn, u.role_key_wire, u.agent_id);
        if (!current.ok()) return current.status();
        if (!current->has_value()) {
          if (absl::Status s = rows::RefuseClosedScope(conn, u.role_key_wire);
              !s.ok()) {
            return s;
          }
          return NotFoundError(
              "CANDIDATE_NOT_FOUND",
              absl::StrCat("candidate '", u.agent_id, "' of role '",
                           u.role_key_wire, "' not found"));
        }
        CandidateRecord c = **current;
        roles::ApplyReachability(u, &c);
        return SaveCandidate(conn, c);
      });
}

absl::StatusOr<std::vector<CandidateRecord>> SqliteStore::ListCandidates(
    absl::string_view wire) {
  using Result = std::vector<CandidateRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    absl::StatusOr<Stmt> stmt = conn.Prepare(
        "SELECT " HUB_CANDIDATE_COLUMNS
        " FROM role_candidates "
        "WHERE role_key_wire = ? "
        "ORDER BY priority DESC, updated_at_ms DESC, agent_id ASC");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, wire);
    return rows::ReadAll<CandidateRecord>(*stmt, rows::ReadCandidate);
  });
}

absl::StatusOr<std::vector<CandidateRecord>> SqliteStore::ListCandidatesPage(
    const CandidatePageQuery& q) {
  using Result = std::vector<CandidateRecord>;
  const std::optional<CandidatePageQuery::Key> start =
      roles::CandidatePageStart(q);
  if (!start.has_value()) return Result();
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    absl::StatusOr<Stmt> stmt =
        conn.Prepare(q.role_key_wire.has_value() ? rows::kRoleCandidatesPageSql
                                                 : rows::kCandidatesPageSql);
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, absl::string_view(start->role_key_wire))
        .Bind(2, start->priority)
        .Bind(3, start->updated_at_ms)
        .Bind(4, absl::string_view(start->agent_id));
    stmt->Bind(5, q.agent_id);
    rows::BindList(*stmt, 6, q.projects);
    stmt->Bind(7, rows::SqlLimit(q.limit));
    return rows::ReadAll<CandidateRecord>(*stmt, rows::ReadCandidate);
  });
}

}  // namespace hub::storage
