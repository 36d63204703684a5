#include "storage/sqlite/sqlite_role_rows.h"

#include <utility>

#include "storage/sqlite/sqlite_message_rows.h"
#include "storage/sqlite/sqlite_rows.h"

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

const char kClosedScopesPageSql[] = "SELECT " HUB_CLOSED_SCOPE_COLUMNS
                                    " FROM hub_closed_scopes "
                                    "WHERE role_key_wire > ?3 "
                                    "AND (?1 IS NULL OR project_id = ?1) "
                                    "AND (?2 IS NULL OR scope_id = ?2) "
                                    "AND (?4 IS NULL OR project_id IN "
                                    "(SELECT value FROM json_each(?4))) "
                                    "ORDER BY role_key_wire LIMIT ?5";

RoleRecord ReadRole(const Stmt& s) { return ReadRoleRow(s); }
CandidateRecord ReadCandidate(const Stmt& s) { return ReadCandidateRow(s); }
ClosedScopeRecord ReadClosedScope(const Stmt& s) {
  return ReadClosedScopeRow(s);
}

}  // namespace rows

namespace {

constexpr char kAllRolesSql[] =
    "SELECT " HUB_ROLE_COLUMNS " FROM role_registry ORDER BY role_key_wire";

// Binds a role row's mutable columns, state to last_reason in the order of
// HUB_ROLE_COLUMNS, to parameters `first`, first + 1, ...
void BindMutableColumns(Stmt& stmt, int first, const RoleRecord& r) {
  stmt.Bind(first, RoleStateName(r.state))
      .Bind(first + 1, r.holder_agent_id)
      .Bind(first + 2, r.previous_holder_agent_id)
      .Bind(first + 3, r.epoch)
      .Bind(first + 4, r.activation_seq)
      .Bind(first + 5, r.activation_id)
      .Bind(first + 6, r.activation_deadline_ms)
      .Bind(first + 7, r.holder_lease_expires_ms)
      .Bind(first + 8, r.charter_version)
      .Bind(first + 9, r.charter_acked_epoch)
      .Bind(first + 10, r.retry_count)
      .Bind(first + 11, r.next_probe_ms)
      .Bind(first + 12, r.blocked_reason)
      .Bind(first + 13, r.last_transition_ms)
      .Bind(first + 14, absl::string_view(r.last_reason));
}

}  // namespace

// ---- role_registry ----------------------------------------------------------

absl::StatusOr<std::optional<RoleRecord>> SqliteRoleRows::Load(
    absl::string_view wire, RowLock lock) {
  (void)lock;
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_ROLE_COLUMNS " FROM role_registry WHERE role_key_wire = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire);
  return rows::ReadOne<RoleRecord>(*stmt, rows::ReadRole);
}

// A conflict is the UNIQUE constraint's error: no other writer can have
// inserted the row meanwhile.
absl::StatusOr<std::optional<RoleRecord>> SqliteRoleRows::Insert(
    const RoleRecord& r) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT INTO role_registry (" HUB_ROLE_COLUMNS
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
      "?14, ?15, ?16, ?17, ?18, ?19, ?20)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(r.role_key_wire))
      .Bind(2, absl::string_view(r.project_id))
      .Bind(3, absl::string_view(r.role_kind))
      .Bind(4, absl::string_view(r.scope_id));
  BindMutableColumns(*stmt, 5, r);
  stmt->Bind(20, r.version);
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  return Load(r.role_key_wire, RowLock::kNone);
}

absl::StatusOr<std::optional<RoleRecord>> SqliteRoleRows::UpdateIfFence(
    const RoleRecord& next, const roles::RoleFence& fence) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
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
  BindMutableColumns(*stmt, 1, next);
  stmt->Bind(16, absl::string_view(next.role_key_wire))
      .Bind(17, fence.version)
      .Bind(18, fence.epoch)
      .Bind(19, fence.activation_seq)
      .Bind(20, fence.activation_id);
  return rows::ReadOne<RoleRecord>(*stmt, rows::ReadRole);
}

absl::StatusOr<bool> SqliteRoleRows::Delete(absl::string_view wire) {
  absl::StatusOr<Stmt> stmt =
      conn_.Prepare("DELETE FROM role_registry WHERE role_key_wire = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire);
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  return conn_.Changes() == 1;
}

absl::StatusOr<std::vector<RoleRecord>> SqliteRoleRows::All(RowLock lock) {
  (void)lock;
  absl::StatusOr<Stmt> stmt = conn_.Prepare(kAllRolesSql);
  if (!stmt.ok()) return stmt.status();
  return rows::ReadAll<RoleRecord>(*stmt, rows::ReadRole);
}

absl::StatusOr<std::vector<RoleRecord>> SqliteRoleRows::Page(
    const RoleFilter& f) {
  // `role_key_wire > ?5` always binds ("" from the start: every wire is
  // longer) so the primary key index drives the range and the order.
  absl::StatusOr<Stmt> stmt = conn_.Prepare(rows::kRolesPageSql);
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
}

absl::StatusOr<std::vector<RoleRecord>> SqliteRoleRows::WithExpiredHolder(
    int64_t now_ms) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_ROLE_COLUMNS
      " FROM role_registry "
      "WHERE holder_agent_id IS NOT NULL "
      "AND state IN ('elected-probing', 'active') "
      "AND (holder_lease_expires_ms IS NULL OR holder_lease_expires_ms <= ?) "
      "ORDER BY role_key_wire");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, now_ms);
  return rows::ReadAll<RoleRecord>(*stmt, rows::ReadRole);
}

