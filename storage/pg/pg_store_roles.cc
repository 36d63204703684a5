// PostgresStore: role registry (TRIFLUX-HUB.md §5.3-§5.5, §5.7).
//
// A reservation reads its row FOR UPDATE, decides the new row in C++
// (storage/role_updates.h, shared with SQLite) and writes it with one
// UPDATE whose WHERE clause carries the whole fence; the changed-row count
// decides the outcome. The lock makes the refusal reasons exact while other
// hubs write the same row; the fence alone would keep it correct. A
// compare-and-set names its whole fence itself, so it is that UPDATE alone,
// the patch applied in SQL; the row is read only to explain a refusal.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/pg/pg_role_rows.h"
#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_store.h"
#include "storage/role_updates.h"

namespace hub::storage::pg {

absl::StatusOr<std::optional<RoleRecord>> LoadRole(Connection& conn,
                                                   absl::string_view wire,
                                                   RowLock lock) {
  static constexpr const char* kSql[] = {
      "SELECT " HUB_ROLE_COLUMNS " FROM role_registry WHERE role_key_wire = $1",
      "SELECT " HUB_ROLE_COLUMNS
      " FROM role_registry WHERE role_key_wire = $1 FOR SHARE",
      "SELECT " HUB_ROLE_COLUMNS
      " FROM role_registry WHERE role_key_wire = $1 FOR UPDATE",
  };
  absl::StatusOr<Result> r = conn.Run(kSql[static_cast<int>(lock)], {P(wire)});
  if (!r.ok()) return r.status();
  return ReadOne<RoleRecord>(*r, ReadRole);
}

namespace {

// A patch of a column as (keep, value) parameters: Keep leaves the column,
// Set writes the value, Clear writes NULL, except in a NOT NULL column,
// which only Set changes (§5.4).
enum class Column { kNullable, kNotNull };
template <typename T>
void AddPatch(const Patch<T>& patch, std::vector<Param>& params,
              Column column = Column::kNullable) {
  params.push_back(
      P(column == Column::kNullable ? patch.keep() : !patch.set()));
  params.push_back(patch.set() ? P(patch.value()) : Param());
}

// LockScopeAndCasRole's statement: $1 the wire, $2 its scope lock's key,
// $3..$6 the fence, $7 last_transition_ms, then (keep, value) per patched
// column from $8 on, in the order of the SET list. One text for every
// patch, so a writer connection prepares it once. The lock is a filter on
// no column of the row: checked once, before the row is read or locked.
const std::string& CasRoleSql() {
  static const std::string* const sql = [] {
    constexpr const char* kColumns[][2] = {
        {"state", "text"},
        {"holder_agent_id", "text"},
        {"previous_holder_agent_id", "text"},
        {"activation_id", "text"},
        {"activation_deadline_ms", "bigint"},
        {"holder_lease_expires_ms", "bigint"},
        {"charter_version", "text"},
        {"charter_acked_epoch", "bigint"},
        {"retry_count", "bigint"},
        {"next_probe_ms", "bigint"},
        {"blocked_reason", "text"},
        {"last_reason", "text"},
    };
    std::string text =
        "WITH l AS MATERIALIZED (SELECT "
        "pg_advisory_xact_lock_shared(hashtextextended($2, 0))) "
        "UPDATE role_registry SET ";
    int n = 8;
    for (const auto& [column, type] : kColumns) {
      absl::StrAppend(&text, column, " = CASE WHEN $", n, "::boolean THEN ",
                      column, " ELSE $", n + 1, "::", type, " END, ");
      n += 2;
    }
    absl::StrAppend(&text,
                    "last_transition_ms = $7::bigint, version = version + 1 "
                    "WHERE role_key_wire = $1 AND version = $3::bigint "
                    "AND epoch = $4::bigint AND activation_seq = $5::bigint "
                    "AND activation_id IS NOT DISTINCT FROM $6::text "
                    "AND (SELECT true FROM l) RETURNING " HUB_ROLE_COLUMNS);
    return new std::string(std::move(text));
  }();
  return *sql;
}

Statement CasRoleStatement(const RoleCas& cas) {
  const RolePatch& p = cas.patch;
  std::vector<Param> params = {
      P(cas.role_key_wire),
      P(ScopeWireKey(cas.role_key_wire)),
      P(cas.expected_version.value_or(0)),
      P(cas.expected_epoch.value_or(0)),
      cas.expected_activation_seq ? P(*cas.expected_activation_seq) : Param(),
      cas.expected_activation_id ? P(*cas.expected_activation_id) : Param(),
      P(p.last_transition_ms.value_or(cas.now_ms))};
  params.reserve(params.size() + 24);
  AddPatch(p.state, params, Column::kNotNull);
  AddPatch(p.holder_agent_id, params);
  AddPatch(p.previous_holder_agent_id, params);
  AddPatch(p.activation_id, params);
  AddPatch(p.activation_deadline_ms, params);
  AddPatch(p.holder_lease_expires_ms, params);
  AddPatch(p.charter_version, params);
  AddPatch(p.charter_acked_epoch, params);
  AddPatch(p.retry_count, params, Column::kNotNull);
  AddPatch(p.next_probe_ms, params);
  AddPatch(p.blocked_reason, params);
  AddPatch(p.last_reason, params, Column::kNotNull);
  return Statement{CasRoleSql(), std::move(params)};
}

absl::StatusOr<std::optional<RoleRecord>> CasRoleRow(
    absl::StatusOr<Result> answer) {
  if (!answer.ok()) return answer.status();
  return ReadOne<RoleRecord>(*answer, ReadRole);
}

}  // namespace

absl::StatusOr<std::optional<RoleRecord>> LockScopeAndCasRole(
    Connection& conn, const RoleCas& cas) {
  Statement statement = CasRoleStatement(cas);
  return CasRoleRow(conn.Run(statement.sql, statement.params));
}

namespace {

using roles::RoleFence;

// Every role, by wire in byte order ("C" collation, whatever the
// database's), optionally locked: recovery locks them in this one order.
constexpr char kAllRolesSql[] = "SELECT " HUB_ROLE_COLUMNS
                                " FROM role_registry "
                                "ORDER BY role_key_wire COLLATE \"C\"";
constexpr char kAllRolesForUpdateSql[] =
    "SELECT " HUB_ROLE_COLUMNS
    " FROM role_registry ORDER BY role_key_wire COLLATE \"C\" FOR UPDATE";

// Every role's pending backlog (unexpired queued | delivered messages with
// a role wire), in delivery order.
constexpr char kAllRoleBacklogsSql[] =
    "SELECT " HUB_MESSAGE_COLUMNS
    " FROM messages "
    "WHERE role_key_wire IS NOT NULL "
    "AND status IN ('queued', 'delivered') AND expires_at_ms > $1 "
    "ORDER BY priority DESC, created_at_ms ASC, id COLLATE \"C\" ASC";

// Filters bind NULL for "any"; lists bind as text[]; LIMIT NULL is no limit.
constexpr char kRolesPageSql[] =
    "SELECT " HUB_ROLE_COLUMNS
    " FROM role_registry "
    "WHERE role_key_wire COLLATE \"C\" > $5 "
    "AND ($1::text IS NULL OR project_id = $1) "
    "AND ($2::text IS NULL OR role_kind = $2) "
    "AND ($3::text IS NULL OR scope_id = $3) "
    "AND ($4::text[] IS NULL OR state = ANY($4::text[])) "
    "AND ($6::text[] IS NULL OR project_id = ANY($6::text[])) "
    "ORDER BY role_key_wire COLLATE \"C\" LIMIT $7::bigint";

std::vector<Param> RoleColumns(const RoleRecord& r) {
  return {P(r.state),
          P(r.holder_agent_id),
          P(r.previous_holder_agent_id),
          P(r.epoch),
          P(r.activation_seq),
          P(r.activation_id),
          P(r.activation_deadline_ms),
          P(r.holder_lease_expires_ms),
          P(r.charter_version),
          P(r.charter_acked_epoch),
          P(r.retry_count),
          P(r.next_probe_ms),
          P(r.blocked_reason),
          P(r.last_transition_ms),
          P(r.last_reason)};
}

// Writes `next` (all mutable columns; version becomes version + 1) WHERE
// the row still matches `fence`. Returns the new row, or nullopt when the
// fence was lost.
absl::StatusOr<std::optional<RoleRecord>> UpdateRoleIfFence(
    Connection& conn, const RoleRecord& next, const RoleFence& fence) {
  std::vector<Param> params = RoleColumns(next);
  params.insert(params.end(),
                {P(next.role_key_wire), P(fence.version), P(fence.epoch),
                 P(fence.activation_seq), P(fence.activation_id)});
  absl::StatusOr<Result> r = conn.Run(
      "UPDATE role_registry SET state = $1, holder_agent_id = $2, "
      "previous_holder_agent_id = $3, epoch = $4, activation_seq = $5, "
      "activation_id = $6, activation_deadline_ms = $7, "
      "holder_lease_expires_ms = $8, charter_version = $9, "
      "charter_acked_epoch = $10, retry_count = $11, next_probe_ms = $12, "
      "blocked_reason = $13, last_transition_ms = $14, last_reason = $15, "
      "version = version + 1 "
      "WHERE role_key_wire = $16 AND version = $17 AND epoch = $18 "
      "AND activation_seq = $19 "
      "AND activation_id IS NOT DISTINCT FROM $20::text "
      "RETURNING " HUB_ROLE_COLUMNS,
      params);
  if (!r.ok()) return r.status();
  return ReadOne<RoleRecord>(*r, ReadRole);
}

// Inserts the first row of a role unless a row with its wire, or its
// project, kind and scope, exists (a statement that cannot fail on a race
// with another hub's first reservation). nullopt: such a row exists.
absl::StatusOr<std::optional<RoleRecord>> InsertRoleIfAbsent(
    Connection& conn, const RoleRecord& r) {
  std::vector<Param> params = {P(r.role_key_wire), P(r.project_id),
                               P(r.role_kind), P(r.scope_id)};
  std::vector<Param> columns = RoleColumns(r);
  params.insert(params.end(), columns.begin(), columns.end());
  params.push_back(P(r.version));
  absl::StatusOr<Result> result = conn.Run(
      "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
      "scope_id, state, holder_agent_id, previous_holder_agent_id, epoch, "
      "activation_seq, activation_id, activation_deadline_ms, "
      "holder_lease_expires_ms, charter_version, charter_acked_epoch, "
      "retry_count, next_probe_ms, blocked_reason, last_transition_ms, "
      "last_reason, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
      "$10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) "
      "ON CONFLICT DO NOTHING RETURNING " HUB_ROLE_COLUMNS,
      params);
  if (!result.ok()) return result.status();
  return ReadOne<RoleRecord>(*result, ReadRole);
}

absl::StatusOr<RoleWrite> ApplyFenced(Connection& conn, const RoleRecord& next,
                                      const RoleFence& fence) {
  absl::StatusOr<std::optional<RoleRecord>> updated =
      UpdateRoleIfFence(conn, next, fence);
  if (!updated.ok()) return updated.status();
  if (updated->has_value()) {
    return roles::Refused(RoleOutcome::kApplied, std::move(*updated));
  }
  // The fence was lost: the reason, recomputed from the latest row.
  absl::StatusOr<std::optional<RoleRecord>> latest =
      LoadRole(conn, next.role_key_wire, RowLock::kNone);
  if (!latest.ok()) return latest.status();
  return roles::Refused(roles::LostFenceOutcome(*latest, fence),
                        std::move(*latest));
}

absl::StatusOr<RoleWrite> ReserveIn(
    Connection& conn, const RoleReservation& r,
    const std::function<std::string()>& new_id) {
  // Inside the write, under the scope's lock (taken with the row's): a
  // scope closed after the caller's checks is refused here, before anything
  // is written.
  absl::StatusOr<std::optional<RoleRecord>> current =
      LockScopeAndLoadRole(conn, r.role_key_wire);
  if (!current.ok()) return current.status();
  if (absl::Status s =
          RefuseClosedScope(conn, r.role_key_wire, r.project_id, r.scope_id);
      !s.ok()) {
    return s;
  }
  // Twice at most: when another hub inserts the first row meanwhile, our
  // insert waits for its commit, does nothing, and the row is then read.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (attempt > 0) {
      current = LoadRole(conn, r.role_key_wire, RowLock::kUpdate);
      if (!current.ok()) return current.status();
    }
    absl::StatusOr<roles::RolePlan> plan =
        roles::PlanReservation(*current, r, new_id);
    if (!plan.ok()) return plan.status();
    if (plan->refused) return std::move(*plan->refused);
    if (!plan->insert) return ApplyFenced(conn, plan->next, plan->fence);
    absl::StatusOr<std::optional<RoleRecord>> inserted =
        InsertRoleIfAbsent(conn, plan->next);
    if (!inserted.ok()) return inserted.status();
    if (inserted->has_value()) {
      return roles::Refused(RoleOutcome::kApplied, std::move(*inserted));
    }
  }
  // No row of this wire, yet the insert conflicted: the project, kind and
  // scope belong to another wire (SQLite: a UNIQUE constraint failure).
  return FailedPreconditionError(
      "STORE_CONSTRAINT",
      absl::StrCat("UNIQUE constraint failed: role_registry.project_id, "
                   "role_kind, scope_id (role '",
                   r.role_key_wire, "')"));
}

