// SqliteStore: messages, per-recipient inbox rows, expiry and dead letters
// (TRIFLUX-HUB.md §6, B0 expiry of §6.6).
#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/role_ops.h"
#include "storage/sqlite/sqlite_role_rows.h"
#include "storage/sqlite/sqlite_rows.h"
#include "storage/sqlite/sqlite_store.h"

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

absl::StatusOr<std::optional<MessageRecord>> LoadMessage(Connection& conn,
                                                         absl::string_view id) {
  absl::StatusOr<Stmt> stmt =
      conn.Prepare("SELECT " HUB_MESSAGE_COLUMNS " FROM messages WHERE id = ?");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, id);
  return rows::ReadOne<MessageRecord>(*stmt, rows::ReadMessage);
}

absl::Status MessageNotFound(absl::string_view id) {
  return NotFoundError("MESSAGE_NOT_FOUND",
                       absl::StrCat("message '", id, "' not found"));
}

// A recipient's row; `delivered_at_ms` set: handed to its stream already
// (one attempt).
absl::Status InsertInboxRow(Connection& conn, absl::string_view message_id,
                            absl::string_view agent_id,
                            std::optional<int64_t> delivered_at_ms = {}) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "INSERT INTO message_inbox (message_id, agent_id, delivered_at_ms, "
      "attempts) VALUES (?1, ?2, ?3, ?4) "
      "ON CONFLICT(message_id, agent_id) DO NOTHING");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, message_id)
      .Bind(2, agent_id)
      .Bind(3, delivered_at_ms)
      .Bind(4, int64_t{delivered_at_ms.has_value() ? 1 : 0});
  return stmt->Run();
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
  absl::StatusOr<std::vector<std::string>> agents = rows::ReadAll<std::string>(
      *stmt, [](const Stmt& s) { return s.Text(0); });
  if (!agents.ok()) return agents.status();
  for (const std::string& agent : *agents) Add(agent, -1);
  return absl::OkStatus();
}

// Inserts the message, its inbox rows and, for `deliver_to` (recipients
// about to be pushed to), a first delivery attempt; the message then starts
// out delivered. Returns the delivered inbox rows in `deliver_to` order.
// With a limit, a full inbox refuses the message before anything is written.
absl::StatusOr<std::vector<InboxRecord>> SqliteStore::InsertMessageIn(
    Connection& conn, const MessageRecord& m,
    const std::vector<std::string>& recipients,
    const std::vector<std::string>& deliver_to, int64_t now_ms,
    int64_t max_pending_per_inbox) {
  const bool pending = IsPending(m.status);
  // Inside the write: a lead scope closed after the publish was checked
  // still refuses its message (nothing is written).
  if (m.role_key_wire.has_value()) {
    SqliteRoleRows roles(conn, *this);
    if (absl::Status s = GuardOpenScope(roles, *m.role_key_wire); !s.ok()) {
      return s;
    }
  }
  if (max_pending_per_inbox > 0 && pending) {
    for (const std::string& agent : recipients) {
      absl::StatusOr<int64_t> count = pending_.Get(conn, agent);
      if (!count.ok()) return count.status();
      if (*count >= max_pending_per_inbox)
        return InboxFullError(agent, max_pending_per_inbox);
    }
  }
  absl::StatusOr<Stmt> stmt = conn.Prepare(
      "INSERT INTO messages (" HUB_MESSAGE_COLUMNS
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
      "?14)");
  if (!stmt.ok()) return stmt.status();
  const bool delivering =
      !deliver_to.empty() && m.status == MessageStatus::kQueued;
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
      .Bind(13, MessageStatusName(delivering ? MessageStatus::kDelivered
                                             : m.status))
      .Bind(14, m.role_key_wire);
  absl::Status s = stmt->Run();
  if (!s.ok() &&
      sqlite3_extended_errcode(conn.raw()) == SQLITE_CONSTRAINT_PRIMARYKEY) {
    return ReasonError(absl::StatusCode::kAlreadyExists, "MESSAGE_EXISTS",
                       absl::StrCat("message '", m.id, "' already exists"));
  }
  if (!s.ok()) return s;
  // A recipient whose stream gets the message now starts delivered: one
  // insert, no update of idx_inbox_agent after it.
  const absl::flat_hash_set<absl::string_view> now_delivered(deliver_to.begin(),
                                                             deliver_to.end());
  const absl::flat_hash_set<absl::string_view> recipient_set(recipients.begin(),
                                                             recipients.end());
  for (const std::string& agent : deliver_to) {
    if (!recipient_set.contains(agent)) {
      return NotFoundError(
          "DELIVERY_NOT_FOUND",
          absl::StrCat("message '", m.id, "' has no recipient '", agent, "'"));
    }
  }
  std::vector<InboxRecord> delivered;
  delivered.reserve(deliver_to.size());
  std::vector<const std::string*> inserted;  // a recipient named twice: once
  inserted.reserve(recipients.size());
  for (const std::string& agent : recipients) {
    const bool delivered_now = now_delivered.contains(agent);
    s = InsertInboxRow(
        conn, m.id, agent,
        delivered_now ? std::optional<int64_t>(now_ms) : std::nullopt);
    if (!s.ok()) return s;
    if (conn.Changes() != 1) continue;
    inserted.push_back(&agent);
    if (!delivered_now) continue;
    InboxRecord row;
    row.message_id = m.id;
    row.agent_id = agent;
    row.delivered_at_ms = now_ms;
    row.attempts = 1;
    delivered.push_back(std::move(row));
  }
  if (pending) {
    for (const std::string* agent : inserted) pending_.Add(*agent, 1);
  }
  return delivered;
}

