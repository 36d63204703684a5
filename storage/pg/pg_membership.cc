#include "storage/pg/pg_membership.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "status/status.h"
#include "storage/pg/pg_rows.h"

namespace hub::storage::pg {
namespace {

// A timestamptz as milliseconds since the epoch.
#define HUB_MS(x) "(extract(epoch FROM " x ") * 1000)::bigint"

std::vector<TakenAgent> ReadTaken(const Result& r) {
  std::vector<TakenAgent> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    Row row(r, i);
    out.push_back({row.Text(0), row.Int(1), row.Text(2)});
  }
  return out;
}

}  // namespace

std::string SeatLiveSql(absl::string_view hub, absl::string_view inc) {
  return absl::StrCat("(", hub,
                      "::text IS NULL OR EXISTS (SELECT 1 FROM hub_hubs "
                      "WHERE hub_id = ",
                      hub, "::text AND incarnation = ", inc,
                      "::bigint AND state = 'live' AND lease_expires_at > "
                      "clock_timestamp()))");
}

PgMembership::PgMembership(std::string conninfo, std::string hub_id)
    : conninfo_(std::move(conninfo)), hub_id_(std::move(hub_id)) {
  seat_.hub_id = hub_id_;
}

PgMembership::~PgMembership() = default;

absl::StatusOr<Result> PgMembership::Run(absl::string_view sql,
                                         const std::vector<Param>& params,
                                         bool retry) {
  for (int attempt = 0;; ++attempt) {
    if (conn_ == nullptr || !conn_->Healthy()) {
      absl::StatusOr<std::unique_ptr<Connection>> conn =
          Connection::Open(conninfo_, "hubd membership");
      if (!conn.ok()) return conn.status();
      conn_ = std::move(*conn);
    }
    absl::StatusOr<Result> r = conn_->Run(sql, params);
    if (r.ok() || !retry || attempt > 0 ||
        ReasonOf(r.status()) != "STORE_UNAVAILABLE") {
      return r;
    }
    conn_.reset();  // broken: once more on a new connection
  }
}

absl::StatusOr<Membership::Joined> PgMembership::Join(absl::string_view address,
                                                      int64_t ttl_ms) {
  absl::MutexLock lock(&conn_mu_);
  // One statement: the new seat and, when this hub had one before, its
  // agents moved over. Every CTE reads the same snapshot, so `old` is the
  // row as it was before the upsert replaced it; agents another hub took
  // over meanwhile no longer name this hub and are not moved.
  absl::StatusOr<Result> r = Run(
      "WITH old AS (SELECT incarnation FROM hub_hubs WHERE hub_id = $1), "
      "joined AS (INSERT INTO hub_hubs AS h (hub_id, incarnation, address, "
      "state, joined_at, renewed_at, lease_expires_at) "
      "VALUES ($1, nextval('hub_incarnations'), $2, 'live', "
      "clock_timestamp(), clock_timestamp(), "
      "clock_timestamp() + $3::bigint * interval '1 millisecond') "
      "ON CONFLICT (hub_id) DO UPDATE SET incarnation = excluded.incarnation, "
      "address = excluded.address, state = 'live', "
      "joined_at = excluded.joined_at, renewed_at = excluded.renewed_at, "
      "lease_expires_at = excluded.lease_expires_at, taken_over_at = NULL, "
      "taken_over_by = NULL "
      "RETURNING incarnation, " HUB_MS("lease_expires_at") " AS lease_ms), "
      "taken AS (UPDATE agents a SET stream_hub_incarnation = "
      "(SELECT incarnation FROM joined) FROM old "
      "WHERE a.stream_hub_id = $1 AND a.stream_hub_incarnation = "
      "old.incarnation AND a.status <> 'offline' "
      "RETURNING a.agent_id, a.presence_generation) "
      "SELECT j.incarnation, j.lease_ms, t.agent_id, t.presence_generation "
      "FROM joined j LEFT JOIN taken t ON true ORDER BY t.agent_id",
      {P(hub_id_), P(address), P(ttl_ms)}, /*retry=*/false);
  if (!r.ok()) return r.status();
  if (r->rows() == 0) {
    return ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL",
                       "joining the hubs returned no row");
  }
  Joined joined;
  for (int i = 0; i < r->rows(); ++i) {
    Row row(*r, i);
    if (row.IsNull(2)) continue;
    joined.taken.push_back({row.Text(2), row.Int(3), hub_id_});
  }
  absl::MutexLock seat_lock(&seat_mu_);
  seat_.incarnation = r->Int(0, 0).value_or(0);
  seat_.lease_expires_ms = r->Int(0, 1).value_or(0);
  joined.seat = seat_;
  return joined;
}

