// PostgresStore: path reservations. The operations are storage/
// reservation_ops.h's, shared with SQLite; this file is their statements.
// They run inside the writer's group transaction: none of them fails on
// expected input (the token comes from the locked counter row, ids are new
// UUIDs, the patterns were validated), so a reservation never aborts the
// group it runs in. The token row is locked FOR UPDATE before anything is
// read, so reserves of one project serialize across hubs, and under READ
// COMMITTED every later statement sees what the previous holder committed.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_store.h"
#include "storage/reservation_ops.h"
#include "storage/reservation_store_calls.h"

namespace hub::storage::pg {

namespace {

// Live at $1.
#define HUB_PG_RES_LIVE(n)                                     \
  "(r.expires_at_ms > " n                                      \
  "::bigint AND EXISTS (SELECT 1 FROM agents a "               \
  "WHERE a.agent_id = r.agent_id AND a.presence_generation = " \
  "r.presence_generation AND a.status <> 'offline'))"
#define HUB_PG_RES_CANDIDATE \
  "SELECT p.reservation_id, p.pattern, r.agent_id, r.exclusive, r.token, " \
  "r.expires_at_ms, " HUB_PG_RES_LIVE("$1")                             \
  " FROM hub_reservation_patterns p JOIN hub_reservations r "           \
  "ON r.reservation_id = p.reservation_id WHERE p.project_id = $2 "

// Each statement twice: for every row, and (`Excl`, a shared request) for
// exclusive rows only, through idx_hub_reservation_patterns_exclusive.
#define HUB_PG_RES_EXCL "AND p.exclusive = 1 "
constexpr char kCandidatesAllSql[] = HUB_PG_RES_CANDIDATE;
constexpr char kCandidatesAllExclSql[] = HUB_PG_RES_CANDIDATE HUB_PG_RES_EXCL;
constexpr char kCandidatesAtSql[] =
    HUB_PG_RES_CANDIDATE "AND p.prefix = ANY($3::text[])";
constexpr char kCandidatesAtExclSql[] =
    HUB_PG_RES_CANDIDATE HUB_PG_RES_EXCL "AND p.prefix = ANY($3::text[])";
// Every range below the request's prefixes in one statement (a check of
// 1,000 staged paths is one round trip, not 1,000): one index range scan
// per (low, high) pair, then each pattern's reservation by its key. The
// reservation is a LATERAL subquery that may not be flattened (OFFSET 0):
// as a plain join, the planner, unsure how many patterns the ranges hold,
// hash-joined the project's every reservation on each check (about 1 ms at
// 5,000; measured 2026-12-04, commit 0870039, the run is in git history of
// docs/BENCHMARKS.md).
#define HUB_PG_RES_BELOW(excl) \
  "SELECT p.reservation_id, p.pattern, r.agent_id, r.exclusive, r.token, " \
  "r.expires_at_ms, " HUB_PG_RES_LIVE("$1")                                \
  " FROM unnest($3::text[], $4::text[]) AS k(low, high) "                  \
  "JOIN hub_reservation_patterns p ON p.project_id = $2 " excl             \
  "AND p.prefix >= k.low COLLATE \"C\" AND p.prefix < k.high COLLATE \"C\" " \
  "CROSS JOIN LATERAL (SELECT r.agent_id, r.exclusive, r.token, "         \
  "r.expires_at_ms, r.presence_generation FROM hub_reservations r "       \
  "WHERE r.reservation_id = p.reservation_id OFFSET 0) r"
constexpr char kCandidatesBelowSql[] = HUB_PG_RES_BELOW("");
constexpr char kCandidatesBelowExclSql[] = HUB_PG_RES_BELOW(HUB_PG_RES_EXCL);

ReservationCandidate ReadCandidate(const Row& s) {
  ReservationCandidate c;
  c.reservation_id = s.Text(0);
  c.pattern = s.Text(1);
  c.agent_id = s.Text(2);
  c.exclusive = s.Int(3) != 0;
  c.token = s.Int(4);
  c.expires_at_ms = s.Int(5);
  c.live = s.Text(6) == "t";
  return c;
}

ReservationRecord ReadReservation(const Row& s) {
  return ReadReservationColumns(s);
}

ReservationWaiter ReadWaiter(const Row& s) { return ReadWaiterColumns(s); }

class PgReservationRows final : public ReservationRows {
 public:
  explicit PgReservationRows(Connection& conn) : conn_(conn) {}

