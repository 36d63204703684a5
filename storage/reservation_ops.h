// The Store's reservation operations, written once for both engines
// (docs/design/reservations.md, "Storage"). Each engine implements
// ReservationRows, the statements of one transaction over the reservation
// tables in its own SQL; the operations below decide everything else, the
// same way on SQLite and PostgreSQL, as storage/role_updates.h does for
// roles.
//
// Locks in one order: the project's token row (LockProject), then the
// project's reservation rows. Every operation that writes reservation rows
// takes the token row first, so on PostgreSQL the writes of one project
// serialize across hubs, and under READ COMMITTED each statement after the
// lock sees what the previous holder of the lock committed.
#ifndef HUB_STORAGE_RESERVATION_OPS_H_
#define HUB_STORAGE_RESERVATION_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/reservations.h"

namespace hub::storage {

// A reservation that ended, found by a sweep.
struct EndedReservation {
  std::string reservation_id;
  std::string project_id;
  bool expired = false;  // else its holder is gone
};

class ReservationRows {
 public:
  virtual ~ReservationRows() = default;

  // A read snapshot on this read connection, for
  // ReservationStore::SnapshotReservations: every statement between the two
  // sees one moment. EndSnapshot(false) after a failed read.
  virtual absl::Status BeginSnapshot() = 0;
  virtual absl::Status EndSnapshot(bool commit) = 0;

  // The agent's (presence_generation, status), nullopt without a row.
  virtual absl::StatusOr<std::optional<std::pair<int64_t, std::string>>> Holder(
      absl::string_view agent_id) = 0;
  // Creates the project's token row when missing and locks it until the
  // transaction ends. Returns {last_token, held}.
  virtual absl::StatusOr<std::pair<int64_t, int64_t>> LockProject(
      absl::string_view project_id) = 0;
  // REQUIRES: LockProject(project_id) in this transaction.
  virtual absl::Status SetProject(absl::string_view project_id,
                                  int64_t last_token, int64_t held) = 0;
  // Pattern rows of the project under `keys`, each with its reservation's
  // holder, mode, token, expiry and liveness at `now_ms`.
  virtual absl::StatusOr<std::vector<ReservationCandidate>> Candidates(
      absl::string_view project_id, const CandidateKeys& keys,
      int64_t now_ms) = 0;
  // Live reservations of the agent at `generation` in the project.
  virtual absl::StatusOr<int64_t> CountHeld(absl::string_view project_id,
                                            absl::string_view agent_id,
                                            int64_t generation,
                                            int64_t now_ms) = 0;
  // Reservation rows of the project, live or not.
  virtual absl::StatusOr<int64_t> CountRows(absl::string_view project_id) = 0;
  // Deletes these reservations (and their patterns), only those not live
  // at `ended_at_ms` when it is set; returns how many rows.
  virtual absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& reservation_ids,
      std::optional<int64_t> ended_at_ms) = 0;
  // Deletes the reservation when `agent_id` holds it under `token` (any
  // token when unset); returns 0 or 1.
  virtual absl::StatusOr<int64_t> DeleteHeld(absl::string_view reservation_id,
                                             absl::string_view agent_id,
                                             std::optional<int64_t> token) = 0;
  // Deletes these normalized patterns of the reservation.
  virtual absl::StatusOr<int64_t> DeletePatterns(
      absl::string_view reservation_id,
      const std::vector<std::string>& patterns) = 0;
  // Inserts the reservation and its patterns (with their literal prefixes).
  virtual absl::Status Insert(const ReservationRecord& record) = 0;
  // The reservation and whether it is live at `now_ms`; nullopt without a
  // row.
  virtual absl::StatusOr<std::optional<std::pair<ReservationRecord, bool>>>
  Load(absl::string_view reservation_id, int64_t now_ms) = 0;
  // Sets expires_at_ms = `expires_at_ms` when the reservation is live at
  // `now_ms` and held by `agent_id` under `token`, in one fenced UPDATE.
  // Returns whether it changed.
  virtual absl::StatusOr<bool> Extend(absl::string_view reservation_id,
                                      absl::string_view agent_id, int64_t token,
                                      int64_t now_ms,
                                      int64_t expires_at_ms) = 0;
  // The agent's reservations (at `generation` when set): {id, project}.
  virtual absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
  OfAgent(absl::string_view agent_id, std::optional<int64_t> generation) = 0;
  // At most `limit` reservations that ended by `now_ms` (of `project_id`
  // only, when set).
  virtual absl::StatusOr<std::vector<EndedReservation>> Ended(
      int64_t now_ms, int64_t limit,
      std::optional<absl::string_view> project_id) = 0;
  // Live reservations matching the filter's project, agent and keyset, by
  // id, at most filter.limit (the `overlapping` filter is not applied).
  virtual absl::StatusOr<std::vector<ReservationRecord>> Page(
      const ReservationFilter& filter) = 0;

  // The change log (ReservationStore::ReadReservationChanges). Appends one
  // change: the log's seq is the engine's (commit order).
  virtual absl::Status AppendChange(ReservationChangeKind kind,
                                    const ReservationRecord& reservation,
                                    int64_t now_ms) = 0;
  // At most `limit` changes after `after_seq`, by seq.
  virtual absl::StatusOr<std::vector<ReservationChange>> ChangesAfter(
      int64_t after_seq, int64_t limit) = 0;
  // The newest seq handed out (0 before the first change).
  virtual absl::StatusOr<int64_t> ChangeHead() = 0;
  virtual absl::StatusOr<int64_t> PruneChanges(int64_t before_ms,
                                               int64_t limit) = 0;