// Moves one message from `from_status` to dead_letter and inserts its dead
// letter row if absent (first writer wins). Both or neither: the caller's
// savepoint undoes the status change if the insert fails (and the caller
// drops the pending counts it may have adjusted). Returns nullopt when the
// status fence was lost, else whether the dead letter was inserted.
absl::StatusOr<std::optional<bool>> SqliteStore::DeadLetterIfStatus(
    Connection& conn, absl::string_view id, MessageStatus from_status,
    absl::string_view reason, int64_t now_ms,
    const std::optional<std::string>& last_error) {
  absl::StatusOr<Stmt> claim = conn.Prepare(
      "UPDATE messages SET status = 'dead_letter' WHERE id = ? AND status = ?");
  if (!claim.ok()) return claim.status();
  claim->Bind(1, id).Bind(2, MessageStatusName(from_status));
  absl::Status s = claim->Run();
  if (!s.ok()) return s;
  if (conn.Changes() != 1) return std::optional<bool>();
  if (s = pending_.MessageLeftPending(conn, id); !s.ok()) return s;
  absl::StatusOr<Stmt> dlq = conn.Prepare(
      "INSERT INTO dead_letters (message_id, reason, failed_at_ms, last_error) "
      "VALUES (?, ?, ?, ?) ON CONFLICT(message_id) DO NOTHING");
  if (!dlq.ok()) return dlq.status();
  dlq->Bind(1, id).Bind(2, reason).Bind(3, now_ms).Bind(4, last_error);
  s = dlq->Run();
  if (!s.ok()) return s;
  return std::optional<bool>(conn.Changes() == 1);
}

absl::Status SqliteStore::InsertMessage(
    const MessageRecord& m, const std::vector<std::string>& recipients) {
  return WriteStatus([&](Connection& conn) -> absl::Status {
    return InsertMessageIn(conn, m, recipients, {}, 0, 0).status();
  });
}

absl::StatusOr<std::vector<InboxRecord>> SqliteStore::InsertMessageDelivering(
    const MessageRecord& m, const std::vector<std::string>& recipients,
    const std::vector<std::string>& deliver_to, int64_t now_ms,
    int64_t max_pending_per_inbox) {
  return Write<std::vector<InboxRecord>>([&](Connection& conn) {
    return InsertMessageIn(conn, m, recipients, deliver_to, now_ms,
                           max_pending_per_inbox);
  });
}

void SqliteStore::InsertMessageDeliveringAsync(
    const MessageRecord& m, const std::vector<std::string>& recipients,
    const std::vector<std::string>& deliver_to, int64_t now_ms,
    int64_t max_pending_per_inbox, Callback<std::vector<InboxRecord>> done) {
  WriteAsync<std::vector<InboxRecord>>(
      [this, m, recipients, deliver_to, now_ms,
       max_pending_per_inbox](Connection& conn) {
        return InsertMessageIn(conn, m, recipients, deliver_to, now_ms,
                               max_pending_per_inbox);
      },
      std::move(done));
}