  // REPEATABLE READ: every statement reads one snapshot.
  absl::Status BeginSnapshot() override {
    return conn_.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .status();
  }
  absl::Status EndSnapshot(bool commit) override {
    return conn_.Exec(commit ? "COMMIT" : "ROLLBACK").status();
  }

  absl::StatusOr<std::optional<std::pair<int64_t, std::string>>> Holder(
      absl::string_view agent_id) override {
    using R = std::pair<int64_t, std::string>;
    absl::StatusOr<Result> r = conn_.Run(
        "SELECT presence_generation, status FROM agents WHERE agent_id = $1",
        {P(agent_id)});
    if (!r.ok()) return r.status();
    return ReadOne<R>(
        *r, [](const Row& row) { return R(row.Int(0), row.Text(1)); });
  }

  absl::StatusOr<std::pair<int64_t, int64_t>> LockProject(
      absl::string_view project_id) override {
    if (absl::StatusOr<Result> r = conn_.Run(
            "INSERT INTO hub_reservation_tokens (project_id, last_token, held) "
            "VALUES ($1, 0, 0) ON CONFLICT (project_id) DO NOTHING",
            {P(project_id)});
        !r.ok()) {
      return r.status();
    }
    absl::StatusOr<Result> r = conn_.Run(
        "SELECT last_token, held FROM hub_reservation_tokens "
        "WHERE project_id = $1 FOR UPDATE",
        {P(project_id)});
    if (!r.ok()) return r.status();
    using R = std::pair<int64_t, int64_t>;
    return ReadOne<R>(*r,
                      [](const Row& row) { return R(row.Int(0), row.Int(1)); })
        .value_or(R(0, 0));
  }

  absl::Status SetProject(absl::string_view project_id, int64_t last_token,
                          int64_t held) override {
    return conn_
        .Run(
            "UPDATE hub_reservation_tokens SET last_token = $2, held = $3 "
            "WHERE project_id = $1",
            {P(project_id), P(last_token), P(held)})
        .status();
  }

  absl::StatusOr<std::vector<ReservationCandidate>> Candidates(
      absl::string_view project_id, const CandidateKeys& keys,
      int64_t now_ms) override {
    std::vector<ReservationCandidate> out;
    auto run = [&](const char* sql, std::vector<Param> params) {
      absl::StatusOr<Result> r = conn_.Run(sql, params);
      if (!r.ok()) return r.status();
      std::vector<ReservationCandidate> part =
          ReadAll<ReservationCandidate>(*r, ReadCandidate);
      out.insert(out.end(), part.begin(), part.end());
      return absl::OkStatus();
    };
    const bool excl = keys.exclusive_only;
    if (keys.whole_project) {
      if (absl::Status s = run(excl ? kCandidatesAllExclSql : kCandidatesAllSql,
                               {P(now_ms), P(project_id)});
          !s.ok()) {
        return s;
      }
      return out;
    }
    if (!keys.at_or_above.empty()) {
      if (absl::Status s =
              run(excl ? kCandidatesAtExclSql : kCandidatesAtSql,
                  {P(now_ms), P(project_id), P(TextArray(keys.at_or_above))});
          !s.ok()) {
        return s;
      }
    }
    if (!keys.below.empty()) {
      std::vector<std::string> lows, highs;
      for (const auto& [low, high] : keys.below) {
        lows.push_back(low);
        highs.push_back(high);
      }
      if (absl::Status s =
              run(excl ? kCandidatesBelowExclSql : kCandidatesBelowSql,
                  {P(now_ms), P(project_id), P(TextArray(lows)),
                   P(TextArray(highs))});
          !s.ok()) {
        return s;
      }
    }
    return out;
  }

