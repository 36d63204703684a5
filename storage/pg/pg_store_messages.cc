// PostgresStore: messages, per-recipient inbox rows, expiry and dead letters
// (TRIFLUX-HUB.md §6, B0 expiry of §6.6), with SqliteStore's outcomes. Other
// hubs write the same rows at any moment (READ COMMITTED), so nothing here
// is cached across operations: the inbox limit reads a count the database
// keeps, under its row lock; an ack locks its message row; the sweep skips
// rows another transaction holds.
// See docs/design/postgres.md, "Messages".
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/pg/pg_message_sql.h"
#include "storage/pg/pg_role_rows.h"
#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_store.h"
#include "storage/role_ops.h"

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

absl::Status MessageNotFound(absl::string_view id) {
  return NotFoundError("MESSAGE_NOT_FOUND",
                       absl::StrCat("message '", id, "' not found"));
}

absl::Status DeliveryNotFound(absl::string_view id, absl::string_view agent) {
  return NotFoundError(
      "DELIVERY_NOT_FOUND",
      absl::StrCat("message '", id, "' has no recipient '", agent, "'"));
}

absl::StatusOr<std::optional<MessageRecord>> LoadMessage(Connection& conn,
                                                         absl::string_view id) {
  absl::StatusOr<Result> r = conn.Run(
      "SELECT " HUB_MESSAGE_COLUMNS " FROM messages WHERE id = $1", {P(id)});
  if (!r.ok()) return r.status();
  return ReadOne<MessageRecord>(*r, ReadMessage);
}

// Whether message `id` exists (a statement that returns no row when it does
// not, so an error after it leaves the group nothing to replay).
absl::StatusOr<bool> MessageExists(Connection& conn, absl::string_view id) {
  absl::StatusOr<Result> r =
      conn.Run("SELECT 1 FROM messages WHERE id = $1", {P(id)});
  if (!r.ok()) return r.status();
  return r->rows() == 1;
}

InboxRecord ReadInbox(const Row& r) { return rows::ReadInboxRow(r); }
DeadLetterRecord ReadDeadLetter(const Row& r) {
  return rows::ReadDeadLetterRow(r);
}

std::vector<std::string> FirstColumn(const Result& r) {
  return ReadAll<std::string>(r, [](const Row& row) { return row.Text(0); });
}

// The writer's order key of a write whose first row locks are its
// recipients' inbox counts (hub_inbox_pending, locked by
// kInsertMessageWithinLimitSql, kLockPendingCountsSql or the inbox insert's
// count), taken in agent order: the smallest recipient. With it two hubs'
// groups of publishes to a and b lock a first (storage/group_commit_writer.h,
// order keys).
std::string InboxLockKey(const std::vector<std::string>& recipients) {
  if (recipients.empty()) return {};
  return absl::StrCat("inbox:",
                      *std::min_element(recipients.begin(), recipients.end()));
}

// OK, or LIMIT_EXCEEDED for the first of `recipients` whose inbox holds
// `limit` pending messages, decided under the counts' row locks (no
// overshoot by concurrent publishes, from this hub or another).
absl::Status CheckInboxLimit(Connection& conn,
                             const std::vector<std::string>& recipients,
                             int64_t limit) {
  if (recipients.empty()) return absl::OkStatus();
  absl::StatusOr<Result> counts =
      conn.Run(kLockPendingCountsSql, {TextArray(recipients)});
  if (!counts.ok()) return counts.status();
  const absl::flat_hash_set<absl::string_view> distinct(recipients.begin(),
                                                        recipients.end());
  if (counts->rows() < static_cast<int>(distinct.size())) {
    // A recipient without a row (or one created by a transaction that
    // committed after this statement's snapshot): create and lock them all.
    counts = conn.Run(kCreatePendingCountsSql, {TextArray(recipients)});
    if (!counts.ok()) return counts.status();
  }
  absl::flat_hash_set<absl::string_view> full;
  for (int i = 0; i < counts->rows(); ++i) {
    if (counts->Int(i, 1).value_or(0) >= limit) full.insert(counts->Text(i, 0));
  }
  for (const std::string& agent : recipients) {
    if (full.contains(agent)) return InboxFullError(agent, limit);
  }
  return absl::OkStatus();
}

// The message's columns, as kInsertMessageSql and the inbox inserts take
// them ($1..$14).
std::vector<Param> MessageParams(const MessageRecord& m, bool delivering) {
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
          P(delivering ? MessageStatus::kDelivered : m.status),
          P(m.role_key_wire)};
}

// How many distinct agents `recipients` names (usually one: no hashing).
int64_t DistinctCount(const std::vector<std::string>& recipients) {
  if (recipients.size() < 2) return static_cast<int64_t>(recipients.size());
  return static_cast<int64_t>(absl::flat_hash_set<absl::string_view>(
                                  recipients.begin(), recipients.end())
                                  .size());
}

