// PostgreSQL's message statements (TRIFLUX-HUB.md §6, B0 expiry of §6.6).
#include "storage/pg/pg_message_rows.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "storage/pg/pg_message_sql.h"
#include "storage/pg/pg_rows.h"

namespace hub::storage::pg {
namespace {

#define HUB_PG_M_COLUMNS                                           \
  "m.id, m.type, m.from_agent, m.to_agent, m.topic, m.priority, "  \
  "m.ttl_ms, m.created_at_ms, m.expires_at_ms, m.correlation_id, " \
  "m.trace_id, m.payload_json, m.status, m.role_key_wire"

// Locks each distinct recipient's pending count (storage/pg/schema.sql's
// hub_inbox_pending, which the writer keeps) until the group commits, in
// agent order so two publishes never wait on each other crosswise, and
// reads it less what was settled (hub_inbox_settled, not locked: a settle
// committed after this statement began only makes the inbox look fuller).
// The locked row is the latest committed one, since a lock waits for its
// holder's commit. A lock, not an update: the row's next version is the
// insert's own +1 (HUB_PG_COUNT_INBOX_ROWS), so a group of publishes to one
// agent leaves one version of its row per publish, not two (each version is
// one more step for every later statement of the group that finds the row).
// `agents` names the text[] parameter of the recipients.
#define HUB_PG_LOCK_PENDING_COUNTS(agents)                      \
  "SELECT p.agent_id, p.pending - COALESCE(s.settled, 0) AS n " \
  "FROM hub_inbox_pending p "                                   \
  "LEFT JOIN hub_inbox_settled s ON s.agent_id = p.agent_id "   \
  "WHERE p.agent_id = ANY(" agents                              \
  "::text[]) ORDER BY p.agent_id "                              \
  "FOR UPDATE OF p"
constexpr char kLockPendingCountsSql[] = HUB_PG_LOCK_PENDING_COUNTS("$1");

// When a recipient has no row yet (its first publish ever): creates the
// missing rows (count 0) and locks them all in agent order, so that a
// first publish is serialized too. A recipient need not be a registered
// agent. Rows that exist are locked again by an update (no change).
constexpr char kCreatePendingCountsSql[] =
    "WITH p AS (INSERT INTO hub_inbox_pending AS p (agent_id, pending) "
    "SELECT DISTINCT a, 0 FROM unnest($1::text[]) AS a ORDER BY a "
    "ON CONFLICT (agent_id) DO UPDATE SET pending = p.pending "
    "RETURNING agent_id, pending) "
    "SELECT p.agent_id, p.pending - COALESCE(s.settled, 0) FROM p "
    "LEFT JOIN hub_inbox_settled s ON s.agent_id = p.agent_id";

constexpr char kInsertMessageSql[] =
    "INSERT INTO messages (" HUB_MESSAGE_COLUMNS
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) "
    "ON CONFLICT (id) DO NOTHING RETURNING id";

// The inbox rows of the message that a CTE `m` inserted: $15 the
// recipients, in order; those in $16 start delivered at $17 with one attempt.
#define HUB_PG_INBOX_FROM_M                                            \
  "INSERT INTO message_inbox (message_id, agent_id, delivered_at_ms, " \
  "attempts) SELECT m.id, r.agent, "                                   \
  "CASE WHEN r.agent = ANY($16::text[]) THEN $17::bigint END, "        \
  "CASE WHEN r.agent = ANY($16::text[]) THEN 1 ELSE 0 END "            \
  "FROM m, unnest($15::text[]) WITH ORDINALITY AS r(agent, ord) "      \
  "ORDER BY r.ord "                                                    \
  "ON CONFLICT (message_id, agent_id) DO NOTHING RETURNING agent_id"

// The rows the CTE `i` wrote count in their agents' inboxes when the
// message ($13: its status) is pending: the writer keeps the counts
// (storage/pg/schema.sql), in agent order. In a publish within the limit
// the rows are those `c` locked, so this writes their one new version.
#define HUB_PG_COUNT_INBOX_ROWS                                   \
  "n AS (INSERT INTO hub_inbox_pending AS p (agent_id, pending) " \
  "SELECT agent_id, count(*) FROM i "                             \
  "WHERE $13::text IN ('queued', 'delivered') "                   \
  "GROUP BY agent_id ORDER BY agent_id ON CONFLICT (agent_id) "   \
  "DO UPDATE SET pending = p.pending + excluded.pending) "

// The message and every recipient's row in one statement (one round trip):
// those in $16 (about to be pushed) start delivered with one attempt; a
// recipient named twice gets one row. When the message's id is taken, `m`
// is empty and no inbox row is written, so no row comes back (a new message
// always gets at least one). The inbox rows' foreign key check runs at the
// statement's end and sees the message the CTE inserted.
constexpr char kInsertMessageWithInboxSql[] =
    "WITH m AS (INSERT INTO messages (" HUB_MESSAGE_COLUMNS
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) "
    "ON CONFLICT (id) DO NOTHING RETURNING id), "
    "i AS (" HUB_PG_INBOX_FROM_M "), " HUB_PG_COUNT_INBOX_ROWS
    "SELECT agent_id FROM i";