// Whether `cas` can go straight to LockScopeAndCasRole: it names every
// guard (otherwise its refusal depends on the row, which PlanCas decides
// first).
bool CasInOneStatement(const RoleCas& cas) {
  return cas.expected_version && cas.expected_epoch &&
         cas.expected_activation_seq && cas.expected_activation_id;
}

// A CAS. `first`, when set, is the answer to CasRoleStatement(cas), already
// sent (CasInOneStatement(cas) holds).
absl::StatusOr<RoleWrite> CasIn(
    Connection& conn, const RoleCas& cas,
    std::optional<absl::StatusOr<Result>> first = std::nullopt) {
  const bool one_statement = first.has_value() || CasInOneStatement(cas);
  // The row PlanCas decides on: read FOR UPDATE first, or, when the one
  // statement changed nothing, read to say why.
  absl::StatusOr<std::optional<RoleRecord>> row;
  if (one_statement) {
    row = first.has_value() ? CasRoleRow(std::move(*first))
                            : LockScopeAndCasRole(conn, cas);
    if (!row.ok()) return row.status();
    if (row->has_value()) {
      return roles::Refused(RoleOutcome::kApplied, std::move(*row));
    }
    row = LoadRole(conn, cas.role_key_wire, RowLock::kNone);
  } else {
    row = LockScopeAndLoadRole(conn, cas.role_key_wire);
  }
  if (!row.ok()) return row.status();
  absl::StatusOr<roles::RolePlan> plan = roles::PlanCas(*row, cas);
  if (!plan.ok()) return plan.status();
  if (plan->refused) {
    if (plan->refused->outcome == RoleOutcome::kNotFound) {
      if (absl::Status s = RefuseClosedScope(conn, cas.role_key_wire);
          !s.ok()) {
        return s;
      }
    }
    return std::move(*plan->refused);
  }
  // A fence that matches the row read after the one statement refused it
  // was lost to a race in between.
  if (one_statement) {
    return roles::Refused(RoleOutcome::kCasConflict, std::move(*row));
  }
  return ApplyFenced(conn, plan->next, plan->fence);
}

