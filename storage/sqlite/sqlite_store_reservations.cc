// SqliteStore: path reservations (hub_schema_version 7; the change log 8). The
// operations are storage/reservation_ops.h's, shared with PostgreSQL; this file
// is their statements. Writes run on the single writer, so the token row needs
// no lock of its own here; reads (Check, List, Get, the sweep's search) run on
// the read pool.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/reservation_ops.h"
#include "storage/reservation_store_calls.h"
#include "storage/sqlite/sqlite_rows.h"
#include "storage/sqlite/sqlite_store.h"

namespace hub::storage {

namespace {

// Live at ?1: not expired, and the holder's row exists at the generation
// that reserved and is not offline.
#define HUB_RES_LIVE                                           \
  "(r.expires_at_ms > ?1 AND EXISTS (SELECT 1 FROM agents a "  \
  "WHERE a.agent_id = r.agent_id AND a.presence_generation = " \
  "r.presence_generation AND a.status <> 'offline'))"
#define HUB_RES_CANDIDATE                                                  \
  "SELECT p.reservation_id, p.pattern, r.agent_id, r.exclusive, r.token, " \
  "r.expires_at_ms, " HUB_RES_LIVE                                         \
  " FROM hub_reservation_patterns p JOIN hub_reservations r "              \
  "ON r.reservation_id = p.reservation_id WHERE p.project_id = ?2 "

// Each statement twice: for every row, and (`Excl`, a shared request) for
// exclusive rows only, through idx_hub_reservation_patterns_exclusive.
#define HUB_RES_EXCL "AND p.exclusive = 1 "
constexpr char kCandidatesAllSql[] = HUB_RES_CANDIDATE;
constexpr char kCandidatesAllExclSql[] = HUB_RES_CANDIDATE HUB_RES_EXCL;
#define HUB_RES_AT "AND p.prefix IN (SELECT value FROM json_each(?3))"
constexpr char kCandidatesAtSql[] = HUB_RES_CANDIDATE HUB_RES_AT;
constexpr char kCandidatesAtExclSql[] =
    HUB_RES_CANDIDATE HUB_RES_EXCL HUB_RES_AT;
// Every range below the request's prefixes in one statement: ?3 is the
// JSON array of the ranges' low ends (prefix + "/"); each high end is the
// low end with its "/" turned into "0". CROSS JOIN keeps the list outside,
// so each range is one index range scan.
#define HUB_RES_BELOW                                                      \
  "SELECT p.reservation_id, p.pattern, r.agent_id, r.exclusive, r.token, " \
  "r.expires_at_ms, " HUB_RES_LIVE                                         \
  " FROM json_each(?3) AS k CROSS JOIN hub_reservation_patterns AS p "     \
  "JOIN hub_reservations r ON r.reservation_id = p.reservation_id "        \
  "WHERE p.project_id = ?2 AND p.prefix >= k.value "                       \
  "AND p.prefix < substr(k.value, 1, length(k.value) - 1) || '0' "
constexpr char kCandidatesBelowSql[] = HUB_RES_BELOW;
constexpr char kCandidatesBelowExclSql[] = HUB_RES_BELOW HUB_RES_EXCL;

ReservationCandidate ReadCandidate(const Stmt& s) {
  ReservationCandidate c;
  c.reservation_id = s.Text(0);
  c.pattern = s.Text(1);
  c.agent_id = s.Text(2);
  c.exclusive = s.Int(3) != 0;
  c.token = s.Int(4);
  c.expires_at_ms = s.Int(5);
  c.live = s.Int(6) != 0;
  return c;
}

ReservationRecord ReadReservation(const Stmt& s) {
  return ReadReservationColumns(s);
}

ReservationWaiter ReadWaiter(const Stmt& s) { return ReadWaiterColumns(s); }

class SqliteReservationRows final : public ReservationRows {
 public:
  explicit SqliteReservationRows(Connection& conn) : conn_(conn) {}

  // One read transaction: every statement reads one snapshot of the WAL.
  absl::Status BeginSnapshot() override { return conn_.Exec("BEGIN"); }
  absl::Status EndSnapshot(bool commit) override {
    return conn_.Exec(commit ? "COMMIT" : "ROLLBACK");
  }