absl::StatusOr<bool> SqliteStore::AddRecipient(absl::string_view message_id,
                                               absl::string_view agent_id) {
  return Write<bool>([&](Connection& conn) -> absl::StatusOr<bool> {
    absl::StatusOr<std::optional<MessageRecord>> m =
        LoadMessage(conn, message_id);
    if (!m.ok()) return m.status();
    if (!m->has_value()) return MessageNotFound(message_id);
    if (absl::Status s = InsertInboxRow(conn, message_id, agent_id); !s.ok())
      return s;
    const bool added = conn.Changes() == 1;
    if (added && IsPending((*m)->status)) pending_.Add(agent_id, 1);
    return added;
  });
}

absl::StatusOr<std::optional<InboxRecord>> SqliteStore::MarkDeliveredIfUnacked(
    absl::string_view message_id, absl::string_view agent_id, int64_t now_ms) {
  using Marked = std::optional<InboxRecord>;
  return Write<Marked>([&](Connection& conn) -> absl::StatusOr<Marked> {
    // The fence: a row acknowledged, or a message settled, since the caller
    // read it changes nothing (MessageStore::MarkDeliveredIfUnacked).
    absl::StatusOr<Stmt> inbox = conn.Prepare(
        "UPDATE message_inbox SET "
        "delivered_at_ms = COALESCE(delivered_at_ms, ?3), "
        "attempts = attempts + 1 WHERE message_id = ?1 AND agent_id = ?2 "
        "AND acked_at_ms IS NULL AND EXISTS (SELECT 1 FROM messages "
        "WHERE id = ?1 AND status IN ('queued', 'delivered')) "
        "RETURNING message_id, agent_id, delivered_at_ms, acked_at_ms, "
        "attempts");
    if (!inbox.ok()) return inbox.status();
    inbox->Bind(1, message_id).Bind(2, agent_id).Bind(3, now_ms);
    absl::StatusOr<bool> row = inbox->Step();
    if (!row.ok()) return row.status();
    if (!*row) {
      absl::StatusOr<Stmt> exists = conn.Prepare(
          "SELECT 1 FROM message_inbox WHERE message_id = ?1 "
          "AND agent_id = ?2");
      if (!exists.ok()) return exists.status();
      exists->Bind(1, message_id).Bind(2, agent_id);
      absl::StatusOr<bool> found = exists->Step();
      if (!found.ok()) return found.status();
      if (*found) return Marked();
      return NotFoundError("DELIVERY_NOT_FOUND",
                           absl::StrCat("message '", message_id,
                                        "' has no recipient '", agent_id, "'"));
    }
    InboxRecord delivered;
    delivered.message_id = inbox->Text(0);
    delivered.agent_id = inbox->Text(1);
    delivered.delivered_at_ms = inbox->OptInt(2);
    delivered.acked_at_ms = inbox->OptInt(3);
    delivered.attempts = inbox->Int(4);
    if (absl::Status s = inbox->Run(); !s.ok()) return s;  // finish the step
    absl::StatusOr<Stmt> msg = conn.Prepare(
        "UPDATE messages SET status = 'delivered' "
        "WHERE id = ? AND status = 'queued'");
    if (!msg.ok()) return msg.status();
    msg->Bind(1, message_id);
    if (absl::Status s = msg->Run(); !s.ok()) return s;
    return Marked(std::move(delivered));
  });
}

absl::StatusOr<bool> SqliteStore::AckIn(Connection& conn,
                                        absl::string_view message_id,
                                        absl::string_view agent_id,
                                        int64_t now_ms) {
  absl::StatusOr<Stmt> ack = conn.Prepare(
      "UPDATE message_inbox SET acked_at_ms = ?3 "
      "WHERE message_id = ?1 AND agent_id = ?2 "
      "AND delivered_at_ms IS NOT NULL AND acked_at_ms IS NULL "
      "AND EXISTS (SELECT 1 FROM messages WHERE id = ?1 "
      "AND status IN ('queued', 'delivered'))");
  if (!ack.ok()) return ack.status();
  ack->Bind(1, message_id).Bind(2, agent_id).Bind(3, now_ms);
  absl::Status s = ack->Run();
  if (!s.ok()) return s;
  if (conn.Changes() != 1) return false;
  absl::StatusOr<Stmt> done = conn.Prepare(
      "UPDATE messages SET status = 'acked' "
      "WHERE id = ?1 AND status IN ('queued', 'delivered') "
      "AND NOT EXISTS (SELECT 1 FROM message_inbox "
      "WHERE message_id = ?1 AND acked_at_ms IS NULL)");
  if (!done.ok()) return done.status();
  done->Bind(1, message_id);
  s = done->Run();
  if (!s.ok()) return s;
  pending_.Add(agent_id, -1);
  return true;
}

