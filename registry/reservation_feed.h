// ReservationFeed: the live feed of path reservation changes, for every
// hub over one database (docs/design/reservations.md, "Watching").
//
// Every reservation write appends its changes to the store's change log in
// its own transaction (ReservationStore::ReadReservationChanges: granted,
// renewed, narrowed, released, forced, expired, holder_gone), with seqs in
// commit order. One thread per hub reads the log by cursor and hands each
// change, in seq order, to the subscribers whose filter it matches: the changes
// made through this hub and through every other hub sharing the database.
// It is woken by Kick (this hub's commit; another hub's hint) and by a slow
// poll, the safety net, and prunes the log.
//
// Resume starts from a seq instead (a watcher that reconnects): the feed
// keeps the last kept_changes changes it handed over, in memory, and serves
// a cursor those cover with the changes after it, each once; an older
// cursor (or one from before the feed started) is refused, and the
// subscriber takes a snapshot instead.
//
// Subscribe gives a consistent start: it registers first, then reads the
// live reservations and the log's head from one snapshot
// (ReservationStore::SnapshotReservations), hands over the snapshot, and from
// then on only changes with a seq above that head: nothing is missed between
// the two and nothing is handed over twice. Listen is the same without a
// snapshot (changes after the cursor at the time of the call).
//
// Callbacks run on the feed's thread (a snapshot's on the subscriber's,
// before any change), one at a time per subscription, and must not block
// or call back into the feed. Thread-safe.
#ifndef HUB_REGISTRY_RESERVATION_FEED_H_
#define HUB_REGISTRY_RESERVATION_FEED_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "registry/clock.h"
#include "storage/store.h"

namespace hub {

// Which changes a subscription gets; unset fields match everything.
struct ReservationWatchFilter {
  std::optional<std::string> project_id;
  std::optional<std::string> agent_id;  // the holder

  bool Matches(const storage::ReservationRecord& r) const;
};

struct ReservationFeedOptions {
  // The safety net: the log is read at least this often.
  absl::Duration poll_interval = absl::Milliseconds(200);
  // Reads start at least this long apart (kicks that come sooner are served
  // by one read).
  absl::Duration min_read_interval = absl::Milliseconds(2);
  int64_t page_size = 500;
  // Changes kept in memory for Resume (bounded: at most this many).
  int64_t kept_changes = 10'000;
  // Changes older than this are pruned every prune_interval (zero: never).
  absl::Duration retention = absl::Minutes(5);
  absl::Duration prune_interval = absl::Seconds(30);
  // Told, on the feed's thread, when reading starts failing (once per run
  // of failures) and when changes were missed (pruned before they were
  // read: reason RESERVATION_CHANGES_MISSED). Default: nothing.
  std::function<void(const absl::Status&)> on_error;
};

class ReservationFeed {
 public:
  using SnapshotFn = std::function<void(const storage::ReservationSnapshot&)>;
  // A resume was accepted; `oldest` is the lowest seq it could have started
  // after. Runs before any change.
  using ResumedFn = std::function<void(int64_t oldest)>;
  using ChangeFn = std::function<void(const storage::ReservationChange&)>;
  // The subscription can no longer be kept without a gap (changes were
  // pruned before the feed read them, or the feed stopped): the subscriber
  // must start again. Called at most once; nothing follows it.
  using EndFn = std::function<void(const absl::Status&)>;

  // A subscription; destroying it (or Cancel) ends it.
  class Subscription {
   public:
    ~Subscription() { Cancel(); }
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    // No callback runs once this returns (one in progress is waited for).
    // Idempotent. Never from inside a callback.
    void Cancel();

   private:
    friend class ReservationFeed;
    Subscription(ReservationFeed* feed, int64_t id) : feed_(feed), id_(id) {}
    ReservationFeed* feed_;
    int64_t id_;
  };

