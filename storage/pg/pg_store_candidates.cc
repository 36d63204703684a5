// PostgresStore: role candidates (TRIFLUX-HUB.md §5.6) and closed lead
// scopes (hub_closed_scopes). A candidate upsert is one statement that
// merges in SQL against the row it conflicts with, so two hubs upserting
// the same candidate each keep the other's fields; a probe result locks its
// candidate row. Closing a scope takes the scope's advisory locks, then the
// role row, then its candidates and messages: the order every other write
// here follows, so hubs wait for one another and never deadlock.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/pg/pg_message_sql.h"
#include "storage/pg/pg_role_rows.h"
#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_store.h"
#include "storage/role_updates.h"

namespace hub::storage::pg {

// ---- closed scopes: locks and checks ---------------------------------------

namespace {

// Transaction-scoped advisory locks on a 64-bit hash of a key text; a
// collision only makes two scopes wait for each other.
absl::Status AdvisoryLock(Connection& conn, const std::string& key,
                          bool exclusive) {
  absl::StatusOr<Result> r = conn.Run(
      exclusive
          ? "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"
          : "SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))",
      {P(key)});
  return r.status();
}

}  // namespace

std::string ScopeWireKey(absl::string_view wire) {
  return absl::StrCat("hub.scope-wire:", wire);
}

absl::Status LockScopeWire(Connection& conn, absl::string_view wire,
                           bool exclusive) {
  return AdvisoryLock(conn, ScopeWireKey(wire), exclusive);
}

absl::StatusOr<std::optional<RoleRecord>> LockScopeAndLoadRole(
    Connection& conn, absl::string_view wire) {
  // `(SELECT true FROM l)` references no column of the row: a constant
  // filter, which the executor checks once before the scan starts
  // (a `One-Time Filter`; pg_plans_test checks the lock with no row, under
  // generic and custom plans).
  absl::StatusOr<Result> r = conn.Run(
      "WITH l AS MATERIALIZED (SELECT "
      "pg_advisory_xact_lock_shared(hashtextextended($2, 0))) "
      "SELECT " HUB_ROLE_COLUMNS
      " FROM role_registry WHERE role_key_wire = $1 "
      "AND (SELECT true FROM l) FOR UPDATE",
      {P(wire), P(ScopeWireKey(wire))});
  if (!r.ok()) return r.status();
  return ReadOne<RoleRecord>(*r, ReadRole);
}

absl::StatusOr<std::optional<ClosedScopeRecord>> LoadClosedScope(
    Connection& conn, absl::string_view wire, absl::string_view project_id,
    absl::string_view scope_id) {
  absl::StatusOr<Result> r = conn.Run(
      "SELECT " HUB_CLOSED_SCOPE_COLUMNS
      " FROM hub_closed_scopes "
      "WHERE role_key_wire = $1 OR (project_id = $2 AND scope_id = $3) "
      "LIMIT 1",
      {P(wire), P(project_id), P(scope_id)});
  if (!r.ok()) return r.status();
  return ReadOne<ClosedScopeRecord>(*r, ReadClosedScope);
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

namespace {

constexpr char kClosedScopesPageSql[] =
    "SELECT " HUB_CLOSED_SCOPE_COLUMNS
    " FROM hub_closed_scopes "
    "WHERE role_key_wire COLLATE \"C\" > $3 "
    "AND ($1::text IS NULL OR project_id = $1) "
    "AND ($2::text IS NULL OR scope_id = $2) "
    "AND ($4::text[] IS NULL OR project_id = ANY($4::text[])) "
    "ORDER BY role_key_wire COLLATE \"C\" LIMIT $5::bigint";

// The scope's pending messages, expired or not, locked in id order (the
// order of any other writer's message locks); the caller sorts them.
constexpr char kScopeBacklogForUpdateSql[] =
    "SELECT " HUB_MESSAGE_COLUMNS
    " FROM messages WHERE role_key_wire = $1 "
    "AND status IN ('queued', 'delivered') "
    "ORDER BY id COLLATE \"C\" FOR UPDATE";

// Delivery order: priority DESC, created ASC, id ASC (bytes).
bool DeliveredBefore(const MessageRecord& a, const MessageRecord& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.created_at_ms != b.created_at_ms) {
    return a.created_at_ms < b.created_at_ms;
  }
  return a.id < b.id;
}

// Moves `m` to dead_letter unless its status changed, with a dead letter
// row first-writer-wins. nullopt: the fence was lost; else whether the dead
// letter row is this call's.
absl::StatusOr<std::optional<bool>> DeadLetterIfStatus(
    Connection& conn, const MessageRecord& m, int64_t now_ms,
    const std::string& last_error) {
  absl::StatusOr<Result> claim = conn.Run(
      "UPDATE messages SET status = 'dead_letter' "
      "WHERE id = $1 AND status = $2",
      {P(m.id), P(m.status)});
  if (!claim.ok()) return claim.status();
  if (claim->changed() != 1) return std::optional<bool>();
  absl::StatusOr<Result> dlq = conn.Run(
      "INSERT INTO dead_letters (message_id, reason, failed_at_ms, "
      "last_error) VALUES ($1, $2, $3, $4) "
      "ON CONFLICT (message_id) DO NOTHING",
      {P(m.id), P(kScopeClosedReason), P(now_ms), P(last_error)});
  if (!dlq.ok()) return dlq.status();
  return std::optional<bool>(dlq->changed() == 1);
}

// Dead-letters every pending message of the scope's wire.
absl::StatusOr<std::vector<ClaimedMessage>> DeadLetterBacklog(
    Connection& conn, const ScopeClose& c) {
  absl::StatusOr<Result> pending =
      conn.Run(kScopeBacklogForUpdateSql, {P(c.role_key_wire)});
  if (!pending.ok()) return pending.status();
  std::vector<MessageRecord> messages =
      ReadAll<MessageRecord>(*pending, ReadMessage);
  std::sort(messages.begin(), messages.end(), DeliveredBefore);
  const std::string last_error = roles::ScopeClosedLastError(c);
  std::vector<ClaimedMessage> claimed;
  for (MessageRecord& m : messages) {
    absl::StatusOr<std::optional<bool>> inserted =
        DeadLetterIfStatus(conn, m, c.now_ms, last_error);
    if (!inserted.ok()) return inserted.status();
    if (!inserted->has_value()) continue;  // fence lost (locked: cannot)
    claimed.push_back(
        roles::ScopeClosedClaim(std::move(m), c.now_ms, **inserted));
  }
  // No longer pending: their unacked rows stop counting in their inboxes
  // (the writer keeps the counts; the messages are locked).
  std::vector<std::string> ids;
  ids.reserve(claimed.size());
  for (const ClaimedMessage& m : claimed) ids.push_back(m.message.id);
  if (absl::Status s = SettleRowsOf(conn, ids); !s.ok()) return s;
  return claimed;
}

absl::StatusOr<ScopeCloseResult> CloseScopeIn(Connection& conn,
                                              const ScopeClose& c) {
  if (absl::Status s = LockScopeWire(conn, c.role_key_wire, true); !s.ok()) {
    return s;
  }
  ScopeCloseResult result;
  absl::StatusOr<std::optional<ClosedScopeRecord>> earlier =
      LoadClosedScope(conn, c.role_key_wire, c.project_id, c.scope_id);
  if (!earlier.ok()) return earlier.status();
  if (earlier->has_value()) {
    result.closed = std::move(**earlier);
    result.already_closed = true;
    return result;
  }
  // The role row (locked first), then its candidates, deleted explicitly
  // so the count does not depend on the foreign key's cascade.
  absl::StatusOr<std::optional<RoleRecord>> role =
      LoadRole(conn, c.role_key_wire, RowLock::kUpdate);
  if (!role.ok()) return role.status();
  absl::StatusOr<Result> candidates =
      conn.Run("DELETE FROM role_candidates WHERE role_key_wire = $1",
               {P(c.role_key_wire)});
  if (!candidates.ok()) return candidates.status();
  result.candidates_removed = candidates->changed();
  if (role->has_value()) {
    absl::StatusOr<Result> removed =
        conn.Run("DELETE FROM role_registry WHERE role_key_wire = $1",
                 {P(c.role_key_wire)});
    if (!removed.ok()) return removed.status();
    result.removed_role = std::move(*role);
  }
  absl::StatusOr<std::vector<ClaimedMessage>> claimed =
      DeadLetterBacklog(conn, c);
  if (!claimed.ok()) return claimed.status();
  result.dead_lettered = std::move(*claimed);

  // The record, last, so it carries the count. The scope's locks keep any
  // other close out, so the insert meets no conflict.
  result.closed = roles::ClosedScopeOf(
      c, static_cast<int64_t>(result.dead_lettered.size()));
  absl::StatusOr<Result> insert = conn.Run(
      "INSERT INTO hub_closed_scopes (project_id, scope_id, role_key_wire, "
      "closed_at_ms, closed_by, reason, dead_lettered_count) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7)",
      {P(c.project_id), P(c.scope_id), P(c.role_key_wire), P(c.now_ms),
       P(c.closed_by), P(c.reason), P(*result.closed.dead_lettered_count)});
  if (!insert.ok()) return insert.status();
  return result;
}

}  // namespace

absl::StatusOr<ScopeCloseResult> PostgresStore::CloseLeadScope(
    const ScopeClose& close) {
  return Write<ScopeCloseResult>(
      [&](Connection& conn) { return CloseScopeIn(conn, close); });
}

absl::StatusOr<std::optional<ClosedScopeRecord>> PostgresStore::GetClosedScope(
    absl::string_view wire) {
  using Record = std::optional<ClosedScopeRecord>;
  return Read<Record>([&](Connection& conn) -> absl::StatusOr<Record> {
    return LoadClosedScope(conn, wire);
  });
}

absl::StatusOr<std::vector<ClosedScopeRecord>> PostgresStore::ListClosedScopes(
    const ClosedScopeFilter& f) {
  using Rows = std::vector<ClosedScopeRecord>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r =
        conn.Run(kClosedScopesPageSql,
                 {P(f.project_id), P(f.scope_id), P(f.after_wire.value_or("")),
                  OptTextArray(f.projects), f.limit > 0 ? P(f.limit) : Null()});
    if (!r.ok()) return r.status();
    return ReadAll<ClosedScopeRecord>(*r, ReadClosedScope);
  });
}