  absl::StatusOr<int64_t> CountHeld(absl::string_view project_id,
                                    absl::string_view agent_id,
                                    int64_t generation,
                                    int64_t now_ms) override {
    return Count(
        "SELECT COUNT(*) FROM hub_reservations r WHERE r.agent_id = $2 "
        "AND r.project_id = $3 AND r.presence_generation = $4 "
        "AND r.expires_at_ms > $1",
        {P(now_ms), P(agent_id), P(project_id), P(generation)});
  }

  absl::StatusOr<int64_t> CountRows(absl::string_view project_id) override {
    return Count("SELECT COUNT(*) FROM hub_reservations WHERE project_id = $1",
                 {P(project_id)});
  }

  absl::StatusOr<int64_t> Delete(const std::vector<std::string>& ids,
                                 std::optional<int64_t> ended_at_ms) override {
    return Changed(
        "DELETE FROM hub_reservations AS r WHERE r.reservation_id = "
        "ANY($1::text[]) AND ($2::bigint IS NULL OR NOT " HUB_PG_RES_LIVE(
            "$2") ")",
        {P(TextArray(ids)), P(ended_at_ms)});
  }

  absl::StatusOr<int64_t> DeleteHeld(absl::string_view reservation_id,
                                     absl::string_view agent_id,
                                     std::optional<int64_t> token) override {
    return Changed(
        "DELETE FROM hub_reservations WHERE reservation_id = $1 "
        "AND agent_id = $2 AND ($3::bigint IS NULL OR token = $3)",
        {P(reservation_id), P(agent_id), P(token)});
  }

  absl::StatusOr<int64_t> DeletePatterns(
      absl::string_view reservation_id,
      const std::vector<std::string>& patterns) override {
    return Changed(
        "DELETE FROM hub_reservation_patterns WHERE reservation_id = $1 "
        "AND pattern = ANY($2::text[])",
        {P(reservation_id), P(TextArray(patterns))});
  }

  absl::Status Insert(const ReservationRecord& r) override {
    if (absl::StatusOr<Result> res = conn_.Run(
            "INSERT INTO hub_reservations (reservation_id, project_id, "
            "agent_id, presence_generation, exclusive, token, reason, "
            "created_at_ms, expires_at_ms) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            {P(r.reservation_id), P(r.project_id), P(r.agent_id),
             P(r.presence_generation), P(int64_t{r.exclusive ? 1 : 0}),
             P(r.token), P(r.reason), P(r.created_at_ms), P(r.expires_at_ms)});
        !res.ok()) {
      return res.status();
    }
    std::vector<std::string> prefixes;
    for (const std::string& p : r.patterns) {
      prefixes.push_back(ReservationPrefix(p));
    }
    // One statement for every pattern, ordinals from their order.
    return conn_
        .Run(
            "INSERT INTO hub_reservation_patterns (reservation_id, ordinal, "
            "project_id, pattern, prefix, exclusive) "
            "SELECT $1, t.ord - 1, $2, t.pattern, t.prefix, $5 "
            "FROM unnest($3::text[], $4::text[]) WITH ORDINALITY "
            "AS t(pattern, prefix, ord)",
            {P(r.reservation_id), P(r.project_id), P(TextArray(r.patterns)),
             P(TextArray(prefixes)), P(int64_t{r.exclusive ? 1 : 0})})
        .status();
  }