// Whether a publish counts against its recipients' inbox limit.
bool Limited(const MessageRecord& m, const std::vector<std::string>& recipients,
             int64_t max_pending_per_inbox) {
  return max_pending_per_inbox > 0 && IsPending(m.status) &&
         !recipients.empty();
}

// The one statement that inserts a message and its inbox rows (with the
// counts' lock and the limit when Limited): kInsertMessageWithinLimitSql,
// else kInsertMessageWithInboxSql. REQUIRES: recipients not empty.
Statement InboxInsert(const MessageRecord& m,
                      const std::vector<std::string>& recipients,
                      const std::vector<std::string>& deliver_to,
                      int64_t now_ms, int64_t max_pending_per_inbox) {
  const bool delivering =
      !deliver_to.empty() && m.status == MessageStatus::kQueued;
  Statement st{kInsertMessageWithInboxSql, MessageParams(m, delivering)};
  st.params.push_back(TextArray(recipients));
  st.params.push_back(TextArray(deliver_to));
  st.params.push_back(P(now_ms));
  if (Limited(m, recipients, max_pending_per_inbox)) {
    st.sql = kInsertMessageWithinLimitSql;
    st.params.push_back(P(max_pending_per_inbox));
    st.params.push_back(P(DistinctCount(recipients)));
  }
  return st;
}

// A first statement and the answer it had.
struct FirstAnswer {
  const Statement* statement;
  absl::StatusOr<Result> answer;
};

// InboxInsert, when a publish starts with it: no role scope to lock and
// check first, some recipients, every push target among them (so nothing
// is refused before it).
std::optional<Statement> PublishFirst(
    const MessageRecord& m, const std::vector<std::string>& recipients,
    const std::vector<std::string>& deliver_to, int64_t now_ms,
    int64_t max_pending_per_inbox) {
  if (m.role_key_wire.has_value() || recipients.empty()) return std::nullopt;
  for (const std::string& agent : deliver_to) {
    if (std::find(recipients.begin(), recipients.end(), agent) ==
        recipients.end()) {
      return std::nullopt;
    }
  }
  return InboxInsert(m, recipients, deliver_to, now_ms, max_pending_per_inbox);
}

// Inserts the message, its inbox rows and, for `deliver_to` (recipients
// about to be pushed to), a first delivery attempt; the message then starts
// out delivered. `first`, when set, is PublishFirst's statement and its
// answer, already run. Returns the delivered inbox rows in `recipients` order
// (SqliteStore's). Refusals come before any row is written, in SqliteStore's
// order: closed scope, full inbox, duplicate id, unknown deliver_to.
absl::StatusOr<std::vector<InboxRecord>> InsertMessageIn(
    Connection& conn, const MessageRecord& m,
    const std::vector<std::string>& recipients,
    const std::vector<std::string>& deliver_to, int64_t now_ms,
    int64_t max_pending_per_inbox,
    std::optional<FirstAnswer> first = std::nullopt) {
  // Inside the write, under the scope's wire lock (shared; a close takes it
  // exclusively): a lead scope closed after the publish was checked, by this
  // hub or another, still refuses its message (nothing is written), and a
  // close that is running waits for this insert and then dead-letters it.
  if (m.role_key_wire.has_value()) {
    PgRoleRows roles(conn);
    if (absl::Status s = GuardOpenScope(roles, *m.role_key_wire); !s.ok()) {
      return s;
    }
  }
  const bool limited = Limited(m, recipients, max_pending_per_inbox);
  const auto exists = [&m] {
    return ReasonError(absl::StatusCode::kAlreadyExists, "MESSAGE_EXISTS",
                       absl::StrCat("message '", m.id, "' already exists"));
  };
  // Every push target must be a recipient (PublishFirst checked that
  // already); one that is not is refused before any write, after the
  // refusals that come first.
  if (!first.has_value() && !deliver_to.empty()) {
    const absl::flat_hash_set<absl::string_view> recipient_set(
        recipients.begin(), recipients.end());
    for (const std::string& agent : deliver_to) {
      if (recipient_set.contains(agent)) continue;
      if (limited) {
        if (absl::Status s =
                CheckInboxLimit(conn, recipients, max_pending_per_inbox);
            !s.ok()) {
          return s;
        }
      }
      absl::StatusOr<bool> taken = MessageExists(conn, m.id);
      if (!taken.ok()) return taken.status();
      if (*taken) return exists();
      return DeliveryNotFound(m.id, agent);
    }
  }
  std::vector<InboxRecord> delivered;
  if (recipients.empty()) {
    absl::StatusOr<Result> inserted =
        conn.Run(kInsertMessageSql,
                 MessageParams(m, !deliver_to.empty() &&
                                      m.status == MessageStatus::kQueued));
    if (!inserted.ok()) return inserted.status();
    if (inserted->rows() == 0) return exists();
    return delivered;
  }
  // The inbox rows written: one statement in the common case, the counts'
  // lock and the limit in it (the limit refuses before the taken id).
  // A new message gets a row for every distinct recipient, so whether rows
  // came back says all: no need to read them.
  std::optional<Statement> own;
  if (!first.has_value()) {
    own = InboxInsert(m, recipients, deliver_to, now_ms, max_pending_per_inbox);
  }
  const Statement& insert = first.has_value() ? *first->statement : *own;
  absl::StatusOr<Result> rows = first.has_value()
                                    ? std::move(first->answer)
                                    : conn.Run(insert.sql, insert.params);
  if (!rows.ok()) return rows.status();
  if (rows->rows() == 0) {
    if (!limited) return exists();
    if (absl::Status s =
            CheckInboxLimit(conn, recipients, max_pending_per_inbox);
        !s.ok()) {
      return s;  // full: nothing was written
    }
    // Otherwise a count row was missing (CheckInboxLimit created it) or
    // the id is taken: the statement without the limit's part tells.
    rows = conn.Run(
        kInsertMessageWithInboxSql,
        std::vector<Param>(insert.params.begin(), insert.params.end() - 2));
    if (!rows.ok()) return rows.status();
    if (rows->rows() == 0) return exists();
  }
  absl::flat_hash_set<absl::string_view> now_delivered(deliver_to.begin(),
                                                       deliver_to.end());
  for (const std::string& agent : recipients) {
    // erase(): a recipient named twice is reported once.
    if (now_delivered.erase(agent) == 0) continue;
    InboxRecord row;
    row.message_id = m.id;
    row.agent_id = agent;
    row.delivered_at_ms = now_ms;
    row.attempts = 1;
    delivered.push_back(std::move(row));
  }
  return delivered;
}

