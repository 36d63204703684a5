// SQLite's message statements (TRIFLUX-HUB.md §6, B0 expiry of §6.6).
#include "storage/sqlite/sqlite_message_rows.h"

#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_rows.h"

namespace hub::storage {

namespace rows {

const char kTracePageSql[] =
    "SELECT " HUB_MESSAGE_COLUMNS
    " FROM messages WHERE trace_id = ?1 AND created_at_ms >= ?2 "
    "AND (created_at_ms > ?2 OR id > ?3) "
    "ORDER BY created_at_ms, id LIMIT ?4";

const char kDeadLettersPageSql[] =
    "SELECT m.id, m.type, m.from_agent, m.to_agent, m.topic, m.priority, "
    "m.ttl_ms, m.created_at_ms, m.expires_at_ms, m.correlation_id, "
    "m.trace_id, m.payload_json, m.status, m.role_key_wire, "
    "d.message_id, d.reason, d.failed_at_ms, d.last_error "
    "FROM dead_letters d LEFT JOIN messages m ON m.id = d.message_id "
    "WHERE d.failed_at_ms <= ?3 "
    "AND (d.failed_at_ms < ?3 OR d.message_id > ?4) "
    "AND (?1 IS NULL OR d.reason = ?1) "
    "AND (?2 IS NULL OR m.from_agent = ?2) "
    "ORDER BY d.failed_at_ms DESC, d.message_id ASC LIMIT ?5";

const char kExpiredMessagesSql[] =
    "SELECT id, status FROM messages "
    "WHERE status IN ('queued', 'delivered') AND expires_at_ms <= ? "
    "ORDER BY expires_at_ms, id";

const char kPendingPageSql[] =
    "SELECT m.id, m.type, m.from_agent, m.to_agent, m.topic, m.priority, "
    "m.ttl_ms, m.created_at_ms, m.expires_at_ms, m.correlation_id, "
    "m.trace_id, m.payload_json, m.status, m.role_key_wire "
    "FROM message_inbox i JOIN messages m ON m.id = i.message_id "
    "WHERE i.agent_id = ?1 AND i.acked_at_ms IS NULL "
    "AND m.status IN ('queued', 'delivered') AND m.expires_at_ms > ?2 "
    "AND (?3 IS NULL OR m.topic = ?3) "
    "AND (m.priority < ?4 OR (m.priority = ?4 AND (m.created_at_ms > ?5 "
    "OR (m.created_at_ms = ?5 AND m.id > ?6)))) "
    "ORDER BY m.priority DESC, m.created_at_ms ASC, m.id ASC LIMIT ?7";

const char kRoleBacklogSql[] =
    "SELECT " HUB_MESSAGE_COLUMNS
    " FROM messages "
    "WHERE role_key_wire = ?1 "
    "AND status IN ('queued', 'delivered') AND expires_at_ms > ?2 "
    "ORDER BY priority DESC, created_at_ms ASC, id ASC";

// `+expires_at_ms` keeps the planner off idx_messages_expiry_pending, whose
// range would be every pending message, agents' and topics' too.
const char kAllRoleBacklogsSql[] =
    "SELECT " HUB_MESSAGE_COLUMNS
    " FROM messages "
    "WHERE role_key_wire IS NOT NULL "
    "AND status IN ('queued', 'delivered') AND +expires_at_ms > ?1 "
    "ORDER BY priority DESC, created_at_ms ASC, id ASC";

const char kScopeBacklogSql[] =
    "SELECT " HUB_MESSAGE_COLUMNS
    " FROM messages WHERE role_key_wire = ?1 "
    "AND status IN ('queued', 'delivered') "
    "ORDER BY priority DESC, created_at_ms ASC, id ASC";

MessageRecord ReadMessage(const Stmt& s) { return ReadMessageRow(s); }

absl::StatusOr<std::vector<MessageRecord>> PendingRoleMessages(
    Connection& conn, std::optional<std::string> wire, int64_t now_ms) {
  absl::StatusOr<Stmt> stmt =
      conn.Prepare(wire.has_value() ? kRoleBacklogSql : kAllRoleBacklogsSql);
  if (!stmt.ok()) return stmt.status();
  if (wire.has_value()) {
    stmt->Bind(1, *wire).Bind(2, now_ms);
  } else {
    stmt->Bind(1, now_ms);
  }
  return ReadAll<MessageRecord>(*stmt, ReadMessage);
}

}  // namespace rows

namespace {

InboxRecord ReadInbox(const Stmt& s) { return rows::ReadInboxRow(s); }
DeadLetterRecord ReadDeadLetter(const Stmt& s) {
  return rows::ReadDeadLetterRow(s);
}

absl::StatusOr<std::vector<std::string>> Texts(Stmt& stmt) {
  return rows::ReadAll<std::string>(stmt,
                                    [](const Stmt& s) { return s.Text(0); });
}

}  // namespace

absl::StatusOr<int64_t> SqliteStore::PendingInboxCounts::Get(
    Connection& conn, absl::string_view agent_id) {
  if (auto it = counts_.find(agent_id); it != counts_.end()) return it->second;
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "SELECT COUNT(*) FROM message_inbox i "
      "JOIN messages m ON m.id = i.message_id "
      "WHERE i.agent_id = ?1 AND i.acked_at_ms IS NULL "
      "AND m.status IN ('queued', 'delivered')");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, agent_id);
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  const int64_t count = stmt->Int(0);
  counts_.emplace(std::string(agent_id), count);
  return count;
}