  absl::StatusOr<std::optional<std::pair<int64_t, std::string>>> Holder(
      absl::string_view agent_id) override {
    using Row = std::pair<int64_t, std::string>;
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT presence_generation, status FROM agents WHERE agent_id = ?");
    if (!s.ok()) return s.status();
    s->Bind(1, agent_id);
    return rows::ReadOne<Row>(
        *s, [](const Stmt& st) { return Row(st.Int(0), st.Text(1)); });
  }

  absl::StatusOr<std::pair<int64_t, int64_t>> LockProject(
      absl::string_view project_id) override {
    absl::StatusOr<Stmt> ins = conn_.Prepare(
        "INSERT INTO hub_reservation_tokens (project_id, last_token, held) "
        "VALUES (?, 0, 0) ON CONFLICT (project_id) DO NOTHING");
    if (!ins.ok()) return ins.status();
    ins->Bind(1, project_id);
    if (absl::Status st = ins->Run(); !st.ok()) return st;
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT last_token, held FROM hub_reservation_tokens "
        "WHERE project_id = ?");
    if (!s.ok()) return s.status();
    s->Bind(1, project_id);
    using Row = std::pair<int64_t, int64_t>;
    absl::StatusOr<std::optional<Row>> row = rows::ReadOne<Row>(
        *s, [](const Stmt& st) { return Row(st.Int(0), st.Int(1)); });
    if (!row.ok()) return row.status();
    return row->value_or(Row(0, 0));
  }