absl::StatusOr<RenewOutcome> PgMembership::Renew(int64_t ttl_ms) {
  const HubSeat current = seat();
  absl::MutexLock lock(&conn_mu_);
  absl::StatusOr<Result> r =
      Run("UPDATE hub_hubs SET renewed_at = clock_timestamp(), "
          "lease_expires_at = clock_timestamp() + $3::bigint * "
          "interval '1 millisecond' "
          "WHERE hub_id = $1 AND incarnation = $2::bigint AND state = 'live' "
          "AND lease_expires_at > clock_timestamp() "
          "RETURNING " HUB_MS("lease_expires_at"),
          {P(hub_id_), P(current.incarnation), P(ttl_ms)});
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return RenewOutcome::kLost;
  absl::MutexLock seat_lock(&seat_mu_);
  if (seat_.incarnation == current.incarnation) {
    seat_.lease_expires_ms = r->Int(0, 0).value_or(0);
  }
  return RenewOutcome::kRenewed;
}

absl::StatusOr<std::vector<TakenAgent>> PgMembership::TakeOverDeadHubs() {
  const HubSeat current = seat();
  if (current.incarnation == 0) return SeatLostError(hub_id_);
  absl::MutexLock lock(&conn_mu_);
  // One statement, so one transaction: the hubs declared dead and the
  // agents taken from them commit together. A hub row another hub is
  // declaring at the same time is locked until that one commits; the WHERE
  // clause, checked again on the committed row, then finds it taken over
  // already. Agents are taken only from the incarnation that was declared:
  // rows a hub wrote under a later seat are not its dead seat's. Also taken:
  // any agent whose seat is not live any more though no takeover moved it
  // (a registration whose seat check passed when its statement ran and that
  // committed after its seat was declared dead, or after its hub joined
  // again: no takeover's snapshot could see the row). Every CTE reads the
  // statement's snapshot, so seats declared dead by `dead` still read as
  // live in that check and are matched by the first branch.
  absl::StatusOr<Result> r =
      Run(absl::StrCat(
              "WITH me AS (SELECT 1 FROM hub_hubs WHERE ",
              "hub_id = $1 AND incarnation = $2::bigint AND state = 'live' "
              "AND lease_expires_at > clock_timestamp()), "
              "dead AS (UPDATE hub_hubs h SET state = CASE h.state "
              "WHEN 'left' THEN 'left' ELSE 'dead' END, "
              "taken_over_at = clock_timestamp(), taken_over_by = $1 "
              "WHERE h.hub_id <> $1 AND h.taken_over_at IS NULL "
              "AND EXISTS (SELECT 1 FROM me) AND (h.state = 'left' OR "
              "(h.state = 'live' AND h.lease_expires_at <= clock_timestamp())) "
              "RETURNING h.hub_id, h.incarnation), "
              "taken AS (UPDATE agents a SET stream_hub_id = $1, "
              "stream_hub_incarnation = $2::bigint FROM agents o "
              "WHERE o.agent_id = a.agent_id "
              "AND a.stream_hub_id IS NOT NULL AND a.status <> 'offline' "
              "AND EXISTS (SELECT 1 FROM me) "
              "AND (EXISTS (SELECT 1 FROM dead d "
              "WHERE d.hub_id = a.stream_hub_id "
              "AND d.incarnation = a.stream_hub_incarnation) "
              "OR NOT EXISTS (SELECT 1 FROM hub_hubs h "
              "WHERE h.hub_id = a.stream_hub_id "
              "AND h.incarnation = a.stream_hub_incarnation "
              "AND h.state = 'live')) "
              "RETURNING a.agent_id, a.presence_generation, "
              "o.stream_hub_id AS from_hub) "
              "SELECT agent_id, presence_generation, from_hub FROM taken "
              "ORDER BY agent_id"),
          {P(hub_id_), P(current.incarnation)}, /*retry=*/false);
  if (!r.ok()) return r.status();
  return ReadTaken(*r);
}

