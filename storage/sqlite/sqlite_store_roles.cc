// SqliteStore: role registry (TRIFLUX-HUB.md §5.3-§5.5, §5.7).
//
// Every role update goes through one statement, kUpdateRoleIfFence, whose
// WHERE clause carries the full fence (version, epoch, activation_seq,
// activation_id IS); callers check that it changed exactly one row. The new
// row is computed in C++ from the row read in the same transaction, so the
// same code is correct on a database shared by several hubs.
#include <utility>

#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/role_updates.h"
#include "storage/sqlite/sqlite_rows.h"
#include "storage/sqlite/sqlite_store.h"

namespace hub::storage {

namespace rows {

const char kRolesPageSql[] =
    "SELECT " HUB_ROLE_COLUMNS
    " FROM role_registry "
    "WHERE role_key_wire > ?5 "
    "AND (?1 IS NULL OR project_id = ?1) "
    "AND (?2 IS NULL OR role_kind = ?2) AND (?3 IS NULL OR scope_id = ?3) "
    "AND (?4 IS NULL OR state IN (SELECT value FROM json_each(?4))) "
    "AND (?6 IS NULL OR project_id IN (SELECT value FROM json_each(?6))) "
    "ORDER BY role_key_wire LIMIT ?7";

RoleRecord ReadRole(const Stmt& s) { return ReadRoleRow(s); }

absl::StatusOr<std::optional<RoleRecord>> LoadRole(Connection& conn,
                                                   absl::string_view wire) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "SELECT " HUB_ROLE_COLUMNS " FROM role_registry WHERE role_key_wire = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire);
  return ReadOne<RoleRecord>(*stmt, ReadRole);
}

}  // namespace rows

namespace {

using roles::RoleFence;

// Writes `next` (all mutable columns; version becomes version + 1) WHERE
// the row still matches `fence`. Returns the new row, or nullopt when the
// fence was lost.
absl::StatusOr<std::optional<RoleRecord>> UpdateRoleIfFence(
    Connection& conn, const RoleRecord& next, const RoleFence& fence) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "UPDATE role_registry SET state = ?1, holder_agent_id = ?2, "
      "previous_holder_agent_id = ?3, epoch = ?4, activation_seq = ?5, "
      "activation_id = ?6, activation_deadline_ms = ?7, "
      "holder_lease_expires_ms = ?8, charter_version = ?9, "
      "charter_acked_epoch = ?10, retry_count = ?11, next_probe_ms = ?12, "
      "blocked_reason = ?13, last_transition_ms = ?14, last_reason = ?15, "
      "version = version + 1 "
      "WHERE role_key_wire = ?16 AND version = ?17 AND epoch = ?18 "
      "AND activation_seq = ?19 AND activation_id IS ?20 "
      "RETURNING " HUB_ROLE_COLUMNS);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, RoleStateName(next.state))
      .Bind(2, next.holder_agent_id)
      .Bind(3, next.previous_holder_agent_id)
      .Bind(4, next.epoch)
      .Bind(5, next.activation_seq)
      .Bind(6, next.activation_id)
      .Bind(7, next.activation_deadline_ms)
      .Bind(8, next.holder_lease_expires_ms)
      .Bind(9, next.charter_version)
      .Bind(10, next.charter_acked_epoch)
      .Bind(11, next.retry_count)
      .Bind(12, next.next_probe_ms)
      .Bind(13, next.blocked_reason)
      .Bind(14, next.last_transition_ms)
      .Bind(15, absl::string_view(next.last_reason))
      .Bind(16, absl::string_view(next.role_key_wire))
      .Bind(17, fence.version)
      .Bind(18, fence.epoch)
      .Bind(19, fence.activation_seq)
      .Bind(20, fence.activation_id);
  return rows::ReadOne<RoleRecord>(*stmt, rows::ReadRole);
}

absl::Status InsertRole(Connection& conn, const RoleRecord& r) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "INSERT INTO role_registry (" HUB_ROLE_COLUMNS
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
      "?14, ?15, ?16, ?17, ?18, ?19, ?20)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(r.role_key_wire))
      .Bind(2, absl::string_view(r.project_id))
      .Bind(3, absl::string_view(r.role_kind))
      .Bind(4, absl::string_view(r.scope_id))
      .Bind(5, RoleStateName(r.state))
      .Bind(6, r.holder_agent_id)
      .Bind(7, r.previous_holder_agent_id)
      .Bind(8, r.epoch)
      .Bind(9, r.activation_seq)
      .Bind(10, r.activation_id)
      .Bind(11, r.activation_deadline_ms)
      .Bind(12, r.holder_lease_expires_ms)
      .Bind(13, r.charter_version)
      .Bind(14, r.charter_acked_epoch)
      .Bind(15, r.retry_count)
      .Bind(16, r.next_probe_ms)
      .Bind(17, r.blocked_reason)
      .Bind(18, r.last_transition_ms)
      .Bind(19, absl::string_view(r.last_reason))
      .Bind(20, r.version);
  return stmt->Run();
}

