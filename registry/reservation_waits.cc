#include "registry/reservation_waits.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub {

namespace {
// Ids cancelled before their Reserve arrived, kept at most.
constexpr size_t kMaxCancelledEarly = 4096;
}  // namespace

ReservationWaits::ReservationWaits(ReservationBook* book, ReservationFeed* feed,
                                   const Clock* clock)
    : book_(book), feed_(feed), clock_(clock) {}

ReservationWaits::~ReservationWaits() { Stop(); }

absl::Status ReservationWaits::Start() {
  // A waiter tries again on the changes that can free it (CanFree).
  absl::StatusOr<std::unique_ptr<ReservationFeed::Subscription>> listening =
      feed_->Listen({}, [this](const storage::ReservationChange& change) {
        absl::MutexLock lock(&mu_);
        bool due = false;
        for (auto& [id, w] : waits_) {
          if (w.attempting &&
              change.kind == storage::ReservationChangeKind::kNarrowed &&
              change.reservation.project_id == w.in.project_id &&
              change.reservation.agent_id != w.in.agent_id) {
            w.narrowed_while_attempting.insert(
                change.reservation.reservation_id);
            continue;
          }
          if (CanFree(w, change)) {
            w.changed = true;
            w.next = absl::InfinitePast();
            due = true;
          }
        }
        if (due) wake_.Signal();
      });
  if (!listening.ok()) return listening.status();
  listening_ = std::move(*listening);
  absl::MutexLock lock(&mu_);
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

bool ReservationWaits::CanFree(const Wait& w,
                               const storage::ReservationChange& change) {
  const storage::ReservationRecord& r = change.reservation;
  if (r.project_id != w.in.project_id || r.agent_id == w.in.agent_id) {
    return false;  // an agent never conflicts with itself
  }
  switch (change.kind) {
    case storage::ReservationChangeKind::kReleased:
    case storage::ReservationChangeKind::kForced:
    case storage::ReservationChangeKind::kExpired:
    case storage::ReservationChangeKind::kHolderGone:
    case storage::ReservationChangeKind::kWaitEnded:
      // As it was: every pattern it held (or waited for).
      return w.blockers.count(r.reservation_id) > 0 ||
             storage::RequestConflictsWith(w.in.patterns, w.in.exclusive,
                                           w.in.agent_id, r);
    case storage::ReservationChangeKind::kNarrowed:
      return !w.blockers_whole || w.blockers.count(r.reservation_id) > 0;
    case storage::ReservationChangeKind::kGranted:
    case storage::ReservationChangeKind::kRenewed:
    case storage::ReservationChangeKind::kWaiting:
      return false;  // adds or keeps conflicts, frees none
  }
  return true;
}

void ReservationWaits::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  if (listening_ != nullptr) listening_->Cancel();
  std::map<int64_t, Wait> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(waits_);
  }
  for (auto& [id, w] : left) {
    if (w.waiter_id.has_value()) book_->LeaveQueue(*w.waiter_id);
    Finish(std::move(w),
           UnavailableError("HUB_SHUTTING_DOWN", "the hub is shutting down"),
           "cancelled");
  }
}

int64_t ReservationWaits::NewId() {
  absl::MutexLock lock(&mu_);
  return next_id_++;
}

void ReservationWaits::Reserve(int64_t id, PathReserveInput in,
                               absl::Duration wait, Done done) {
  Wait w;
  w.in = std::move(in);
  w.deadline = clock_->Now() + wait;
  w.done = std::move(done);
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_early_.erase(id) > 0) w.cancelled = true;
    if (!stopping_ && started_) {
      waits_.emplace(id, std::move(w));
      wake_.Signal();
      return;
    }
  }
  Finish(std::move(w),
         UnavailableError("HUB_SHUTTING_DOWN", "the hub is shutting down"),
         "cancelled");
}

void ReservationWaits::Cancel(int64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = waits_.find(id);
  if (it == waits_.end()) {
    if (cancelled_early_.size() < kMaxCancelledEarly) {
      cancelled_early_.insert(id);
    }
    return;
  }
  it->second.cancelled = true;
  it->second.next = absl::InfinitePast();
  wake_.Signal();
}