  absl::Status SetProject(absl::string_view project_id, int64_t last_token,
                          int64_t held) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "UPDATE hub_reservation_tokens SET last_token = ?2, held = ?3 "
        "WHERE project_id = ?1");
    if (!s.ok()) return s.status();
    s->Bind(1, project_id).Bind(2, last_token).Bind(3, held);
    return s->Run();
  }

  absl::StatusOr<std::vector<ReservationCandidate>> Candidates(
      absl::string_view project_id, const CandidateKeys& keys,
      int64_t now_ms) override {
    std::vector<ReservationCandidate> out;
    auto run = [&](Stmt& s) -> absl::Status {
      absl::StatusOr<std::vector<ReservationCandidate>> part =
          rows::ReadAll<ReservationCandidate>(s, ReadCandidate);
      if (!part.ok()) return part.status();
      out.insert(out.end(), part->begin(), part->end());
      return absl::OkStatus();
    };
    const bool excl = keys.exclusive_only;
    if (keys.whole_project) {
      absl::StatusOr<Stmt> s =
          conn_.Prepare(excl ? kCandidatesAllExclSql : kCandidatesAllSql);
      if (!s.ok()) return s.status();
      s->Bind(1, now_ms).Bind(2, project_id);
      if (absl::Status st = run(*s); !st.ok()) return st;
      return out;
    }
    if (!keys.at_or_above.empty()) {
      absl::StatusOr<Stmt> s =
          conn_.Prepare(excl ? kCandidatesAtExclSql : kCandidatesAtSql);
      if (!s.ok()) return s.status();
      s->Bind(1, now_ms).Bind(2, project_id);
      s->Bind(3, rows::JsonStringArray(keys.at_or_above));
      if (absl::Status st = run(*s); !st.ok()) return st;
    }
    if (!keys.below.empty()) {
      std::vector<std::string> lows;
      for (const auto& range : keys.below) lows.push_back(range.first);
      absl::StatusOr<Stmt> s =
          conn_.Prepare(excl ? kCandidatesBelowExclSql : kCandidatesBelowSql);
      if (!s.ok()) return s.status();
      s->Bind(1, now_ms).Bind(2, project_id);
      s->Bind(3, rows::JsonStringArray(lows));
      if (absl::Status st = run(*s); !st.ok()) return st;
    }
    return out;
  }

  absl::StatusOr<int64_t> CountHeld(absl::string_view project_id,
                                    absl::string_view agent_id,
                                    int64_t generation,
                                    int64_t now_ms) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT COUNT(*) FROM hub_reservations r WHERE r.agent_id = ?2 "
        "AND r.project_id = ?3 AND r.presence_generation = ?4 "
        "AND r.expires_at_ms > ?1");
    if (!s.ok()) return s.status();
    s->Bind(1, now_ms)
        .Bind(2, agent_id)
        .Bind(3, project_id)
        .Bind(4, generation);
    return Count(*s);
  }

  absl::StatusOr<int64_t> CountRows(absl::string_view project_id) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT COUNT(*) FROM hub_reservations WHERE project_id = ?");
    if (!s.ok()) return s.status();
    s->Bind(1, project_id);
    return Count(*s);
  }

  absl::StatusOr<int64_t> Delete(const std::vector<std::string>& ids,
                                 std::optional<int64_t> ended_at_ms) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "DELETE FROM hub_reservations AS r WHERE r.reservation_id IN "
        "(SELECT value FROM json_each(?2)) AND (?3 IS NULL OR NOT " HUB_RES_LIVE
        ")");
    if (!s.ok()) return s.status();
    s->Bind(1, ended_at_ms.value_or(0)).Bind(2, rows::JsonStringArray(ids));
    if (ended_at_ms.has_value()) {
      s->Bind(3, int64_t{1});
    } else {
      s->BindNull(3);
    }
    if (absl::Status st = s->Run(); !st.ok()) return st;
    return conn_.Changes();
  }

  absl::StatusOr<int64_t> DeleteHeld(absl::string_view reservation_id,
                                     absl::string_view agent_id,
                                     std::optional<int64_t> token) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "DELETE FROM hub_reservations WHERE reservation_id = ?1 "
        "AND agent_id = ?2 AND (?3 IS NULL OR token = ?3)");
    if (!s.ok()) return s.status();
    s->Bind(1, reservation_id).Bind(2, agent_id).Bind(3, token);
    if (absl::Status st = s->Run(); !st.ok()) return st;
    return conn_.Changes();
  }

  absl::StatusOr<int64_t> DeletePatterns(
      absl::string_view reservation_id,
      const std::vector<std::string>& patterns) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "DELETE FROM hub_reservation_patterns WHERE reservation_id = ?1 "
        "AND pattern IN (SELECT value FROM json_each(?2))");
    if (!s.ok()) return s.status();
    s->Bind(1, reservation_id).Bind(2, rows::JsonStringArray(patterns));
    if (absl::Status st = s->Run(); !st.ok()) return st;
    return conn_.Changes();
  }

  absl::Status Insert(const ReservationRecord& r) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "INSERT INTO hub_reservations (reservation_id, project_id, agent_id, "
        "presence_generation, exclusive, token, reason, created_at_ms, "
        "expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!s.ok()) return s.status();
    s->Bind(1, r.reservation_id)
        .Bind(2, r.project_id)
        .Bind(3, r.agent_id)
        .Bind(4, r.presence_generation)
        .Bind(5, int64_t{r.exclusive ? 1 : 0})
        .Bind(6, r.token)
        .Bind(7, r.reason)
        .Bind(8, r.created_at_ms)
        .Bind(9, r.expires_at_ms);
    if (absl::Status st = s->Run(); !st.ok()) return st;
    for (size_t i = 0; i < r.patterns.size(); ++i) {
      absl::StatusOr<Stmt> p = conn_.Prepare(
          "INSERT INTO hub_reservation_patterns (reservation_id, ordinal, "
          "project_id, pattern, prefix, exclusive) VALUES (?, ?, ?, ?, ?, ?)");
      if (!p.ok()) return p.status();
      p->Bind(1, r.reservation_id)
          .Bind(2, static_cast<int64_t>(i))
          .Bind(3, r.project_id)
          .Bind(4, r.patterns[i])
          .Bind(5, ReservationPrefix(r.patterns[i]))
          .Bind(6, int64_t{r.exclusive ? 1 : 0});
      if (absl::Status st = p->Run(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<std::pair<ReservationRecord, bool>>> Load(
      absl::string_view reservation_id, int64_t now_ms) override {
    using Row = std::pair<ReservationRecord, bool>;
    absl::StatusOr<Stmt> s =
        conn_.Prepare("SELECT " HUB_RES_COLUMNS ", " HUB_RES_LIVE
                      " FROM hub_reservations r WHERE r.reservation_id = ?2");
    if (!s.ok()) return s.status();
    s->Bind(1, now_ms).Bind(2, reservation_id);
    absl::StatusOr<std::optional<Row>> row =
        rows::ReadOne<Row>(*s, [](const Stmt& st) {
          return Row(ReadReservation(st), st.Int(9) != 0);
        });
    if (!row.ok() || !row->has_value()) return row;
    if (absl::Status st = LoadPatterns((*row)->first); !st.ok()) return st;
    return row;
  }

  absl::StatusOr<bool> Extend(absl::string_view reservation_id,
                              absl::string_view agent_id, int64_t token,
                              int64_t now_ms, int64_t expires_at_ms) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "UPDATE hub_reservations AS r SET expires_at_ms = ?5 "
        "WHERE r.reservation_id = ?2 AND r.agent_id = ?3 AND r.token = ?4 "
        "AND " HUB_RES_LIVE);
    if (!s.ok()) return s.status();
    s->Bind(1, now_ms)
        .Bind(2, reservation_id)
        .Bind(3, agent_id)
        .Bind(4, token)
        .Bind(5, expires_at_ms);
    if (absl::Status st = s->Run(); !st.ok()) return st;
    return conn_.Changes() == 1;
  }

  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> OfAgent(
      absl::string_view agent_id, std::optional<int64_t> generation) override {
    using Row = std::pair<std::string, std::string>;
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT reservation_id, project_id FROM hub_reservations "
        "WHERE agent_id = ?1 AND (?2 IS NULL OR presence_generation = ?2)");
    if (!s.ok()) return s.status();
    s->Bind(1, agent_id).Bind(2, generation);
    return rows::ReadAll<Row>(
        *s, [](const Stmt& st) { return Row(st.Text(0), st.Text(1)); });
  }

  absl::StatusOr<std::vector<EndedReservation>> Ended(
      int64_t now_ms, int64_t limit,
      std::optional<absl::string_view> project_id) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT r.reservation_id, r.project_id, r.expires_at_ms <= ?1 "
        "FROM hub_reservations r WHERE (?3 IS NULL OR r.project_id = ?3) "
        "AND NOT " HUB_RES_LIVE " LIMIT ?2");
    if (!s.ok()) return s.status();
    s->Bind(1, now_ms).Bind(2, limit);
    if (project_id.has_value()) {
      s->Bind(3, *project_id);
    } else {
      s->BindNull(3);
    }
    return rows::ReadAll<EndedReservation>(*s, [](const Stmt& st) {
      return EndedReservation{st.Text(0), st.Text(1), st.Int(2) != 0};
    });
  }

  absl::StatusOr<std::vector<ReservationRecord>> Page(
      const ReservationFilter& f) override {
    absl::StatusOr<Stmt> s =
        conn_.Prepare("SELECT " HUB_RES_COLUMNS
                      " FROM hub_reservations r WHERE r.reservation_id > ?2 "
                      "AND (?3 IS NULL OR r.project_id = ?3) "
                      "AND (?4 IS NULL OR r.agent_id = ?4) "
                      "AND (?6 IS NULL OR r.project_id IN "
                      "(SELECT value FROM json_each(?6))) AND " HUB_RES_LIVE
                      " ORDER BY r.reservation_id LIMIT ?5");
    if (!s.ok()) return s.status();
    s->Bind(1, f.now_ms)
        .Bind(2, f.after_reservation_id)
        .Bind(3, f.project_id)
        .Bind(4, f.agent_id)
        .Bind(5, std::max<int64_t>(f.limit, 1));
    rows::BindList(*s, 6, f.projects);
    absl::StatusOr<std::vector<ReservationRecord>> out =
        rows::ReadAll<ReservationRecord>(*s, ReadReservation);
    if (!out.ok()) return out;
    for (ReservationRecord& r : *out) {
      if (absl::Status st = LoadPatterns(r); !st.ok()) return st;
    }
    return out;
  }

  absl::Status AppendChange(ReservationChangeKind kind,
                            const ReservationRecord& r,
                            int64_t now_ms) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "INSERT INTO hub_reservation_changes (kind, written_at_ms, "
        "reservation_id, project_id, agent_id, presence_generation, "
        "exclusive, token, reason, created_at_ms, expires_at_ms, patterns, "
        "waits_for) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!s.ok()) return s.status();
    s->Bind(1, ReservationChangeWord(kind))
        .Bind(2, now_ms)
        .Bind(3, r.reservation_id)
        .Bind(4, r.project_id)
        .Bind(5, r.agent_id)
        .Bind(6, r.presence_generation)
        .Bind(7, int64_t{r.exclusive ? 1 : 0})
        .Bind(8, r.token)
        .Bind(9, r.reason)
        .Bind(10, r.created_at_ms)
        .Bind(11, r.expires_at_ms)
        .Bind(12, JoinLoggedPatterns(r.patterns))
        .Bind(13, JoinLoggedPatterns(r.waits_for));
    return s->Run();
  }

  absl::StatusOr<std::vector<ReservationChange>> ChangesAfter(
      int64_t after_seq, int64_t limit) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT reservation_id, project_id, agent_id, presence_generation, "
        "exclusive, token, reason, created_at_ms, expires_at_ms, seq, kind, "
        "written_at_ms, patterns, waits_for FROM hub_reservation_changes "
        "WHERE seq > ?1 ORDER BY seq LIMIT ?2");
    if (!s.ok()) return s.status();
    s->Bind(1, after_seq).Bind(2, limit);
    return rows::ReadAll<ReservationChange>(*s, [](const Stmt& st) {
      ReservationChange c;
      c.reservation = ReadReservation(st);
      c.seq = st.Int(9);
      c.kind = ReservationChangeKindOf(st.Text(10))
                   .value_or(ReservationChangeKind::kGranted);
      c.written_at_ms = st.Int(11);
      c.reservation.patterns = SplitLoggedPatterns(st.Text(12));
      c.reservation.waits_for = SplitLoggedPatterns(st.Text(13));
      return c;
    });
  }

  absl::StatusOr<int64_t> ChangeHead() override {
    // AUTOINCREMENT's high-water mark: never lower than a seq handed out,
    // even once the log is pruned empty.
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT COALESCE((SELECT seq FROM sqlite_sequence "
        "WHERE name = 'hub_reservation_changes'), 0)");
    if (!s.ok()) return s.status();
    return Count(*s);
  }

  absl::StatusOr<int64_t> PruneChanges(int64_t before_ms,
                                       int64_t limit) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "DELETE FROM hub_reservation_changes WHERE seq IN (SELECT seq FROM "
        "hub_reservation_changes ORDER BY seq LIMIT ?2) "
        "AND written_at_ms < ?1");
    if (!s.ok()) return s.status();
    s->Bind(1, before_ms).Bind(2, limit);
    if (absl::Status st = s->Run(); !st.ok()) return st;
    return conn_.Changes();
  }

  absl::StatusOr<std::vector<ReservationWaiter>> Waiters(
      std::optional<absl::string_view> project_id, int64_t now_ms) override {
    // The waiters that count: deadline ahead, agent present.
#define HUB_RES_QUEUED                                           \
  "w.deadline_ms > ?1 AND EXISTS (SELECT 1 FROM agents a WHERE " \
  "a.agent_id = w.agent_id AND a.presence_generation = "         \
  "w.presence_generation AND a.status <> 'offline')"
    absl::StatusOr<Stmt> s = conn_.Prepare(
        project_id.has_value()
            ? "SELECT " HUB_RES_WAITER_COLUMNS
              " FROM hub_reservation_waiters w WHERE w.project_id = ?2 "
              "AND " HUB_RES_QUEUED " ORDER BY w.seq"
            : "SELECT " HUB_RES_WAITER_COLUMNS
              " FROM hub_reservation_waiters w WHERE " HUB_RES_QUEUED
              " ORDER BY w.project_id, w.seq");
#undef HUB_RES_QUEUED
    if (!s.ok()) return s.status();
    s->Bind(1, now_ms);
    if (project_id.has_value()) s->Bind(2, *project_id);
    return rows::ReadAll<ReservationWaiter>(*s, ReadWaiter);
  }

  absl::StatusOr<std::optional<ReservationWaiter>> LoadWaiter(
      absl::string_view waiter_id) override {
    absl::StatusOr<Stmt> s =
        conn_.Prepare("SELECT " HUB_RES_WAITER_COLUMNS
                      " FROM hub_reservation_waiters w WHERE w.waiter_id = ?");
    if (!s.ok()) return s.status();
    s->Bind(1, waiter_id);
    return rows::ReadOne<ReservationWaiter>(*s, ReadWaiter);
  }

  absl::StatusOr<int64_t> LastWaiterSeq(absl::string_view project_id) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT COALESCE(MAX(seq), 0) FROM hub_reservation_waiters "
        "WHERE project_id = ?");
    if (!s.ok()) return s.status();
    s->Bind(1, project_id);
    return Count(*s);
  }

  absl::Status InsertWaiter(const ReservationWaiter& w) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "INSERT INTO hub_reservation_waiters (waiter_id, project_id, "
        "agent_id, presence_generation, exclusive, seq, created_at_ms, "
        "deadline_ms, patterns, waits_for) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?)");
    if (!s.ok()) return s.status();
    s->Bind(1, w.waiter_id)
        .Bind(2, w.project_id)
        .Bind(3, w.agent_id)
        .Bind(4, w.presence_generation)
        .Bind(5, int64_t{w.exclusive ? 1 : 0})
        .Bind(6, w.seq)
        .Bind(7, w.created_at_ms)
        .Bind(8, w.deadline_ms)
        .Bind(9, JoinLoggedPatterns(w.patterns))
        .Bind(10, JoinLoggedPatterns(w.waits_for));
    return s->Run();
  }

  absl::StatusOr<int64_t> SetWaitsFor(
      absl::string_view waiter_id,
      const std::vector<std::string>& ids) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "UPDATE hub_reservation_waiters SET waits_for = ? WHERE waiter_id = ?");
    if (!s.ok()) return s.status();
    s->Bind(1, JoinLoggedPatterns(ids)).Bind(2, waiter_id);
    if (absl::Status st = s->Run(); !st.ok()) return st;
    return conn_.Changes();
  }

  absl::StatusOr<int64_t> DeleteWaiter(absl::string_view waiter_id) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "DELETE FROM hub_reservation_waiters WHERE waiter_id = ?");
    if (!s.ok()) return s.status();
    s->Bind(1, waiter_id);
    if (absl::Status st = s->Run(); !st.ok()) return st;
    return conn_.Changes();
  }

  absl::StatusOr<int64_t> DeleteDeadWaiters(int64_t now_ms) override {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "DELETE FROM hub_reservation_waiters WHERE deadline_ms <= ?");
    if (!s.ok()) return s.status();
    s->Bind(1, now_ms);
    if (absl::Status st = s->Run(); !st.ok()) return st;
    return conn_.Changes();
  }

 private:
  absl::StatusOr<int64_t> Count(Stmt& s) {
    absl::StatusOr<std::optional<int64_t>> n =
        rows::ReadOne<int64_t>(s, [](const Stmt& st) { return st.Int(0); });
    if (!n.ok()) return n.status();
    return n->value_or(0);
  }

  absl::Status LoadPatterns(ReservationRecord& r) {
    absl::StatusOr<Stmt> s = conn_.Prepare(
        "SELECT pattern FROM hub_reservation_patterns WHERE reservation_id = ? "
        "ORDER BY ordinal");
    if (!s.ok()) return s.status();
    s->Bind(1, r.reservation_id);
    absl::StatusOr<std::vector<std::string>> p = rows::ReadAll<std::string>(
        *s, [](const Stmt& st) { return st.Text(0); });
    if (!p.ok()) return p.status();
    r.patterns = *std::move(p);
    return absl::OkStatus();
  }

  Connection& conn_;
};

}  // namespace

std::unique_ptr<ReservationStore> SqliteStore::NewReservationStore() {
  return std::make_unique<ReservationCalls<SqliteStore, SqliteReservationRows,
                                           /*kOrderKeys=*/false>>(*this);
}

}  // namespace hub::storage