// ---- candidates
// --------------------------------------------------------------

namespace {

constexpr char kCandidateColumns[] =
    "c.role_key_wire, c.agent_id, c.source, c.priority, "
    "c.transport_locators_json, c.consecutive_probe_failures, "
    "c.excluded_until_ms, c.last_probe_ms, c.last_probe_code, "
    "c.updated_at_ms";

// The activator's order after a key ($2 priority, $3 updated_at_ms, $4
// agent_id): priority DESC, updated_at_ms DESC, agent_id ASC (bytes).
#define HUB_PG_CANDIDATE_AFTER                                      \
  "(c.priority < $2 OR (c.priority = $2 AND (c.updated_at_ms < $3 " \
  "OR (c.updated_at_ms = $3 AND c.agent_id COLLATE \"C\" > $4))))"

// Every role's candidates, by wire, then the activator's order.
const std::string& CandidatesPageSql() {
  static const std::string* sql = new std::string(absl::StrCat(
      "SELECT ", kCandidateColumns,
      " FROM role_candidates c "
      "JOIN role_registry r ON r.role_key_wire = c.role_key_wire "
      "WHERE c.role_key_wire COLLATE \"C\" >= $1 "
      "AND (c.role_key_wire COLLATE \"C\" > $1 OR " HUB_PG_CANDIDATE_AFTER
      ") AND ($5::text IS NULL OR c.agent_id = $5) "
      "AND ($6::text[] IS NULL OR r.project_id = ANY($6::text[])) "
      "ORDER BY c.role_key_wire COLLATE \"C\", c.priority DESC, "
      "c.updated_at_ms DESC, c.agent_id COLLATE \"C\" LIMIT $7::bigint"));
  return *sql;
}

// One role's candidates.
const std::string& RoleCandidatesPageSql() {
  static const std::string* sql = new std::string(absl::StrCat(
      "SELECT ", kCandidateColumns,
      " FROM role_candidates c "
      "WHERE c.role_key_wire = $1 AND " HUB_PG_CANDIDATE_AFTER
      " AND ($5::text IS NULL OR c.agent_id = $5) "
      "AND ($6::text[] IS NULL OR EXISTS (SELECT 1 FROM role_registry r "
      "WHERE r.role_key_wire = c.role_key_wire "
      "AND r.project_id = ANY($6::text[]))) "
      "ORDER BY c.priority DESC, c.updated_at_ms DESC, "
      "c.agent_id COLLATE \"C\" LIMIT $7::bigint"));
  return *sql;
}

#undef HUB_PG_CANDIDATE_AFTER

// The §5.6 merge in one statement: the insert's values are the upsert's
// fields over the column defaults; on conflict each field given ($11-$14
// true) or patched ($15-$17 false: not keep) replaces the stored value,
// which PostgreSQL reads after any concurrent writer of the row committed.
constexpr char kUpsertCandidateSql[] =
    "INSERT INTO role_candidates (" HUB_CANDIDATE_COLUMNS
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
    "ON CONFLICT (role_key_wire, agent_id) DO UPDATE SET "
    "source = CASE WHEN $11::boolean THEN excluded.source "
    "ELSE role_candidates.source END, "
    "priority = CASE WHEN $12::boolean THEN excluded.priority "
    "ELSE role_candidates.priority END, "
    "transport_locators_json = CASE WHEN $13::boolean "
    "THEN excluded.transport_locators_json "
    "ELSE role_candidates.transport_locators_json END, "
    "consecutive_probe_failures = CASE WHEN $14::boolean "
    "THEN excluded.consecutive_probe_failures "
    "ELSE role_candidates.consecutive_probe_failures END, "
    "excluded_until_ms = CASE WHEN $15::boolean "
    "THEN role_candidates.excluded_until_ms "
    "ELSE excluded.excluded_until_ms END, "
    "last_probe_ms = CASE WHEN $16::boolean "
    "THEN role_candidates.last_probe_ms ELSE excluded.last_probe_ms END, "
    "last_probe_code = CASE WHEN $17::boolean "
    "THEN role_candidates.last_probe_code ELSE excluded.last_probe_code END, "
    "updated_at_ms = excluded.updated_at_ms "
    "RETURNING " HUB_CANDIDATE_COLUMNS;

template <typename T>
Param PatchValue(const Patch<T>& p) {
  return p.set() ? P(p.value()) : Null();
}

absl::Status CandidateNotFound(absl::string_view wire,
                               absl::string_view agent_id) {
  return NotFoundError("CANDIDATE_NOT_FOUND",
                       absl::StrCat("candidate '", agent_id, "' of role '",
                                    wire, "' not found"));
}

absl::StatusOr<CandidateRecord> UpsertIn(Connection& conn,
                                         const CandidateUpsert& u) {
  // The role row stays until this commits, so a scope close (or a delete)
  // waits for the candidate and then removes it too. FOR UPDATE, not
  // FOR SHARE: a later reservation of the same group then needs no upgrade
  // (two hubs upgrading a shared lock deadlock).
  if (absl::Status s = LockScopeWire(conn, u.role_key_wire, false); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<RoleRecord>> role =
      LoadRole(conn, u.role_key_wire, RowLock::kUpdate);
  if (!role.ok()) return role.status();
  if (!role->has_value()) {
    if (absl::Status s = RefuseClosedScope(conn, u.role_key_wire); !s.ok()) {
      return s;
    }
    return NotFoundError(
        "ROLE_NOT_FOUND",
        absl::StrCat("role '", u.role_key_wire, "' not found for candidate"));
  }
  absl::StatusOr<Result> r = conn.Run(
      kUpsertCandidateSql,
      {P(u.role_key_wire), P(u.agent_id), P(u.source.value_or("operator")),
       P(u.priority.value_or(0)), P(u.transport_locators_json.value_or("[]")),
       P(u.consecutive_probe_failures.value_or(0)),
       PatchValue(u.excluded_until_ms), PatchValue(u.last_probe_ms),
       PatchValue(u.last_probe_code), P(u.now_ms), P(u.source.has_value()),
       P(u.priority.has_value()), P(u.transport_locators_json.has_value()),
       P(u.consecutive_probe_failures.has_value()),
       P(u.excluded_until_ms.keep()), P(u.last_probe_ms.keep()),
       P(u.last_probe_code.keep())});
  if (!r.ok()) return r.status();
  std::optional<CandidateRecord> row =
      ReadOne<CandidateRecord>(*r, ReadCandidate);
  if (!row.has_value()) return CandidateNotFound(u.role_key_wire, u.agent_id);
  return std::move(*row);
}

absl::StatusOr<CandidateRecord> ReachabilityIn(Connection& conn,
                                               const ReachabilityUpdate& u) {
  if (absl::Status s = LockScopeWire(conn, u.role_key_wire, false); !s.ok()) {
    return s;
  }
  absl::StatusOr<Result> current = conn.Run(
      "SELECT " HUB_CANDIDATE_COLUMNS
      " FROM role_candidates WHERE role_key_wire = $1 AND agent_id = $2 "
      "FOR UPDATE",
      {P(u.role_key_wire), P(u.agent_id)});
  if (!current.ok()) return current.status();
  std::optional<CandidateRecord> c =
      ReadOne<CandidateRecord>(*current, ReadCandidate);
  if (!c.has_value()) {
    if (absl::Status s = RefuseClosedScope(conn, u.role_key_wire); !s.ok()) {
      return s;
    }
    return CandidateNotFound(u.role_key_wire, u.agent_id);
  }
  roles::ApplyReachability(u, &*c);
  absl::StatusOr<Result> r = conn.Run(
      "UPDATE role_candidates SET consecutive_probe_failures = $3, "
      "excluded_until_ms = $4, last_probe_ms = $5, last_probe_code = $6 "
      "WHERE role_key_wire = $1 AND agent_id = $2 "
      "RETURNING " HUB_CANDIDATE_COLUMNS,
      {P(c->role_key_wire), P(c->agent_id), P(c->consecutive_probe_failures),
       P(c->excluded_until_ms), P(c->last_probe_ms), P(c->last_probe_code)});
  if (!r.ok()) return r.status();
  std::optional<CandidateRecord> row =
      ReadOne<CandidateRecord>(*r, ReadCandidate);
  if (!row.has_value()) return CandidateNotFound(u.role_key_wire, u.agent_id);
  return std::move(*row);
}

}  // namespace

absl::StatusOr<bool> PostgresStore::DeleteCandidate(
    absl::string_view wire, absl::string_view agent_id) {
  const std::string w(wire);
  const std::string a(agent_id);
  return Write<bool>([&w, &a](Connection& conn) -> absl::StatusOr<bool> {
    absl::StatusOr<Result> r = conn.Run(
        "DELETE FROM role_candidates WHERE role_key_wire = $1 "
        "AND agent_id = $2",
        {P(w), P(a)});
    if (!r.ok()) return r.status();
    return r->changed() > 0;
  });
}

absl::StatusOr<CandidateRecord> PostgresStore::UpsertCandidate(
    const CandidateUpsert& upsert) {
  return Write<CandidateRecord>(
      [&](Connection& conn) { return UpsertIn(conn, upsert); });
}

absl::StatusOr<CandidateRecord> PostgresStore::UpdateCandidateReachability(
    const ReachabilityUpdate& update) {
  return Write<CandidateRecord>(
      [&](Connection& conn) { return ReachabilityIn(conn, update); });
}

absl::StatusOr<std::vector<CandidateRecord>> PostgresStore::ListCandidates(
    absl::string_view wire) {
  using Rows = std::vector<CandidateRecord>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r = conn.Run(
        "SELECT " HUB_CANDIDATE_COLUMNS
        " FROM role_candidates WHERE role_key_wire = $1 "
        "ORDER BY priority DESC, updated_at_ms DESC, agent_id COLLATE \"C\"",
        {P(wire)});
    if (!r.ok()) return r.status();
    return ReadAll<CandidateRecord>(*r, ReadCandidate);
  });
}