void SqliteStore::PendingInboxCounts::Add(absl::string_view agent_id,
                                          int64_t delta) {
  if (auto it = counts_.find(agent_id); it != counts_.end())
    it->second += delta;
}

absl::Status SqliteStore::PendingInboxCounts::MessageLeftPending(
    Connection& conn, absl::string_view message_id) {
  if (counts_.empty()) return absl::OkStatus();
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "SELECT agent_id FROM message_inbox "
      "WHERE message_id = ? AND acked_at_ms IS NULL");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, message_id);
  absl::StatusOr<std::vector<std::string>> agents = Texts(*stmt);
  if (!agents.ok()) return agents.status();
  for (const std::string& agent : *agents) Add(agent, -1);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<MessageRecord>> SqliteMessageRows::Load(
    absl::string_view id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare("SELECT " HUB_MESSAGE_COLUMNS
                                            " FROM messages WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, id);
  return rows::ReadOne<MessageRecord>(*stmt, rows::ReadMessage);
}

absl::StatusOr<bool> SqliteMessageRows::Exists(absl::string_view id) {
  absl::StatusOr<Stmt> stmt =
      conn_.Prepare("SELECT 1 FROM messages WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, id);
  return stmt->Step();
}

absl::StatusOr<bool> SqliteMessageRows::InsertRow(
    absl::string_view message_id, absl::string_view agent_id,
    std::optional<int64_t> delivered_at_ms) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT INTO message_inbox (message_id, agent_id, delivered_at_ms, "
      "attempts) VALUES (?1, ?2, ?3, ?4) "
      "ON CONFLICT(message_id, agent_id) DO NOTHING");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, message_id)
      .Bind(2, agent_id)
      .Bind(3, delivered_at_ms)
      .Bind(4, int64_t{delivered_at_ms.has_value() ? 1 : 0});
  if (absl::Status s = stmt->Run(); !s.ok()) return s;
  return conn_.Changes() == 1;
}