// kInsertMessageWithInboxSql behind the inbox limit, in the same one
// statement: `c` locks the recipients' counts with kLockPendingCountsSql's
// text (agent order, the latest committed row), and the message and its
// rows are written only when every distinct recipient ($19 of them) has a
// count row and none holds $18 pending. Returns the inbox rows written.
// None came back when a recipient is full or has no count row yet, or the
// id is taken: nothing was written, and the caller finds out which with
// the statements of old (uncommon cases; a refusal then returns no row, so
// it does not look like a write, Connection::total_changed()).
constexpr char kInsertMessageWithinLimitSql[] =
    "WITH c AS MATERIALIZED (" HUB_PG_LOCK_PENDING_COUNTS("$15") "), "
    "go AS (SELECT count(*) = $19::bigint "
    "AND COALESCE(bool_and(n < $18::bigint), true) AS ok FROM c), "
    "m AS (INSERT INTO messages (" HUB_MESSAGE_COLUMNS
    ") SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14 "
    "FROM go WHERE go.ok ON CONFLICT (id) DO NOTHING RETURNING id), "
    "i AS (" HUB_PG_INBOX_FROM_M "), " HUB_PG_COUNT_INBOX_ROWS
    "SELECT agent_id FROM i";

// A statement after sql::kAckRowsSql, so its snapshot sees every ack committed
// by whoever held a message's lock before us.
constexpr char kAckMessagesSql[] =
    "UPDATE messages SET status = 'acked' "
    "WHERE id = ANY($1::text[]) AND " HUB_PG_PENDING_BY_KEY("status")
    " AND NOT EXISTS (SELECT 1 FROM message_inbox i "
    "WHERE i.message_id = messages.id AND " HUB_PG_UNACKED_BY_KEY(
        "i.acked_at_ms") ")";

constexpr char kAckedBeforeSql[] =
    "SELECT message_id FROM message_inbox WHERE message_id = ANY($1::text[]) "
    "AND agent_id = $2 AND acked_at_ms IS NOT NULL";

// The sweep in one statement: claims pending messages at or past expiry
// (skipping rows another transaction holds: another hub's sweep, or an ack
// in flight, which the next sweep sees settled), moves them to dead_letter
// and inserts their dead letters first-writer-wins.
constexpr char kSweepSql[] =
    "WITH claimed AS MATERIALIZED (SELECT id, status, expires_at_ms "
    "FROM messages WHERE status IN ('queued', 'delivered') "
    "AND expires_at_ms <= $1::bigint ORDER BY expires_at_ms, id "
    "FOR UPDATE SKIP LOCKED), "
    "moved AS (UPDATE messages m SET status = 'dead_letter' FROM claimed c "
    "WHERE m.id = c.id RETURNING m.id, c.status, c.expires_at_ms), "
    "dlq AS (INSERT INTO dead_letters (message_id, reason, failed_at_ms, "
    "last_error) SELECT id, 'ttl_expired', $1::bigint, NULL FROM moved "
    "ON CONFLICT (message_id) DO NOTHING RETURNING message_id) "
    "SELECT moved.id, moved.status, dlq.message_id IS NOT NULL "
    "FROM moved LEFT JOIN dlq ON dlq.message_id = moved.id "
    "ORDER BY moved.expires_at_ms, moved.id";

