#include "storage/sqlite/sqlite_agent_rows.h"

#include <algorithm>

#include "storage/sqlite/sqlite_rows.h"

namespace hub::storage {
namespace {

// Binds a Patch as (flag, value): flag 1 = write value (NULL when cleared).
void BindPatch(Stmt& stmt, int flag_index, const Patch<std::string>& p) {
  stmt.Bind(flag_index, static_cast<int64_t>(p.keep() ? 0 : 1));
  if (p.set()) {
    stmt.Bind(flag_index + 1, absl::string_view(p.value()));
  } else {
    stmt.BindNull(flag_index + 1);
  }
}

}  // namespace

absl::StatusOr<std::optional<AgentRecord>> SqliteAgentRows::Load(
    absl::string_view agent_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare("SELECT " HUB_AGENT_COLUMNS
                                            " FROM agents WHERE agent_id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, agent_id);
  return rows::ReadOne<AgentRecord>(*stmt, rows::ReadAgent);
}

absl::StatusOr<std::optional<AgentRecord>> SqliteAgentRows::Upsert(
    const AgentRegistration& r) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT INTO agents (agent_id, cli, pid, capabilities_json, "
      "topics_json, last_seen_ms, lease_expires_ms, presence_generation, "
      "status, metadata_json, project_id, session_id, host_id, "
      "transport_locators_json, lease_ttl_ms) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, 'online', ?8, ?10, ?12, ?14, "
      "COALESCE(?16, '[]'), ?17) "
      "ON CONFLICT(agent_id) DO UPDATE SET cli = excluded.cli, "
      "pid = excluded.pid, capabilities_json = excluded.capabilities_json, "
      "topics_json = excluded.topics_json, "
      "last_seen_ms = excluded.last_seen_ms, "
      "lease_expires_ms = excluded.lease_expires_ms, "
      "lease_ttl_ms = excluded.lease_ttl_ms, "
      "presence_generation = agents.presence_generation + 1, "
      "status = 'online', metadata_json = excluded.metadata_json, "
      "project_id = CASE WHEN ?9 THEN ?10 ELSE agents.project_id END, "
      "session_id = CASE WHEN ?11 THEN ?12 ELSE agents.session_id END, "
      "host_id = CASE WHEN ?13 THEN ?14 ELSE agents.host_id END, "
      "transport_locators_json = CASE WHEN ?15 THEN COALESCE(?16, '[]') "
      "ELSE agents.transport_locators_json END "
      "RETURNING " HUB_AGENT_COLUMNS);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(r.agent_id))
      .Bind(2, absl::string_view(r.cli))
      .Bind(3, r.pid)
      .Bind(4, absl::string_view(r.capabilities_json))
      .Bind(5, absl::string_view(r.topics_json))
      .Bind(6, r.now_ms)
      .Bind(7, r.now_ms + r.lease_ttl_ms)
      .Bind(8, absl::string_view(r.metadata_json));
  BindPatch(*stmt, 9, r.project_id);
  BindPatch(*stmt, 11, r.session_id);
  BindPatch(*stmt, 13, r.host_id);
  BindPatch(*stmt, 15, r.transport_locators_json);
  stmt->Bind(17, r.lease_ttl_ms);
  return rows::ReadOne<AgentRecord>(*stmt, rows::ReadAgent);
}

absl::StatusOr<std::optional<AgentRecord>> SqliteAgentRows::Refresh(
    absl::string_view agent_id, std::optional<int64_t> generation,
    int64_t now_ms, int64_t lease_ttl_ms) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "UPDATE agents SET last_seen_ms = ?2, lease_expires_ms = ?3, "
      "lease_ttl_ms = ?3 - ?2, status = 'online' "
      "WHERE agent_id = ?1 AND (?4 IS NULL OR presence_generation = ?4) "
      "RETURNING " HUB_AGENT_COLUMNS);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, agent_id)
      .Bind(2, now_ms)
      .Bind(3, now_ms + lease_ttl_ms)
      .Bind(4, generation);
  return rows::ReadOne<AgentRecord>(*stmt, rows::ReadAgent);
}

absl::StatusOr<std::optional<AgentRecord>> SqliteAgentRows::SetStatus(
    absl::string_view agent_id, std::optional<int64_t> generation,
    AgentStatus status) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "UPDATE agents SET status = ?2 "
      "WHERE agent_id = ?1 AND (?3 IS NULL OR presence_generation = ?3) "
      "RETURNING " HUB_AGENT_COLUMNS);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, agent_id).Bind(2, AgentStatusName(status)).Bind(3, generation);
  return rows::ReadOne<AgentRecord>(*stmt, rows::ReadAgent);
}