absl::StatusOr<bool> SqliteMessageRows::Insert(const Publish& p,
                                               bool within_limit) {
  (void)within_limit;
  const MessageRecord& m = p.message;
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "INSERT INTO messages (" HUB_MESSAGE_COLUMNS
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
      "?14)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(m.id))
      .Bind(2, absl::string_view(m.type))
      .Bind(3, absl::string_view(m.from_agent))
      .Bind(4, absl::string_view(m.to_agent))
      .Bind(5, absl::string_view(m.topic))
      .Bind(6, m.priority)
      .Bind(7, m.ttl_ms)
      .Bind(8, m.created_at_ms)
      .Bind(9, m.expires_at_ms)
      .Bind(10, absl::string_view(m.correlation_id))
      .Bind(11, absl::string_view(m.trace_id))
      .Bind(12, absl::string_view(m.payload_json))
      .Bind(13, MessageStatusName(p.Delivering() ? MessageStatus::kDelivered
                                                 : m.status))
      .Bind(14, m.role_key_wire);
  absl::Status s = stmt->Run();
  if (!s.ok() &&
      sqlite3_extended_errcode(conn_.raw()) == SQLITE_CONSTRAINT_PRIMARYKEY) {
    return false;
  }
  if (!s.ok()) return s;
  // A recipient whose stream gets the message now starts delivered: one
  // insert, no update of idx_inbox_agent after it.
  const absl::flat_hash_set<absl::string_view> now_delivered(
      p.deliver_to.begin(), p.deliver_to.end());
  std::vector<const std::string*> inserted;  // a recipient named twice: once
  inserted.reserve(p.recipients.size());
  for (const std::string& agent : p.recipients) {
    absl::StatusOr<bool> added = InsertRow(
        m.id, agent,
        now_delivered.contains(agent) ? std::optional<int64_t>(p.now_ms)
                                      : std::nullopt);
    if (!added.ok()) return added.status();
    if (*added) inserted.push_back(&agent);
  }
  if (IsPending(m.status)) {
    for (const std::string* agent : inserted) store_.pending_.Add(*agent, 1);
  }
  return true;
}

absl::StatusOr<absl::flat_hash_map<std::string, int64_t>>
SqliteMessageRows::PendingCounts(const std::vector<std::string>& agents) {
  absl::flat_hash_map<std::string, int64_t> counts;
  for (const std::string& agent : agents) {
    absl::StatusOr<int64_t> count = store_.pending_.Get(conn_, agent);
    if (!count.ok()) return count.status();
    counts[agent] = *count;
  }
  return counts;
}

