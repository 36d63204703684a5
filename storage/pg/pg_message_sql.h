// Statements of PostgresStore's messages whose plans a test pins
// (storage/pg/pg_plans_test.cc). Internal to storage/pg.
#ifndef HUB_STORAGE_PG_PG_MESSAGE_SQL_H_
#define HUB_STORAGE_PG_PG_MESSAGE_SQL_H_

namespace hub::storage::pg::sql {

// Acks the agent's delivered, unacked rows of the pending messages among
// $1, locking those messages first (in id order) so that an ack and
// another hub's ack of the same message, or its expiry, run one after the
// other: the lock's re-check drops a message that left pending meanwhile.
// Each row is found by (message_id, agent_id), one probe of the unique
// index per message: "unacked" is spelled so that it implies nothing about
// idx_inbox_agent_unacked's predicate, so the planner cannot walk the
// agent's unacked rows instead (it did when its statistics put a new agent
// at one row: 1.2-1.8 ms per ack against 2,000 rows, docs/BENCHMARKS.md).
// Acks are times since the epoch, never negative.
inline constexpr char kAckRowsSql[] =
    "WITH m AS MATERIALIZED (SELECT id FROM messages "
    "WHERE id = ANY($1::text[]) AND status IN ('queued', 'delivered') "
    "ORDER BY id FOR NO KEY UPDATE) "
    "UPDATE message_inbox i SET acked_at_ms = $3::bigint FROM m "
    "WHERE i.message_id = m.id AND i.agent_id = $2 "
    "AND i.delivered_at_ms IS NOT NULL AND COALESCE(i.acked_at_ms, -1) < 0 "
    "RETURNING i.message_id";

}  // namespace hub::storage::pg::sql

#endif  // HUB_STORAGE_PG_PG_MESSAGE_SQL_H_