// Acks `agent_id`'s rows of `ids`; returns the ids it acked now. A message
// whose every row is acked becomes acked.
absl::StatusOr<absl::flat_hash_set<std::string>> AckIn(
    Connection& conn, absl::string_view agent_id,
    const std::vector<std::string>& ids, int64_t now_ms) {
  absl::StatusOr<Result> rows =
      conn.Run(sql::kAckRowsSql, {TextArray(ids), P(agent_id), P(now_ms)});
  if (!rows.ok()) return rows.status();
  std::vector<std::string> acked = FirstColumn(*rows);
  if (!acked.empty()) {
    if (absl::StatusOr<Result> done =
            conn.Run(kAckMessagesSql, {TextArray(acked)});
        !done.ok()) {
      return done.status();
    }
  }
  return absl::flat_hash_set<std::string>(
      std::make_move_iterator(acked.begin()),
      std::make_move_iterator(acked.end()));
}

// AckMessages in one operation: the owner's generation checked with its
// row locked FOR SHARE until the group commits (a re-registration by
// another hub waits for these acks, or these acks see it and refuse), then
// every id acked, or looked up when there was nothing to ack (acked before
// by this agent counts as acknowledged).
absl::StatusOr<std::vector<bool>> AckAllIn(
    Connection& conn, absl::string_view agent_id,
    const std::vector<std::string>& message_ids, int64_t now_ms,
    std::optional<int64_t> presence_generation) {
  absl::StatusOr<Result> owner = conn.Run(
      "SELECT presence_generation FROM agents WHERE agent_id = $1 FOR SHARE",
      {P(agent_id)});
  if (!owner.ok()) return owner.status();
  if (owner->rows() == 0) return ToStatus(PresenceOutcome::kNotFound, agent_id);
  if (absl::Status stale =
          CheckAckGeneration(owner->Int(0, 0).value_or(0), presence_generation);
      !stale.ok()) {
    return stale;
  }
  absl::StatusOr<absl::flat_hash_set<std::string>> acked =
      AckIn(conn, agent_id, message_ids, now_ms);
  if (!acked.ok()) return acked.status();
  std::vector<std::string> rest;
  for (const std::string& id : message_ids) {
    if (!acked->contains(id)) rest.push_back(id);
  }
  if (!rest.empty()) {
    absl::StatusOr<Result> before =
        conn.Run(kAckedBeforeSql, {TextArray(rest), P(agent_id)});
    if (!before.ok()) return before.status();
    for (std::string& id : FirstColumn(*before)) acked->insert(std::move(id));
  }
  std::vector<bool> out;
  out.reserve(message_ids.size());
  for (const std::string& id : message_ids) out.push_back(acked->contains(id));
  return out;
}

}  // namespace