absl::StatusOr<std::vector<MessageRecord>> SqliteRoleRows::Backlogs(
    int64_t now_ms) {
  return rows::PendingRoleMessages(conn_, std::nullopt, now_ms);
}

// ---- role_candidates --------------------------------------------------------

absl::StatusOr<std::optional<CandidateRecord>> SqliteRoleRows::LoadCandidate(
    absl::string_view wire, absl::string_view agent_id, RowLock lock) {
  (void)lock;
  absl::StatusOr<Stmt> stmt =
      conn_.Prepare("SELECT " HUB_CANDIDATE_COLUMNS
                    " FROM role_candidates "
                    "WHERE role_key_wire = ? AND agent_id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire).Bind(2, agent_id);
  return rows::ReadOne<CandidateRecord>(*stmt, rows::ReadCandidate);
}

absl::StatusOr<std::optional<CandidateRecord>> SqliteRoleRows::MergeCandidate(
    const roles::CandidateMerge& m) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT INTO role_candidates (" HUB_CANDIDATE_COLUMNS
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
      "ON CONFLICT(role_key_wire, agent_id) DO UPDATE SET "
      "source = CASE WHEN ?11 THEN role_candidates.source "
      "ELSE excluded.source END, "
      "priority = CASE WHEN ?12 THEN role_candidates.priority "
      "ELSE excluded.priority END, "
      "transport_locators_json = CASE WHEN ?13 "
      "THEN role_candidates.transport_locators_json "
      "ELSE excluded.transport_locators_json END, "
      "consecutive_probe_failures = CASE WHEN ?14 "
      "THEN role_candidates.consecutive_probe_failures "
      "ELSE excluded.consecutive_probe_failures END, "
      "excluded_until_ms = CASE WHEN ?15 "
      "THEN role_candidates.excluded_until_ms "
      "ELSE excluded.excluded_until_ms END, "
      "last_probe_ms = CASE WHEN ?16 "
      "THEN role_candidates.last_probe_ms ELSE excluded.last_probe_ms END, "
      "last_probe_code = CASE WHEN ?17 "
      "THEN role_candidates.last_probe_code ELSE excluded.last_probe_code END, "
      "updated_at_ms = excluded.updated_at_ms "
      "RETURNING " HUB_CANDIDATE_COLUMNS);
  if (!stmt.ok()) return stmt.status();
  const CandidateRecord& c = m.insert;
  stmt->Bind(1, absl::string_view(c.role_key_wire))
      .Bind(2, absl::string_view(c.agent_id))
      .Bind(3, absl::string_view(c.source))
      .Bind(4, c.priority)
      .Bind(5, absl::string_view(c.transport_locators_json))
      .Bind(6, c.consecutive_probe_failures)
      .Bind(7, c.excluded_until_ms)
      .Bind(8, c.last_probe_ms)
      .Bind(9, c.last_probe_code)
      .Bind(10, c.updated_at_ms)
      .Bind(11, int64_t{m.keep_source})
      .Bind(12, int64_t{m.keep_priority})
      .Bind(13, int64_t{m.keep_transport_locators})
      .Bind(14, int64_t{m.keep_probe_failures})
      .Bind(15, int64_t{m.keep_excluded_until})
      .Bind(16, int64_t{m.keep_last_probe_ms})
      .Bind(17, int64_t{m.keep_last_probe_code});
  return rows::ReadOne<CandidateRecord>(*stmt, rows::ReadCandidate);
}

absl::StatusOr<std::optional<CandidateRecord>> SqliteRoleRows::UpdateProbe(
    const CandidateRecord& c) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "UPDATE role_candidates SET consecutive_probe_failures = ?3, "
      "excluded_until_ms = ?4, last_probe_ms = ?5, last_probe_code = ?6 "
      "WHERE role_key_wire = ?1 AND agent_id = ?2 "
      "RETURNING " HUB_CANDIDATE_COLUMNS);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(c.role_key_wire))
      .Bind(2, absl::string_view(c.agent_id))
      .Bind(3, c.consecutive_probe_failures)
      .Bind(4, c.excluded_until_ms)
      .Bind(5, c.last_probe_ms)
      .Bind(6, c.last_probe_code);
  return rows::ReadOne<CandidateRecord>(*stmt, rows::ReadCandidate);
}

