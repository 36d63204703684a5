#include "storage/pg/pg_agent_rows.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/pg/pg_membership.h"
#include "storage/pg/pg_rows.h"

namespace hub::storage::pg {
namespace {

// A Patch as (flag, value): flag true = write value (NULL when cleared).
void AddPatch(std::vector<Param>& params, const Patch<std::string>& p) {
  params.push_back(P(!p.keep()));
  params.push_back(p.set() ? P(p.value()) : Null());
}

// A seat as ($hub, $inc): both NULL for a store that never joined.
void AddSeat(std::vector<Param>& params, const std::optional<HubSeat>& seat) {
  params.push_back(seat.has_value() ? P(seat->hub_id) : Null());
  params.push_back(seat.has_value() ? P(seat->incarnation) : Null());
}

// "{1,2,3}": a bigint[] literal.
std::string IntArray(const std::vector<int64_t>& values) {
  std::string out = "{";
  for (int64_t v : values) {
    if (out.size() > 1) out += ',';
    absl::StrAppend(&out, v);
  }
  out += '}';
  return out;
}

// The row an UPDATE ... RETURNING changed, nullopt when its fence held.
absl::StatusOr<std::optional<AgentRecord>> Returned(absl::StatusOr<Result> r) {
  if (!r.ok()) return r.status();
  return ReadOne<AgentRecord>(*r, ReadAgent);
}

}  // namespace

Statement PgAgentRows::UpsertStatement(const AgentRegistration& r,
                                       const std::optional<HubSeat>& seat) {
  std::vector<Param> params = {P(r.agent_id),
                               P(r.cli),
                               P(r.pid),
                               P(r.capabilities_json),
                               P(r.topics_json),
                               P(r.now_ms),
                               P(r.now_ms + r.lease_ttl_ms),
                               P(r.metadata_json)};
  AddPatch(params, r.project_id);               // $9, $10
  AddPatch(params, r.session_id);               // $11, $12
  AddPatch(params, r.host_id);                  // $13, $14
  AddPatch(params, r.transport_locators_json);  // $15, $16
  params.push_back(P(r.lease_ttl_ms));          // $17
  AddSeat(params, seat);                        // $18, $19
  // The generation bump and the identity patch are one statement: no
  // window where a new owner's row carries the old owner's identity, and
  // two hubs registering one agent at once give two generations (ON
  // CONFLICT DO UPDATE is atomic). With a seat, the row names this hub as
  // its presence's holder, and nothing is written unless the seat is live
  // (SeatLiveSql): the insert selects no row and the update's WHERE fails.
  static const std::string* const kUpsert = new std::string(absl::StrCat(
      "INSERT INTO agents AS a (agent_id, cli, pid, capabilities_json, "
      "topics_json, last_seen_ms, lease_expires_ms, presence_generation, "
      "status, metadata_json, project_id, session_id, host_id, "
      "transport_locators_json, lease_ttl_ms, stream_hub_id, "
      "stream_hub_incarnation) "
      "SELECT $1, $2, $3::bigint, $4, $5, $6::bigint, $7::bigint, 1, "
      "'online', $8, $10::text, $12::text, $14::text, "
      "COALESCE($16::text, '[]'), $17::bigint, $18::text, $19::bigint "
      "WHERE ",
      SeatLiveSql("$18", "$19"),
      " ON CONFLICT (agent_id) DO UPDATE SET cli = excluded.cli, "
      "pid = excluded.pid, capabilities_json = excluded.capabilities_json, "
      "topics_json = excluded.topics_json, "
      "last_seen_ms = excluded.last_seen_ms, "
      "lease_expires_ms = excluded.lease_expires_ms, "
      "lease_ttl_ms = excluded.lease_ttl_ms, "
      "presence_generation = a.presence_generation + 1, "
      "status = 'online', metadata_json = excluded.metadata_json, "
      "project_id = CASE WHEN $9::boolean THEN $10::text "
      "ELSE a.project_id END, "
      "session_id = CASE WHEN $11::boolean THEN $12::text "
      "ELSE a.session_id END, "
      "host_id = CASE WHEN $13::boolean THEN $14::text ELSE a.host_id END, "
      "transport_locators_json = CASE WHEN $15::boolean "
      "THEN COALESCE($16::text, '[]') ELSE a.transport_locators_json END, "
      "stream_hub_id = excluded.stream_hub_id, "
      "stream_hub_incarnation = excluded.stream_hub_incarnation "
      "WHERE ",
      SeatLiveSql("$18", "$19"), " RETURNING " HUB_AGENT_COLUMNS));
  return Statement{*kUpsert, std::move(params)};
}

absl::StatusOr<std::optional<AgentRecord>> PgAgentRows::UpsertedAgent(
    absl::StatusOr<Result> answer) {
  return Returned(std::move(answer));
}

absl::StatusOr<std::optional<AgentRecord>> PgAgentRows::Load(
    absl::string_view agent_id) {
  return Returned(conn_.Run("SELECT " HUB_AGENT_COLUMNS
                            " FROM agents WHERE agent_id = $1",
                            {P(agent_id)}));
}

absl::StatusOr<std::optional<AgentRecord>> PgAgentRows::Upsert(
    const AgentRegistration& r) {
  Statement upsert = UpsertStatement(r, seat_);
  return Returned(conn_.Run(upsert.sql, upsert.params));
}

absl::StatusOr<std::optional<AgentRecord>> PgAgentRows::Refresh(
    absl::string_view agent_id, std::optional<int64_t> generation,
    int64_t now_ms, int64_t lease_ttl_ms) {
  return Returned(conn_.Run(
      "UPDATE agents SET last_seen_ms = $2::bigint, "
      "lease_expires_ms = $3::bigint, "
      "lease_ttl_ms = $3::bigint - $2::bigint, status = 'online' "
      "WHERE agent_id = $1 AND ($4::bigint IS NULL OR "
      "presence_generation = $4::bigint) "
      "RETURNING " HUB_AGENT_COLUMNS,
      {P(agent_id), P(now_ms), P(now_ms + lease_ttl_ms), P(generation)}));
}

absl::StatusOr<std::optional<AgentRecord>> PgAgentRows::SetStatus(
    absl::string_view agent_id, std::optional<int64_t> generation,
    AgentStatus status) {
  return Returned(
      conn_.Run("UPDATE agents SET status = $2 "
                "WHERE agent_id = $1 AND ($3::bigint IS NULL OR "
                "presence_generation = $3::bigint) "
                "RETURNING " HUB_AGENT_COLUMNS,
                {P(agent_id), P(status), P(generation)}));
}

absl::StatusOr<std::optional<AgentRecord>> PgAgentRows::Claim(
    absl::string_view agent_id, int64_t generation, int64_t now_ms,
    int64_t lease_ttl_ms) {
  static const std::string* const kClaim = new std::string(absl::StrCat(
      "UPDATE agents SET last_seen_ms = $2::bigint, "
      "lease_expires_ms = $3::bigint, "
      "lease_ttl_ms = $3::bigint - $2::bigint, status = 'online', "
      "stream_hub_id = $5::text, stream_hub_incarnation = $6::bigint "
      "WHERE agent_id = $1 AND presence_generation = $4::bigint "
      "AND status <> 'offline' AND ",
      SeatLiveSql("$5", "$6"), " RETURNING " HUB_AGENT_COLUMNS));
  std::vector<Param> params = {P(agent_id), P(now_ms), P(now_ms + lease_ttl_ms),
                               P(generation)};
  AddSeat(params, seat_);
  return Returned(conn_.Run(*kClaim, params));
}

absl::StatusOr<bool> PgAgentRows::Release(const LeaseCheckpoint& last) {
  static const std::string* const kRelease = new std::string(absl::StrCat(
      "UPDATE agents SET stream_hub_id = NULL, "
      "stream_hub_incarnation = NULL, last_seen_ms = $5::bigint, "
      "lease_expires_ms = $6::bigint, lease_ttl_ms = $7::bigint "
      "WHERE agent_id = $1 AND presence_generation = $2::bigint "
      "AND status <> 'offline' "
      "AND stream_hub_id = $3::text AND stream_hub_incarnation = $4::bigint "
      "AND ",
      SeatLiveSql("$3", "$4")));
  std::vector<Param> params = {P(last.agent_id), P(last.presence_generation)};
  AddSeat(params, seat_);
  params.push_back(P(last.last_seen_ms));
  params.push_back(P(last.lease_expires_ms));
  params.push_back(P(last.lease_ttl_ms));
  absl::StatusOr<Result> r = conn_.Run(*kRelease, params);
  if (!r.ok()) return r.status();
  return r->changed() == 1;
}

absl::StatusOr<std::vector<PresenceTransition>> PgAgentRows::Sweep(
    int64_t now_ms, int64_t offline_after_ms) {
  // One statement: the WHERE clause is the fence, re-checked on the newest
  // row version after another hub's concurrent write, so a transition two
  // hubs sweep at once is made (and reported) once.
  absl::StatusOr<Result> r = conn_.Run(
      "UPDATE agents SET status = CASE status WHEN 'online' "
      "THEN 'stale' ELSE 'offline' END "
      "WHERE (status = 'online' AND lease_expires_ms < $1::bigint) "
      "OR (status = 'stale' AND lease_expires_ms < $2::bigint) "
      "RETURNING agent_id, presence_generation, status",
      {P(now_ms), P(now_ms - offline_after_ms)});
  if (!r.ok()) return r.status();
  std::vector<PresenceTransition> out;
  out.reserve(r->rows());
  for (int i = 0; i < r->rows(); ++i) {
    Row row(*r, i);
    PresenceTransition t;
    t.agent_id = row.Text(0);
    t.presence_generation = row.Int(1);
    t.to_status = rows::StoredAgentStatus(row.Text(2));
    t.from_status = t.to_status == AgentStatus::kStale ? AgentStatus::kOnline
                                                       : AgentStatus::kStale;
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<std::vector<bool>> PgAgentRows::Checkpoint(
    const std::vector<LeaseCheckpoint>& leases) {
  // One statement for the batch. A checkpoint is fenced by the generation
  // that renewed the lease (and an agent that went offline stays offline);
  // of several checkpoints of one (agent, generation) the last one wins, as
  // if they had run in order.
  std::vector<std::string> ids;
  std::vector<int64_t> generations, seen, expires, ttls;
  absl::flat_hash_set<std::pair<std::string, int64_t>> taken;
  for (auto it = leases.rbegin(); it != leases.rend(); ++it) {
    if (!taken.emplace(it->agent_id, it->presence_generation).second) continue;
    ids.push_back(it->agent_id);
    generations.push_back(it->presence_generation);
    seen.push_back(it->last_seen_ms);
    expires.push_back(it->lease_expires_ms);
    ttls.push_back(it->lease_ttl_ms);
  }
  // With a seat, only rows whose presence this seat holds, while it is
  // live: a hub another one took over (or that another hub's attach took
  // the agent from) writes nothing back. The seat's liveness is read once,
  // in the statement, and answered in a row of its own (agent_id NULL), so
  // that a refusal because the seat is over is told apart from a refusal
  // because the row names another holder.
  static const std::string* const kCheckpoint = new std::string(absl::StrCat(
      "WITH seat AS (SELECT ", SeatLiveSql("$6", "$7"),
      " AS live), written AS ("
      "UPDATE agents AS a SET last_seen_ms = v.seen, "
      "lease_expires_ms = v.expires, lease_ttl_ms = v.ttl "
      "FROM seat, unnest($1::text[], $2::bigint[], $3::bigint[], "
      "$4::bigint[], $5::bigint[]) AS v(agent_id, generation, seen, "
      "expires, ttl) "
      "WHERE seat.live AND a.agent_id = v.agent_id "
      "AND a.presence_generation = v.generation AND a.status <> 'offline' "
      "AND ($6::text IS NULL OR (a.stream_hub_id = $6::text "
      "AND a.stream_hub_incarnation = $7::bigint)) "
      "RETURNING a.agent_id, a.presence_generation) "
      "SELECT agent_id, presence_generation FROM written "
      "UNION ALL SELECT NULL, NULL FROM seat WHERE NOT live"));
  std::vector<Param> params = {TextArray(ids), IntArray(generations),
                               IntArray(seen), IntArray(expires),
                               IntArray(ttls)};
  AddSeat(params, seat_);
  absl::StatusOr<Result> r = conn_.Run(*kCheckpoint, params);
  if (!r.ok()) return r.status();
  absl::flat_hash_set<std::pair<std::string, int64_t>> written;
  for (int i = 0; i < r->rows(); ++i) {
    if (r->IsNull(i, 0)) {
      return UnavailableError(
          "HUB_SEAT_LOST",
          "this hub's seat is not live: its leases are not written back");
    }
    written.emplace(std::string(r->Text(i, 0)), r->Int(i, 1).value_or(-1));
  }
  std::vector<bool> out;
  out.reserve(leases.size());
  for (const LeaseCheckpoint& lease : leases) {
    out.push_back(
        written.contains({lease.agent_id, lease.presence_generation}));
  }
  return out;
}

absl::StatusOr<std::vector<AgentRecord>> PgAgentRows::All() {
  absl::StatusOr<Result> r =
      conn_.Run("SELECT " HUB_AGENT_COLUMNS " FROM agents ORDER BY agent_id");
  if (!r.ok()) return r.status();
  return ReadAll<AgentRecord>(*r, ReadAgent);
}

absl::StatusOr<std::vector<AgentRecord>> PgAgentRows::Page(
    const AgentPageQuery& q) {
  // The primary key drives both the range and the order (agent_id is
  // COLLATE "C": byte order, the page token's order on both engines).
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT " HUB_AGENT_COLUMNS
      " FROM agents WHERE agent_id > $1 "
      "AND ($2::text[] IS NULL OR cli = ANY($2::text[])) "
      "AND ($3::text IS NULL OR project_id = $3::text) "
      "AND ($4::text[] IS NULL OR project_id = ANY($4::text[])) "
      "AND ($5::text IS NULL OR hub_json_array_has(topics_json, $5)) "
      "ORDER BY agent_id LIMIT $6::bigint",
      {P(q.after_agent_id), q.clis.empty() ? Null() : P(TextArray(q.clis)),
       P(q.project_id), OptTextArray(q.projects), P(q.topic),
       P(std::max<int64_t>(q.limit, 1))});
  if (!r.ok()) return r.status();
  return ReadAll<AgentRecord>(*r, ReadAgent);
}

absl::Status PgAgentRows::InsertOwner(absl::string_view agent_id,
                                      absl::string_view principal,
                                      int64_t now_ms) {
  // A concurrent claim by another hub waits for that hub's transaction
  // (the primary key's lock) and then does nothing; Owner(), a statement of
  // its own, sees whichever claim committed first.
  return conn_
      .Run(
          "INSERT INTO hub_agent_owners(agent_id, principal, claimed_at_ms) "
          "VALUES ($1, $2, $3) ON CONFLICT (agent_id) DO NOTHING",
          {P(agent_id), P(principal), P(now_ms)})
      .status();
}

absl::StatusOr<std::optional<std::string>> PgAgentRows::Owner(
    absl::string_view agent_id) {
  absl::StatusOr<Result> r =
      conn_.Run("SELECT principal FROM hub_agent_owners WHERE agent_id = $1",
                {P(agent_id)});
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return std::optional<std::string>();
  return std::optional<std::string>(std::string(r->Text(0, 0)));
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
PgAgentRows::Owners() {
  absl::StatusOr<Result> r = conn_.Run(
      "SELECT agent_id, principal FROM hub_agent_owners ORDER BY agent_id");
  if (!r.ok()) return r.status();
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(r->rows());
  for (int i = 0; i < r->rows(); ++i) {
    out.emplace_back(std::string(r->Text(i, 0)), std::string(r->Text(i, 1)));
  }
  return out;
}

}  // namespace hub::storage::pg
