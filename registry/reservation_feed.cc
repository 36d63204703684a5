#include "registry/reservation_feed.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub {

namespace {
constexpr int64_t kPruneBatchRows = 10'000;
constexpr int kPruneBatches = 10;
}  // namespace

bool ReservationWatchFilter::Matches(
    const storage::ReservationRecord& r) const {
  if (project_id.has_value() && r.project_id != *project_id) return false;
  if (agent_id.has_value() && r.agent_id != *agent_id) return false;
  return true;
}

// One subscription. `mu` serializes its callbacks: the snapshot (on the
// subscriber's thread) and the changes (on the feed's).
struct ReservationFeed::Subscriber {
  ReservationWatchFilter filter;
  ChangeFn on_change;
  EndFn on_end;

  absl::Mutex mu;
  // Until the snapshot is handed over, changes wait in `early`; then only
  // those above `head` are handed over.
  bool ready ABSL_GUARDED_BY(mu) = false;
  int64_t head ABSL_GUARDED_BY(mu) = 0;
  std::vector<storage::ReservationChange> early ABSL_GUARDED_BY(mu);
  bool done ABSL_GUARDED_BY(mu) = false;  // cancelled or ended

  void Deliver(const storage::ReservationChange& change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (done || change.seq <= head) return;
    on_change(change);
  }
  void End(const absl::Status& status) {
    absl::MutexLock lock(&mu);
    if (done) return;
    done = true;
    early.clear();
    if (on_end) on_end(status);
  }
};

void ReservationFeed::Subscription::Cancel() {
  if (feed_ == nullptr) return;
  feed_->Unsubscribe(id_);
  feed_ = nullptr;
}