absl::StatusOr<bool> SqliteRoleRows::DeleteCandidate(
    absl::string_view wire, absl::string_view agent_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "DELETE FROM role_candidates WHERE role_key_wire = ?1 AND "
      "agent_id = ?2");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire).Bind(2, agent_id);
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  return conn_.Changes() > 0;
}

absl::StatusOr<int64_t> SqliteRoleRows::DeleteCandidates(
    absl::string_view wire) {
  absl::StatusOr<Stmt> stmt =
      conn_.Prepare("DELETE FROM role_candidates WHERE role_key_wire = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire);
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  return conn_.Changes();
}

absl::StatusOr<std::vector<CandidateRecord>> SqliteRoleRows::Candidates(
    absl::string_view wire) {
  absl::StatusOr<Stmt> stmt =
      conn_.Prepare("SELECT " HUB_CANDIDATE_COLUMNS
                    " FROM role_candidates "
                    "WHERE role_key_wire = ? "
                    "ORDER BY priority DESC, updated_at_ms DESC, agent_id ASC");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire);
  return rows::ReadAll<CandidateRecord>(*stmt, rows::ReadCandidate);
}

absl::StatusOr<std::vector<CandidateRecord>> SqliteRoleRows::CandidatePage(
    const CandidatePageQuery& q, const CandidatePageQuery::Key& start) {
  absl::StatusOr<Stmt> stmt =
      conn_.Prepare(q.role_key_wire.has_value() ? rows::kRoleCandidatesPageSql
                                                : rows::kCandidatesPageSql);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(start.role_key_wire))
      .Bind(2, start.priority)
      .Bind(3, start.updated_at_ms)
      .Bind(4, absl::string_view(start.agent_id));
  stmt->Bind(5, q.agent_id);
  rows::BindList(*stmt, 6, q.projects);
  stmt->Bind(7, rows::SqlLimit(q.limit));
  return rows::ReadAll<CandidateRecord>(*stmt, rows::ReadCandidate);
}

// ---- hub_closed_scopes and a closed scope's backlog -------------------------

absl::StatusOr<std::optional<ClosedScopeRecord>>
SqliteRoleRows::LoadClosedScope(absl::string_view wire,
                                absl::string_view project_id,
                                absl::string_view scope_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_CLOSED_SCOPE_COLUMNS
      " FROM hub_closed_scopes "
      "WHERE role_key_wire = ?1 OR (project_id = ?2 AND scope_id = ?3) "
      "LIMIT 1");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire).Bind(2, project_id).Bind(3, scope_id);
  return rows::ReadOne<ClosedScopeRecord>(*stmt, rows::ReadClosedScope);
}

absl::Status SqliteRoleRows::InsertClosedScope(const ClosedScopeRecord& c) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT INTO hub_closed_scopes (project_id, scope_id, role_key_wire, "
      "closed_at_ms, closed_by, reason, dead_lettered_count) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(c.project_id))
      .Bind(2, absl::string_view(c.scope_id))
      .Bind(3, absl::string_view(c.role_key_wire))
      .Bind(4, c.closed_at_ms)
      .Bind(5, absl::string_view(c.closed_by))
      .Bind(6, absl::string_view(c.reason))
      .Bind(7, c.dead_lettered_count);
  return stmt->Run();
}

absl::StatusOr<std::vector<ClosedScopeRecord>> SqliteRoleRows::ClosedScopePage(
    const ClosedScopeFilter& f) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(rows::kClosedScopesPageSql);
  if (!stmt.ok()) return stmt.status();
  // As Page: the UNIQUE index on role_key_wire drives range and order.
  stmt->Bind(1, f.project_id).Bind(2, f.scope_id);
  stmt->Bind(3, absl::string_view(f.after_wire ? *f.after_wire : ""));
  rows::BindList(*stmt, 4, f.projects);
  stmt->Bind(5, rows::SqlLimit(f.limit));
  return rows::ReadAll<ClosedScopeRecord>(*stmt, rows::ReadClosedScope);
}

absl::StatusOr<std::vector<MessageRecord>> SqliteRoleRows::ScopeBacklog(
    absl::string_view wire) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(rows::kScopeBacklogSql);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, wire);
  return rows::ReadAll<MessageRecord>(*stmt, rows::ReadMessage);
}

absl::StatusOr<std::optional<bool>> SqliteRoleRows::DeadLetter(
    const MessageRecord& m, absl::string_view reason, int64_t now_ms,
    const std::string& last_error) {
  SqliteMessageRows messages(conn_, store_);
  return messages.DeadLetterIfStatus(m.id, m.status, reason, now_ms,
                                     last_error);
}

void SqliteRoleRows::Undone() { store_.pending_.Clear(); }

}  // namespace hub::storage