absl::Status PostgresStore::InsertMessage(
    const MessageRecord& message, const std::vector<std::string>& recipients) {
  return WriteStatus(
      [&](Connection& conn) -> absl::Status {
        return InsertMessageIn(conn, message, recipients, {}, 0, 0).status();
      },
      InboxLockKey(recipients));
}

absl::StatusOr<std::vector<InboxRecord>> PostgresStore::InsertMessageDelivering(
    const MessageRecord& message, const std::vector<std::string>& recipients,
    const std::vector<std::string>& deliver_to, int64_t now_ms,
    int64_t max_pending_per_inbox) {
  return Write<std::vector<InboxRecord>>(
      [&](Connection& conn) {
        return InsertMessageIn(conn, message, recipients, deliver_to, now_ms,
                               max_pending_per_inbox);
      },
      InboxLockKey(recipients));
}

void PostgresStore::InsertMessageDeliveringAsync(
    const MessageRecord& message, const std::vector<std::string>& recipients,
    const std::vector<std::string>& deliver_to, int64_t now_ms,
    int64_t max_pending_per_inbox, Callback<std::vector<InboxRecord>> done) {
  using Rows = std::vector<InboxRecord>;
  // The common publish is its one statement: it goes ahead with its
  // group's neighbours.
  if (std::optional<Statement> first = PublishFirst(
          message, recipients, deliver_to, now_ms, max_pending_per_inbox)) {
    WriteAsyncFirst<Rows>(
        std::move(*first),
        [message, recipients, deliver_to, now_ms, max_pending_per_inbox](
            const Statement& statement, absl::StatusOr<Result> answer,
            Connection& conn) {
          return InsertMessageIn(conn, message, recipients, deliver_to, now_ms,
                                 max_pending_per_inbox,
                                 FirstAnswer{&statement, std::move(answer)});
        },
        std::move(done), InboxLockKey(recipients));
    return;
  }
  WriteAsync<Rows>(
      [message, recipients, deliver_to, now_ms,
       max_pending_per_inbox](Connection& conn) {
        return InsertMessageIn(conn, message, recipients, deliver_to, now_ms,
                               max_pending_per_inbox);
      },
      std::move(done), InboxLockKey(recipients));
}