  absl::StatusOr<std::optional<std::pair<ReservationRecord, bool>>> Load(
      absl::string_view reservation_id, int64_t now_ms) override {
    using R = std::pair<ReservationRecord, bool>;
    absl::StatusOr<Result> r = conn_.Run(
        "SELECT " HUB_RES_COLUMNS ", " HUB_PG_RES_LIVE(
            "$1") " FROM hub_reservations r WHERE r.reservation_id = $2",
        {P(now_ms), P(reservation_id)});
    if (!r.ok()) return r.status();
    std::optional<R> row = ReadOne<R>(*r, [](const Row& s) {
      return R(ReadReservation(s), s.Text(9) == "t");
    });
    if (!row.has_value()) return row;
    if (absl::Status s = LoadPatterns(row->first); !s.ok()) return s;
    return row;
  }

  absl::StatusOr<bool> Extend(absl::string_view reservation_id,
                              absl::string_view agent_id, int64_t token,
                              int64_t now_ms, int64_t expires_at_ms) override {
    absl::StatusOr<int64_t> n = Changed(
        "UPDATE hub_reservations AS r SET expires_at_ms = $5 "
        "WHERE r.reservation_id = $2 AND r.agent_id = $3 AND r.token = $4 "
        "AND " HUB_PG_RES_LIVE("$1"),
        {P(now_ms), P(reservation_id), P(agent_id), P(token),
         P(expires_at_ms)});
    if (!n.ok()) return n.status();
    return *n == 1;
  }

  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> OfAgent(
      absl::string_view agent_id, std::optional<int64_t> generation) override {
    using R = std::pair<std::string, std::string>;
    absl::StatusOr<Result> r = conn_.Run(
        "SELECT reservation_id, project_id FROM hub_reservations "
        "WHERE agent_id = $1 AND ($2::bigint IS NULL OR "
        "presence_generation = $2)",
        {P(agent_id), P(generation)});
    if (!r.ok()) return r.status();
    return ReadAll<R>(*r, [](const Row& s) { return R(s.Text(0), s.Text(1)); });
  }

  absl::StatusOr<std::vector<EndedReservation>> Ended(
      int64_t now_ms, int64_t limit,
      std::optional<absl::string_view> project_id) override {
    std::optional<std::string> project;
    if (project_id.has_value()) project = std::string(*project_id);
    absl::StatusOr<Result> r = conn_.Run(
        "SELECT r.reservation_id, r.project_id, r.expires_at_ms <= $1 "
        "FROM hub_reservations r WHERE ($3::text IS NULL OR r.project_id = "
        "$3) AND NOT " HUB_PG_RES_LIVE("$1") " LIMIT $2",
        {P(now_ms), P(limit), P(project)});
    if (!r.ok()) return r.status();
    return ReadAll<EndedReservation>(*r, [](const Row& s) {
      return EndedReservation{s.Text(0), s.Text(1), s.Text(2) == "t"};
    });
  }

  absl::StatusOr<std::vector<ReservationRecord>> Page(
      const ReservationFilter& f) override {
    absl::StatusOr<Result> r = conn_.Run(
        "SELECT " HUB_RES_COLUMNS
        " FROM hub_reservations r WHERE r.reservation_id > $2 "
        "AND ($3::text IS NULL OR r.project_id = $3) "
        "AND ($4::text IS NULL OR r.agent_id = $4) "
        "AND ($6::text[] IS NULL OR r.project_id = ANY($6::text[])) "
        "AND " HUB_PG_RES_LIVE("$1") " ORDER BY r.reservation_id LIMIT $5",
        {P(f.now_ms), P(f.after_reservation_id), P(f.project_id), P(f.agent_id),
         P(std::max<int64_t>(f.limit, 1)), OptTextArray(f.projects)});
    if (!r.ok()) return r.status();
    std::vector<ReservationRecord> out =
        ReadAll<ReservationRecord>(*r, ReadReservation);
    for (ReservationRecord& rec : out) {
      if (absl::Status s = LoadPatterns(rec); !s.ok()) return s;
    }
    return out;
  }