absl::StatusOr<bool> SqliteStore::AckMessage(absl::string_view message_id,
                                             absl::string_view agent_id,
                                             int64_t now_ms) {
  return Write<bool>([&](Connection& conn) -> absl::StatusOr<bool> {
    absl::StatusOr<bool> acked = AckIn(conn, message_id, agent_id, now_ms);
    if (!acked.ok()) pending_.Clear();
    return acked;
  });
}

// AckMessages in one operation: each id acked, or looked up when there was
// nothing to ack (acked before by this agent counts as acknowledged).
absl::StatusOr<std::vector<bool>> SqliteStore::AckAllIn(
    Connection& conn, absl::string_view agent_id,
    const std::vector<std::string>& message_ids, int64_t now_ms,
    std::optional<int64_t> presence_generation) {
  // The acknowledging owner is checked in the acks' own transaction: a
  // re-registration committed before them makes the whole op stale.
  absl::StatusOr<Stmt> owner =
      conn.Prepare("SELECT presence_generation FROM agents WHERE agent_id = ?");
  if (!owner.ok()) return owner.status();
  owner->Bind(1, agent_id);
  absl::StatusOr<bool> found = owner->Step();
  if (!found.ok()) return found.status();
  if (!*found) return ToStatus(PresenceOutcome::kNotFound, agent_id);
  if (absl::Status stale =
          CheckAckGeneration(owner->Int(0), presence_generation);
      !stale.ok()) {
    return stale;
  }
  std::vector<bool> out;
  out.reserve(message_ids.size());
  absl::Status s;
  for (const std::string& id : message_ids) {
    absl::StatusOr<bool> acked = AckIn(conn, id, agent_id, now_ms);
    if (!acked.ok()) {
      s = acked.status();
      break;
    }
    if (!*acked) {
      absl::StatusOr<Stmt> before = conn.Prepare(
          "SELECT 1 FROM message_inbox WHERE message_id = ? AND agent_id = ? "
          "AND acked_at_ms IS NOT NULL");
      if (!before.ok()) {
        s = before.status();
        break;
      }
      before->Bind(1, absl::string_view(id)).Bind(2, agent_id);
      acked = before->Step();
      if (!acked.ok()) {
        s = acked.status();
        break;
      }
    }
    out.push_back(*acked);
  }
  if (!s.ok()) {
    pending_.Clear();  // earlier ids of this op adjusted it; all undone
    return s;
  }
  return out;
}

absl::StatusOr<std::vector<bool>> SqliteStore::AckMessages(
    absl::string_view agent_id, const std::vector<std::string>& message_ids,
    int64_t now_ms, std::optional<int64_t> presence_generation) {
  return Write<std::vector<bool>>([&](Connection& conn) {
    return AckAllIn(conn, agent_id, message_ids, now_ms, presence_generation);
  });
}

void SqliteStore::AckMessagesAsync(absl::string_view agent_id,
                                   const std::vector<std::string>& message_ids,
                                   int64_t now_ms,
                                   std::optional<int64_t> presence_generation,
                                   Callback<std::vector<bool>> done) {
  WriteAsync<std::vector<bool>>(
      [this, agent = std::string(agent_id), message_ids, now_ms,
       presence_generation](Connection& conn) {
        return AckAllIn(conn, agent, message_ids, now_ms, presence_generation);
      },
      std::move(done));
}

absl::StatusOr<MessageRecord> SqliteStore::GetMessage(absl::string_view id) {
  return Read<MessageRecord>(
      [&](Connection& conn) -> absl::StatusOr<MessageRecord> {
        absl::StatusOr<std::optional<MessageRecord>> m = LoadMessage(conn, id);
        if (!m.ok()) return m.status();
        if (!m->has_value()) return MessageNotFound(id);
        return std::move(**m);
      });
}

