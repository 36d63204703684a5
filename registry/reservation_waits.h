// ReservationWaits: reserves that wait, up to a deadline, for the
// reservations they conflict with to end (ReserveRequest.wait;
// docs/design/reservations.md, "Waiting").
//
// A waiting reserve first tries once; on a conflict it joins its project's
// queue in the store (ReservationStore::EnqueueReservationWaiter: a seq handed
// out under the project's token row, so in arrival order across every hub
// sharing the database) and tries again on each change on the
// ReservationFeed that can free it (any hub's: the end of a reservation, or
// a waiter leaving, whose patterns conflict with its own; a narrowing of
// one it conflicted with; CanFree), and at the earliest expiry among its
// conflicts (an expired reservation no longer
// conflicts, before any sweep logs it). Every reserve of the project treats
// the overlapping waiters ahead of it as conflicts, so the first waiter for
// a path gets it first, whichever hub serves it. At the deadline it fails
// with the RESERVATION_CONFLICT of its last attempt; cancelled, timed out
// or failed, it leaves the queue (nothing stays behind; a waiter whose hub
// died stops counting at its deadline and is swept).
//
// One thread runs every attempt, so waiting costs no thread per call.
// Thread-safe.
#ifndef HUB_REGISTRY_RESERVATION_WAITS_H_
#define HUB_REGISTRY_RESERVATION_WAITS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "registry/clock.h"
#include "registry/reservation_feed.h"
#include "registry/reservations.h"

namespace hub {

// The longest a reserve may wait.
inline constexpr absl::Duration kMaxReservationWait = absl::Minutes(10);

class ReservationWaits {
 public:
  using Done = std::function<void(absl::StatusOr<storage::ReservationRecord>)>;

  // Everything must outlive the waits (or their Stop).
  ReservationWaits(ReservationBook* book, ReservationFeed* feed,
                   const Clock* clock);
  // Stop().
  ~ReservationWaits();
  ReservationWaits(const ReservationWaits&) = delete;
  ReservationWaits& operator=(const ReservationWaits&) = delete;

  // Listens to the feed and starts the thread. Errors: the feed's.
  absl::Status Start();
  // Every wait still running ends with UNAVAILABLE / HUB_SHUTTING_DOWN and
  // leaves its queue; later Reserve calls too. Idempotent.
  void Stop();

  // An id for Reserve and Cancel.
  int64_t NewId();
  // Reserves `in`, waiting up to `wait` (0 < wait <= kMaxReservationWait,
  // checked by the caller). `done` runs exactly once, on the waits'
  // thread.
  void Reserve(int64_t id, PathReserveInput in, absl::Duration wait, Done done);
  // Ends the wait `id` with CANCELLED (its caller went away), also when it
  // has not started yet.
  void Cancel(int64_t id);

  // Told how each waiting reserve ended: "granted", "timeout",
  // "cancelled" or "error". Set before Start.
  void SetObserver(std::function<void(const std::string&)> observer) {
    observer_ = std::move(observer);
  }
  // Told of each attempt of a waiting reserve (one write). Set before Start.
  void SetAttemptObserver(std::function<void()> observer) {
    attempt_observer_ = std::move(observer);
  }

 private:
  struct Wait {
    PathReserveInput in;
    absl::Time deadline;
    Done done;
    std::optional<std::string> waiter_id;    // once queued
    absl::Time next = absl::InfinitePast();  // the next attempt
    bool changed = false;  // a change that can free it came since
    bool cancelled = false;
    // The reservations (and waiters) its last attempt conflicted with, and
    // whether that list was whole (the store reports a bounded number).
    std::set<std::string> blockers;
    bool blockers_whole = false;
    // While an attempt runs, the reservations narrowed meanwhile: the
    // attempt may have read them before or after, so it tries again only if
    // one of them is among the blockers it found.
    bool attempting = false;
    std::set<std::string> narrowed_while_attempting;
  };
  // Whether `change` can free what `w` waits for: only an end of something
  // of another agent that conflicts with it can, or a narrowing of one of
  // its blockers (the change holds what is left, not what was released).
  static bool CanFree(const Wait& w, const storage::ReservationChange& change);
  void Run();
  // One attempt (or the end) of the wait `id`; on the thread.
  void Step(int64_t id);
  void Finish(Wait wait, absl::StatusOr<storage::ReservationRecord> result,
              const std::string& outcome);

  ReservationBook* const book_;
  ReservationFeed* const feed_;
  const Clock* const clock_;
  std::function<void(const std::string&)> observer_;
  std::function<void()> attempt_observer_;
  std::unique_ptr<ReservationFeed::Subscription> listening_;

  absl::Mutex mu_;
  absl::CondVar wake_;
  std::map<int64_t, Wait> waits_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> cancelled_early_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hub

#endif  // HUB_REGISTRY_RESERVATION_WAITS_H_