absl::StatusOr<bool> PostgresStore::AddRecipient(absl::string_view message_id,
                                                 absl::string_view agent_id) {
  return Write<bool>(
      [&](Connection& conn) -> absl::StatusOr<bool> {
        // The new row counts in the agent's inbox if the message is
        // pending (the writer keeps the counts, storage/pg/schema.sql).
        absl::StatusOr<Result> added = conn.Run(
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
        if (added->rows() == 1) return true;
        absl::StatusOr<bool> exists = MessageExists(conn, message_id);
        if (!exists.ok()) return exists.status();
        if (!*exists) return MessageNotFound(message_id);
        return false;  // a recipient already
      },
      InboxLockKey({std::string(agent_id)}));
}

// The fence of a delivery attempt (MessageStore::MarkDeliveredIfUnacked), in
// the WHERE of both marks: the row is unacknowledged and its message pending
// when the UPDATE runs. An ack holding the row makes the UPDATE wait and
// then re-check the row as the ack left it, so a mark behind an ack changes
// nothing. Spelled by key, so that the planner keeps probing the primary
// keys (pg_message_sql.h).
absl::StatusOr<std::optional<InboxRecord>>
PostgresStore::MarkDeliveredIfUnacked(absl::string_view message_id,
                                      absl::string_view agent_id,
                                      int64_t now_ms) {
  using Marked = std::optional<InboxRecord>;
  return Write<Marked>([&](Connection& conn) -> absl::StatusOr<Marked> {
    absl::StatusOr<Result> inbox = conn.Run(
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
    std::optional<InboxRecord> row = ReadOne<InboxRecord>(*inbox, ReadInbox);
    if (!row.has_value()) {
      absl::StatusOr<Result> exists = conn.Run(
          "SELECT 1 FROM message_inbox WHERE message_id = $1 "
          "AND agent_id = $2",
          {P(message_id), P(agent_id)});
      if (!exists.ok()) return exists.status();
      if (exists->rows() == 0) return DeliveryNotFound(message_id, agent_id);
      return Marked();
    }
    absl::StatusOr<Result> msg = conn.Run(
        "UPDATE messages SET status = 'delivered' "
        "WHERE id = $1 AND status = 'queued'",
        {P(message_id)});
    if (!msg.ok()) return msg.status();
    return Marked(std::move(*row));
  });
}

absl::StatusOr<std::vector<InboxRecord>>
PostgresStore::MarkDeliveredManyIfUnacked(
    const std::vector<Delivery>& deliveries, int64_t now_ms) {
  if (deliveries.empty()) return std::vector<InboxRecord>();
  std::vector<std::string> message_ids;
  std::vector<std::string> agent_ids;
  for (const Delivery& d : deliveries) {
    message_ids.push_back(d.message_id);
    agent_ids.push_back(d.agent_id);
  }
  return Write<std::vector<InboxRecord>>(
      [&](Connection& conn) -> absl::StatusOr<std::vector<InboxRecord>> {
        // Two statements for the lot, in the lock order of single marks
        // (inbox rows, then messages), each row fenced as a single mark.
        absl::StatusOr<Result> inbox = conn.Run(
            "UPDATE message_inbox i SET "
            "delivered_at_ms = COALESCE(i.delivered_at_ms, $3::bigint), "
            "attempts = i.attempts + 1 "
            "FROM unnest($1::text[], $2::text[]) AS d(message_id, agent_id) "
            "WHERE i.message_id = d.message_id AND i.agent_id = d.agent_id "
            "AND " HUB_PG_UNACKED_BY_KEY("i.acked_at_ms")
            " AND EXISTS (SELECT 1 FROM messages m WHERE m.id = i.message_id "
            "AND " HUB_PG_PENDING_BY_KEY("m.status") ") "
            "RETURNING i.message_id, i.agent_id, "
            "i.delivered_at_ms, i.acked_at_ms, i.attempts",
            {TextArray(message_ids), TextArray(agent_ids), P(now_ms)});
        if (!inbox.ok()) return inbox.status();
        std::vector<InboxRecord> marked =
            ReadAll<InboxRecord>(*inbox, ReadInbox);
        if (marked.empty()) return marked;
        std::vector<std::string> marked_ids;
        for (const InboxRecord& row : marked)
          marked_ids.push_back(row.message_id);
        absl::StatusOr<Result> msg = conn.Run(
            "UPDATE messages SET status = 'delivered' "
            "WHERE id = ANY($1::text[]) AND status = 'queued'",
            {TextArray(marked_ids)});
        if (!msg.ok()) return msg.status();
        return marked;
      });
}

absl::StatusOr<bool> PostgresStore::AckMessage(absl::string_view message_id,
                                               absl::string_view agent_id,
                                               int64_t now_ms) {
  return Write<bool>([&](Connection& conn) -> absl::StatusOr<bool> {
    absl::StatusOr<absl::flat_hash_set<std::string>> acked =
        AckIn(conn, agent_id, {std::string(message_id)}, now_ms);
    if (!acked.ok()) return acked.status();
    return !acked->empty();
  });
}

absl::StatusOr<std::vector<bool>> PostgresStore::AckMessages(
    absl::string_view agent_id, const std::vector<std::string>& message_ids,
    int64_t now_ms, std::optional<int64_t> presence_generation) {
  return Write<std::vector<bool>>([&](Connection& conn) {
    return AckAllIn(conn, agent_id, message_ids, now_ms, presence_generation);
  });
}

void PostgresStore::AckMessagesAsync(
    absl::string_view agent_id, const std::vector<std::string>& message_ids,
    int64_t now_ms, std::optional<int64_t> presence_generation,
    Callback<std::vector<bool>> done) {
  WriteAsync<std::vector<bool>>(
      [agent = std::string(agent_id), message_ids, now_ms,
       presence_generation](Connection& conn) {
        return AckAllIn(conn, agent, message_ids, now_ms, presence_generation);
      },
      std::move(done));
}

absl::StatusOr<MessageRecord> PostgresStore::GetMessage(absl::string_view id) {
  return Read<MessageRecord>(
      [&](Connection& conn) -> absl::StatusOr<MessageRecord> {
        absl::StatusOr<std::optional<MessageRecord>> m = LoadMessage(conn, id);
        if (!m.ok()) return m.status();
        if (!m->has_value()) return MessageNotFound(id);
        return std::move(**m);
      });
}

absl::StatusOr<std::vector<InboxRecord>> PostgresStore::ListInbox(
    absl::string_view message_id) {
  using Rows = std::vector<InboxRecord>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r =
        conn.Run("SELECT " HUB_INBOX_COLUMNS
                 " FROM message_inbox WHERE message_id = $1 ORDER BY agent_id",
                 {P(message_id)});
    if (!r.ok()) return r.status();
    return ReadAll<InboxRecord>(*r, ReadInbox);
  });
}