absl::StatusOr<std::vector<InboxRecord>> SqliteStore::ListInbox(
    absl::string_view message_id) {
  using Result = std::vector<InboxRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    absl::StatusOr<Stmt> stmt = conn.Prepare(
        "SELECT " HUB_INBOX_COLUMNS
        " FROM message_inbox WHERE message_id = ? ORDER BY agent_id");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, message_id);
    return rows::ReadAll<InboxRecord>(
        *stmt, [](const Stmt& s) { return rows::ReadInboxRow(s); });
  });
}

absl::StatusOr<std::vector<MessageRecord>> SqliteStore::ListPendingForAgent(
    absl::string_view agent_id, int64_t now_ms, int limit) {
  // The first page of ListPendingPage, any topic, `limit` rows exactly as
  // given (LIMIT 0 is none, a negative limit all).
  using Result = std::vector<MessageRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    absl::StatusOr<Stmt> stmt = conn.Prepare(rows::kPendingPageSql);
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, agent_id)
        .Bind(2, now_ms)
        .Bind(3, std::optional<std::string>())
        .Bind(4, std::numeric_limits<int64_t>::max())
        .Bind(5, int64_t{0})
        .Bind(6, absl::string_view(""))
        .Bind(7, static_cast<int64_t>(limit));
    return rows::ReadAll<MessageRecord>(*stmt, rows::ReadMessage);
  });
}

absl::StatusOr<std::vector<MessageRecord>> SqliteStore::ListPendingPage(
    const PendingPageQuery& q) {
  using Result = std::vector<MessageRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    // The agent's inbox rows (idx_inbox_agent) are sorted to page them: a
    // page costs the agent's pending messages (bounded by the inbox limit),
    // and returns only rows after the last key.
    absl::StatusOr<Stmt> stmt = conn.Prepare(rows::kPendingPageSql);
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
  });
}

absl::StatusOr<int64_t> SqliteStore::CountPendingForAgent(
    absl::string_view agent_id, int64_t now_ms, int64_t limit) {
  return Read<int64_t>([&](Connection& conn) -> absl::StatusOr<int64_t> {
    absl::StatusOr<Stmt> stmt = conn.Prepare(
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
  });
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
SqliteStore::CountPendingByAgent(int64_t now_ms) {
  using Counts = std::vector<std::pair<std::string, int64_t>>;
  return Read<Counts>([&](Connection& conn) -> absl::StatusOr<Counts> {
    absl::StatusOr<Stmt> stmt = conn.Prepare(
        "SELECT i.agent_id, COUNT(*) FROM message_inbox i "
        "JOIN messages m ON m.id = i.message_id "
        "WHERE i.acked_at_ms IS NULL "
        "AND m.status IN ('queued', 'delivered') AND m.expires_at_ms > ?1 "
        "GROUP BY i.agent_id ORDER BY i.agent_id");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, now_ms);
    Counts counts;
    for (;;) {
      absl::StatusOr<bool> row = stmt->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      counts.emplace_back(stmt->Text(0), stmt->Int(1));
    }
    return counts;
  });
}

absl::StatusOr<std::vector<MessageRecord>> SqliteStore::ListPendingRoleMessages(
    absl::string_view wire, int64_t now_ms) {
  using Result = std::vector<MessageRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    return rows::PendingRoleMessages(conn, std::string(wire), now_ms);
  });
}

absl::StatusOr<std::vector<ExpiryTransition>> SqliteStore::SweepExpiredMessages(
    int64_t now_ms) {
  using Result = std::vector<ExpiryTransition>;
  return Write<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    absl::StatusOr<Stmt> select = conn.Prepare(rows::kExpiredMessagesSql);
    if (!select.ok()) return select.status();
    select->Bind(1, now_ms);
    absl::StatusOr<Result> expired =
        rows::ReadAll<ExpiryTransition>(*select, [&](const Stmt& s) {
          ExpiryTransition t;
          t.message_id = s.Text(0);
          t.previous_status = rows::StoredMessageStatus(s.Text(1));
          t.reason = "ttl_expired";
          t.failed_at_ms = now_ms;
          return t;
        });
    if (!expired.ok()) return expired.status();
    Result claimed;
    for (ExpiryTransition& t : *expired) {
      absl::StatusOr<std::optional<bool>> inserted =
          DeadLetterIfStatus(conn, t.message_id, t.previous_status, t.reason,
                             now_ms, std::nullopt);
      if (!inserted.ok()) {
        pending_.Clear();  // earlier claims of this op adjusted it
        return inserted.status();
      }
      if (!inserted->has_value()) continue;  // fence lost: someone else won
      t.dlq_inserted = **inserted;
      claimed.push_back(std::move(t));
    }
    return claimed;
  });
}