absl::Status SqliteMessageRows::MarkMessagesDelivered(
    const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    absl::StatusOr<Stmt> msg = conn_.Prepare(
        "UPDATE messages SET status = 'delivered' "
        "WHERE id = ? AND status = 'queued'");
    if (!msg.ok()) return msg.status();
    msg->Bind(1, absl::string_view(id));
    if (absl::Status s = msg->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status SqliteMessageRows::AckMessagesDone(
    const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    absl::StatusOr<Stmt> done = conn_.Prepare(
        "UPDATE messages SET status = 'acked' "
        "WHERE id = ?1 AND status IN ('queued', 'delivered') "
        "AND NOT EXISTS (SELECT 1 FROM message_inbox "
        "WHERE message_id = ?1 AND acked_at_ms IS NULL)");
    if (!done.ok()) return done.status();
    done->Bind(1, absl::string_view(id));
    if (absl::Status s = done->Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<bool>> SqliteMessageRows::DeadLetterIfStatus(
    absl::string_view id, std::optional<MessageStatus> from_status,
    absl::string_view reason, int64_t now_ms,
    const std::optional<std::string>& last_error) {
  absl::StatusOr<Stmt> claim =
      from_status.has_value()
          ? conn_.Prepare(
                "UPDATE messages SET status = 'dead_letter' "
                "WHERE id = ? AND status = ?")
          : conn_.Prepare(
                "UPDATE messages SET status = 'dead_letter' "
                "WHERE id = ? AND status IN ('queued', 'delivered')");
  if (!claim.ok()) return claim.status();
  claim->Bind(1, id);
  if (from_status.has_value()) {
    claim->Bind(2, MessageStatusName(*from_status));
  }
  absl::Status s = claim->Run();
  if (!s.ok()) return s;
  if (conn_.Changes() != 1) return std::optional<bool>();
  if (s = store_.pending_.MessageLeftPending(conn_, id); !s.ok()) return s;
  absl::StatusOr<Stmt> dlq = conn_.Prepare(
      "INSERT INTO dead_letters (message_id, reason, failed_at_ms, last_error) "
      "VALUES (?, ?, ?, ?) ON CONFLICT(message_id) DO NOTHING");
  if (!dlq.ok()) return dlq.status();
  dlq->Bind(1, id).Bind(2, reason).Bind(3, now_ms).Bind(4, last_error);
  s = dlq->Run();
  if (!s.ok()) return s;
  return std::optional<bool>(conn_.Changes() == 1);
}

absl::StatusOr<std::optional<bool>> SqliteMessageRows::DeadLetterIfPending(
    absl::string_view id, absl::string_view reason, int64_t now_ms,
    const std::optional<std::string>& last_error) {
  return DeadLetterIfStatus(id, std::nullopt, reason, now_ms, last_error);
}

absl::StatusOr<std::vector<ExpiryTransition>> SqliteMessageRows::SweepExpired(
    int64_t now_ms) {
  absl::StatusOr<Stmt> select = conn_.Prepare(rows::kExpiredMessagesSql);
  if (!select.ok()) return select.status();
  select->Bind(1, now_ms);
  absl::StatusOr<std::vector<ExpiryTransition>> expired =
      rows::ReadAll<ExpiryTransition>(*select, [](const Stmt& s) {
        ExpiryTransition t;
        t.message_id = s.Text(0);
        t.previous_status = rows::StoredMessageStatus(s.Text(1));
        return t;
      });
  if (!expired.ok()) return expired.status();
  std::vector<ExpiryTransition> claimed;
  for (ExpiryTransition& t : *expired) {
    absl::StatusOr<std::optional<bool>> inserted = DeadLetterIfStatus(
        t.message_id, t.previous_status, "ttl_expired", now_ms, std::nullopt);
    if (!inserted.ok()) return inserted.status();
    if (!inserted->has_value()) continue;  // fence lost: someone else won
    t.dlq_inserted = **inserted;
    claimed.push_back(std::move(t));
  }
  return claimed;
}

absl::StatusOr<std::optional<MessageRecord>> SqliteMessageRows::Requeue(
    absl::string_view id, int64_t now_ms) {
  absl::StatusOr<Stmt> requeue = conn_.Prepare(
      "UPDATE messages SET status = 'queued', expires_at_ms = ?2 + ttl_ms "
      "WHERE id = ?1 AND status = 'dead_letter' "
      "RETURNING " HUB_MESSAGE_COLUMNS);
  if (!requeue.ok()) return requeue.status();
  requeue->Bind(1, id).Bind(2, now_ms);
  absl::StatusOr<std::optional<MessageRecord>> after =
      rows::ReadOne<MessageRecord>(*requeue, rows::ReadMessage);
  if (!after.ok() || !after->has_value()) return after;
  if (absl::Status s = requeue->Run(); !s.ok()) return s;  // finish the step
  return after;
}

absl::StatusOr<bool> SqliteMessageRows::AddRecipient(
    absl::string_view message_id, absl::string_view agent_id) {
  // The message first: the inbox row's foreign key needs it.
  absl::StatusOr<std::optional<MessageRecord>> m = Load(message_id);
  if (!m.ok()) return m.status();
  if (!m->has_value()) return false;
  absl::StatusOr<bool> added = InsertRow(message_id, agent_id, std::nullopt);
  if (!added.ok()) return added.status();
  if (*added && IsPending((*m)->status)) store_.pending_.Add(agent_id, 1);
  return added;
}

absl::StatusOr<bool> SqliteMessageRows::InsertInboxRow(
    absl::string_view message_id, absl::string_view agent_id) {
  return InsertRow(message_id, agent_id, std::nullopt);
}

absl::StatusOr<bool> SqliteMessageRows::HasInboxRow(
    absl::string_view message_id, absl::string_view agent_id) {
  absl::StatusOr<Stmt> exists = conn_.Prepare(
      "SELECT 1 FROM message_inbox WHERE message_id = ?1 AND agent_id = ?2");
  if (!exists.ok()) return exists.status();
  exists->Bind(1, message_id).Bind(2, agent_id);
  return exists->Step();
}

absl::StatusOr<std::optional<InboxRecord>>
SqliteMessageRows::MarkInboxDelivered(absl::string_view message_id,
                                      absl::string_view agent_id,
                                      int64_t now_ms) {
  absl::StatusOr<Stmt> inbox = conn_.Prepare(
      "UPDATE message_inbox SET "
      "delivered_at_ms = COALESCE(delivered_at_ms, ?3), "
      "attempts = attempts + 1 WHERE message_id = ?1 AND agent_id = ?2 "
      "AND acked_at_ms IS NULL AND EXISTS (SELECT 1 FROM messages "
      "WHERE id = ?1 AND status IN ('queued', 'delivered')) "
      "RETURNING message_id, agent_id, delivered_at_ms, acked_at_ms, "
      "attempts");
  if (!inbox.ok()) return inbox.status();
  inbox->Bind(1, message_id).Bind(2, agent_id).Bind(3, now_ms);
  absl::StatusOr<std::optional<InboxRecord>> row =
      rows::ReadOne<InboxRecord>(*inbox, ReadInbox);
  if (!row.ok() || !row->has_value()) return row;
  if (absl::Status s = inbox->Run(); !s.ok()) return s;  // finish the step
  return row;
}

absl::StatusOr<std::vector<std::string>> SqliteMessageRows::AckInboxRows(
    absl::string_view agent_id, const std::vector<std::string>& ids,
    int64_t now_ms) {
  std::vector<std::string> acked;
  for (const std::string& id : ids) {
    absl::StatusOr<Stmt> ack = conn_.Prepare(
        "UPDATE message_inbox SET acked_at_ms = ?3 "
        "WHERE message_id = ?1 AND agent_id = ?2 "
        "AND delivered_at_ms IS NOT NULL AND acked_at_ms IS NULL "
        "AND EXISTS (SELECT 1 FROM messages WHERE id = ?1 "
        "AND status IN ('queued', 'delivered'))");
    if (!ack.ok()) return ack.status();
    ack->Bind(1, absl::string_view(id)).Bind(2, agent_id).Bind(3, now_ms);
    if (absl::Status s = ack->Run(); !s.ok()) return s;
    if (conn_.Changes() == 1) acked.push_back(id);
  }
  store_.pending_.Add(agent_id, -static_cast<int64_t>(acked.size()));
  return acked;
}

absl::StatusOr<std::vector<std::string>> SqliteMessageRows::AckedBefore(
    absl::string_view agent_id, const std::vector<std::string>& ids) {
  std::vector<std::string> acked;
  for (const std::string& id : ids) {
    absl::StatusOr<Stmt> before = conn_.Prepare(
        "SELECT 1 FROM message_inbox WHERE message_id = ? AND agent_id = ? "
        "AND acked_at_ms IS NOT NULL");
    if (!before.ok()) return before.status();
    before->Bind(1, absl::string_view(id)).Bind(2, agent_id);
    absl::StatusOr<bool> found = before->Step();
    if (!found.ok()) return found.status();
    if (*found) acked.push_back(id);
  }
  return acked;
}

absl::StatusOr<std::vector<std::string>> SqliteMessageRows::RedriveRecipients(
    absl::string_view message_id, const std::optional<std::string>& add) {
  absl::StatusOr<Stmt> s = conn_.Prepare(
      "SELECT agent_id, acked_at_ms IS NULL FROM message_inbox "
      "WHERE message_id = ?");
  if (!s.ok()) return s.status();
  s->Bind(1, message_id);
  absl::StatusOr<std::vector<std::pair<std::string, bool>>> rows =
      rows::ReadAll<std::pair<std::string, bool>>(*s, [](const Stmt& st) {
        return std::make_pair(st.Text(0), st.Int(1) != 0);
      });
  if (!rows.ok()) return rows.status();
  std::vector<std::string> agents;
  bool has_add = false;
  for (auto& [agent, pending] : *rows) {
    if (add.has_value() && agent == *add) has_add = true;
    if (pending) agents.push_back(std::move(agent));
  }
  if (add.has_value() && !has_add) agents.push_back(*add);
  return agents;
}

absl::StatusOr<std::vector<std::string>> SqliteMessageRows::ClearDelivered(
    absl::string_view message_id) {
  absl::StatusOr<Stmt> again = conn_.Prepare(
      "UPDATE message_inbox SET delivered_at_ms = NULL "
      "WHERE message_id = ? AND acked_at_ms IS NULL RETURNING agent_id");
  if (!again.ok()) return again.status();
  again->Bind(1, message_id);
  return Texts(*again);
}

absl::Status SqliteMessageRows::Repending(
    absl::string_view message_id, const std::vector<std::string>& agents) {
  (void)message_id;
  for (const std::string& agent : agents) store_.pending_.Add(agent, 1);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<InboxRecord>> SqliteMessageRows::Inbox(
    absl::string_view message_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT " HUB_INBOX_COLUMNS
      " FROM message_inbox WHERE message_id = ? ORDER BY agent_id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, message_id);
  return rows::ReadAll<InboxRecord>(*stmt, ReadInbox);
}

absl::StatusOr<std::optional<DeadLetterRecord>>
SqliteMessageRows::LoadDeadLetter(absl::string_view message_id) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT message_id, reason, failed_at_ms, last_error "
      "FROM dead_letters WHERE message_id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, message_id);
  return rows::ReadOne<DeadLetterRecord>(*stmt, ReadDeadLetter);
}

absl::StatusOr<std::optional<DeadLetterRecord>>
SqliteMessageRows::DeleteDeadLetter(absl::string_view message_id) {
  absl::StatusOr<Stmt> dlq = conn_.Prepare(
      "DELETE FROM dead_letters WHERE message_id = ? "
      "RETURNING message_id, reason, failed_at_ms, last_error");
  if (!dlq.ok()) return dlq.status();
  dlq->Bind(1, message_id);
  absl::StatusOr<std::optional<DeadLetterRecord>> removed =
      rows::ReadOne<DeadLetterRecord>(*dlq, ReadDeadLetter);
  if (!removed.ok() || !removed->has_value()) return removed;
  if (absl::Status s = dlq->Run(); !s.ok()) return s;  // finish the step
  return removed;
}

absl::StatusOr<std::optional<int64_t>> SqliteMessageRows::PresenceGeneration(
    absl::string_view agent_id) {
  absl::StatusOr<Stmt> owner = conn_.Prepare(
      "SELECT presence_generation FROM agents WHERE agent_id = ?");
  if (!owner.ok()) return owner.status();
  owner->Bind(1, agent_id);
  return rows::ReadOne<int64_t>(*owner, [](const Stmt& s) { return s.Int(0); });
}

absl::StatusOr<std::vector<MessageRecord>> SqliteMessageRows::PendingForAgent(
    absl::string_view agent_id, int64_t now_ms, int limit) {
  // The first page of ListPendingPage, any topic, `limit` rows exactly as
  // given (LIMIT 0 is none, a negative limit all).
  absl::StatusOr<Stmt> stmt = conn_.Prepare(rows::kPendingPageSql);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, agent_id)
      .Bind(2, now_ms)
      .Bind(3, std::optional<std::string>())
      .Bind(4, std::numeric_limits<int64_t>::max())
      .Bind(5, int64_t{0})
      .Bind(6, absl::string_view(""))
      .Bind(7, static_cast<int64_t>(limit));
  return rows::ReadAll<MessageRecord>(*stmt, rows::ReadMessage);
}

absl::StatusOr<std::vector<MessageRecord>> SqliteMessageRows::PendingPage(
    const PendingPageQuery& q) {
  // The agent's inbox rows (idx_inbox_agent) are sorted to page them: a
  // page costs the agent's pending messages (bounded by the inbox limit),
  // and returns only rows after the last key.
  absl::StatusOr<Stmt> stmt = conn_.Prepare(rows::kPendingPageSql);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(q.agent_id))
      .Bind(2, q.now_ms)
      .Bind(3, q.topic)
      .Bind(4,
            q.after ? q.after->priority : std::numeric_limits<int64_t>::max())
      .Bind(5, q.after ? q.after->created_at_ms : int64_t{0})
      .Bind(6, absl::string_view(q.after ? q.after->id : ""))
      .Bind(7, rows::SqlLimit(q.limit));
  return rows::ReadAll<MessageRecord>(*stmt, rows::ReadMessage);
}

absl::StatusOr<int64_t> SqliteMessageRows::CountPending(
    absl::string_view agent_id, int64_t now_ms, int64_t limit) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT COUNT(*) FROM (SELECT 1 FROM message_inbox i "
      "JOIN messages m ON m.id = i.message_id "
      "WHERE i.agent_id = ?1 AND i.acked_at_ms IS NULL "
      "AND m.status IN ('queued', 'delivered') AND m.expires_at_ms > ?2 "
      "LIMIT ?3)");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, agent_id).Bind(2, now_ms).Bind(3, limit);
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return stmt->Int(0);
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
SqliteMessageRows::CountPendingByAgent(int64_t now_ms) {
  absl::StatusOr<Stmt> stmt = conn_.Prepare(
      "SELECT i.agent_id, COUNT(*) FROM message_inbox i "
      "JOIN messages m ON m.id = i.message_id "
      "WHERE i.acked_at_ms IS NULL "
      "AND m.status IN ('queued', 'delivered') AND m.expires_at_ms > ?1 "
      "GROUP BY i.agent_id ORDER BY i.agent_id");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, now_ms);
  return rows::ReadAll<std::pair<std::string, int64_t>>(
      *stmt, [](const Stmt& s) { return std::make_pair(s.Text(0), s.Int(1)); });
}