constexpr char kPendingPageSql[] =
    "SELECT " HUB_PG_M_COLUMNS
    " FROM message_inbox i JOIN messages m ON m.id = i.message_id "
    "WHERE i.agent_id = $1 AND i.acked_at_ms IS NULL "
    "AND m.status IN ('queued', 'delivered') AND m.expires_at_ms > $2::bigint "
    "AND ($3::text IS NULL OR m.topic = $3::text) "
    "AND (m.priority < $4::bigint OR (m.priority = $4::bigint "
    "AND (m.created_at_ms > $5::bigint "
    "OR (m.created_at_ms = $5::bigint AND m.id > $6::text)))) "
    "ORDER BY m.priority DESC, m.created_at_ms ASC, m.id ASC "
    "LIMIT $7::bigint";

// The agent last: columns 0..13 are the message, as ReadMessage reads them.
constexpr char kUndeliveredSql[] =
    "SELECT " HUB_PG_M_COLUMNS
    ", i.agent_id FROM message_inbox i JOIN messages m "
    "ON m.id = i.message_id WHERE i.agent_id = ANY($1::text[]) "
    "AND i.delivered_at_ms IS NULL AND i.acked_at_ms IS NULL "
    "AND m.status IN ('queued', 'delivered') "
    "AND m.expires_at_ms > $2::bigint "
    "ORDER BY i.agent_id, m.priority DESC, m.created_at_ms ASC, m.id ASC "
    "LIMIT $3::bigint";

constexpr char kTracePageSql[] =
    "SELECT " HUB_MESSAGE_COLUMNS
    " FROM messages WHERE trace_id = $1 AND created_at_ms >= $2::bigint "
    "AND (created_at_ms > $2::bigint OR id > $3::text) "
    "ORDER BY created_at_ms, id LIMIT $4::bigint";

constexpr char kDeadLettersPageSql[] =
    "SELECT " HUB_PG_M_COLUMNS
    ", d.message_id, d.reason, d.failed_at_ms, d.last_error "
    "FROM dead_letters d LEFT JOIN messages m ON m.id = d.message_id "
    "WHERE d.failed_at_ms <= $3::bigint "
    "AND (d.failed_at_ms < $3::bigint OR d.message_id > $4::text) "
    "AND ($1::text IS NULL OR d.reason = $1::text) "
    "AND ($2::text IS NULL OR m.from_agent = $2::text) "
    "ORDER BY d.failed_at_ms DESC, d.message_id ASC LIMIT $5::bigint";

#undef HUB_PG_M_COLUMNS
#undef HUB_PG_INBOX_FROM_M
#undef HUB_PG_LOCK_PENDING_COUNTS

// A page's LIMIT: `limit` when > 0, else NULL (PostgreSQL: no limit).
Param PageLimit(int64_t limit) { return limit > 0 ? P(limit) : Null(); }

InboxRecord ReadInbox(const Row& r) { return rows::ReadInboxRow(r); }
DeadLetterRecord ReadDeadLetter(const Row& r) {
  return rows::ReadDeadLetterRow(r);
}

std::vector<std::string> FirstColumn(const Result& r) {
  return ReadAll<std::string>(r, [](const Row& row) { return row.Text(0); });
}

// A statement's rows read with `read`, or its error.
template <typename T, typename F>
absl::StatusOr<std::vector<T>> Each(absl::StatusOr<Result> r, F read) {
  if (!r.ok()) return r.status();
  return ReadAll<T>(*r, read);
}

// The message's columns, as kInsertMessageSql and the inbox inserts take
// them ($1..$14).
std::vector<Param> MessageParams(const Publish& p) {
  const MessageRecord& m = p.message;
  return {P(m.id),
          P(m.type),
          P(m.from_agent),
          P(m.to_agent),
          P(m.topic),
          P(m.priority),
          P(m.ttl_ms),
          P(m.created_at_ms),
          P(m.expires_at_ms),
          P(m.correlation_id),
          P(m.trace_id),
          P(m.payload_json),
          P(p.Delivering() ? MessageStatus::kDelivered : m.status),
          P(m.role_key_wire)};
}

// How many distinct agents `recipients` names (usually one: no hashing).
int64_t DistinctCount(const std::vector<std::string>& recipients) {
  if (recipients.size() < 2) return static_cast<int64_t>(recipients.size());
  return static_cast<int64_t>(absl::flat_hash_set<absl::string_view>(
                                  recipients.begin(), recipients.end())
                                  .size());
}