  absl::Status AppendChange(ReservationChangeKind kind,
                            const ReservationRecord& r,
                            int64_t now_ms) override {
    // No seq yet: hub_reservation_change_logged gives it one at COMMIT.
    return conn_
        .Run(
            "INSERT INTO hub_reservation_changes (kind, written_at_ms, "
            "reservation_id, project_id, agent_id, presence_generation, "
            "exclusive, token, reason, created_at_ms, expires_at_ms, "
            "patterns, waits_for) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
            "$10, $11, $12, $13)",
            {P(ReservationChangeWord(kind)), P(now_ms), P(r.reservation_id),
             P(r.project_id), P(r.agent_id), P(r.presence_generation),
             P(int64_t{r.exclusive ? 1 : 0}), P(r.token), P(r.reason),
             P(r.created_at_ms), P(r.expires_at_ms),
             P(JoinLoggedPatterns(r.patterns)),
             P(JoinLoggedPatterns(r.waits_for))})
        .status();
  }

  absl::StatusOr<std::vector<ReservationChange>> ChangesAfter(
      int64_t after_seq, int64_t limit) override {
    absl::StatusOr<Result> r = conn_.Run(
        "SELECT reservation_id, project_id, agent_id, presence_generation, "
        "exclusive, token, reason, created_at_ms, expires_at_ms, seq, kind, "
        "written_at_ms, patterns, waits_for FROM hub_reservation_changes "
        "WHERE seq > $1 ORDER BY seq LIMIT $2",
        {P(after_seq), P(limit)});
    if (!r.ok()) return r.status();
    return ReadAll<ReservationChange>(*r, [](const Row& s) {
      ReservationChange c;
      c.reservation = ReadReservation(s);
      c.seq = s.Int(9);
      c.kind = ReservationChangeKindOf(s.Text(10))
                   .value_or(ReservationChangeKind::kGranted);
      c.written_at_ms = s.Int(11);
      c.reservation.patterns = SplitLoggedPatterns(s.Text(12));
      c.reservation.waits_for = SplitLoggedPatterns(s.Text(13));
      return c;
    });
  }

  absl::StatusOr<int64_t> ChangeHead() override {
    return Count(
        "SELECT COALESCE((SELECT seq FROM hub_reservation_change_counter), 0)",
        {});
  }

  absl::StatusOr<int64_t> PruneChanges(int64_t before_ms,
                                       int64_t limit) override {
    // The oldest `limit` as an array the unique index on seq is probed
    // with: as `seq IN (subquery)`, the writer's generic plan (it cannot
    // know the limit) joined the subquery to a read of the whole log.
    return Changed(
        "DELETE FROM hub_reservation_changes WHERE seq = ANY(ARRAY("
        "SELECT seq FROM hub_reservation_changes WHERE seq IS NOT NULL "
        "ORDER BY seq LIMIT $2)) AND written_at_ms < $1",
        {P(before_ms), P(limit)});
  }

  absl::StatusOr<std::vector<ReservationWaiter>> Waiters(
      std::optional<absl::string_view> project_id, int64_t now_ms) override {
    // The waiters that count: deadline ahead, agent present.
#define HUB_RES_QUEUED                                           \
  "w.deadline_ms > $1 AND EXISTS (SELECT 1 FROM agents a WHERE " \
  "a.agent_id = w.agent_id AND a.presence_generation = "         \
  "w.presence_generation AND a.status <> 'offline')"
    absl::StatusOr<Result> r =
        project_id.has_value()
            ? conn_.Run("SELECT " HUB_RES_WAITER_COLUMNS
                        " FROM hub_reservation_waiters w WHERE w.project_id = "
                        "$2 AND " HUB_RES_QUEUED " ORDER BY w.seq",
                        {P(now_ms), P(*project_id)})
            : conn_.Run("SELECT " HUB_RES_WAITER_COLUMNS
                        " FROM hub_reservation_waiters w WHERE " HUB_RES_QUEUED
                        " ORDER BY w.project_id, w.seq",
                        {P(now_ms)});
#undef HUB_RES_QUEUED
    if (!r.ok()) return r.status();
    return ReadAll<ReservationWaiter>(*r, ReadWaiter);
  }

