#include "storage/pg/pg_role_rows.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/pg/pg_message_sql.h"
#include "storage/pg/pg_rows.h"

namespace hub::storage::pg {
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

// CasStatement's text: $1 the wire, $2 its scope lock's key, $3..$6 the
// fence, $7 last_transition_ms, then (keep, value) per patched column from
// $8 on, in the order of the SET list. One text for every patch, so a
// writer connection prepares it once. The lock is a filter on no column of
// the row: checked once, before the row is read or locked.
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

// Every role, by wire in byte order, optionally locked.
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

// roles::CandidateMerge in one statement: on conflict each field kept
// ($11-$17 true) stays as stored, which PostgreSQL reads after any
// concurrent writer of the row committed.
constexpr char kMergeCandidateSql[] =
    "INSERT INTO role_candidates (" HUB_CANDIDATE_COLUMNS
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
    "ON CONFLICT (role_key_wire, agent_id) DO UPDATE SET "
    "source = CASE WHEN $11::boolean THEN role_candidates.source "
    "ELSE excluded.source END, "
    "priority = CASE WHEN $12::boolean THEN role_candidates.priority "
    "ELSE excluded.priority END, "
    "transport_locators_json = CASE WHEN $13::boolean "
    "THEN role_candidates.transport_locators_json "
    "ELSE excluded.transport_locators_json END, "
    "consecutive_probe_failures = CASE WHEN $14::boolean "
    "THEN role_candidates.consecutive_probe_failures "
    "ELSE excluded.consecutive_probe_failures END, "
    "excluded_until_ms = CASE WHEN $15::boolean "
    "THEN role_candidates.excluded_until_ms "
    "ELSE excluded.excluded_until_ms END, "
    "last_probe_ms = CASE WHEN $16::boolean "
    "THEN role_candidates.last_probe_ms ELSE excluded.last_probe_ms END, "
    "last_probe_code = CASE WHEN $17::boolean "
    "THEN role_candidates.last_probe_code ELSE excluded.last_probe_code END, "
    "updated_at_ms = excluded.updated_at_ms "
    "RETURNING " HUB_CANDIDATE_COLUMNS;

constexpr char kClosedScopesPageSql[] =
    "SELECT " HUB_CLOSED_SCOPE_COLUMNS
    " FROM hub_closed_scopes "
    "WHERE role_key_wire COLLATE \"C\" > $3 "
    "AND ($1::text IS NULL OR project_id = $1) "
    "AND ($2::text IS NULL OR scope_id = $2) "
    "AND ($4::text[] IS NULL OR project_id = ANY($4::text[])) "
    "ORDER BY role_key_wire COLLATE \"C\" LIMIT $5::bigint";

// The scope's pending messages, expired or not, locked in id order.
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

template <typename T>
absl::StatusOr<std::optional<T>> One(absl::StatusOr<Result> r,
                                     T (*read)(const Row&)) {
  if (!r.ok()) return r.status();
  return ReadOne<T>(*r, read);
}
template <typename T>
absl::StatusOr<std::vector<T>> Each(absl::StatusOr<Result> r,
                                    T (*read)(const Row&)) {
  if (!r.ok()) return r.status();
  return ReadAll<T>(*r, read);
}

}  // namespace

std::string ScopeWireKey(absl::string_view wire) {
  return absl::StrCat("hub.scope-wire:", wire);
}

// ---- the one-statement compare-and-set --------------------------------------