// The one statement that inserts a message and its inbox rows (with the
// counts' lock and the limit `within_limit`): kInsertMessageWithinLimitSql,
// else kInsertMessageWithInboxSql. REQUIRES: recipients not empty.
Statement InboxInsert(const Publish& p, bool within_limit) {
  Statement st{kInsertMessageWithInboxSql, MessageParams(p)};
  st.params.push_back(TextArray(p.recipients));
  st.params.push_back(TextArray(p.deliver_to));
  st.params.push_back(P(p.now_ms));
  if (within_limit) {
    st.sql = kInsertMessageWithinLimitSql;
    st.params.push_back(P(p.max_pending_per_inbox));
    st.params.push_back(P(DistinctCount(p.recipients)));
  }
  return st;
}

}  // namespace

std::optional<Statement> PgMessageRows::PublishFirst(const Publish& p) {
  if (p.message.role_key_wire.has_value() || p.recipients.empty()) {
    return std::nullopt;
  }
  for (const std::string& agent : p.deliver_to) {
    if (std::find(p.recipients.begin(), p.recipients.end(), agent) ==
        p.recipients.end()) {
      return std::nullopt;
    }
  }
  return InboxInsert(p, p.Limited());
}

absl::StatusOr<std::optional<MessageRecord>> PgMessageRows::Load(
    absl::string_view id) {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT " HUB_MESSAGE_COLUMNS " FROM messages WHERE id = $1", {P(id)});
  if (!r.ok()) return r.status();
  return ReadOne<MessageRecord>(*r, ReadMessage);
}

absl::StatusOr<bool> PgMessageRows::Exists(absl::string_view id) {
  absl::StatusOr<Result> r =
      conn_.Run("SELECT 1 FROM messages WHERE id = $1", {P(id)});
  if (!r.ok()) return r.status();
  return r->rows() == 1;
}

// A new message gets a row for every distinct recipient, so whether rows
// came back says all: no need to read them.
absl::StatusOr<bool> PgMessageRows::Insert(const Publish& p,
                                           bool within_limit) {
  if (p.recipients.empty()) {
    absl::StatusOr<Result> inserted =
        conn_.Run(kInsertMessageSql, MessageParams(p));
    if (!inserted.ok()) return inserted.status();
    return inserted->rows() > 0;
  }
  absl::StatusOr<Result> rows;
  if (first_answer_.has_value()) {
    rows = std::move(*first_answer_);
    first_answer_.reset();
  } else {
    const Statement insert = InboxInsert(p, within_limit);
    rows = conn_.Run(insert.sql, insert.params);
  }
  if (!rows.ok()) return rows.status();
  return rows->rows() > 0;
}

// Decided under the counts' row locks (no overshoot by concurrent
// publishes, from this hub or another).
absl::StatusOr<absl::flat_hash_map<std::string, int64_t>>
PgMessageRows::PendingCounts(const std::vector<std::string>& agents) {
  absl::StatusOr<Result> counts =
      conn_.Run(kLockPendingCountsSql, {TextArray(agents)});
  if (!counts.ok()) return counts.status();
  const absl::flat_hash_set<absl::string_view> distinct(agents.begin(),
                                                        agents.end());
  if (counts->rows() < static_cast<int>(distinct.size())) {
    // An agent without a row (or one created by a transaction that
    // committed after this statement's snapshot): create and lock them all.
    counts = conn_.Run(kCreatePendingCountsSql, {TextArray(agents)});
    if (!counts.ok()) return counts.status();
  }
  absl::flat_hash_map<std::string, int64_t> out;
  for (int i = 0; i < counts->rows(); ++i) {
    out[std::string(counts->Text(i, 0))] = counts->Int(i, 1).value_or(0);
  }
  return out;
}

absl::Status PgMessageRows::MarkMessagesDelivered(
    const std::vector<std::string>& ids) {
  if (ids.size() == 1) {
    return conn_
        .Run(
            "UPDATE messages SET status = 'delivered' "
            "WHERE id = $1 AND status = 'queued'",
            {P(ids[0])})
        .status();
  }
  return conn_
      .Run(
          "UPDATE messages SET status = 'delivered' "
          "WHERE id = ANY($1::text[]) AND status = 'queued'",
          {TextArray(ids)})
      .status();
}