absl::StatusOr<std::vector<CandidateRecord>>
PostgresStore::ListCandidatesOfRoles(const std::vector<std::string>& wires) {
  using Rows = std::vector<CandidateRecord>;
  if (wires.empty()) return Rows();
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r = conn.Run(
        "SELECT " HUB_CANDIDATE_COLUMNS
        " FROM role_candidates WHERE role_key_wire = ANY($1::text[]) "
        "ORDER BY array_position($1::text[], role_key_wire), priority DESC, "
        "updated_at_ms DESC, agent_id COLLATE \"C\"",
        {TextArray(wires)});
    if (!r.ok()) return r.status();
    return ReadAll<CandidateRecord>(*r, ReadCandidate);
  });
}

absl::StatusOr<std::vector<CandidateRecord>> PostgresStore::ListCandidatesPage(
    const CandidatePageQuery& q) {
  using Rows = std::vector<CandidateRecord>;
  const std::optional<CandidatePageQuery::Key> start =
      roles::CandidatePageStart(q);
  if (!start.has_value()) return Rows();
  const CandidatePageQuery::Key& from = *start;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r =
        conn.Run(q.role_key_wire.has_value() ? RoleCandidatesPageSql()
                                             : CandidatesPageSql(),
                 {P(from.role_key_wire), P(from.priority),
                  P(from.updated_at_ms), P(from.agent_id), P(q.agent_id),
                  OptTextArray(q.projects), q.limit > 0 ? P(q.limit) : Null()});
    if (!r.ok()) return r.status();
    return ReadAll<CandidateRecord>(*r, ReadCandidate);
  });
}

}  // namespace hub::storage::pg