absl::StatusOr<bool> SqliteStore::DeadLetterMessage(
    absl::string_view message_id, absl::string_view reason, int64_t now_ms,
    std::optional<std::string> last_error) {
  return Write<bool>([&](Connection& conn) -> absl::StatusOr<bool> {
    absl::StatusOr<std::optional<MessageRecord>> m =
        LoadMessage(conn, message_id);
    if (!m.ok()) return m.status();
    if (!m->has_value()) return MessageNotFound(message_id);
    const MessageStatus status = (*m)->status;
    if (!IsPending(status)) return false;
    absl::StatusOr<std::optional<bool>> moved = DeadLetterIfStatus(
        conn, message_id, status, reason, now_ms, last_error);
    if (!moved.ok()) {
      pending_.Clear();
      return moved.status();
    }
    return moved->has_value();
  });
}

absl::StatusOr<std::vector<MessageRecord>> SqliteStore::ListTraceMessages(
    const TracePageQuery& q) {
  using Result = std::vector<MessageRecord>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    // idx_messages_trace finds the trace's rows; they are sorted to page
    // them, so a page costs the trace's size, never the table's.
    absl::StatusOr<Stmt> stmt = conn.Prepare(rows::kTracePageSql);
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, absl::string_view(q.trace_id))
        .Bind(2, q.after ? q.after->created_at_ms
                         : std::numeric_limits<int64_t>::min())
        .Bind(3, absl::string_view(q.after ? q.after->id : ""))
        .Bind(4, rows::SqlLimit(q.limit));
    return rows::ReadAll<MessageRecord>(*stmt, rows::ReadMessage);
  });
}

absl::StatusOr<std::vector<DeadLetterRow>> SqliteStore::ListDeadLetters(
    const DeadLetterPageQuery& q) {
  using Result = std::vector<DeadLetterRow>;
  return Read<Result>([&](Connection& conn) -> absl::StatusOr<Result> {
    // idx_dead_letters_failed (failed_at_ms DESC, message_id) gives the
    // order; the redundant `failed_at_ms <= ?3` lets it seek to the page
    // instead of scanning the rows before it.
    absl::StatusOr<Stmt> stmt = conn.Prepare(rows::kDeadLettersPageSql);
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
      row.dead_letter =
          rows::ReadDeadLetterRow(s, 14);  // after the message's 14
      return row;
    });
  });
}

absl::StatusOr<DeadLetterRecord> SqliteStore::GetDeadLetter(
    absl::string_view message_id) {
  return Read<DeadLetterRecord>(
      [&](Connection& conn) -> absl::StatusOr<DeadLetterRecord> {
        absl::StatusOr<Stmt> stmt = conn.Prepare(
            "SELECT message_id, reason, failed_at_ms, last_error "
            "FROM dead_letters WHERE message_id = ?");
        if (!stmt.ok()) return stmt.status();
        stmt->Bind(1, message_id);
        absl::StatusOr<std::optional<DeadLetterRecord>> row =
            rows::ReadOne<DeadLetterRecord>(*stmt, [](const Stmt& s) {
              return rows::ReadDeadLetterRow(s);
            });
        if (!row.ok()) return row.status();
        if (!row->has_value()) {
          return NotFoundError(
              "DEAD_LETTER_NOT_FOUND",
              absl::StrCat("no dead letter for message '", message_id, "'"));
        }
        return std::move(**row);
      });
}