absl::StatusOr<std::vector<UndeliveredMessage>> PostgresStore::ListUndelivered(
    const std::vector<std::string>& agent_ids, int64_t now_ms, int64_t limit) {
  using Rows = std::vector<UndeliveredMessage>;
  if (agent_ids.empty()) return Rows();
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    // idx_inbox_undelivered: the rows no push reached yet, per agent.
    absl::StatusOr<Result> r =
        conn.Run(kUndeliveredSql, {TextArray(agent_ids), P(now_ms), P(limit)});
    if (!r.ok()) return r.status();
    Rows out;
    out.reserve(r->rows());
    for (int i = 0; i < r->rows(); ++i) {
      Row row(*r, i);
      out.push_back({row.Text(14), ReadMessage(row)});
    }
    return out;
  });
}

absl::StatusOr<std::vector<MessageRecord>> PostgresStore::ListPendingForAgent(
    absl::string_view agent_id, int64_t now_ms, int limit) {
  // The first page of ListPendingPage, any topic, `limit` rows exactly as
  // given (LIMIT 0 is none, a negative limit all).
  using Rows = std::vector<MessageRecord>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r = conn.Run(
        kPendingPageSql,
        {P(agent_id), P(now_ms), Null(), P(std::numeric_limits<int64_t>::max()),
         P(int64_t{0}), P(""), limit >= 0 ? P(limit) : Null()});
    if (!r.ok()) return r.status();
    return ReadAll<MessageRecord>(*r, ReadMessage);
  });
}

absl::StatusOr<std::vector<MessageRecord>> PostgresStore::ListPendingPage(
    const PendingPageQuery& q) {
  using Rows = std::vector<MessageRecord>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r = conn.Run(
        kPendingPageSql,
        {P(q.agent_id), P(q.now_ms), P(q.topic),
         P(q.after ? q.after->priority : std::numeric_limits<int64_t>::max()),
         P(q.after ? q.after->created_at_ms : int64_t{0}),
         P(q.after ? q.after->id : std::string()), PageLimit(q.limit)});
    if (!r.ok()) return r.status();
    return ReadAll<MessageRecord>(*r, ReadMessage);
  });
}

absl::StatusOr<int64_t> PostgresStore::CountPendingForAgent(
    absl::string_view agent_id, int64_t now_ms, int64_t limit) {
  return Read<int64_t>([&](Connection& conn) -> absl::StatusOr<int64_t> {
    absl::StatusOr<Result> r = conn.Run(
        "SELECT count(*) FROM (SELECT 1 FROM message_inbox i "
        "JOIN messages m ON m.id = i.message_id "
        "WHERE i.agent_id = $1 AND i.acked_at_ms IS NULL "
        "AND m.status IN ('queued', 'delivered') "
        "AND m.expires_at_ms > $2::bigint LIMIT $3::bigint) AS c",
        {P(agent_id), P(now_ms), limit >= 0 ? P(limit) : Null()});
    if (!r.ok()) return r.status();
    return r->Int(0, 0).value_or(0);
  });
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
PostgresStore::CountPendingByAgent(int64_t now_ms) {
  using Counts = std::vector<std::pair<std::string, int64_t>>;
  return Read<Counts>([&](Connection& conn) -> absl::StatusOr<Counts> {
    absl::StatusOr<Result> r = conn.Run(
        "SELECT i.agent_id, count(*) FROM message_inbox i "
        "JOIN messages m ON m.id = i.message_id "
        "WHERE i.acked_at_ms IS NULL "
        "AND m.status IN ('queued', 'delivered') "
        "AND m.expires_at_ms > $1::bigint "
        "GROUP BY i.agent_id ORDER BY i.agent_id COLLATE \"C\"",
        {P(now_ms)});
    if (!r.ok()) return r.status();
    Counts counts;
    for (int row = 0; row < r->rows(); ++row) {
      counts.emplace_back(r->Text(row, 0), r->Int(row, 1).value_or(0));
    }
    return counts;
  });
}

absl::StatusOr<std::vector<MessageRecord>>
PostgresStore::ListPendingRoleMessages(absl::string_view wire, int64_t now_ms) {
  using Rows = std::vector<MessageRecord>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    // A range of idx_messages_role_pending (pending role messages only).
    absl::StatusOr<Result> r = conn.Run(
        "SELECT " HUB_MESSAGE_COLUMNS
        " FROM messages WHERE role_key_wire = $1 "
        "AND status IN ('queued', 'delivered') AND expires_at_ms > $2::bigint "
        "ORDER BY priority DESC, created_at_ms ASC, id ASC",
        {P(wire), P(now_ms)});
    if (!r.ok()) return r.status();
    return ReadAll<MessageRecord>(*r, ReadMessage);
  });
}