absl::Status PgMessageRows::AckMessagesDone(
    const std::vector<std::string>& ids) {
  return conn_.Run(kAckMessagesSql, {TextArray(ids)}).status();
}

// The status fence waits for, then re-checks, a concurrent writer's row.
absl::StatusOr<std::optional<bool>> PgMessageRows::DeadLetterIfPending(
    absl::string_view id, absl::string_view reason, int64_t now_ms,
    const std::optional<std::string>& last_error) {
  absl::StatusOr<Result> moved = conn_.Run(
      "UPDATE messages SET status = 'dead_letter' "
      "WHERE id = $1 AND " HUB_PG_PENDING_BY_KEY("status"),
      {P(id)});
  if (!moved.ok()) return moved.status();
  if (moved->changed() == 0) return std::optional<bool>();
  absl::StatusOr<Result> dlq = conn_.Run(
      "INSERT INTO dead_letters (message_id, reason, failed_at_ms, "
      "last_error) VALUES ($1, $2, $3::bigint, $4) "
      "ON CONFLICT (message_id) DO NOTHING",
      {P(id), P(reason), P(now_ms), P(last_error)});
  if (!dlq.ok()) return dlq.status();
  return std::optional<bool>(dlq->changed() == 1);
}

absl::StatusOr<std::vector<ExpiryTransition>> PgMessageRows::SweepExpired(
    int64_t now_ms) {
  return Each<ExpiryTransition>(
      conn_.Run(kSweepSql, {P(now_ms)}), [](const Row& row) {
        ExpiryTransition t;
        t.message_id = row.Text(0);
        t.previous_status = rows::StoredMessageStatus(row.Text(1));
        t.dlq_inserted = row.Text(2) == "t";
        return t;
      });
}

absl::Status PgMessageRows::Settled(const std::vector<std::string>& ids) {
  return SettleRowsOf(conn_, ids);
}

// The fence: a concurrent re-drive (any hub's) waits for this row's lock,
// re-reads it queued and changes nothing.
absl::StatusOr<std::optional<MessageRecord>> PgMessageRows::Requeue(
    absl::string_view id, int64_t now_ms) {
  absl::StatusOr<Result> requeued = conn_.Run(
      "UPDATE messages SET status = 'queued', "
      "expires_at_ms = $2::bigint + ttl_ms "
      "WHERE id = $1 AND status = 'dead_letter' "
      "RETURNING " HUB_MESSAGE_COLUMNS,
      {P(id), P(now_ms)});
  if (!requeued.ok()) return requeued.status();
  return ReadOne<MessageRecord>(*requeued, ReadMessage);
}

// The new row counts in the agent's inbox if the message is pending (the
// writer keeps the counts, storage/pg/schema.sql).
absl::StatusOr<bool> PgMessageRows::AddRecipient(absl::string_view message_id,
                                                 absl::string_view agent_id) {
  absl::StatusOr<Result> added = conn_.Run(
      "WITH i AS (INSERT INTO message_inbox (message_id, agent_id, "
      "delivered_at_ms, attempts) SELECT id, $2, NULL, 0 FROM messages "
      "WHERE id = $1 ON CONFLICT (message_id, agent_id) DO NOTHING "
      "RETURNING agent_id), "
      "n AS (INSERT INTO hub_inbox_pending AS p (agent_id, pending) "
      "SELECT agent_id, 1 FROM i WHERE EXISTS (SELECT 1 FROM messages "
      "WHERE id = $1 AND " HUB_PG_PENDING_BY_KEY("status")
      ") ON CONFLICT (agent_id) DO UPDATE SET pending = p.pending + 1) "
      "SELECT agent_id FROM i",
      {P(message_id), P(agent_id)});
  if (!added.ok()) return added.status();
  return added->rows() == 1;
}

absl::StatusOr<bool> PgMessageRows::InsertInboxRow(absl::string_view message_id,
                                                   absl::string_view agent_id) {
  absl::StatusOr<Result> added = conn_.Run(
      "INSERT INTO message_inbox (message_id, agent_id, "
      "delivered_at_ms, attempts) VALUES ($1, $2, NULL, 0) "
      "ON CONFLICT (message_id, agent_id) DO NOTHING",
      {P(message_id), P(agent_id)});
  if (!added.ok()) return added.status();
  return added->changed() == 1;
}