ReservationFeed::ReservationFeed(storage::ReservationStore* store,
                                 const Clock* clock,
                                 ReservationFeedOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

ReservationFeed::~ReservationFeed() { Stop(); }

absl::Status ReservationFeed::Start() {
  absl::StatusOr<storage::ReservationChangePage> page =
      store_->ReadReservationChanges(0, 1);
  if (!page.ok()) return page.status();
  absl::MutexLock lock(&mu_);
  if (started_ || stopping_) {
    return FailedPreconditionError("REQUEST_INVALID",
                                   "the reservation feed was started before");
  }
  cursor_ = page->head;
  kept_after_ = kept_last_ = page->head;  // nothing before the start is kept
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void ReservationFeed::Kick() {
  absl::MutexLock lock(&mu_);
  if (!started_ || stopping_) return;
  kicked_ = true;
  wake_.Signal();
}

void ReservationFeed::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_.SignalAll();
    advanced_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  EndAll(UnavailableError("HUB_SHUTTING_DOWN", "the hub is shutting down"));
}

int64_t ReservationFeed::cursor() const {
  absl::MutexLock lock(&mu_);
  return cursor_;
}

bool ReservationFeed::AwaitCursor(int64_t seq, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  while (cursor_ < seq && !stopping_) {
    if (advanced_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return cursor_ >= seq;
}

absl::StatusOr<std::unique_ptr<ReservationFeed::Subscription>>
ReservationFeed::Subscribe(const ReservationWatchFilter& filter,
                           SnapshotFn on_snapshot, ChangeFn on_change,
                           EndFn on_end) {
  return Add(filter, true, std::move(on_snapshot), std::move(on_change),
             std::move(on_end));
}

absl::StatusOr<std::unique_ptr<ReservationFeed::Subscription>>
ReservationFeed::Listen(const ReservationWatchFilter& filter,
                        ChangeFn on_change, EndFn on_end) {
  return Add(filter, false, nullptr, std::move(on_change), std::move(on_end));
}

int64_t ReservationFeed::oldest_resumable() const {
  absl::MutexLock lock(&mu_);
  return kept_after_;
}

void ReservationFeed::ForgetKeptLocked(int64_t seq) {
  kept_.clear();
  kept_after_ = kept_last_ = seq;
}

namespace {
absl::Status CursorInvalid(int64_t after_seq, std::optional<int64_t> head) {
  absl::Status s = InvalidArgumentError(
      "RESERVATION_CURSOR_INVALID",
      head.has_value()
          ? absl::StrCat("after_seq ", after_seq,
                         " is above the reservation change log's newest seq ",
                         *head)
          : absl::StrCat("after_seq must be 0 or more, got ", after_seq));
  s = WithMetadata(s, "after_seq", absl::StrCat(after_seq));
  if (head.has_value()) s = WithMetadata(s, "head", absl::StrCat(*head));
  return s;
}
}  // namespace

absl::StatusOr<std::unique_ptr<ReservationFeed::Subscription>>
ReservationFeed::Resume(const ReservationWatchFilter& filter, int64_t after_seq,
                        ResumedFn on_resumed, ChangeFn on_change,
                        EndFn on_end) {
  if (after_seq < 0) return CursorInvalid(after_seq, std::nullopt);
  auto sub = std::make_shared<Subscriber>();
  sub->filter = filter;
  sub->on_change = std::move(on_change);
  sub->on_end = std::move(on_end);
  std::optional<int64_t> store_head;
  std::vector<storage::ReservationChange> replay;
  int64_t id = 0;
  int64_t oldest = 0;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (!started_ || stopping_) {
        return UnavailableError("HUB_SHUTTING_DOWN",
                                "the reservation feed is not running");
      }
      oldest = kept_after_;
      if (after_seq < kept_after_) {
        return WithMetadata(
            FailedPreconditionError(
                "RESERVATION_CURSOR_EXPIRED",
                absl::StrCat("this hub keeps the reservation changes after "
                             "seq ",
                             kept_after_, ", not after ", after_seq)),
            "oldest_seq", absl::StrCat(kept_after_));
      }
      // Registered in the same critical section that reads what is kept:
      // Dispatch keeps a change and picks its targets under mu_, so every
      // change is either in `replay` or reaches this subscriber later.
      if (after_seq <= kept_last_ ||
          (store_head.has_value() && after_seq <= *store_head)) {
        for (const storage::ReservationChange& c : kept_) {
          if (c.seq > after_seq && filter.Matches(c.reservation)) {
            replay.push_back(c);
          }
        }
        id = next_id_++;
        subscribers_[id] = sub;
        break;
      }
    }
    // Beyond what this feed read: another hub may have read further, but
    // nothing can be beyond the log's head.
    absl::StatusOr<storage::ReservationChangePage> page =
        store_->ReadReservationChanges(0, 1);
    if (!page.ok()) return page.status();
    if (after_seq > page->head) return CursorInvalid(after_seq, page->head);
    store_head = page->head;
  }
  auto subscription = std::unique_ptr<Subscription>(new Subscription(this, id));
  absl::MutexLock lock(&sub->mu);
  if (sub->done) return subscription;  // ended meanwhile (on_end was told)
  sub->head = after_seq;
  on_resumed(oldest);
  for (const storage::ReservationChange& change : replay) sub->Deliver(change);
  sub->ready = true;
  for (const storage::ReservationChange& change : sub->early) {
    sub->Deliver(change);
  }
  sub->early.clear();
  return subscription;
}

absl::StatusOr<std::unique_ptr<ReservationFeed::Subscription>>
ReservationFeed::Add(const ReservationWatchFilter& filter, bool snapshot,
                     SnapshotFn on_snapshot, ChangeFn on_change, EndFn on_end) {
  auto sub = std::make_shared<Subscriber>();
  sub->filter = filter;
  sub->on_change = std::move(on_change);
  sub->on_end = std::move(on_end);
  int64_t id = 0;
  int64_t cursor = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) {
      return UnavailableError("HUB_SHUTTING_DOWN",
                              "the reservation feed is not running");
    }
    id = next_id_++;
    cursor = cursor_;
    subscribers_[id] = sub;
  }
  auto subscription = std::unique_ptr<Subscription>(new Subscription(this, id));
  if (!snapshot) {
    absl::MutexLock lock(&sub->mu);
    sub->head = cursor;
    sub->ready = true;
    return subscription;
  }
  // Registered first: every change the snapshot does not hold reaches
  // `early` or later Deliver calls, whose seqs are above the cursor read
  // above and so above nothing the snapshot lacks.
  storage::ReservationFilter f;
  f.project_id = filter.project_id;
  f.agent_id = filter.agent_id;
  f.now_ms = absl::ToUnixMillis(clock_->Now());
  absl::StatusOr<storage::ReservationSnapshot> snap =
      store_->SnapshotReservations(f);
  if (!snap.ok()) return snap.status();  // the subscription unregisters
  absl::MutexLock lock(&sub->mu);
  if (sub->done) return subscription;  // ended meanwhile (on_end was told)
  sub->head = snap->head;
  on_snapshot(*snap);
  sub->ready = true;
  for (const storage::ReservationChange& change : sub->early) {
    sub->Deliver(change);
  }
  sub->early.clear();
  return subscription;
}