  // Waiters (ReservationStore::EnqueueReservationWaiter). The project's queued
  // waiters whose deadline is after `now_ms` and whose agent is present at
  // their generation, by seq; without a project, every project's, by
  // project, then seq.
  virtual absl::StatusOr<std::vector<ReservationWaiter>> Waiters(
      std::optional<absl::string_view> project_id, int64_t now_ms) = 0;
  virtual absl::StatusOr<std::optional<ReservationWaiter>> LoadWaiter(
      absl::string_view waiter_id) = 0;
  // The project's highest seq (0 without a waiter). REQUIRES: its token row
  // locked.
  virtual absl::StatusOr<int64_t> LastWaiterSeq(
      absl::string_view project_id) = 0;
  virtual absl::Status InsertWaiter(const ReservationWaiter& waiter) = 0;
  // Sets the waiter's waits_for; returns how many rows.
  virtual absl::StatusOr<int64_t> SetWaitsFor(
      absl::string_view waiter_id, const std::vector<std::string>& ids) = 0;
  // Returns how many rows.
  virtual absl::StatusOr<int64_t> DeleteWaiter(absl::string_view waiter_id) = 0;
  // Deletes waiters whose deadline passed by `now_ms` (their hub died).
  virtual absl::StatusOr<int64_t> DeleteDeadWaiters(int64_t now_ms) = 0;
};

// ReservationStore::Reserve (store.h).
absl::StatusOr<ReservationOutcome> ReserveWith(ReservationRows& rows,
                                               const ReservationRequest& r);
// ReservationStore::CheckReservations; reads only.
absl::StatusOr<std::vector<ReservationConflict>> CheckWith(
    ReservationRows& rows, const ReservationCheck& check);
absl::StatusOr<ReservationRecord> RenewWith(ReservationRows& rows,
                                            const ReservationRenewal& r);
absl::StatusOr<std::optional<ReservationRecord>> ReleaseWith(
    ReservationRows& rows, const ReservationRelease& r);
absl::StatusOr<int64_t> ReleaseAgentWith(ReservationRows& rows,
                                         absl::string_view agent_id,
                                         std::optional<int64_t> generation,
                                         int64_t now_ms);
absl::StatusOr<std::optional<ReservationRecord>> GetWith(
    ReservationRows& rows, absl::string_view reservation_id, int64_t now_ms);
// ReservationStore::ListReservations, with each reservation's waiters
// (ReservationRecord::waiter_count, waiting_agent_ids).
absl::StatusOr<std::vector<ReservationRecord>> ListWith(
    ReservationRows& rows, const ReservationFilter& filter);
// Deletes what `ended` lists, project by project (token row first), each
// reservation only if it is still not live at `now_ms`. Returns {expired,
// holder_gone} counts of what was deleted.
absl::StatusOr<std::pair<int64_t, int64_t>> DeleteEndedWith(
    ReservationRows& rows, const std::vector<EndedReservation>& ended,
    int64_t now_ms);
// ReservationStore::ReadReservationChanges: the head, then the page (whose read
// sees every change up to that head); the page's head is the larger of the two.
absl::StatusOr<ReservationChangePage> ReadChangesWith(ReservationRows& rows,
                                                      int64_t after_seq,
                                                      int64_t limit);
// ReservationStore::SnapshotReservations; the caller runs it in one read
// snapshot.
absl::StatusOr<ReservationSnapshot> SnapshotWith(
    ReservationRows& rows, const ReservationFilter& filter);
absl::StatusOr<ReservationWaiter> EnqueueWaiterWith(
    ReservationRows& rows, const ReservationWaiter& waiter);
absl::StatusOr<bool> RemoveWaiterWith(ReservationRows& rows,
                                      absl::string_view waiter_id,
                                      int64_t now_ms);
// Joins and splits the patterns column of the change log.
std::string JoinLoggedPatterns(const std::vector<std::string>& patterns);
std::vector<std::string> SplitLoggedPatterns(absl::string_view joined);

// The columns both engines select for a reservation (as `r`) and a waiter
// (as `w`), and their readers over either engine's row (storage/pg/
// pg_rows.h's Row, storage/sqlite_conn.h's Stmt: Text(i), Int(i)).
#define HUB_RES_COLUMNS                                                 \
  "r.reservation_id, r.project_id, r.agent_id, r.presence_generation, " \
  "r.exclusive, r.token, r.reason, r.created_at_ms, r.expires_at_ms"
#define HUB_RES_WAITER_COLUMNS                                       \
  "w.waiter_id, w.project_id, w.agent_id, w.presence_generation, "   \
  "w.exclusive, w.seq, w.created_at_ms, w.deadline_ms, w.patterns, " \
  "w.waits_for"

template <typename Row>
ReservationRecord ReadReservationColumns(const Row& s) {
  ReservationRecord r;
  r.reservation_id = s.Text(0);
  r.project_id = s.Text(1);
  r.agent_id = s.Text(2);
  r.presence_generation = s.Int(3);
  r.exclusive = s.Int(4) != 0;
  r.token = s.Int(5);
  r.reason = s.Text(6);
  r.created_at_ms = s.Int(7);
  r.expires_at_ms = s.Int(8);
  return r;
}

template <typename Row>
ReservationWaiter ReadWaiterColumns(const Row& s) {
  ReservationWaiter w;
  w.waiter_id = s.Text(0);
  w.project_id = s.Text(1);
  w.agent_id = s.Text(2);
  w.presence_generation = s.Int(3);
  w.exclusive = s.Int(4) != 0;
  w.seq = s.Int(5);
  w.created_at_ms = s.Int(6);
  w.deadline_ms = s.Int(7);
  w.patterns = SplitLoggedPatterns(s.Text(8));
  w.waits_for = SplitLoggedPatterns(s.Text(9));
  return w;
}

}  // namespace hub::storage

#endif  // HUB_STORAGE_RESERVATION_OPS_H_