absl::StatusOr<bool> PgMessageRows::HasInboxRow(absl::string_view message_id,
                                                absl::string_view agent_id) {
  absl::StatusOr<Result> exists = conn_.Run(
      "SELECT 1 FROM message_inbox WHERE message_id = $1 AND agent_id = $2",
      {P(message_id), P(agent_id)});
  if (!exists.ok()) return exists.status();
  return exists->rows() > 0;
}

// The fence of a delivery attempt (MessageStore::MarkDeliveredIfUnacked), in
// the WHERE of both marks: the row is unacknowledged and its message pending
// when the UPDATE runs. An ack holding the row makes the UPDATE wait and
// then re-check the row as the ack left it, so a mark behind an ack changes
// nothing. Spelled by key, so that the planner keeps probing the primary
// keys (pg_message_sql.h).
absl::StatusOr<std::optional<InboxRecord>> PgMessageRows::MarkInboxDelivered(
    absl::string_view message_id, absl::string_view agent_id, int64_t now_ms) {
  absl::StatusOr<Result> inbox = conn_.Run(
      "UPDATE message_inbox i SET "
      "delivered_at_ms = COALESCE(i.delivered_at_ms, $3::bigint), "
      "attempts = i.attempts + 1 WHERE i.message_id = $1 "
      "AND i.agent_id = $2 AND " HUB_PG_UNACKED_BY_KEY("i.acked_at_ms")
      " AND EXISTS (SELECT 1 FROM messages m WHERE m.id = i.message_id "
      "AND " HUB_PG_PENDING_BY_KEY("m.status") ") RETURNING "
      "i.message_id, i.agent_id, i.delivered_at_ms, i.acked_at_ms, "
      "i.attempts",
      {P(message_id), P(agent_id), P(now_ms)});
  if (!inbox.ok()) return inbox.status();
  return ReadOne<InboxRecord>(*inbox, ReadInbox);
}

// In the lock order of single marks (inbox rows, then messages), each row
// fenced as a single mark.
absl::StatusOr<std::vector<InboxRecord>> PgMessageRows::MarkInboxDeliveredMany(
    const std::vector<MessageStore::Delivery>& deliveries, int64_t now_ms) {
  std::vector<std::string> message_ids;
  std::vector<std::string> agent_ids;
  for (const MessageStore::Delivery& d : deliveries) {
    message_ids.push_back(d.message_id);
    agent_ids.push_back(d.agent_id);
  }
  return Each<InboxRecord>(
      conn_.Run(
          "UPDATE message_inbox i SET "
          "delivered_at_ms = COALESCE(i.delivered_at_ms, $3::bigint), "
          "attempts = i.attempts + 1 "
          "FROM unnest($1::text[], $2::text[]) AS d(message_id, agent_id) "
          "WHERE i.message_id = d.message_id AND i.agent_id = d.agent_id "
          "AND " HUB_PG_UNACKED_BY_KEY(
              "i.acked_at_ms") " AND EXISTS (SELECT 1 FROM messages m WHERE "
                               "m.id = i.message_id "
                               "AND " HUB_PG_PENDING_BY_KEY(
                                   "m.status") ") "
                                               "RETURNING i.message_id, "
                                               "i.agent_id, "
                                               "i.delivered_at_ms, "
                                               "i.acked_at_ms, i.attempts",
          {TextArray(message_ids), TextArray(agent_ids), P(now_ms)}),
      ReadInbox);
}

absl::StatusOr<std::vector<std::string>> PgMessageRows::AckInboxRows(
    absl::string_view agent_id, const std::vector<std::string>& ids,
    int64_t now_ms) {
  absl::StatusOr<Result> rows =
      conn_.Run(sql::kAckRowsSql, {TextArray(ids), P(agent_id), P(now_ms)});
  if (!rows.ok()) return rows.status();
  return FirstColumn(*rows);
}

absl::StatusOr<std::vector<std::string>> PgMessageRows::AckedBefore(
    absl::string_view agent_id, const std::vector<std::string>& ids) {
  absl::StatusOr<Result> before =
      conn_.Run(kAckedBeforeSql, {TextArray(ids), P(agent_id)});
  if (!before.ok()) return before.status();
  return FirstColumn(*before);
}