absl::StatusOr<std::vector<ExpiryTransition>>
PostgresStore::SweepExpiredMessages(int64_t now_ms) {
  using Rows = std::vector<ExpiryTransition>;
  return Write<Rows>([now_ms](Connection& conn) -> absl::StatusOr<Rows> {
    absl::StatusOr<Result> r = conn.Run(kSweepSql, {P(now_ms)});
    if (!r.ok()) return r.status();
    if (absl::Status s = SettleRowsOf(conn, FirstColumn(*r)); !s.ok()) {
      return s;
    }
    return ReadAll<ExpiryTransition>(*r, [now_ms](const Row& row) {
      ExpiryTransition t;
      t.message_id = row.Text(0);
      t.previous_status = rows::StoredMessageStatus(row.Text(1));
      t.reason = "ttl_expired";
      t.failed_at_ms = now_ms;
      t.dlq_inserted = row.Text(2) == "t";
      return t;
    });
  });
}

absl::StatusOr<bool> PostgresStore::DeadLetterMessage(
    absl::string_view message_id, absl::string_view reason, int64_t now_ms,
    std::optional<std::string> last_error) {
  return Write<bool>([&](Connection& conn) -> absl::StatusOr<bool> {
    // The status fence waits for, then re-checks, a concurrent writer's row.
    absl::StatusOr<Result> moved = conn.Run(
        "UPDATE messages SET status = 'dead_letter' "
        "WHERE id = $1 AND " HUB_PG_PENDING_BY_KEY("status"),
        {P(message_id)});
    if (!moved.ok()) return moved.status();
    if (moved->changed() == 0) {
      absl::StatusOr<bool> exists = MessageExists(conn, message_id);
      if (!exists.ok()) return exists.status();
      if (!*exists) return MessageNotFound(message_id);
      return false;  // terminal already
    }
    if (absl::Status s = SettleRowsOf(conn, {std::string(message_id)});
        !s.ok()) {
      return s;
    }
    absl::StatusOr<Result> dlq = conn.Run(
        "INSERT INTO dead_letters (message_id, reason, failed_at_ms, "
        "last_error) VALUES ($1, $2, $3::bigint, $4) "
        "ON CONFLICT (message_id) DO NOTHING",
        {P(message_id), P(reason), P(now_ms), P(last_error)});
    if (!dlq.ok()) return dlq.status();
    return true;
  });
}

absl::StatusOr<DeadLetterRecord> PostgresStore::GetDeadLetter(
    absl::string_view message_id) {
  return Read<DeadLetterRecord>(
      [&](Connection& conn) -> absl::StatusOr<DeadLetterRecord> {
        absl::StatusOr<Result> r = conn.Run(
            "SELECT message_id, reason, failed_at_ms, last_error "
            "FROM dead_letters WHERE message_id = $1",
            {P(message_id)});
        if (!r.ok()) return r.status();
        std::optional<DeadLetterRecord> row =
            ReadOne<DeadLetterRecord>(*r, ReadDeadLetter);
        if (!row.has_value()) {
          return NotFoundError(
              "DEAD_LETTER_NOT_FOUND",
              absl::StrCat("no dead letter for message '", message_id, "'"));
        }
        return std::move(*row);
      });
}

absl::StatusOr<std::vector<MessageRecord>> PostgresStore::ListTraceMessages(
    const TracePageQuery& q) {
  using Rows = std::vector<MessageRecord>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    // idx_messages_trace finds the trace's rows; they are sorted to page
    // them, so a page costs the trace's size, never the table's.
    absl::StatusOr<Result> r = conn.Run(
        kTracePageSql,
        {P(q.trace_id),
         P(q.after ? q.after->created_at_ms
                   : std::numeric_limits<int64_t>::min()),
         P(q.after ? q.after->id : std::string()), PageLimit(q.limit)});
    if (!r.ok()) return r.status();
    return ReadAll<MessageRecord>(*r, ReadMessage);
  });
}

absl::StatusOr<std::vector<DeadLetterRow>> PostgresStore::ListDeadLetters(
    const DeadLetterPageQuery& q) {
  using Rows = std::vector<DeadLetterRow>;
  return Read<Rows>([&](Connection& conn) -> absl::StatusOr<Rows> {
    // idx_dead_letters_failed (failed_at_ms DESC, message_id) gives the
    // order; the redundant `failed_at_ms <= $3` lets it seek to the page.
    absl::StatusOr<Result> r = conn.Run(
        kDeadLettersPageSql,
        {P(q.reason), P(q.from_agent),
         P(q.after ? q.after->failed_at_ms
                   : std::numeric_limits<int64_t>::max()),
         P(q.after ? q.after->message_id : std::string()), PageLimit(q.limit)});
    if (!r.ok()) return r.status();
    return ReadAll<DeadLetterRow>(*r, [](const Row& s) {
      DeadLetterRow row;
      if (!s.IsNull(0)) row.message = ReadMessage(s);
      row.dead_letter =
          rows::ReadDeadLetterRow(s, 14);  // after the message's 14
      return row;
    });
  });
}

