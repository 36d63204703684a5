// ReservationStore over one engine, written once for SQLite and PostgreSQL
// (docs/design/reservations.md, "Storage"): each method runs one operation
// of reservation_ops.h in one of the engine's reads or writes over the
// engine's ReservationRows. What differs between the engines is only their
// statements (the Rows class, its snapshot's BEGIN included) and whether
// their writer orders a group's operations by key (PostgreSQL: the writes
// that take a project's token row carry ReservationOrderKey, so two hubs'
// groups lock token rows in one order; storage/group_commit_writer.h).
#ifndef HUB_STORAGE_RESERVATION_STORE_CALLS_H_
#define HUB_STORAGE_RESERVATION_STORE_CALLS_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "storage/reservation_ops.h"
#include "storage/reservation_store.h"
#include "storage/reservations.h"

namespace hub::storage {

// The writer's order key of a write that locks the project's token row.
inline std::string ReservationOrderKey(absl::string_view project_id) {
  return absl::StrCat("reservation-token:", project_id);
}

// `Engine` (a friend: its Read and Write are private) runs functions of
// its Connection; `Rows` is its ReservationRows over one Connection;
// `kOrderKeys`: its Write takes an order key.
template <typename Engine, typename Rows, bool kOrderKeys>
class ReservationCalls final : public ReservationStore {
 public:
  explicit ReservationCalls(Engine& engine) : engine_(engine) {}

  absl::StatusOr<ReservationOutcome> Reserve(
      const ReservationRequest& r) override {
    return Write<ReservationOutcome>(
        [&](Rows& rows) { return ReserveWith(rows, r); },
        ReservationOrderKey(r.project_id));
  }
  absl::StatusOr<std::vector<ReservationConflict>> CheckReservations(
      const ReservationCheck& check) override {
    return Read<std::vector<ReservationConflict>>(
        [&](Rows& rows) { return CheckWith(rows, check); });
  }
  absl::StatusOr<ReservationRecord> RenewReservation(
      const ReservationRenewal& renewal) override {
    return Write<ReservationRecord>(
        [&](Rows& rows) { return RenewWith(rows, renewal); });
  }
  absl::StatusOr<std::optional<ReservationRecord>> ReleaseReservation(
      const ReservationRelease& release) override {
    return Write<std::optional<ReservationRecord>>(
        [&](Rows& rows) { return ReleaseWith(rows, release); });
  }
  absl::StatusOr<int64_t> ReleaseAgentReservations(
      absl::string_view agent_id, std::optional<int64_t> generation,
      int64_t now_ms) override {
    return Write<int64_t>([&](Rows& rows) {
      return ReleaseAgentWith(rows, agent_id, generation, now_ms);
    });
  }
  absl::StatusOr<std::optional<ReservationRecord>> GetReservation(
      absl::string_view reservation_id, int64_t now_ms) override {
    return Read<std::optional<ReservationRecord>>(
        [&](Rows& rows) { return GetWith(rows, reservation_id, now_ms); });
  }
  absl::StatusOr<std::vector<ReservationRecord>> ListReservations(
      const ReservationFilter& filter) override {
    return Read<std::vector<ReservationRecord>>(
        [&](Rows& rows) { return ListWith(rows, filter); });
  }
  // Ended reservations are found on a read connection (the search reads
  // every row whose holder is gone) and deleted on the writer, each only if
  // still ended; waiters whose hub died before their wait ended (a live
  // hub takes its own out of the queue) go too, one cheap statement.
  absl::StatusOr<std::pair<int64_t, int64_t>> SweepReservations(
      int64_t now_ms) override {
    using Ended = std::vector<EndedReservation>;
    absl::StatusOr<Ended> ended = Read<Ended>(
        [&](Rows& rows) { return rows.Ended(now_ms, 1000, std::nullopt); });
    if (!ended.ok()) return ended.status();
    absl::StatusOr<int64_t> dead = Write<int64_t>(
        [&](Rows& rows) { return rows.DeleteDeadWaiters(now_ms); });
    if (!dead.ok()) return dead.status();
    if (ended->empty()) return std::pair<int64_t, int64_t>(0, 0);
    // DeleteEndedWith locks its projects in order, the smallest first.
    std::string first_project = ended->front().project_id;
    for (const EndedReservation& e : *ended) {
      first_project = std::min(first_project, e.project_id);
    }
    return Write<std::pair<int64_t, int64_t>>(
        [&](Rows& rows) { return DeleteEndedWith(rows, *ended, now_ms); },
        ReservationOrderKey(first_project));
  }
  absl::StatusOr<ReservationChangePage> ReadReservationChanges(
      int64_t after_seq, int64_t limit) override {
    return Read<ReservationChangePage>(
        [&](Rows& rows) { return ReadChangesWith(rows, after_seq, limit); });
  }
  // One read snapshot (Rows::BeginSnapshot): the head and every page.
  absl::StatusOr<ReservationSnapshot> SnapshotReservations(
      const ReservationFilter& filter) override {
    return Read<ReservationSnapshot>(
        [&](Rows& rows) -> absl::StatusOr<ReservationSnapshot> {
          if (absl::Status s = rows.BeginSnapshot(); !s.ok()) return s;
          absl::StatusOr<ReservationSnapshot> snapshot =
              SnapshotWith(rows, filter);
          absl::Status end = rows.EndSnapshot(snapshot.ok());
          if (snapshot.ok() && !end.ok()) return end;
          return snapshot;
        });
  }
  absl::StatusOr<int64_t> PruneReservationChanges(int64_t before_ms,
                                                  int64_t limit) override {
    return Write<int64_t>(
        [&](Rows& rows) { return rows.PruneChanges(before_ms, limit); });
  }
  absl::StatusOr<ReservationWaiter> EnqueueReservationWaiter(
      const ReservationWaiter& waiter) override {
    return Write<ReservationWaiter>(
        [&](Rows& rows) { return EnqueueWaiterWith(rows, waiter); },
        ReservationOrderKey(waiter.project_id));
  }
  absl::StatusOr<bool> RemoveReservationWaiter(absl::string_view waiter_id,
                                               int64_t now_ms) override {
    return Write<bool>(
        [&](Rows& rows) { return RemoveWaiterWith(rows, waiter_id, now_ms); });
  }

 private:
  template <typename T, typename Fn>
  absl::StatusOr<T> Read(Fn fn) {
    return engine_.template Read<T>([&](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn);
      return fn(rows);
    });
  }
  template <typename T, typename Fn>
  absl::StatusOr<T> Write(Fn fn, std::string order_key = {}) {
    auto run = [&](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn);
      return fn(rows);
    };
    if constexpr (kOrderKeys) {
      return engine_.template Write<T>(run, std::move(order_key));
    } else {
      return engine_.template Write<T>(run);
    }
  }

  Engine& engine_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_RESERVATION_STORE_CALLS_H_