void ReservationWaits::Run() {
  for (;;) {
    std::vector<int64_t> due;
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        if (stopping_) return;
        const absl::Time now = clock_->Now();
        absl::Time earliest = absl::InfiniteFuture();
        for (const auto& [id, w] : waits_) {
          if (w.next <= now) {
            due.push_back(id);
          } else {
            earliest = std::min(earliest, w.next);
          }
        }
        if (!due.empty()) break;
        // Until the earliest deadline or expiry, a change, a new wait.
        wake_.WaitWithTimeout(&mu_, earliest - now);
      }
    }
    for (int64_t id : due) Step(id);
  }
}

void ReservationWaits::Step(int64_t id) {
  PathReserveInput in;
  std::optional<std::string> waiter_id;
  absl::Time deadline;
  bool cancelled = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = waits_.find(id);
    if (it == waits_.end()) return;
    Wait& w = it->second;
    in = w.in;
    waiter_id = w.waiter_id;
    deadline = w.deadline;
    cancelled = w.cancelled;
    w.changed = false;  // changes from here on make it try again
    w.attempting = true;
    w.narrowed_while_attempting.clear();
    w.next = absl::InfiniteFuture();
  }
  // Ends the wait: out of the map, then `done`.
  auto finish = [&](absl::StatusOr<storage::ReservationRecord> result,
                    const std::string& outcome) {
    Wait w;
    {
      absl::MutexLock lock(&mu_);
      auto it = waits_.find(id);
      if (it == waits_.end()) return;
      w = std::move(it->second);
      waits_.erase(it);
    }
    Finish(std::move(w), std::move(result), outcome);
  };
  if (cancelled) {
    if (waiter_id.has_value()) book_->LeaveQueue(*waiter_id);
    finish(absl::CancelledError("the waiting reserve was cancelled"),
           "cancelled");
    return;
  }
  if (attempt_observer_) attempt_observer_();
  absl::StatusOr<storage::ReservationOutcome> out =
      book_->Attempt(in, waiter_id);
  if (!out.ok()) {
    if (waiter_id.has_value()) book_->LeaveQueue(*waiter_id);
    finish(out.status(), "error");
    return;
  }
  if (out->granted.has_value()) {  // out of the queue in the same write
    finish(*std::move(out->granted), "granted");
    return;
  }
  if (clock_->Now() >= deadline) {
    if (waiter_id.has_value()) book_->LeaveQueue(*waiter_id);
    book_->CountConflict();
    finish(storage::ReservationConflictError(out->conflicts), "timeout");
    return;
  }
  absl::Time next = deadline;
  if (!waiter_id.has_value()) {
    absl::StatusOr<storage::ReservationWaiter> queued =
        book_->Enqueue(in, deadline, storage::WaitsFor(out->conflicts));
    if (!queued.ok()) {
      finish(queued.status(), "error");
      return;
    }
    waiter_id = queued->waiter_id;
    next = absl::InfinitePast();  // for what ended before it was queued
  } else {
    // An expired reservation (or a waiter past its deadline) stops
    // conflicting before anything logs its end.
    for (const storage::ReservationConflict& c : out->conflicts) {
      next = std::min(next, absl::FromUnixMillis(c.expires_at_ms + 1));
    }
  }
  std::set<std::string> blockers;
  for (const storage::ReservationConflict& c : out->conflicts) {
    blockers.insert(c.reservation_id);
  }
  const bool whole =
      out->conflicts.size() < storage::ReservationRequest().max_conflicts;
  absl::MutexLock lock(&mu_);
  auto it = waits_.find(id);
  if (it == waits_.end()) return;
  Wait& w = it->second;
  w.attempting = false;
  for (const std::string& narrowed : w.narrowed_while_attempting) {
    if (!whole || blockers.count(narrowed) > 0) w.changed = true;
  }
  w.narrowed_while_attempting.clear();
  w.blockers = std::move(blockers);
  w.blockers_whole = whole;
  w.waiter_id = waiter_id;
  w.next = w.changed || w.cancelled ? absl::InfinitePast() : next;
}

void ReservationWaits::Finish(Wait wait,
                              absl::StatusOr<storage::ReservationRecord> result,
                              const std::string& outcome) {
  if (observer_) observer_(outcome);
  wait.done(std::move(result));
}

}  // namespace hub