// After a lost fence: the reason, recomputed from the latest row.
absl::StatusOr<RoleWrite> ExplainLostFence(Connection& conn,
                                           absl::string_view wire,
                                           const RoleFence& fence) {
  absl::StatusOr<std::optional<RoleRecord>> latest = rows::LoadRole(conn, wire);
  if (!latest.ok()) return latest.status();
  return roles::Refused(roles::LostFenceOutcome(*latest, fence),
                        std::move(*latest));
}

absl::StatusOr<RoleWrite> ApplyFenced(Connection& conn, const RoleRecord& next,
                                      const RoleFence& fence) {
  absl::StatusOr<std::optional<RoleRecord>> updated =
      UpdateRoleIfFence(conn, next, fence);
  if (!updated.ok()) return updated.status();
  if (!updated->has_value()) {
    return ExplainLostFence(conn, next.role_key_wire, fence);
  }
  RoleWrite w;
  w.outcome = RoleOutcome::kApplied;
  w.role = std::move(*updated);
  return w;
}

}  // namespace

absl::StatusOr<RoleWrite> SqliteStore::ReserveIn(Connection& conn,
                                                 const RoleReservation& r) {
  // Inside the write: a scope closed after the caller's checks is refused
  // here, before anything is written.
  if (absl::Status s = rows::RefuseClosedScope(conn, r.role_key_wire,
                                               r.project_id, r.scope_id);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<RoleRecord>> current =
      rows::LoadRole(conn, r.role_key_wire);
  if (!current.ok()) return current.status();
  absl::StatusOr<roles::RolePlan> plan =
      roles::PlanReservation(*current, r, options_.new_id);
  if (!plan.ok()) return plan.status();
  if (plan->refused) return std::move(*plan->refused);
  if (plan->insert) {
    absl::Status s = InsertRole(conn, plan->next);
    if (!s.ok()) return s;
    absl::StatusOr<std::optional<RoleRecord>> inserted =
        rows::LoadRole(conn, r.role_key_wire);
    if (!inserted.ok()) return inserted.status();
    return roles::Refused(RoleOutcome::kApplied, std::move(*inserted));
  }
  return ApplyFenced(conn, plan->next, plan->fence);
}

absl::StatusOr<RoleWrite> SqliteStore::ReserveRole(const RoleReservation& r) {
  return Write<RoleWrite>([&](Connection& conn) { return ReserveIn(conn, r); });
}

absl::StatusOr<RoleWrite> SqliteStore::CasIn(Connection& conn,
                                             const RoleCas& cas) {
  absl::StatusOr<std::optional<RoleRecord>> current =
      rows::LoadRole(conn, cas.role_key_wire);
  if (!current.ok()) return current.status();
  absl::StatusOr<roles::RolePlan> plan = roles::PlanCas(*current, cas);
  if (!plan.ok()) return plan.status();
  if (plan->refused) {
    if (plan->refused->outcome == RoleOutcome::kNotFound) {
      if (absl::Status s = rows::RefuseClosedScope(conn, cas.role_key_wire);
          !s.ok()) {
        return s;
      }
    }
    return std::move(*plan->refused);
  }
  return ApplyFenced(conn, plan->next, plan->fence);
}

absl::StatusOr<RoleWrite> SqliteStore::CompareAndSetRole(const RoleCas& cas) {
  return Write<RoleWrite>([&](Connection& conn) { return CasIn(conn, cas); });
}

void SqliteStore::ReserveRoleAsync(const RoleReservation& r,
                                   Callback<RoleWrite> done) {
  WriteAsync<RoleWrite>(
      [this, r](Connection& conn) { return ReserveIn(conn, r); },
      std::move(done));
}

void SqliteStore::CompareAndSetRoleAsync(const RoleCas& cas,
                                         Callback<RoleWrite> done) {
  WriteAsync<RoleWrite>(
      [this, cas](Connection& conn) { return CasIn(conn, cas); },
      std::move(done));
}

absl::StatusOr<std::vector<RoleRecord>> SqliteStore::RecoverIn(Connection& conn,
                                                               int64_t now_ms) {
  absl::StatusOr<Stmt> all = conn.Prepare(
      "SELECT " HUB_ROLE_COLUMNS " FROM role_registry ORDER BY role_key_wire");
  if (!all.ok()) return all.status();
  absl::StatusOr<std::vector<RoleRecord>> rows_before =
      rows::ReadAll<RoleRecord>(*all, rows::ReadRole);
  if (!rows_before.ok()) return rows_before.status();
  std::vector<RoleRecord> recovered;
  for (const RoleRecord& cur : *rows_before) {
    std::optional<RoleRecord> next =
        roles::RecoveredRole(cur, now_ms, options_.new_id);
    if (!next.has_value()) continue;
    absl::StatusOr<RoleWrite> w = ApplyFenced(conn, *next, roles::FenceOf(cur));
    if (!w.ok()) return w.status();
    if (w->outcome == RoleOutcome::kApplied) recovered.push_back(*w->role);
  }
  return recovered;
}

absl::StatusOr<RecoveryResult> SqliteStore::RecoverRoles(int64_t now_ms) {
  return Write<RecoveryResult>(
      [&](Connection& conn) -> absl::StatusOr<RecoveryResult> {
        RecoveryResult result;
        absl::StatusOr<std::vector<RoleRecord>> recovered =
            RecoverIn(conn, now_ms);
        if (!recovered.ok()) return recovered.status();
        result.recovered = std::move(*recovered);
        absl::StatusOr<Stmt> all =
            conn.Prepare("SELECT " HUB_ROLE_COLUMNS
                         " FROM role_registry ORDER BY role_key_wire");
        if (!all.ok()) return all.status();
        absl::StatusOr<std::vector<RoleRecord>> roles =
            rows::ReadAll<RoleRecord>(*all, rows::ReadRole);
        if (!roles.ok()) return roles.status();
        result.roles = std::move(*roles);
        absl::StatusOr<std::vector<MessageRecord>> pending =
            rows::PendingRoleMessages(conn, std::nullopt, now_ms);
        if (!pending.ok()) return pending.status();
        result.pending_role_messages = std::move(*pending);
        return result;
      });
}

absl::StatusOr<RoleOutcome> SqliteStore::DeleteRole(absl::string_view wire) {
  return Write<RoleOutcome>(
      [&](Connection& conn) -> absl::StatusOr<RoleOutcome> {
        absl::StatusOr<Stmt> stmt =
            conn.Prepare("DELETE FROM role_registry WHERE role_key_wire = ?");
        if (!stmt.ok()) return stmt.status();
        stmt->Bind(1, wire);
        absl::Status s = stmt->Run();
        if (!s.ok()) return s;
        return conn.Changes() == 1 ? RoleOutcome::kApplied
                                   : RoleOutcome::kNotFound;
      });
}

absl::StatusOr<RoleRecord> SqliteStore::GetRole(absl::string_view wire) {
  return Read<RoleRecord>([&](Connection& conn) -> absl::StatusOr<RoleRecord> {
    absl::StatusOr<std::optional<RoleRecord>> row = rows::LoadRole(conn, wire);
    if (!row.ok()) return row.status();
    if (!row->has_value()) {
      return NotFoundError("ROLE_NOT_FOUND",
                           absl::StrCat("role '", wire, "' not found"));
    }
    return std::move(**row);
  });
}

absl::StatusOr<std::vector<RoleRecord>> SqliteStore::ListRoles(
    const RoleFilter& f) {
  using Result = std::vector<RoleRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    // `role_key_wire > ?5` always binds ("" from the start: every wire is
    // longer) so the primary key index drives the range and the order.
    absl::StatusOr<Stmt> stmt = conn.Prepare(rows::kRolesPageSql);
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, f.project_id).Bind(2, f.role_kind).Bind(3, f.scope_id);
    rows::BindList(*stmt, 4,
                   f.states.empty() ? std::nullopt
                                    : std::optional<std::vector<std::string>>(
                                          rows::StoredWords(f.states)));
    stmt->Bind(5, absl::string_view(f.after_wire ? *f.after_wire : ""));
    rows::BindList(*stmt, 6, f.projects);
    stmt->Bind(7, rows::SqlLimit(f.limit));
    return rows::ReadAll<RoleRecord>(*stmt, rows::ReadRole);
  });
}

absl::StatusOr<std::vector<RoleRecord>> SqliteStore::ListRolesWithExpiredHolder(
    int64_t now_ms) {
  using Result = std::vector<RoleRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    absl::StatusOr<Stmt> stmt = conn.Prepare(
        "SELECT " HUB_ROLE_COLUMNS
        " FROM role_registry "
        "WHERE holder_agent_id IS NOT NULL "
        "AND state IN ('elected-probing', 'active') "
        "AND (holder_lease_expires_ms IS NULL OR holder_lease_expires_ms <= ?) "
        "ORDER BY role_key_wire");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, now_ms);
    return rows::ReadAll<RoleRecord>(*stmt, rows::ReadRole);
  });
}

}  // namespace hub::storage