absl::StatusOr<RecoveryResult> RecoverIn(
    Connection& conn, int64_t now_ms,
    const std::function<std::string()>& new_id) {
  RecoveryResult result;
  absl::StatusOr<Result> locked = conn.Run(kAllRolesForUpdateSql);
  if (!locked.ok()) return locked.status();
  for (const RoleRecord& cur : ReadAll<RoleRecord>(*locked, ReadRole)) {
    std::optional<RoleRecord> next = roles::RecoveredRole(cur, now_ms, new_id);
    if (!next.has_value()) continue;
    absl::StatusOr<RoleWrite> w = ApplyFenced(conn, *next, roles::FenceOf(cur));
    if (!w.ok()) return w.status();
    if (w->outcome == RoleOutcome::kApplied) {
      result.recovered.push_back(std::move(*w->role));
    }
  }
  absl::StatusOr<Result> all = conn.Run(kAllRolesSql);
  if (!all.ok()) return all.status();
  result.roles = ReadAll<RoleRecord>(*all, ReadRole);
  absl::StatusOr<Result> pending = conn.Run(kAllRoleBacklogsSql, {P(now_ms)});
  if (!pending.ok()) return pending.status();
  result.pending_role_messages = ReadAll<MessageRecord>(*pending, ReadMessage);
  return result;
}

}  // namespace