Statement PgRoleRows::CasStatement(const RoleCas& cas) {
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

CasAnswer PgRoleRows::CasedRole(absl::StatusOr<Result> answer) {
  return One<RoleRecord>(std::move(answer), ReadRole);
}

CasAnswer PgRoleRows::CasIfFence(const RoleCas& cas) {
  Statement statement = CasStatement(cas);
  return CasedRole(conn_.Run(statement.sql, statement.params));
}

// ---- locks and role_registry ------------------------------------------------

absl::Status PgRoleRows::LockScope(absl::string_view wire, bool exclusive) {
  return conn_
      .Run(exclusive
               ? "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"
               : "SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))",
           {P(ScopeWireKey(wire))})
      .status();
}

absl::StatusOr<std::optional<RoleRecord>> PgRoleRows::LockScopeAndLoad(
    absl::string_view wire) {
  // `(SELECT true FROM l)` references no column of the row: a constant
  // filter, which the executor checks once before the scan starts
  // (a `One-Time Filter`; pg_plans_test checks the lock with no row, under
  // generic and custom plans).
  return One<RoleRecord>(
      conn_.Run("WITH l AS MATERIALIZED (SELECT "
                "pg_advisory_xact_lock_shared(hashtextextended($2, 0))) "
                "SELECT " HUB_ROLE_COLUMNS
                " FROM role_registry WHERE role_key_wire = $1 "
                "AND (SELECT true FROM l) FOR UPDATE",
                {P(wire), P(ScopeWireKey(wire))}),
      ReadRole);
}

absl::StatusOr<std::optional<RoleRecord>> PgRoleRows::Load(
    absl::string_view wire, RowLock lock) {
  return One<RoleRecord>(
      conn_.Run(lock == RowLock::kUpdate
                    ? "SELECT " HUB_ROLE_COLUMNS
                      " FROM role_registry WHERE role_key_wire = $1 FOR UPDATE"
                    : "SELECT " HUB_ROLE_COLUMNS
                      " FROM role_registry WHERE role_key_wire = $1",
                {P(wire)}),
      ReadRole);
}

absl::StatusOr<std::optional<RoleRecord>> PgRoleRows::Insert(
    const RoleRecord& r) {
  std::vector<Param> params = {P(r.role_key_wire), P(r.project_id),
                               P(r.role_kind), P(r.scope_id)};
  std::vector<Param> columns = RoleColumns(r);
  params.insert(params.end(), columns.begin(), columns.end());
  params.push_back(P(r.version));
  return One<RoleRecord>(
      conn_.Run(
          "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
          "scope_id, state, holder_agent_id, previous_holder_agent_id, epoch, "
          "activation_seq, activation_id, activation_deadline_ms, "
          "holder_lease_expires_ms, charter_version, charter_acked_epoch, "
          "retry_count, next_probe_ms, blocked_reason, last_transition_ms, "
          "last_reason, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
          "$10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) "
          "ON CONFLICT DO NOTHING RETURNING " HUB_ROLE_COLUMNS,
          params),
      ReadRole);
}

absl::StatusOr<std::optional<RoleRecord>> PgRoleRows::UpdateIfFence(
    const RoleRecord& next, const roles::RoleFence& fence) {
  std::vector<Param> params = RoleColumns(next);
  params.insert(params.end(),
                {P(next.role_key_wire), P(fence.version), P(fence.epoch),
                 P(fence.activation_seq), P(fence.activation_id)});
  return One<RoleRecord>(
      conn_.Run(
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
          params),
      ReadRole);
}

absl::StatusOr<bool> PgRoleRows::Delete(absl::string_view wire) {
  absl::StatusOr<Result> r = conn_.Run(
      "DELETE FROM role_registry WHERE role_key_wire = $1", {P(wire)});
  if (!r.ok()) return r.status();
  return r->changed() == 1;
}

absl::StatusOr<std::vector<RoleRecord>> PgRoleRows::All(RowLock lock) {
  return Each<RoleRecord>(
      conn_.Run(lock == RowLock::kUpdate ? kAllRolesForUpdateSql
                                         : kAllRolesSql),
      ReadRole);
}

absl::StatusOr<std::vector<RoleRecord>> PgRoleRows::Page(const RoleFilter& f) {
  return Each<RoleRecord>(
      conn_.Run(kRolesPageSql,
                {P(f.project_id), P(f.role_kind), P(f.scope_id),
                 f.states.empty() ? Null()
                                  : P(TextArray(rows::StoredWords(f.states))),
                 P(f.after_wire.value_or("")), OptTextArray(f.projects),
                 f.limit > 0 ? P(f.limit) : Null()}),
      ReadRole);
}

absl::StatusOr<std::vector<RoleRecord>> PgRoleRows::WithExpiredHolder(
    int64_t now_ms) {
  return Each<RoleRecord>(
      conn_.Run("SELECT " HUB_ROLE_COLUMNS " FROM role_registry "
                "WHERE holder_agent_id IS NOT NULL "
                "AND state IN ('elected-probing', 'active') "
                "AND (holder_lease_expires_ms IS NULL "
                "OR holder_lease_expires_ms <= $1) "
                "ORDER BY role_key_wire COLLATE \"C\"",
                {P(now_ms)}),
      ReadRole);
}

absl::StatusOr<std::vector<MessageRecord>> PgRoleRows::Backlogs(
    int64_t now_ms) {
  return Each<MessageRecord>(conn_.Run(kAllRoleBacklogsSql, {P(now_ms)}),
                             ReadMessage);
}

// ---- role_candidates --------------------------------------------------------

absl::StatusOr<std::optional<CandidateRecord>> PgRoleRows::LoadCandidate(
    absl::string_view wire, absl::string_view agent_id, RowLock lock) {
  return One<CandidateRecord>(
      conn_.Run(lock == RowLock::kUpdate
                    ? "SELECT " HUB_CANDIDATE_COLUMNS
                      " FROM role_candidates WHERE role_key_wire = $1 "
                      "AND agent_id = $2 FOR UPDATE"
                    : "SELECT " HUB_CANDIDATE_COLUMNS
                      " FROM role_candidates WHERE role_key_wire = $1 "
                      "AND agent_id = $2",
                {P(wire), P(agent_id)}),
      ReadCandidate);
}

absl::StatusOr<std::optional<CandidateRecord>> PgRoleRows::MergeCandidate(
    const roles::CandidateMerge& m) {
  const CandidateRecord& c = m.insert;
  return One<CandidateRecord>(
      conn_.Run(kMergeCandidateSql,
                {P(c.role_key_wire), P(c.agent_id), P(c.source), P(c.priority),
                 P(c.transport_locators_json), P(c.consecutive_probe_failures),
                 P(c.excluded_until_ms), P(c.last_probe_ms),
                 P(c.last_probe_code), P(c.updated_at_ms), P(m.keep_source),
                 P(m.keep_priority), P(m.keep_transport_locators),
                 P(m.keep_probe_failures), P(m.keep_excluded_until),
                 P(m.keep_last_probe_ms), P(m.keep_last_probe_code)}),
      ReadCandidate);
}

absl::StatusOr<std::optional<CandidateRecord>> PgRoleRows::UpdateProbe(
    const CandidateRecord& c) {
  return One<CandidateRecord>(
      conn_.Run(
          "UPDATE role_candidates SET consecutive_probe_failures = $3, "
          "excluded_until_ms = $4, last_probe_ms = $5, last_probe_code = $6 "
          "WHERE role_key_wire = $1 AND agent_id = $2 "
          "RETURNING " HUB_CANDIDATE_COLUMNS,
          {P(c.role_key_wire), P(c.agent_id), P(c.consecutive_probe_failures),
           P(c.excluded_until_ms), P(c.last_probe_ms), P(c.last_probe_code)}),
      ReadCandidate);
}

absl::StatusOr<bool> PgRoleRows::DeleteCandidate(absl::string_view wire,
                                                 absl::string_view agent_id) {
  absl::StatusOr<Result> r = conn_.Run(
      "DELETE FROM role_candidates WHERE role_key_wire = $1 "
      "AND agent_id = $2",
      {P(wire), P(agent_id)});
  if (!r.ok()) return r.status();
  return r->changed() > 0;
}

absl::StatusOr<int64_t> PgRoleRows::DeleteCandidates(absl::string_view wire) {
  absl::StatusOr<Result> r = conn_.Run(
      "DELETE FROM role_candidates WHERE role_key_wire = $1", {P(wire)});
  if (!r.ok()) return r.status();
  return r->changed();
}

absl::StatusOr<std::vector<CandidateRecord>> PgRoleRows::Candidates(
    absl::string_view wire) {
  return Each<CandidateRecord>(
      conn_.Run(
          "SELECT " HUB_CANDIDATE_COLUMNS
          " FROM role_candidates WHERE role_key_wire = $1 "
          "ORDER BY priority DESC, updated_at_ms DESC, agent_id COLLATE \"C\"",
          {P(wire)}),
      ReadCandidate);
}

absl::StatusOr<std::vector<CandidateRecord>> PgRoleRows::CandidatesOf(
    const std::vector<std::string>& wires) {
  return Each<CandidateRecord>(
      conn_.Run("SELECT " HUB_CANDIDATE_COLUMNS
                " FROM role_candidates WHERE role_key_wire = ANY($1::text[]) "
                "ORDER BY array_position($1::text[], role_key_wire), "
                "priority DESC, updated_at_ms DESC, agent_id COLLATE \"C\"",
                {TextArray(wires)}),
      ReadCandidate);
}

absl::StatusOr<std::vector<CandidateRecord>> PgRoleRows::CandidatePage(
    const CandidatePageQuery& q, const CandidatePageQuery::Key& from) {
  return Each<CandidateRecord>(
      conn_.Run(q.role_key_wire.has_value() ? RoleCandidatesPageSql()
                                            : CandidatesPageSql(),
                {P(from.role_key_wire), P(from.priority), P(from.updated_at_ms),
                 P(from.agent_id), P(q.agent_id), OptTextArray(q.projects),
                 q.limit > 0 ? P(q.limit) : Null()}),
      ReadCandidate);
}

// ---- hub_closed_scopes and a closed scope's backlog -------------------------

absl::StatusOr<std::optional<ClosedScopeRecord>> PgRoleRows::LoadClosedScope(
    absl::string_view wire, absl::string_view project_id,
    absl::string_view scope_id) {
  return One<ClosedScopeRecord>(
      conn_.Run(
          "SELECT " HUB_CLOSED_SCOPE_COLUMNS " FROM hub_closed_scopes "
          "WHERE role_key_wire = $1 OR (project_id = $2 AND scope_id = $3) "
          "LIMIT 1",
          {P(wire), P(project_id), P(scope_id)}),
      ReadClosedScope);
}

absl::Status PgRoleRows::InsertClosedScope(const ClosedScopeRecord& c) {
  return conn_
      .Run(
          "INSERT INTO hub_closed_scopes (project_id, scope_id, "
          "role_key_wire, closed_at_ms, closed_by, reason, "
          "dead_lettered_count) VALUES ($1, $2, $3, $4, $5, $6, $7)",
          {P(c.project_id), P(c.scope_id), P(c.role_key_wire),
           P(c.closed_at_ms), P(c.closed_by), P(c.reason),
           P(c.dead_lettered_count)})
      .status();
}

absl::StatusOr<std::vector<ClosedScopeRecord>> PgRoleRows::ClosedScopePage(
    const ClosedScopeFilter& f) {
  return Each<ClosedScopeRecord>(
      conn_.Run(kClosedScopesPageSql,
                {P(f.project_id), P(f.scope_id), P(f.after_wire.value_or("")),
                 OptTextArray(f.projects), f.limit > 0 ? P(f.limit) : Null()}),
      ReadClosedScope);
}

absl::StatusOr<std::vector<MessageRecord>> PgRoleRows::ScopeBacklog(
    absl::string_view wire) {
  absl::StatusOr<std::vector<MessageRecord>> messages = Each<MessageRecord>(
      conn_.Run(kScopeBacklogForUpdateSql, {P(wire)}), ReadMessage);
  if (messages.ok()) {
    std::sort(messages->begin(), messages->end(), DeliveredBefore);
  }
  return messages;
}

absl::StatusOr<std::optional<bool>> PgRoleRows::DeadLetter(
    const MessageRecord& m, absl::string_view reason, int64_t now_ms,
    const std::string& last_error) {
  absl::StatusOr<Result> claim = conn_.Run(
      "UPDATE messages SET status = 'dead_letter' "
      "WHERE id = $1 AND status = $2",
      {P(m.id), P(m.status)});
  if (!claim.ok()) return claim.status();
  if (claim->changed() != 1) return std::optional<bool>();
  absl::StatusOr<Result> dlq = conn_.Run(
      "INSERT INTO dead_letters (message_id, reason, failed_at_ms, "
      "last_error) VALUES ($1, $2, $3, $4) "
      "ON CONFLICT (message_id) DO NOTHING",
      {P(m.id), P(reason), P(now_ms), P(last_error)});
  if (!dlq.ok()) return dlq.status();
  return std::optional<bool>(dlq->changed() == 1);
}

// The messages are locked (ScopeBacklog), as SettleRowsOf requires.
absl::Status PgRoleRows::Settled(const std::vector<std::string>& ids) {
  return SettleRowsOf(conn_, ids);
}

}  // namespace hub::storage::pg