absl::StatusOr<std::vector<std::string>> PgMessageRows::RedriveRecipients(
    absl::string_view message_id, const std::optional<std::string>& add) {
  absl::StatusOr<Result> would = conn_.Run(
      "SELECT agent_id FROM message_inbox WHERE message_id = $1 "
      "AND " HUB_PG_UNACKED_BY_KEY("acked_at_ms")
      " UNION SELECT a FROM unnest($2::text[]) "
      "AS a WHERE NOT EXISTS (SELECT 1 FROM message_inbox i "
      "WHERE i.message_id = $1 AND i.agent_id = a)",
      {P(message_id), TextArray(add.has_value()
                                    ? std::vector<std::string>{*add}
                                    : std::vector<std::string>{})});
  if (!would.ok()) return would.status();
  return FirstColumn(*would);
}

absl::StatusOr<std::vector<std::string>> PgMessageRows::ClearDelivered(
    absl::string_view message_id) {
  absl::StatusOr<Result> again = conn_.Run(
      "UPDATE message_inbox SET delivered_at_ms = NULL "
      "WHERE message_id = $1 AND " HUB_PG_UNACKED_BY_KEY(
          "acked_at_ms") " RETURNING agent_id",
      {P(message_id)});
  if (!again.ok()) return again.status();
  return FirstColumn(*again);
}

absl::Status PgMessageRows::Repending(absl::string_view message_id,
                                      const std::vector<std::string>& agents) {
  (void)agents;
  return CountRowsOf(conn_, {std::string(message_id)});
}

absl::StatusOr<std::vector<InboxRecord>> PgMessageRows::Inbox(
    absl::string_view message_id) {
  return Each<InboxRecord>(
      conn_.Run("SELECT " HUB_INBOX_COLUMNS
                " FROM message_inbox WHERE message_id = $1 ORDER BY agent_id",
                {P(message_id)}),
      ReadInbox);
}

absl::StatusOr<std::optional<DeadLetterRecord>> PgMessageRows::LoadDeadLetter(
    absl::string_view message_id) {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT message_id, reason, failed_at_ms, last_error "
      "FROM dead_letters WHERE message_id = $1",
      {P(message_id)});
  if (!r.ok()) return r.status();
  return ReadOne<DeadLetterRecord>(*r, ReadDeadLetter);
}

absl::StatusOr<std::optional<DeadLetterRecord>> PgMessageRows::DeleteDeadLetter(
    absl::string_view message_id) {
  absl::StatusOr<Result> removed = conn_.Run(
      "DELETE FROM dead_letters WHERE message_id = $1 "
      "RETURNING message_id, reason, failed_at_ms, last_error",
      {P(message_id)});
  if (!removed.ok()) return removed.status();
  return ReadOne<DeadLetterRecord>(*removed, ReadDeadLetter);
}

absl::StatusOr<std::optional<int64_t>> PgMessageRows::PresenceGeneration(
    absl::string_view agent_id) {
  absl::StatusOr<Result> owner = conn_.Run(
      "SELECT presence_generation FROM agents WHERE agent_id = $1 FOR SHARE",
      {P(agent_id)});
  if (!owner.ok()) return owner.status();
  if (owner->rows() == 0) return std::optional<int64_t>();
  return std::optional<int64_t>(owner->Int(0, 0).value_or(0));
}

absl::StatusOr<std::vector<MessageRecord>> PgMessageRows::PendingForAgent(
    absl::string_view agent_id, int64_t now_ms, int limit) {
  // The first page of ListPendingPage, any topic, `limit` rows exactly as
  // given (LIMIT 0 is none, a negative limit all).
  return Each<MessageRecord>(
      conn_.Run(kPendingPageSql,
                {P(agent_id), P(now_ms), Null(),
                 P(std::numeric_limits<int64_t>::max()), P(int64_t{0}), P(""),
                 limit >= 0 ? P(limit) : Null()}),
      ReadMessage);
}

absl::StatusOr<std::vector<MessageRecord>> PgMessageRows::PendingPage(
    const PendingPageQuery& q) {
  return Each<MessageRecord>(
      conn_.Run(
          kPendingPageSql,
          {P(q.agent_id), P(q.now_ms), P(q.topic),
           P(q.after ? q.after->priority : std::numeric_limits<int64_t>::max()),
           P(q.after ? q.after->created_at_ms : int64_t{0}),
           P(q.after ? q.after->id : std::string()), PageLimit(q.limit)}),
      ReadMessage);
}