absl::StatusOr<RoleWrite> PostgresStore::ReserveRole(
    const RoleReservation& reservation) {
  return Write<RoleWrite>([&](Connection& conn) {
    return ReserveIn(conn, reservation, options_.new_id);
  });
}

absl::StatusOr<RoleWrite> PostgresStore::CompareAndSetRole(const RoleCas& cas) {
  return Write<RoleWrite>([&](Connection& conn) { return CasIn(conn, cas); });
}

void PostgresStore::ReserveRoleAsync(const RoleReservation& reservation,
                                     Callback<RoleWrite> done) {
  WriteAsync<RoleWrite>(
      [this, reservation](Connection& conn) {
        return ReserveIn(conn, reservation, options_.new_id);
      },
      std::move(done));
}

void PostgresStore::CompareAndSetRoleAsync(const RoleCas& cas,
                                           Callback<RoleWrite> done) {
  // A CAS that names its whole fence is its one statement (unless refused):
  // it goes ahead with its group's neighbours.
  if (CasInOneStatement(cas)) {
    WriteAsyncFirst<RoleWrite>(
        CasRoleStatement(cas),
        [cas](const Statement&, absl::StatusOr<Result> answer,
              Connection& conn) { return CasIn(conn, cas, std::move(answer)); },
        std::move(done));
    return;
  }
  WriteAsync<RoleWrite>([cas](Connection& conn) { return CasIn(conn, cas); },
                        std::move(done));
}