  absl::StatusOr<std::optional<ReservationWaiter>> LoadWaiter(
      absl::string_view waiter_id) override {
    absl::StatusOr<Result> r =
        conn_.Run("SELECT " HUB_RES_WAITER_COLUMNS
                  " FROM hub_reservation_waiters w WHERE w.waiter_id = $1",
                  {P(waiter_id)});
    if (!r.ok()) return r.status();
    return ReadOne<ReservationWaiter>(*r, ReadWaiter);
  }

  absl::StatusOr<int64_t> LastWaiterSeq(absl::string_view project_id) override {
    return Count(
        "SELECT COALESCE(MAX(seq), 0) FROM hub_reservation_waiters "
        "WHERE project_id = $1",
        {P(project_id)});
  }

  absl::Status InsertWaiter(const ReservationWaiter& w) override {
    return conn_
        .Run(
            "INSERT INTO hub_reservation_waiters (waiter_id, project_id, "
            "agent_id, presence_generation, exclusive, seq, created_at_ms, "
            "deadline_ms, patterns, waits_for) VALUES ($1, $2, $3, $4, $5, "
            "$6, $7, $8, $9, $10)",
            {P(w.waiter_id), P(w.project_id), P(w.agent_id),
             P(w.presence_generation), P(int64_t{w.exclusive ? 1 : 0}),
             P(w.seq), P(w.created_at_ms), P(w.deadline_ms),
             P(JoinLoggedPatterns(w.patterns)),
             P(JoinLoggedPatterns(w.waits_for))})
        .status();
  }

  absl::StatusOr<int64_t> SetWaitsFor(
      absl::string_view waiter_id,
      const std::vector<std::string>& ids) override {
    return Changed(
        "UPDATE hub_reservation_waiters SET waits_for = $1 WHERE waiter_id = "
        "$2",
        {P(JoinLoggedPatterns(ids)), P(waiter_id)});
  }

  absl::StatusOr<int64_t> DeleteWaiter(absl::string_view waiter_id) override {
    return Changed("DELETE FROM hub_reservation_waiters WHERE waiter_id = $1",
                   {P(waiter_id)});
  }

  absl::StatusOr<int64_t> DeleteDeadWaiters(int64_t now_ms) override {
    return Changed(
        "DELETE FROM hub_reservation_waiters WHERE deadline_ms <= $1",
        {P(now_ms)});
  }

 private:
  absl::StatusOr<int64_t> Count(const char* sql, std::vector<Param> params) {
    absl::StatusOr<Result> r = conn_.Run(sql, params);
    if (!r.ok()) return r.status();
    return r->rows() == 0 ? 0 : r->Int(0, 0).value_or(0);
  }
  absl::StatusOr<int64_t> Changed(const char* sql, std::vector<Param> params) {
    absl::StatusOr<Result> r = conn_.Run(sql, params);
    if (!r.ok()) return r.status();
    return r->changed();
  }
  absl::Status LoadPatterns(ReservationRecord& r) {
    absl::StatusOr<Result> res = conn_.Run(
        "SELECT pattern FROM hub_reservation_patterns "
        "WHERE reservation_id = $1 ORDER BY ordinal",
        {P(r.reservation_id)});
    if (!res.ok()) return res.status();
    r.patterns =
        ReadAll<std::string>(*res, [](const Row& s) { return s.Text(0); });
    return absl::OkStatus();
  }

  Connection& conn_;
};

}  // namespace

std::unique_ptr<ReservationStore> PostgresStore::NewReservationStore() {
  return std::make_unique<
      ReservationCalls<PostgresStore, PgReservationRows, /*kOrderKeys=*/true>>(
      *this);
}

}  // namespace hub::storage::pg