absl::StatusOr<RedriveResult> PostgresStore::RedriveDeadLetter(
    const DeadLetterRedrive& r) {
  return Write<RedriveResult>(
      [&](Connection& conn) -> absl::StatusOr<RedriveResult> {
        absl::StatusOr<std::optional<MessageRecord>> m =
            LoadMessage(conn, r.message_id);
        if (!m.ok()) return m.status();
        if (!m->has_value()) return MessageNotFound(r.message_id);
        // Under the scope's wire lock (shared), as a role message's insert:
        // a close committed by any hub is seen here, or waits for this
        // write and then dead-letters the message again.
        if (const std::optional<std::string>& wire = (*m)->role_key_wire;
            wire.has_value()) {
          PgRoleRows roles(conn);
          if (absl::Status s = GuardOpenScope(roles, *wire); !s.ok()) return s;
        }
        // As a publish's, before any write: the inboxes it would make
        // pending again (or add) are counted under their locks.
        if (r.max_pending_per_inbox > 0 &&
            (*m)->status == MessageStatus::kDeadLetter) {
          absl::StatusOr<Result> would = conn.Run(
              "SELECT agent_id FROM message_inbox WHERE message_id = $1 "
              "AND " HUB_PG_UNACKED_BY_KEY("acked_at_ms")
              " UNION SELECT a FROM unnest($2::text[]) "
              "AS a WHERE NOT EXISTS (SELECT 1 FROM message_inbox i "
              "WHERE i.message_id = $1 AND i.agent_id = a)",
              {P(r.message_id),
               TextArray(r.add_recipient.has_value()
                             ? std::vector<std::string>{*r.add_recipient}
                             : std::vector<std::string>{})});
          if (!would.ok()) return would.status();
          std::vector<std::string> agents = FirstColumn(*would);
          std::sort(agents.begin(), agents.end());
          if (absl::Status s =
                  CheckInboxLimit(conn, agents, r.max_pending_per_inbox);
              !s.ok()) {
            return s;
          }
        }
        // The fence: a concurrent re-drive (any hub's) waits for this row's
        // lock, re-reads it queued and changes nothing.
        absl::StatusOr<Result> requeued = conn.Run(
            "UPDATE messages SET status = 'queued', "
            "expires_at_ms = $2::bigint + ttl_ms "
            "WHERE id = $1 AND status = 'dead_letter' "
            "RETURNING " HUB_MESSAGE_COLUMNS,
            {P(r.message_id), P(r.now_ms)});
        if (!requeued.ok()) return requeued.status();
        std::optional<MessageRecord> after =
            ReadOne<MessageRecord>(*requeued, ReadMessage);
        if (!after.has_value()) {
          absl::StatusOr<std::optional<MessageRecord>> now =
              LoadMessage(conn, r.message_id);
          if (!now.ok()) return now.status();
          if (!now->has_value()) return MessageNotFound(r.message_id);
          return NotDeadLetterError(r.message_id, (*now)->status);
        }
        RedriveResult result;
        result.message = std::move(*after);
        absl::StatusOr<Result> again = conn.Run(
            "UPDATE message_inbox SET delivered_at_ms = NULL "
            "WHERE message_id = $1 AND " HUB_PG_UNACKED_BY_KEY(
                "acked_at_ms") " RETURNING agent_id",
            {P(r.message_id)});
        if (!again.ok()) return again.status();
        result.recipients = FirstColumn(*again);
        if (r.add_recipient.has_value()) {
          absl::StatusOr<Result> added = conn.Run(
              "INSERT INTO message_inbox (message_id, agent_id, "
              "delivered_at_ms, attempts) VALUES ($1, $2, NULL, 0) "
              "ON CONFLICT (message_id, agent_id) DO NOTHING",
              {P(r.message_id), P(*r.add_recipient)});
          if (!added.ok()) return added.status();
          if (added->changed() == 1)
            result.recipients.push_back(*r.add_recipient);
        }
        // Pending again: its unacked rows, the added one too, count again.
        if (absl::Status s = CountRowsOf(conn, {r.message_id}); !s.ok()) {
          return s;
        }
        std::sort(result.recipients.begin(), result.recipients.end());
        absl::StatusOr<Result> removed = conn.Run(
            "DELETE FROM dead_letters WHERE message_id = $1 "
            "RETURNING message_id, reason, failed_at_ms, last_error",
            {P(r.message_id)});
        if (!removed.ok()) return removed.status();
        result.dead_letter =
            ReadOne<DeadLetterRecord>(*removed, ReadDeadLetter);
        return result;
      });
}

}  // namespace hub::storage::pg
