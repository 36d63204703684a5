// Statements of PostgresStore's messages whose plans a test pins
// (storage/pg/pg_plans_test.cc), and the writer's inbox count statements
// that several of its writes run. Internal to storage/pg.
#ifndef HUB_STORAGE_PG_PG_MESSAGE_SQL_H_
#define HUB_STORAGE_PG_PG_MESSAGE_SQL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "storage/pg/pg_conn.h"
#include "storage/pg/pg_rows.h"

// A message found by its key is pending, spelled so that it implies nothing
// about the partial indexes of pending messages (idx_messages_expiry_pending,
// idx_messages_role_pending: `status IN ('queued', 'delivered')`). Those are
// small in a hub whose agents keep up, so the planner prefers walking one,
// filtered by id, to the primary key: each walk then reads every pending
// message and every entry not vacuumed yet (measured 2026-12-04, commit
// 6fb2eac; the run is in git history of docs/BENCHMARKS.md).
// `status` is NOT NULL: the COALESCE changes no answer.
#define HUB_PG_PENDING_BY_KEY(status) \
  "COALESCE(" status ", '') IN ('queued', 'delivered')"
// An inbox row found by its key is unacked, likewise implying nothing about
// idx_inbox_agent_unacked's or idx_inbox_undelivered's predicate
// (`acked_at_ms IS NULL`). Acks are times since the epoch, never negative.
#define HUB_PG_UNACKED_BY_KEY(acked_at_ms) "COALESCE(" acked_at_ms ", -1) < 0"

namespace hub::storage::pg::sql {

// Acks the agent's delivered, unacked rows of the pending messages among
// $1, locking those messages first (in id order) so that an ack and
// another hub's ack of the same message, or its expiry, run one after the
// other: the lock's re-check drops a message that left pending meanwhile.
// Each row is found by (message_id, agent_id), one probe of the unique
// index per message: "unacked" is spelled so that it implies nothing about
// idx_inbox_agent_unacked's predicate, so the planner cannot walk the
// agent's unacked rows instead (it did when its statistics put a new agent
// at one row: 1.2-1.8 ms per ack against 2,000 rows; measured 2026-12-01,
// commit 18ac885, the run is in git history of docs/BENCHMARKS.md);
// the messages likewise by their primary key. Every row it acks stopped
// counting in the agent's inbox (its message is pending, and locked), so
// the agent's settled count grows by as many, in the same statement (the
// writer keeps the counts, storage/pg/schema.sql).
inline constexpr char kAckRowsSql[] =
    "WITH m AS MATERIALIZED (SELECT id FROM messages "
    "WHERE id = ANY($1::text[]) AND " HUB_PG_PENDING_BY_KEY("status")
    " ORDER BY id FOR NO KEY UPDATE), "
    "u AS (UPDATE message_inbox i SET acked_at_ms = $3::bigint FROM m "
    "WHERE i.message_id = m.id AND i.agent_id = $2 "
    "AND i.delivered_at_ms IS NOT NULL AND " HUB_PG_UNACKED_BY_KEY(
        "i.acked_at_ms") " RETURNING i.message_id), "
    "s AS (INSERT INTO hub_inbox_settled AS s (agent_id, settled) "
    "SELECT $2, count(*) FROM u HAVING count(*) > 0 "
    "ON CONFLICT (agent_id) DO UPDATE SET settled = s.settled + "
    "excluded.settled) "
    "SELECT message_id FROM u";

// The writer's counts for what the statement before changed, for messages
// it moved out of pending ($1: their ids; kSettleRowsSql) or into pending
// (kCountRowsSql): each agent's unacked rows of them stop or start
// counting. A statement of its own, run while the write holds those
// messages' row locks: its snapshot then holds every ack that committed
// before (an ack locks the message first, and one still waiting finds it no
// longer pending), which a CTE of the moving statement, reading that
// statement's older snapshot, would count again. In agent order, like every
// writer of the counts.
#define HUB_PG_COUNT_ROWS_OF(table, column) \
  "INSERT INTO " table " AS c (agent_id, " column                        \
  ") SELECT i.agent_id, count(*) FROM message_inbox i "                  \
  "WHERE i.message_id = ANY($1::text[]) AND " HUB_PG_UNACKED_BY_KEY(     \
      "i.acked_at_ms") " GROUP BY i.agent_id ORDER BY i.agent_id "       \
  "ON CONFLICT (agent_id) DO UPDATE SET " column " = c." column          \
  " + excluded." column
inline constexpr char kSettleRowsSql[] =
    HUB_PG_COUNT_ROWS_OF("hub_inbox_settled", "settled");
inline constexpr char kCountRowsSql[] =
    HUB_PG_COUNT_ROWS_OF("hub_inbox_pending", "pending");
#undef HUB_PG_COUNT_ROWS_OF

}  // namespace hub::storage::pg::sql

namespace hub::storage::pg {

// After a write moved messages `ids` out of pending (an expiry, a dead
// letter, a closed scope's backlog), holding their row locks: their unacked
// rows stop counting (sql::kSettleRowsSql). Nothing to do for none.
inline absl::Status SettleRowsOf(Connection& conn,
                                 const std::vector<std::string>& ids) {
  if (ids.empty()) return absl::OkStatus();
  return conn.Run(sql::kSettleRowsSql, {TextArray(ids)}).status();
}

// After a write moved messages `ids` back into pending (a re-drive), holding
// their row locks: their unacked rows count again (sql::kCountRowsSql).
inline absl::Status CountRowsOf(Connection& conn,
                                const std::vector<std::string>& ids) {
  if (ids.empty()) return absl::OkStatus();
  return conn.Run(sql::kCountRowsSql, {TextArray(ids)}).status();
}

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_MESSAGE_SQL_H_