absl::StatusOr<int64_t> PgMessageRows::CountPending(absl::string_view agent_id,
                                                    int64_t now_ms,
                                                    int64_t limit) {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT count(*) FROM (SELECT 1 FROM message_inbox i "
      "JOIN messages m ON m.id = i.message_id "
      "WHERE i.agent_id = $1 AND i.acked_at_ms IS NULL "
      "AND m.status IN ('queued', 'delivered') "
      "AND m.expires_at_ms > $2::bigint LIMIT $3::bigint) AS c",
      {P(agent_id), P(now_ms), limit >= 0 ? P(limit) : Null()});
  if (!r.ok()) return r.status();
  return r->Int(0, 0).value_or(0);
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
PgMessageRows::CountPendingByAgent(int64_t now_ms) {
  return Each<std::pair<std::string, int64_t>>(
      conn_.Run("SELECT i.agent_id, count(*) FROM message_inbox i "
                "JOIN messages m ON m.id = i.message_id "
                "WHERE i.acked_at_ms IS NULL "
                "AND m.status IN ('queued', 'delivered') "
                "AND m.expires_at_ms > $1::bigint "
                "GROUP BY i.agent_id ORDER BY i.agent_id COLLATE \"C\"",
                {P(now_ms)}),
      [](const Row& row) { return std::make_pair(row.Text(0), row.Int(1)); });
}

// A range of idx_messages_role_pending (pending role messages only).
absl::StatusOr<std::vector<MessageRecord>> PgMessageRows::RoleBacklog(
    absl::string_view wire, int64_t now_ms) {
  return Each<MessageRecord>(
      conn_.Run("SELECT " HUB_MESSAGE_COLUMNS
                " FROM messages WHERE role_key_wire = $1 "
                "AND status IN ('queued', 'delivered') "
                "AND expires_at_ms > $2::bigint "
                "ORDER BY priority DESC, created_at_ms ASC, id ASC",
                {P(wire), P(now_ms)}),
      ReadMessage);
}

// idx_messages_trace finds the trace's rows; they are sorted to page them,
// so a page costs the trace's size, never the table's.
absl::StatusOr<std::vector<MessageRecord>> PgMessageRows::TracePage(
    const TracePageQuery& q) {
  return Each<MessageRecord>(
      conn_.Run(kTracePageSql,
                {P(q.trace_id),
                 P(q.after ? q.after->created_at_ms
                           : std::numeric_limits<int64_t>::min()),
                 P(q.after ? q.after->id : std::string()), PageLimit(q.limit)}),
      ReadMessage);
}

// idx_dead_letters_failed (failed_at_ms DESC, message_id) gives the order;
// the redundant `failed_at_ms <= $3` lets it seek to the page.
absl::StatusOr<std::vector<DeadLetterRow>> PgMessageRows::DeadLetterPage(
    const DeadLetterPageQuery& q) {
  return Each<DeadLetterRow>(
      conn_.Run(kDeadLettersPageSql,
                {P(q.reason), P(q.from_agent),
                 P(q.after ? q.after->failed_at_ms
                           : std::numeric_limits<int64_t>::max()),
                 P(q.after ? q.after->message_id : std::string()),
                 PageLimit(q.limit)}),
      [](const Row& s) {
        DeadLetterRow row;
        if (!s.IsNull(0)) row.message = ReadMessage(s);
        row.dead_letter =
            rows::ReadDeadLetterRow(s, 14);  // after the message's 14
        return row;
      });
}

// idx_inbox_undelivered: the rows no push reached yet, per agent.
absl::StatusOr<std::vector<UndeliveredMessage>> PgMessageRows::Undelivered(
    const std::vector<std::string>& agent_ids, int64_t now_ms, int64_t limit) {
  return Each<UndeliveredMessage>(
      conn_.Run(kUndeliveredSql, {TextArray(agent_ids), P(now_ms), P(limit)}),
      [](const Row& row) {
        return UndeliveredMessage{row.Text(14), ReadMessage(row)};
      });
}

}  // namespace hub::storage::pg