absl::StatusOr<std::vector<MessageRecord>> SqliteMessageRows::RoleBacklog(
    absl::string_view wire, int64_t now_ms) {
  return rows::PendingRoleMessages(conn_, std::string(wire), now_ms);
}

absl::StatusOr<std::vector<MessageRecord>> SqliteMessageRows::TracePage(
    const TracePageQuery& q) {
  // idx_messages_trace finds the trace's rows; they are sorted to page
  // them, so a page costs the trace's size, never the table's.
  absl::StatusOr<Stmt> stmt = conn_.Prepare(rows::kTracePageSql);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, absl::string_view(q.trace_id))
      .Bind(2, q.after ? q.after->created_at_ms
                       : std::numeric_limits<int64_t>::min())
      .Bind(3, absl::string_view(q.after ? q.after->id : ""))
      .Bind(4, rows::SqlLimit(q.limit));
  return rows::ReadAll<MessageRecord>(*stmt, rows::ReadMessage);
}

absl::StatusOr<std::vector<DeadLetterRow>> SqliteMessageRows::DeadLetterPage(
    const DeadLetterPageQuery& q) {
  // idx_dead_letters_failed (failed_at_ms DESC, message_id) gives the
  // order; the redundant `failed_at_ms <= ?3` lets it seek to the page
  // instead of scanning the rows before it.
  absl::StatusOr<Stmt> stmt = conn_.Prepare(rows::kDeadLettersPageSql);
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, q.reason)
      .Bind(2, q.from_agent)
      .Bind(3, q.after ? q.after->failed_at_ms
                       : std::numeric_limits<int64_t>::max())
      .Bind(4, absl::string_view(q.after ? q.after->message_id : ""))
      .Bind(5, rows::SqlLimit(q.limit));
  return rows::ReadAll<DeadLetterRow>(*stmt, [](const Stmt& s) {
    DeadLetterRow row;
    if (s.OptText(0).has_value()) row.message = rows::ReadMessage(s);
    row.dead_letter = rows::ReadDeadLetterRow(s, 14);  // after the message's 14
    return row;
  });
}

void SqliteMessageRows::Undone() { store_.pending_.Clear(); }

}  // namespace hub::storage