absl::StatusOr<std::vector<TakenAgent>> PgMembership::HeldAgents() {
  const HubSeat current = seat();
  absl::MutexLock lock(&conn_mu_);
  absl::StatusOr<Result> r =
      Run("SELECT agent_id, presence_generation, stream_hub_id FROM agents "
          "WHERE stream_hub_id = $1 AND stream_hub_incarnation = $2::bigint "
          "AND status <> 'offline' ORDER BY agent_id",
          {P(hub_id_), P(current.incarnation)});
  if (!r.ok()) return r.status();
  return ReadTaken(*r);
}

absl::StatusOr<std::vector<std::string>> PgMembership::HubsHolding(
    const std::vector<std::string>& agent_ids) {
  if (agent_ids.empty()) return std::vector<std::string>();
  absl::MutexLock lock(&conn_mu_);
  absl::StatusOr<Result> r =
      Run("SELECT DISTINCT stream_hub_id FROM agents "
          "WHERE agent_id = ANY($1::text[]) AND stream_hub_id IS NOT NULL "
          "AND stream_hub_id <> $2 ORDER BY 1",
          {TextArray(agent_ids), P(hub_id_)});
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (int i = 0; i < r->rows(); ++i) out.emplace_back(r->Text(i, 0));
  return out;
}

absl::StatusOr<std::vector<Membership::Holding>>
PgMembership::LiveHoldersElsewhere(const std::vector<std::string>& agent_ids) {
  if (agent_ids.empty()) return std::vector<Holding>();
  absl::MutexLock lock(&conn_mu_);
  absl::StatusOr<Result> r =
      Run("SELECT a.agent_id, a.stream_hub_id FROM agents a "
          "JOIN hub_hubs h ON h.hub_id = a.stream_hub_id "
          "AND h.incarnation = a.stream_hub_incarnation "
          "WHERE a.agent_id = ANY($1::text[]) AND a.stream_hub_id <> $2 "
          "AND a.status <> 'offline' AND h.state = 'live' "
          "AND h.lease_expires_at > clock_timestamp() ORDER BY 1",
          {TextArray(agent_ids), P(hub_id_)});
  if (!r.ok()) return r.status();
  std::vector<Holding> out;
  for (int i = 0; i < r->rows(); ++i) {
    out.push_back(
        Holding{std::string(r->Text(i, 0)), std::string(r->Text(i, 1))});
  }
  return out;
}

absl::Status PgMembership::Leave() {
  const HubSeat current = seat();
  absl::MutexLock lock(&conn_mu_);
  absl::StatusOr<Result> r =
      Run("UPDATE hub_hubs SET state = 'left', "
          "lease_expires_at = clock_timestamp() "
          "WHERE hub_id = $1 AND incarnation = $2::bigint AND state = 'live'",
          {P(hub_id_), P(current.incarnation)});
  return r.status();
}

HubSeat PgMembership::seat() const {
  absl::MutexLock lock(&seat_mu_);
  return seat_;
}

absl::StatusOr<std::vector<HubMember>> PgMembership::ListHubs() {
  static constexpr char kList[] =
      "SELECT hub_id, incarnation, address, state, " HUB_MS("joined_at")
      ", " HUB_MS("renewed_at") ", " HUB_MS("lease_expires_at")
      ", " HUB_MS("clock_timestamp()") " FROM hub_hubs ORDER BY hub_id";
  absl::MutexLock lock(&conn_mu_);
  absl::StatusOr<Result> r = Run(kList, {});
  if (!r.ok()) return r.status();
  std::vector<HubMember> out;
  for (int i = 0; i < r->rows(); ++i) {
    Row row(*r, i);
    // hub_hubs' CHECK admits only HubState's three words, and
    // pg_membership_test reads each back, so the fallback is never read.
    out.push_back({row.Text(0), row.Int(1), row.Text(2),
                   ParseHubState(row.Text(3)).value_or(HubState::kDead),
                   row.Int(4), row.Int(5), row.Int(6), row.Int(7)});
  }
  return out;
}

#undef HUB_MS

}  // namespace hub::storage::pg
