// ReservationStore: path reservations, their waiters and their change log
// (the records and the conflict rules are storage/reservations.h's; the
// operations both engines share, storage/reservation_ops.h). The contracts
// every store method keeps are in storage/store.h.
#ifndef HUB_STORAGE_RESERVATION_STORE_H_
#define HUB_STORAGE_RESERVATION_STORE_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/reservations.h"

namespace hub::storage {

class ReservationStore {
 public:
  virtual ~ReservationStore() = default;

  // One write: takes the project's token row (serializing every reserve of
  // the project, across hubs), reads the live candidate rows by literal
  // prefix, decides conflicts (DecideConflicts), then inserts the
  // reservation with the next token, or writes nothing and returns the
  // conflicts. The holder must be present: NOT_FOUND / AGENT_NOT_FOUND,
  // FAILED_PRECONDITION / AGENT_OFFLINE or STALE_PRESENCE_OWNER otherwise;
  // limits as ReservationRequest says.
  virtual absl::StatusOr<ReservationOutcome> Reserve(
      const ReservationRequest& request) = 0;
  // What Reserve would conflict with, from a read (no write, no token).
  virtual absl::StatusOr<std::vector<ReservationConflict>> CheckReservations(
      const ReservationCheck& check) = 0;
  // Moves a live reservation's expiry to now + ttl, fenced in SQL by its
  // id, holder and token. RESERVATION_NOT_FOUND when no live reservation has
  // the id; FAILED_PRECONDITION / RESERVATION_NOT_HOLDER for another agent,
  // RESERVATION_STALE_TOKEN for another token.
  virtual absl::StatusOr<ReservationRecord> RenewReservation(
      const ReservationRenewal& renewal) = 0;
  // Releases some patterns of a reservation, or all of it (fenced as
  // Renew unless forced). Returns what is left, nullopt when the
  // reservation ended. Patterns it does not hold are ignored.
  virtual absl::StatusOr<std::optional<ReservationRecord>> ReleaseReservation(
      const ReservationRelease& release) = 0;
  // Deletes every reservation of `agent_id` (at `generation`, when set):
  // its holder is gone (logged at `now_ms`). Returns how many ended.
  virtual absl::StatusOr<int64_t> ReleaseAgentReservations(
      absl::string_view agent_id, std::optional<int64_t> generation,
      int64_t now_ms) = 0;
  // A live reservation, or nullopt.
  virtual absl::StatusOr<std::optional<ReservationRecord>> GetReservation(
      absl::string_view reservation_id, int64_t now_ms) = 0;
  virtual absl::StatusOr<std::vector<ReservationRecord>> ListReservations(
      const ReservationFilter& filter) = 0;
  // Deletes reservations that ended (expired, holder gone) at `now_ms`.
  // Returns how many, by reason: {expired, holder_gone}.
  virtual absl::StatusOr<std::pair<int64_t, int64_t>> SweepReservations(
      int64_t now_ms) = 0;
  // The reservation change log (hub_reservation_changes): every write above
  // appends, in its own transaction, one change per reservation it grants,
  // renews, narrows or ends. At most `limit` (> 0, else INVALID_ARGUMENT /
  // REQUEST_INVALID) changes with seq > after_seq, by seq, and the head.
  // Seq order is commit order, so a reader paging by seq misses nothing.
  virtual absl::StatusOr<ReservationChangePage> ReadReservationChanges(
      int64_t after_seq, int64_t limit) = 0;
  // Every live reservation of the filter's project and agent (its limit and
  // keyset ignored) and the log's head, from one read snapshot.
  virtual absl::StatusOr<ReservationSnapshot> SnapshotReservations(
      const ReservationFilter& filter) = 0;
  // Queues a waiting reserve in its project (under the project's token
  // row: seq = the project's last + 1) and logs kWaiting. Returns it with
  // its seq.
  virtual absl::StatusOr<ReservationWaiter> EnqueueReservationWaiter(
      const ReservationWaiter& waiter) = 0;
  // Takes a waiter out of its queue (its wait ended without a grant) and
  // logs kWaitEnded; false when it was not queued.
  virtual absl::StatusOr<bool> RemoveReservationWaiter(
      absl::string_view waiter_id, int64_t now_ms) = 0;
  // Deletes changes written before `before_ms`, among the `limit` oldest;
  // returns how many.
  virtual absl::StatusOr<int64_t> PruneReservationChanges(int64_t before_ms,
                                                          int64_t limit) = 0;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_RESERVATION_STORE_H_