  // `store` and `clock` must outlive the feed.
  ReservationFeed(storage::ReservationStore* store, const Clock* clock,
                  ReservationFeedOptions options = {});
  // Stop().
  ~ReservationFeed();
  ReservationFeed(const ReservationFeed&) = delete;
  ReservationFeed& operator=(const ReservationFeed&) = delete;

  // Reads the log's head (the cursor starts there) and starts the thread.
  // Errors: the store's. Call once.
  absl::Status Start();
  // Asks for a read now. Cheap, never blocks on the store; any thread.
  void Kick();
  // Ends every subscription (EndFn with HUB_SHUTTING_DOWN) and joins the
  // thread. Idempotent.
  void Stop();

  // The snapshot of `filter`'s live reservations (read at the clock's now),
  // then its changes. Errors: the store's (nothing is registered then).
  // Before Start or after Stop: UNAVAILABLE / HUB_SHUTTING_DOWN.
  absl::StatusOr<std::unique_ptr<Subscription>> Subscribe(
      const ReservationWatchFilter& filter, SnapshotFn on_snapshot,
      ChangeFn on_change, EndFn on_end = nullptr);
  // Changes after the current cursor, without a snapshot.
  absl::StatusOr<std::unique_ptr<Subscription>> Listen(
      const ReservationWatchFilter& filter, ChangeFn on_change,
      EndFn on_end = nullptr);
  // The filter's changes with a seq above `after_seq`, each once, in seq
  // order, without a snapshot: those kept (on the caller's thread, after
  // on_resumed), then each later one. Errors: INVALID_ARGUMENT /
  // RESERVATION_CURSOR_INVALID when after_seq is negative or above the
  // store's head; FAILED_PRECONDITION / RESERVATION_CURSOR_EXPIRED when the
  // feed no longer holds every change after it (older than what it keeps,
  // or from before it started; metadata oldest_seq); the store's; before
  // Start or after Stop, UNAVAILABLE / HUB_SHUTTING_DOWN.
  absl::StatusOr<std::unique_ptr<Subscription>> Resume(
      const ReservationWatchFilter& filter, int64_t after_seq,
      ResumedFn on_resumed, ChangeFn on_change, EndFn on_end = nullptr);
  // The lowest seq Resume can start after now.
  int64_t oldest_resumable() const;

  // The seq of the last change handed to subscribers.
  int64_t cursor() const;
  // Waits until the feed handed over every change up to `seq` (true), or
  // until `deadline` or Stop (false). Not from a callback.
  bool AwaitCursor(int64_t seq, absl::Time deadline) const;

 private:
  struct Subscriber;
  void Run();
  void CatchUp();
  void Dispatch(const storage::ReservationChange& change);
  void EndAll(const absl::Status& status);
  void Unsubscribe(int64_t id);
  absl::StatusOr<std::unique_ptr<Subscription>> Add(
      const ReservationWatchFilter& filter, bool snapshot,
      SnapshotFn on_snapshot, ChangeFn on_change, EndFn on_end);
  // Forgets the kept changes: none before `seq` can be resumed from.
  void ForgetKeptLocked(int64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  storage::ReservationStore* const store_;
  const Clock* const clock_;
  const ReservationFeedOptions options_;
  // The thread's.
  bool failing_ = false;
  absl::Time last_read_ = absl::InfinitePast();
  absl::Time last_prune_ = absl::InfinitePast();

  mutable absl::Mutex mu_;
  mutable absl::CondVar wake_;      // the thread: kicked, stopping
  mutable absl::CondVar advanced_;  // the cursor moved, or stopping
  int64_t cursor_ ABSL_GUARDED_BY(mu_) = 0;
  // The changes kept for Resume: every change with a seq above kept_after_,
  // up to the last one dispatched (kept_last_), in seq order.
  std::deque<storage::ReservationChange> kept_ ABSL_GUARDED_BY(mu_);
  int64_t kept_after_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t kept_last_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, std::shared_ptr<Subscriber>> subscribers_
      ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace hub

#endif  // HUB_REGISTRY_RESERVATION_FEED_H_