void ReservationFeed::Unsubscribe(int64_t id) {
  std::shared_ptr<Subscriber> sub;
  {
    absl::MutexLock lock(&mu_);
    auto it = subscribers_.find(id);
    if (it == subscribers_.end()) return;
    sub = std::move(it->second);
    subscribers_.erase(it);
  }
  // Waits for a callback in progress.
  absl::MutexLock lock(&sub->mu);
  sub->done = true;
  sub->early.clear();
}

void ReservationFeed::EndAll(const absl::Status& status) {
  std::map<int64_t, std::shared_ptr<Subscriber>> ended;
  {
    absl::MutexLock lock(&mu_);
    ended.swap(subscribers_);
  }
  for (auto& [id, sub] : ended) sub->End(status);
}

void ReservationFeed::Dispatch(const storage::ReservationChange& change) {
  std::vector<std::shared_ptr<Subscriber>> targets;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, sub] : subscribers_) {
      if (sub->filter.Matches(change.reservation)) targets.push_back(sub);
    }
    // Kept for Resume, in the same critical section (see Resume).
    if (options_.kept_changes > 0) {
      kept_.push_back(change);
      while (static_cast<int64_t>(kept_.size()) > options_.kept_changes) {
        kept_after_ = kept_.front().seq;
        kept_.pop_front();
      }
    } else {
      kept_after_ = change.seq;
    }
    kept_last_ = change.seq;
  }
  for (const std::shared_ptr<Subscriber>& sub : targets) {
    absl::MutexLock lock(&sub->mu);
    if (!sub->ready) {
      if (!sub->done) sub->early.push_back(change);
      continue;
    }
    sub->Deliver(change);
  }
}

void ReservationFeed::Run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time until = absl::Now() + options_.poll_interval;
      while (!stopping_ && !kicked_ && !wake_.WaitWithDeadline(&mu_, until)) {
      }
      const absl::Time next_read = last_read_ + options_.min_read_interval;
      while (!stopping_ && absl::Now() < next_read) {
        wake_.WaitWithDeadline(&mu_, next_read);
      }
      if (stopping_) return;
      kicked_ = false;
    }
    last_read_ = absl::Now();
    CatchUp();
    if (options_.prune_interval > absl::ZeroDuration() &&
        absl::Now() - last_prune_ >= options_.prune_interval) {
      last_prune_ = absl::Now();
      const int64_t before = absl::ToUnixMillis(clock_->Now()) -
                             absl::ToInt64Milliseconds(options_.retention);
      for (int i = 0; i < kPruneBatches; ++i) {
        absl::StatusOr<int64_t> n =
            store_->PruneReservationChanges(before, kPruneBatchRows);
        if (!n.ok()) {
          if (options_.on_error) options_.on_error(n.status());
          break;
        }
        if (*n < kPruneBatchRows) break;
      }
    }
  }
}

void ReservationFeed::CatchUp() {
  for (;;) {
    const int64_t after = cursor();
    absl::StatusOr<storage::ReservationChangePage> page =
        store_->ReadReservationChanges(after, options_.page_size);
    if (!page.ok()) {
      if (!failing_ && options_.on_error) options_.on_error(page.status());
      failing_ = true;
      return;
    }
    failing_ = false;
    const std::vector<storage::ReservationChange>& changes = page->changes;
    const int64_t next = changes.empty() ? page->head + 1 : changes[0].seq;
    // Seqs are consecutive: a later first one means changes were pruned
    // before this hub read them; a head below the cursor, a database that
    // went back (restored, or a standby promoted without the last commits).
    // No subscriber can go on without a gap.
    if (next > after + 1 || page->head < after) {
      const absl::Status missed = ReasonError(
          absl::StatusCode::kUnavailable, "RESERVATION_CHANGES_MISSED",
          page->head < after
              ? absl::StrCat("the reservation change log's head went back "
                             "from ",
                             after, " to ", page->head)
              : absl::StrCat("reservation changes ", after + 1, " to ",
                             next - 1,
                             " were pruned before this hub read them"));
      if (options_.on_error) options_.on_error(missed);
      EndAll(missed);
      absl::MutexLock lock(&mu_);
      cursor_ = page->head < after ? page->head : next - 1;
      ForgetKeptLocked(cursor_);  // no resume across the gap
      advanced_.SignalAll();
      continue;
    }
    for (const storage::ReservationChange& change : changes) {
      Dispatch(change);
      absl::MutexLock lock(&mu_);
      cursor_ = change.seq;
      advanced_.SignalAll();
    }
    if (static_cast<int64_t>(changes.size()) < options_.page_size) return;
  }
}

}  // namespace hub