absl::StatusOr<std::vector<PresenceTransition>> SqliteAgentRows::Sweep(
    int64_t now_ms, int64_t offline_after_ms) {
  using Transitions = std::vector<PresenceTransition>;
  // Read first, then one fenced update per row: one step per row per pass.
  absl::StatusOr<Stmt> select = conn_.Prepare(
      "SELECT agent_id, presence_generation, status FROM agents "
      "WHERE (status = 'online' AND lease_expires_ms < ?1) "
      "OR (status = 'stale' AND lease_expires_ms < ?2) ORDER BY agent_id");
  if (!select.ok()) return select.status();
  select->Bind(1, now_ms).Bind(2, now_ms - offline_after_ms);
  absl::StatusOr<Transitions> candidates =
      rows::ReadAll<PresenceTransition>(*select, [](const Stmt& s) {
        PresenceTransition t;
        t.agent_id = s.Text(0);
        t.presence_generation = s.Int(1);
        t.from_status = rows::StoredAgentStatus(s.Text(2));
        t.to_status = t.from_status == AgentStatus::kOnline
                          ? AgentStatus::kStale
                          : AgentStatus::kOffline;
        return t;
      });
  if (!candidates.ok()) return candidates.status();
  Transitions applied;
  for (PresenceTransition& t : *candidates) {
    absl::StatusOr<Stmt> update = conn_.Prepare(
        "UPDATE agents SET status = ?4 WHERE agent_id = ?1 "
        "AND presence_generation = ?2 AND status = ?3 "
        "AND lease_expires_ms < ?5");
    if (!update.ok()) return update.status();
    update->Bind(1, absl::string_view(t.agent_id))
        .Bind(2, t.presence_generation)
        .Bind(3, AgentStatusName(t.from_status))
        .Bind(4, AgentStatusName(t.to_status))
        .Bind(5, t.from_status == AgentStatus::kOnline
                     ? now_ms
                     : now_ms - offline_after_ms);
    if (absl::Status s = update->Run(); !s.ok()) return s;
    if (conn_.Changes() == 1) applied.push_back(std::move(t));
  }
  return applied;
}

absl::StatusOr<std::vector<bool>> SqliteAgentRows::Checkpoint(
    const std::vector<LeaseCheckpoint>& leases) {
  std::vector<bool> written;
  written.reserve(leases.size());
  for (const LeaseCheckpoint& lease : leases) {
    // Fence: the generation that renewed the lease must still own the row,
    // and an agent that went offline meanwhile stays offline. Of several
    // checkpoints of one (agent, generation) the last one wins: they run in
    // order.
    absl::StatusOr<Stmt> stmt = conn_.Prepare(
        "UPDATE agents SET last_seen_ms = ?3, lease_expires_ms = ?4, "
        "lease_ttl_ms = ?5 "
        "WHERE agent_id = ?1 AND presence_generation = ?2 "
        "AND status <> 'offline'");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, lease.agent_id)
        .Bind(2, lease.presence_generation)
        .Bind(3, lease.last_seen_ms)
        .Bind(4, lease.lease_expires_ms)
        .Bind(5, lease.lease_ttl_ms);
    if (absl::Status s = stmt->Run(); !s.ok()) return s;
    written.push_back(conn_.Changes() == 1);
  }
  return written;
}

absl::StatusOr<std::vector<AgentRecord>> SqliteAgentRows::All() {
  absl::StatusOr<Stmt> stmt = conn_.Prepare("SELECT " HUB_AGENT_COLUMNS
                                            " FROM agents ORDER BY agent_id");
  if (!stmt.ok()) return stmt.status();
  return rows::ReadAll<AgentRecord>(*stmt, rows::ReadAgent);
}

absl::StatusOr<std::vector<AgentRecord>> SqliteAgentRows::Page(
    const AgentPageQuery& q) {
  // `agent_id > ?1` always binds (to "" on the first page) so that the
  // primary key index drives both the range and the order: a page reads
  // `limit` rows plus those the filters skip, never the rows before it
  // (storage/sqlite/sqlite_store_agents_test.cc checks the plan). The topic
  // test is guarded by CASE, which evaluates lazily: a malformed
  // topics_json matches nothing instead of failing the query.
  absl::StatusOr<Stmt> stmt = conn_.Prepare(rows::kAgentsPageSql);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(q.after_agent_id));
  rows::BindList(*stmt, 2,
                 q.clis.empty()
                     ? std::nullopt
                     : std::optional<std::vector<std::string>>(q.clis));
  stmt->Bind(3, q.project_id);
  rows::BindList(*stmt, 4, q.projects);
  stmt->Bind(5, q.topic);
  stmt->Bind(6, std::max<int64_t>(q.limit, 1));
  return rows::ReadAll<AgentRecord>(*stmt, rows::ReadAgent);
}

absl::Status SqliteAgentRows::InsertOwner(absl::string_view agent_id,
                                          absl::string_view principal,
                                          int64_t now_ms) {
  absl::StatusOr<Stmt> insert = conn_.Prepare(
      "INSERT INTO hub_agent_owners(agent_id, principal, claimed_at_ms) "
      "VALUES (?, ?, ?) ON CONFLICT(agent_id) DO NOTHING");
  if (!insert.ok()) return insert.status();
  insert->Bind(1, agent_id).Bind(2, principal).Bind(3, now_ms);
  return insert->Run();
}

absl::StatusOr<std::optional<std::string>> SqliteAgentRows::Owner(
    absl::string_view agent_id) {
  absl::StatusOr<Stmt> select = conn_.Prepare(
      "SELECT principal FROM hub_agent_owners WHERE agent_id = ?");
  if (!select.ok()) return select.status();
  select->Bind(1, agent_id);
  absl::StatusOr<bool> row = select->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(select->Text(0));
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
SqliteAgentRows::Owners() {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT agent_id, principal FROM hub_agent_owners ORDER BY agent_id");
  if (!stmt.ok()) return stmt.status();
  std::vector<std::pair<std::string, std::string>> out;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    out.emplace_back(stmt->Text(0), stmt->Text(1));
  }
  return out;
}

}  // namespace hub::storage