absl::StatusOr<RecoveryResult> PostgresStore::RecoverRoles(int64_t now_ms) {
  return Write<RecoveryResult>([&](Connection& conn) {
    return RecoverIn(conn, now_ms, options_.new_id);
  });
}

absl::StatusOr<RoleOutcome> PostgresStore::DeleteRole(absl::string_view wire) {
  const std::string w(wire);
  return Write<RoleOutcome>(
      [&w](Connection& conn) -> absl::StatusOr<RoleOutcome> {
        // Candidates go with it (ON DELETE CASCADE), after the role row:
        // the lock order of CloseLeadScope.
        absl::StatusOr<Result> r = conn.Run(
            "DELETE FROM role_registry WHERE role_key_wire = $1", {P(w)});
        if (!r.ok()) return r.status();
        return r->changed() == 1 ? RoleOutcome::kApplied
                                 : RoleOutcome::kNotFound;
      });
}

absl::StatusOr<RoleRecord> PostgresStore::GetRole(absl::string_view wire) {
  return Read<RoleRecord>([&](Connection& conn) -> absl::StatusOr<RoleRecord> {
    absl::StatusOr<std::optional<RoleRecord>> row =
        LoadRole(conn, wire, RowLock::kNone);
    if (!row.ok()) return row.status();
    if (!row->has_value()) {
      return NotFoundError("ROLE_NOT_FOUND",
                           absl::StrCat("role '", wire, "' not found"));
    }
    return std::move(**row);
  });
}

absl::StatusOr<std::vector<RoleRecord>> PostgresStore::ListRoles(
    const RoleFilter& f) {
  using Rows = std::vector<RoleRecord>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r = conn.Run(
        kRolesPageSql,
        {P(f.project_id), P(f.role_kind), P(f.scope_id),
         f.states.empty() ? Null() : P(TextArray(rows::StoredWords(f.states))),
         P(f.after_wire.value_or("")), OptTextArray(f.projects),
         f.limit > 0 ? P(f.limit) : Null()});
    if (!r.ok()) return r.status();
    return ReadAll<RoleRecord>(*r, ReadRole);
  });
}

absl::StatusOr<std::vector<RoleRecord>>
PostgresStore::ListRolesWithExpiredHolder(int64_t now_ms) {
  using Rows = std::vector<RoleRecord>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r =
        conn.Run("SELECT " HUB_ROLE_COLUMNS
                 " FROM role_registry "
                 "WHERE holder_agent_id IS NOT NULL "
                 "AND state IN ('elected-probing', 'active') "
                 "AND (holder_lease_expires_ms IS NULL "
                 "OR holder_lease_expires_ms <= $1) "
                 "ORDER BY role_key_wire COLLATE \"C\"",
                 {P(now_ms)});
    if (!r.ok()) return r.status();
    return ReadAll<RoleRecord>(*r, ReadRole);
  });
}

}  // namespace hub::storage::pg