namespace {

// The agents a re-drive of `message_id` makes pending: its unacknowledged
// recipients, and `add` unless it has a row already (acknowledged or not).
absl::StatusOr<std::vector<std::string>> RedriveRecipients(
    Connection& conn, absl::string_view message_id,
    const std::optional<std::string>& add) {
  absl::StatusOr<Stmt> s = conn.Prepare(
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

}  // namespace

// RedriveDeadLetter: the message's row decides (its status fence in the
// UPDATE), then its unacknowledged rows become pending again and the dead
// letter goes, all in this operation.
absl::StatusOr<RedriveResult> SqliteStore::RedriveIn(
    Connection& conn, const DeadLetterRedrive& r) {
  absl::StatusOr<std::optional<MessageRecord>> m =
      LoadMessage(conn, r.message_id);
  if (!m.ok()) return m.status();
  if (!m->has_value()) return MessageNotFound(r.message_id);
  if ((*m)->role_key_wire.has_value()) {
    SqliteRoleRows roles(conn, *this);
    if (absl::Status s = GuardOpenScope(roles, *(*m)->role_key_wire); !s.ok()) {
      return s;
    }
  }
  // As a publish's: the inboxes it would fill refuse it before any write.
  if (r.max_pending_per_inbox > 0 &&
      (*m)->status == MessageStatus::kDeadLetter) {
    absl::StatusOr<std::vector<std::string>> would =
        RedriveRecipients(conn, r.message_id, r.add_recipient);
    if (!would.ok()) return would.status();
    for (const std::string& agent : *would) {
      absl::StatusOr<int64_t> count = pending_.Get(conn, agent);
      if (!count.ok()) return count.status();
      if (*count >= r.max_pending_per_inbox) {
        return InboxFullError(agent, r.max_pending_per_inbox);
      }
    }
  }
  absl::StatusOr<Stmt> requeue = conn.Prepare(
      "UPDATE messages SET status = 'queued', expires_at_ms = ?2 + ttl_ms "
      "WHERE id = ?1 AND status = 'dead_letter'");
  if (!requeue.ok()) return requeue.status();
  requeue->Bind(1, absl::string_view(r.message_id)).Bind(2, r.now_ms);
  if (absl::Status s = requeue->Run(); !s.ok()) return s;
  if (conn.Changes() != 1)
    return NotDeadLetterError(r.message_id, (*m)->status);
  absl::StatusOr<Stmt> rows_again = conn.Prepare(
      "UPDATE message_inbox SET delivered_at_ms = NULL "
      "WHERE message_id = ? AND acked_at_ms IS NULL RETURNING agent_id");
  if (!rows_again.ok()) return rows_again.status();
  rows_again->Bind(1, absl::string_view(r.message_id));
  absl::StatusOr<std::vector<std::string>> agents = rows::ReadAll<std::string>(
      *rows_again, [](const Stmt& s) { return s.Text(0); });
  if (!agents.ok()) return agents.status();
  RedriveResult result;
  result.recipients = std::move(*agents);
  if (r.add_recipient.has_value()) {
    if (absl::Status s = InsertInboxRow(conn, r.message_id, *r.add_recipient);
        !s.ok()) {
      return s;
    }
    if (conn.Changes() == 1) result.recipients.push_back(*r.add_recipient);
  }
  std::sort(result.recipients.begin(), result.recipients.end());
  absl::StatusOr<Stmt> dlq = conn.Prepare(
      "DELETE FROM dead_letters WHERE message_id = ? "
      "RETURNING message_id, reason, failed_at_ms, last_error");
  if (!dlq.ok()) return dlq.status();
  dlq->Bind(1, absl::string_view(r.message_id));
  absl::StatusOr<std::optional<DeadLetterRecord>> removed =
      rows::ReadOne<DeadLetterRecord>(
          *dlq, [](const Stmt& s) { return rows::ReadDeadLetterRow(s); });
  if (!removed.ok()) return removed.status();
  result.dead_letter = std::move(*removed);
  absl::StatusOr<std::optional<MessageRecord>> after =
      LoadMessage(conn, r.message_id);
  if (!after.ok()) return after.status();
  result.message = std::move(**after);
  // Pending again: each of these inboxes holds one more.
  for (const std::string& agent : result.recipients) pending_.Add(agent, 1);
  return result;
}

absl::StatusOr<RedriveResult> SqliteStore::RedriveDeadLetter(
    const DeadLetterRedrive& redrive) {
  return Write<RedriveResult>(
      [&](Connection& conn) { return RedriveIn(conn, redrive); });
}

}  // namespace hub::storage
