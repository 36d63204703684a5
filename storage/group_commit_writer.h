// Group commit, independent of the database engine: one thread owns the
// write connection and commits queued operations in groups, one transaction
// (hence one durable sync) per group. A caller that finds it idle may
// commit its own write on its own thread instead (a Run always), and a
// Submit under a CommitOnThisThread (below) may lead it: commit what is
// queued as well, group after group, on its own thread. The connection
// belongs to whichever thread is committing, one at a time.
//
// An operation that fails (a constraint, or any error it returns) is rolled
// back alone and the others in its group still commit. A group runs first
// without savepoints; only when an operation fails after changing a row (or
// leaves the transaction failed, as any error does in PostgreSQL) is the
// group's transaction undone and the group run again, each operation in its
// own SAVEPOINT. Operations must therefore be safe to run twice: they write
// only through the connection (and caches the rollback hook drops).
//
// Two hubs' groups over one PostgreSQL database hold their operations' row
// locks until COMMIT, so they can deadlock (or, at COMMIT, meet a
// serialization failure); the database then refuses one statement or the
// COMMIT with ABORTED / STORE_BUSY. An operation refused that way is not
// answered: it runs again in a later group, after this one let go of its
// locks (the whole group again when it was the COMMIT), up to
// kLockRetries times; only then does its caller hear STORE_BUSY. To make
// such deadlocks rare, an operation may name the lock it takes first (an
// order key: PostgreSQL's reserves name their project's token row): a group
// runs its keyed operations first, in key order, then the others in
// arrival order, so every hub's groups take those locks in one order. Run()
// returns only after the group's COMMIT returned: an OK reply means committed
// with the connection's durability. Submit() is the same without a waiting
// thread: its callback runs once the group committed, so an RPC handler can
// answer from there (no thread parked per write, no wake-up per write: one per
// group). It is not responsible for reads (readers use their own connections).
//
// `Engine` adapts a connection type (storage/sqlite/group_commit.h for SQLite,
// storage/pg/pg_group_commit.h for PostgreSQL); the writer owns one, used
// by the writer thread only:
//   using Connection = ...;
//   static constexpr const char* kThreadName;      // the writer thread's
//   static constexpr bool kCallersLead;  // CommitOnThisThread may lead
//   absl::Status Ready(std::unique_ptr<Connection>&);  // reconnects
//   absl::Status Begin(Connection&);               // starts a group
//   absl::Status Commit(Connection&);              // below
//   absl::Status Exec(Connection&, const char* sql);   // SAVEPOINT, ...
//   GroupTransaction State(Connection&);           // below
//   int64_t Changes(Connection&);                  // rows changed so far
//   struct First;                                  // an op's first statement
//   void Prefetch(Connection&, const std::vector<const First*>&);  // below
// An operation may name its first statement (Submit's `first`): one it
// sends before anything else, whatever happens. A run of such operations
// next to each other in a group has those statements sent together first
// (Prefetch: on PostgreSQL one pipeline, one round trip for the run instead
// of one per operation), each operation then finding its own answer when
// it sends it. Their order is kept; what an operation sends after its first
// statement runs after the run's first statements, so each answer is one
// that some serial order of the group's operations gives (one that needed
// more statements comes, in effect, after its neighbours). Groups replayed
// with savepoints send every statement in order. SQLite's engine sends
// nothing ahead (its statements are calls).
// Commit() returns OK only if the group committed and an error only if it
// did not; when the engine cannot tell (PostgreSQL: the connection broke
// while COMMIT was in flight and the outcome could not be looked up), an
// error whose reason says so (STORE_COMMIT_UNKNOWN), which the group's
// callers then get.
#ifndef HUB_STORAGE_GROUP_COMMIT_WRITER_H_
#define HUB_STORAGE_GROUP_COMMIT_WRITER_H_

#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "status/status.h"
#include "storage/store.h"

namespace hub::storage {

// Where the writer's transaction is after an operation ran.
enum class GroupTransaction {
  kOpen,    // open and usable
  kFailed,  // open, but every statement is refused until a rollback
  kGone,    // the engine ended it (or the connection is lost)
};

using GroupCommitStats = WriteStats;

// How many times an operation refused for a lock conflict (a deadlock, a
// serialization failure, a lock timeout: ABORTED / STORE_BUSY) runs again
// in a later group before its caller is told.
inline constexpr int kLockRetries = 5;

// Whether `s` says the database refused a statement or a COMMIT for a lock
// conflict with another transaction: nothing of it was applied, and the
// same operation may well succeed in a new transaction.
inline bool IsLockConflict(const absl::Status& s) {
  return s.code() == absl::StatusCode::kAborted && ReasonOf(s) == "STORE_BUSY";
}

// How many groups a CommitOnThisThread caller commits in a row as the
// writer's leader before it leaves the rest to the writer thread: the
// caller is an RPC handler on one of gRPC's threads, which has other calls
// to read.
inline constexpr int kMaxLedGroups = 16;
// How long the writer thread lets a leader hold queued writes without
// taking any before it takes them itself (the leader is running a callback
// that waits for one of them, or is slow).
inline constexpr absl::Duration kLeaderStallTimeout = absl::Milliseconds(5);

namespace group_commit_internal {
// The writer whose completion thread this is, if it is one.
inline thread_local const void* completing_for = nullptr;
// The writer this thread leads (BasicGroupCommitWriter::Lead), if any, and
// the term it leads in.
inline thread_local const void* leading_for = nullptr;
inline thread_local uint64_t leading_term = 0;
// Whether a CommitOnThisThread lives on this thread (and no callback of
// a write committed here is running).
inline thread_local bool commit_here = false;
}  // namespace group_commit_internal

// While one lives on a thread, a Submit() that finds no group committing
// and no other thread leading makes this thread the writer's leader: it
// commits its write, with whatever was queued, on the thread itself, runs
// the group's callbacks there, and goes on with what was queued meanwhile,
// group after group, until the queue is empty (at most kMaxLedGroups
// groups; then the writer thread takes over). With an engine whose callers
// do not lead (Engine::kCallersLead false: PostgreSQL, whose commits wait
// for round trips), only a write that finds the writer idle and nothing
// queued is committed here, alone. No hand-off to the writer
// thread and none back to a completion thread: that is most of what one
// caller at a time waits for (two thread wake-ups per write on a machine
// where each costs tens of microseconds), and under load it answers each
// group's calls from a thread of gRPC's that is already running. A writer
// thread that is committing is not disturbed: the write is queued as usual
// and groups form as before. Meant for an RPC handler's own write: the
// thread blocks for the commits and must hold no lock any callback could
// need. Writes made from a callback are queued (the scope is off while
// callbacks run); a callback that waits for one does not wait on itself:
// a Run() hands the leadership back to the writer thread, and the writer
// thread takes the queue of a leader that took nothing for
// kLeaderStallTimeout.
class CommitOnThisThread {
 public:
  CommitOnThisThread() : outer_(group_commit_internal::commit_here) {
    group_commit_internal::commit_here = true;
  }
  ~CommitOnThisThread() { group_commit_internal::commit_here = outer_; }
  CommitOnThisThread(const CommitOnThisThread&) = delete;
  CommitOnThisThread& operator=(const CommitOnThisThread&) = delete;

 private:
  const bool outer_;
};

template <typename Engine>
class BasicGroupCommitWriter {
 public:
  using Connection = typename Engine::Connection;
  // An operation: runs on the writer thread inside a transaction. A non-OK
  // return rolls back what it wrote. May run twice (see above).
  using Op = std::function<absl::Status(Connection&)>;
  // Receives what Run() would have returned.
  using Done = absl::AnyInvocable<void(absl::Status) &&>;
  using Stats = GroupCommitStats;
  using First = typename Engine::First;
  // Told about each group after its COMMIT (or failure) on the thread that
  // committed it: how many operations it held and how long BEGIN..COMMIT
  // took.
  // For metrics; must be quick and must not write.
  using CommitObserver = std::function<void(int ops, absl::Duration latency)>;
  // Runs on the committing thread each time a group's transaction is undone:
  // when it did not commit (BEGIN, a lost transaction or COMMIT failed, or
  // COMMIT's outcome is unknown), before any of its callers hears back, and
  // before a group is replayed with savepoints. Whatever the store caches
  // about rows the group wrote must be dropped. Must not write.
  using RollbackHook = std::function<void()>;

  // `max_group_size` 1 gives one transaction per write (the baseline).
  // Starts the writer thread and `completion_threads` threads for Submit()
  // callbacks and Run() wake-ups; takes ownership of `conn`.
  BasicGroupCommitWriter(std::unique_ptr<Connection> conn, int max_group_size,
                         int completion_threads = 2,
                         CommitObserver observer = nullptr,
                         RollbackHook on_rollback = nullptr,
                         Engine engine = Engine())
      : conn_(std::move(conn)),
        engine_(std::move(engine)),
        max_group_size_(max_group_size < 1 ? 1 : max_group_size),
        observer_(std::move(observer)),
        on_rollback_(std::move(on_rollback)),
        thread_([this] { Loop(); }) {
    for (int i = 0; i < std::max(1, completion_threads); ++i) {
      completion_threads_.emplace_back([this] { Complete(); });
    }
  }
  // Finishes every queued operation and runs every callback, then stops the
  // threads.
  ~BasicGroupCommitWriter() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      work_.Signal();
    }
    thread_.join();  // every queued op has committed and been handed over
    {
      absl::MutexLock lock(&completion_mu_);
      completion_stopping_ = true;
      completion_ready_.SignalAll();
    }
    for (std::thread& t : completion_threads_) t.join();
  }

  BasicGroupCommitWriter(const BasicGroupCommitWriter&) = delete;
  BasicGroupCommitWriter& operator=(const BasicGroupCommitWriter&) = delete;

  // Enqueues `op` and blocks until its group has committed or failed (the
  // wake-up comes from a completion thread, so that the writer moves on);
  // on an idle writer (nothing committing, nothing queued, no leader)
  // commits `op` on the caller's thread instead, which waits either way.
  // Called on a leader's thread (from a callback it runs), it first hands
  // the leadership back to the writer thread. Returns the op's own
  // status, or the group's storage error (STORE_BUSY from BEGIN, STORE_FULL
  // from COMMIT, ...) in which case nothing of the op was committed, except
  // STORE_COMMIT_UNKNOWN: it may have been. Thread-safe. `order_key`, when not
  // empty, names the first lock `op` takes (above).
  absl::Status Run(Op op, std::string order_key = {}) {
    Pending pending;
    pending.op = std::move(op);
    pending.order_key = std::move(order_key);
    // A completion thread waiting here cannot also be the one that wakes it.
    pending.wake_from_writer = group_commit_internal::completing_for == this;
    // Nor can a leader: what is queued is the writer thread's again.
    if (group_commit_internal::leading_for == this) StepDown();
    // Its thread waits either way: on an idle writer it commits the op
    // itself (no callback to run, so no scope needed).
    switch (TryCommitHere(&pending, /*anywhere=*/true)) {
      case Here::kAnswered:
        return pending.result;
      case Here::kQueued:
        break;
      case Here::kNo:
        Enqueue(&pending);
        break;
    }
    pending.done.WaitForNotification();
    return pending.result;
  }

  // Enqueues `op` and returns at once. `done` runs exactly once, after the
  // group has committed or failed, on a completion thread (never on the
  // writer thread, which moves on to the next group) or on a leader's
  // thread: the callbacks of one group run in order on one thread. Under a
  // CommitOnThisThread, when no group is committing and nobody leads, this
  // thread leads (above): `op` commits and `done` runs here before Submit
  // returns, and so do the writes queued meanwhile and their callbacks.
  // Thread-safe.
  // `first`, when set, is the statement `op` sends first, always (above).
  void Submit(Op op, Done done, std::string order_key = {},
              std::optional<First> first = std::nullopt) {
    auto* pending = new Pending;
    pending->op = std::move(op);
    pending->order_key = std::move(order_key);
    pending->first = std::move(first);
    pending->callback = std::move(done);
    if (group_commit_internal::commit_here && Lead(pending)) return;
    Enqueue(pending);
  }

  // Run() for an operation with a result: the result once its group
  // committed, or the group's storage error.
  template <typename T>
  absl::StatusOr<T> RunFor(std::function<absl::StatusOr<T>(Connection&)> fn,
                           std::string order_key = {}) {
    std::optional<absl::StatusOr<T>> out;
    absl::Status s = Run(
        [&](Connection& conn) {
          out.emplace(fn(conn));
          return out->status();
        },
        std::move(order_key));
    if (!s.ok()) return s;
    return std::move(*out);
  }
  // Submit() for an operation with a result: `done` gets it on a completion
  // thread once the group committed.
  template <typename T>
  void SubmitFor(std::function<absl::StatusOr<T>(Connection&)> fn,
                 absl::AnyInvocable<void(absl::StatusOr<T>) &&> done,
                 std::string order_key = {},
                 std::optional<First> first = std::nullopt) {
    auto out = std::make_shared<std::optional<absl::StatusOr<T>>>();
    Submit(
        [fn = std::move(fn), out](Connection& conn) {
          out->emplace(fn(conn));
          return (*out)->status();
        },
        [out, done = std::move(done)](absl::Status s) mutable {
          absl::StatusOr<T> result =
              !s.ok() ? absl::StatusOr<T>(std::move(s))
              : out->has_value()
                  ? std::move(**out)
                  : absl::StatusOr<T>(absl::InternalError("write not run"));
          // The writer keeps no copy of the result once `done` has it: an
          // error's payload is reference-counted inside Abseil, and a last
          // reference dropped here after `done` woke its caller is a
          // release ThreadSanitizer cannot see (tools/tsan/README.md).
          out->reset();
          std::move(done)(std::move(result));
        },
        std::move(order_key), std::move(first));
  }

  Stats stats() const {
    absl::MutexLock lock(&mu_);
    return stats_;
  }
  // Tests: how long a leader may hold the queue without taking a group
  // before the writer thread takes it (kLeaderStallTimeout by default).
  void SetLeaderStallTimeoutForTesting(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    leader_stall_timeout_ = timeout;
  }
  // Operations enqueued and not yet taken by the writer (for tests).
  int queued() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(queue_.size());
  }

 private:
  struct Pending {
    Op op;
    std::string order_key;       // the first lock op takes; "" = none named
    std::optional<First> first;  // the statement op sends first, if named
    absl::Status result;
    Done callback;            // Submit(): owned by the writer, deleted after
    absl::Notification done;  // Run(): each caller sleeps on its own
    // Run() from one of this writer's completion threads: woken by the
    // writer itself, since the completion threads may all be waiting.
    bool wake_from_writer = false;
    // Refused for a lock conflict in its last group (IsLockConflict): runs
    // again instead of being answered, while retries < kLockRetries.
    bool lock_conflict = false;
    int retries = 0;
  };

  enum class Here {
    kNo,        // not committed here: the caller queues it
    kAnswered,  // committed (or failed) here: its result is set
    kQueued,    // refused for a lock conflict: queued for a later group
  };

  // When `allowed`, with no group committing, none queued and no leader:
  // commits `p` alone on this thread, as the writer thread would.
  Here TryCommitHere(Pending* p, bool allowed) {
    if (!allowed) return Here::kNo;
    {
      absl::MutexLock lock(&mu_);
      if (busy_ || leading_ || !queue_.empty() || stopping_) return Here::kNo;
      busy_ = true;
    }
    std::deque<Pending*> group{p};
    const absl::Time started = absl::Now();
    const bool committed = CommitGroup(group);
    if (!committed && on_rollback_) on_rollback_();
    if (observer_) observer_(1, absl::Now() - started);
    const bool again = p->lock_conflict && p->retries < kLockRetries;
    absl::MutexLock lock(&mu_);
    busy_ = false;
    ++stats_.groups;
    if (again) {
      ++stats_.lock_retries;
      p->retries++;
      p->lock_conflict = false;
      p->result = absl::OkStatus();
      queue_.push_front(p);
    } else {
      ++stats_.ops;
    }
    // The writer thread may have found work while this thread committed.
    if (!queue_.empty() || stopping_) work_.Signal();
    return again ? Here::kQueued : Here::kAnswered;
  }

  enum class Ran {
    kAll,              // every op ran; failed ones left nothing behind
    kLost,             // the transaction is gone; every result is set
    kNeedsSavepoints,  // an op failed after writing (savepoints off)
  };

  void Enqueue(Pending* pending) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(pending);
    if (queue_.size() == 1) work_.Signal();
  }

  // Moves up to max_group_size_ queued ops into `group`.
  void TakeGroupLocked(std::deque<Pending*>& group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!queue_.empty() &&
           static_cast<int>(group.size()) < max_group_size_) {
      group.push_back(queue_.front());
      queue_.pop_front();
    }
  }

  // After a group's commit (busy_ still set): counts it, puts the ops
  // refused for a lock conflict back at the queue's front (this group's
  // locks are gone now, so they go first into the next one, in their
  // order), clears busy_ and returns the ops to answer.
  std::vector<Pending*> SettleLocked(std::deque<Pending*>& group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Pending*> again;
    std::vector<Pending*> answered;
    answered.reserve(group.size());
    for (Pending* p : group) {
      if (p->lock_conflict && p->retries < kLockRetries) {
        again.push_back(p);
      } else {
        answered.push_back(p);
      }
    }
    busy_ = false;
    ++stats_.groups;
    stats_.ops += static_cast<int64_t>(answered.size());
    stats_.lock_retries += static_cast<int64_t>(again.size());
    for (auto p = again.rbegin(); p != again.rend(); ++p) {
      (*p)->retries++;
      (*p)->lock_conflict = false;
      (*p)->result = absl::OkStatus();
      queue_.push_front(*p);
    }
    return answered;
  }

  // Commits `group` on this thread (busy_ set by the caller), with the
  // rollback hook and the observer.
  void CommitAndObserve(std::deque<Pending*>& group) {
    OrderByKey(group);
    const absl::Time started = absl::Now();
    const bool committed = CommitGroup(group);
    if (!committed && on_rollback_) on_rollback_();
    if (observer_) {
      observer_(static_cast<int>(group.size()), absl::Now() - started);
    }
  }

  // Answers committed ops on this thread (a leader's or a completion
  // thread): parked Run() callers first (a wake-up each), then the
  // callbacks in order, with no CommitOnThisThread in force (their writes
  // are queued).
  static void AnswerHere(const std::vector<Pending*>& answered) {
    std::vector<Pending*> callbacks;
    for (Pending* p : answered) {
      if (p->callback) {
        callbacks.push_back(p);
      } else {
        p->done.Notify();  // p may be gone after this
      }
    }
    const bool outer = group_commit_internal::commit_here;
    group_commit_internal::commit_here = false;
    for (Pending* p : callbacks) {
      std::move(p->callback)(std::move(p->result));
      delete p;
    }
    group_commit_internal::commit_here = outer;
  }

  // Under a CommitOnThisThread: when no group is committing, nobody leads
  // and the writer is not stopping, this thread becomes its leader (see
  // CommitOnThisThread): queues `p` behind what is queued and commits and
  // answers group after group here until the queue is empty, for at most
  // kMaxLedGroups groups, or until it lost the leadership (a callback's
  // Run() gave it back, or the writer thread took a stalled queue). Returns
  // false, having done nothing, when it cannot lead.
  bool Lead(Pending* p) {
    std::deque<Pending*> group;
    uint64_t term = 0;
    {
      absl::MutexLock lock(&mu_);
      if (busy_ || leading_ || stopping_) return false;
      // An engine whose callers do not lead: only an idle writer, and only
      // the caller's own write.
      if (!Engine::kCallersLead && !queue_.empty()) return false;
      queue_.push_back(p);
      busy_ = true;
      leading_ = true;
      term = ++lead_term_;
      ++lead_progress_;
      TakeGroupLocked(group);
    }
    const void* outer_writer = group_commit_internal::leading_for;
    const uint64_t outer_term = group_commit_internal::leading_term;
    group_commit_internal::leading_for = this;
    group_commit_internal::leading_term = term;
    for (int led = 1;; ++led) {
      CommitAndObserve(group);
      std::vector<Pending*> answered;
      {
        absl::MutexLock lock(&mu_);
        answered = SettleLocked(group);
        ++stats_.led_groups;
      }
      group.clear();
      AnswerHere(answered);
      absl::MutexLock lock(&mu_);
      if (!leading_ || lead_term_ != term) break;  // no longer the leader
      // Still the leader, so busy_ is clear: TryCommitHere refuses while
      // one leads, and the writer thread takes the queue only by ending the
      // leadership.
      if (queue_.empty() || stopping_ || led >= kMaxLedGroups ||
          !Engine::kCallersLead) {
        leading_ = false;
        ++lead_progress_;
        if (!queue_.empty() || stopping_) work_.Signal();
        break;
      }
      busy_ = true;
      ++lead_progress_;
      TakeGroupLocked(group);
    }
    group_commit_internal::leading_for = outer_writer;
    group_commit_internal::leading_term = outer_term;
    return true;
  }

  // On a leader's thread: gives the leadership back to the writer thread.
  void StepDown() {
    absl::MutexLock lock(&mu_);
    if (leading_ && lead_term_ == group_commit_internal::leading_term) {
      leading_ = false;
      ++lead_progress_;
      if (!queue_.empty() || stopping_) work_.Signal();
    }
    group_commit_internal::leading_for = nullptr;
  }

  // The writer thread's wait for a group to take, under mu_: returns false
  // when it is to stop. While a leader holds the queue it only watches
  // (a wake-up every kLeaderStallTimeout), and takes the queue over once
  // the leader has taken nothing for that long.
  bool AwaitWorkLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    uint64_t seen = lead_progress_;
    absl::Time seen_at = absl::Now();
    while (true) {
      if (!queue_.empty() && !busy_) {
        if (!leading_) return true;
        if (lead_progress_ != seen) {
          seen = lead_progress_;
          seen_at = absl::Now();
        } else if (absl::Now() - seen_at >= leader_stall_timeout_) {
          leading_ = false;  // the leader finds this when it is back
          ++lead_progress_;
          ++stats_.leader_stalls;
          return true;
        }
      }
      if (stopping_ && queue_.empty() && !busy_ && !leading_) return false;
      if (leading_) {
        work_.WaitWithTimeout(&mu_, leader_stall_timeout_);
      } else {
        work_.Wait(&mu_);
      }
    }
  }

  // Runs the group's ops inside the open transaction, each in a savepoint
  // when `savepoints`; otherwise stops at the first op that failed after
  // writing.
  Ran RunOps(std::deque<Pending*>& group, bool savepoints) {
    Connection& conn = *conn_;
    for (Pending* p : group) p->lock_conflict = false;
    size_t prefetched = 0;  // ops [0, prefetched) had their first sent
    for (size_t i = 0; i < group.size(); ++i) {
      Pending* p = group[i];
      if (!savepoints && i >= prefetched && p->first) {
        Prefetch(group, i, &prefetched);
      }
      const int64_t changes_before = engine_.Changes(conn);
      absl::Status s =
          savepoints ? engine_.Exec(conn, "SAVEPOINT op") : absl::OkStatus();
      if (s.ok()) s = p->op(conn);
      const GroupTransaction state = engine_.State(conn);
      if (state == GroupTransaction::kGone) {
        // SQLITE_FULL, IOERR, a lost connection and the like end the
        // transaction itself: every earlier op of the group is undone too.
        absl::Status lost =
            s.ok() ? UnavailableError("STORE_UNAVAILABLE",
                                      "the database ended the transaction")
                   : s;
        for (Pending* q : group) {
          q->result = lost;
          q->lock_conflict = false;
        }
        return Ran::kLost;
      }
      if (state == GroupTransaction::kFailed && s.ok()) {
        s = ReasonError(absl::StatusCode::kInternal, "STORE_INTERNAL",
                        "an operation left its transaction failed");
      }
      p->result = s;
      if (!savepoints) {
        // A failed op that changed no row (a validation, a constraint that
        // aborted its one statement in SQLite, a missing row) left nothing
        // to undo; a failed PostgreSQL transaction refuses everything after.
        if (state == GroupTransaction::kFailed ||
            (!s.ok() && engine_.Changes(conn) != changes_before)) {
          return Ran::kNeedsSavepoints;
        }
        continue;
      }
      if (s.ok()) {
        s = engine_.Exec(conn, "RELEASE op");
        p->result = s;
      } else {
        // Its locks go with the savepoint; whatever the others of this group
        // hold stays to COMMIT, so it runs again in a later group.
        p->lock_conflict = IsLockConflict(s);
        absl::Status undo = engine_.Exec(conn, "ROLLBACK TO op");
        if (undo.ok()) undo = engine_.Exec(conn, "RELEASE op");
        if (!undo.ok()) {
          for (Pending* q : group) {
            q->result = undo;
            q->lock_conflict = false;
          }
          return Ran::kLost;
        }
      }
    }
    return Ran::kAll;
  }

  // Sends the first statements of the run of ops from `from` on that name
  // one, when the run has two or more; `*end` becomes the run's end.
  void Prefetch(const std::deque<Pending*>& group, size_t from, size_t* end) {
    size_t to = from;
    while (to < group.size() && group[to]->first) ++to;
    *end = to;
    if (to - from < 2) return;
    std::vector<const First*> firsts;
    firsts.reserve(to - from);
    for (size_t i = from; i < to; ++i) firsts.push_back(&*group[i]->first);
    engine_.Prefetch(*conn_, firsts);
  }

  // Keyed operations first, by key, then the others as they came.
  static void OrderByKey(std::deque<Pending*>& group) {
    if (std::none_of(group.begin(), group.end(),
                     [](const Pending* p) { return !p->order_key.empty(); })) {
      return;
    }
    std::stable_sort(group.begin(), group.end(),
                     [](const Pending* a, const Pending* b) {
                       if (a->order_key.empty() || b->order_key.empty()) {
                         return !a->order_key.empty() && b->order_key.empty();
                       }
                       return a->order_key < b->order_key;
                     });
  }

  // Ends the transaction if the engine has not already.
  void RollBackIfOpen() {
    if (engine_.State(*conn_) != GroupTransaction::kGone) {
      engine_.Exec(*conn_, "ROLLBACK").IgnoreError();
    }
  }

  // True when the group's transaction committed (some of its ops may still
  // have failed alone, their writes undone).
  bool CommitGroup(std::deque<Pending*>& group) {
    auto fail_all = [&](const absl::Status& s) {
      if (conn_ != nullptr) RollBackIfOpen();
      for (Pending* p : group) {
        p->result = s;
        p->lock_conflict = false;
      }
      return false;
    };
    absl::Status ready = engine_.Ready(conn_);
    if (!ready.ok()) return fail_all(ready);
    Connection& conn = *conn_;
    // First without savepoints: almost every op succeeds, or fails before it
    // wrote anything, and then a savepoint per op is pure cost.
    bool savepoints = false;
    while (true) {
      absl::Status begin = engine_.Begin(conn);
      if (!begin.ok()) return fail_all(begin);
      Ran ran = RunOps(group, savepoints);
      if (ran == Ran::kLost) return fail_all(group.front()->result);
      if (ran == Ran::kAll) break;
      // An op failed after writing: undo the whole group and run it again,
      // each op in its own savepoint, so that only that op's writes are
      // undone.
      absl::Status undo = engine_.Exec(conn, "ROLLBACK");
      if (!undo.ok()) return fail_all(undo);
      if (on_rollback_) on_rollback_();
      {
        absl::MutexLock lock(&mu_);
        ++stats_.replays;
      }
      savepoints = true;
    }
    // Not OK: the group did not commit (or STORE_COMMIT_UNKNOWN: it may
    // have), so no caller is told it did.
    absl::Status commit = engine_.Commit(conn);
    if (!commit.ok()) {
      RollBackIfOpen();
      // Refused for a lock conflict (a deadlock between deferred triggers,
      // a serialization failure): nothing of the group stayed, all of it
      // runs again.
      const bool again = IsLockConflict(commit);
      for (Pending* p : group) {
        if (p->result.ok()) p->result = commit;
        p->lock_conflict = again;
      }
      return false;
    }
    return true;
  }

  void Loop() {
    pthread_setname_np(pthread_self(), Engine::kThreadName);  // top -H, perf
    while (true) {
      std::deque<Pending*> group;
      {
        absl::MutexLock lock(&mu_);
        // busy_: a caller's thread is committing (TryCommitHere, Lead).
        if (!AwaitWorkLocked()) return;  // stopping and drained
        TakeGroupLocked(group);
        busy_ = true;
      }
      CommitAndObserve(group);
      std::vector<Pending*> answered;
      {
        absl::MutexLock lock(&mu_);
        answered = SettleLocked(group);
      }
      // Waking the callers is left to a completion thread too: on the writer
      // thread a wake-up per caller is CPU the next group waits for.
      std::vector<Pending*> batch;
      batch.reserve(answered.size());
      for (Pending* p : answered) {
        if (p->wake_from_writer) {
          p->done.Notify();  // p may be gone after this
        } else {
          batch.push_back(p);
        }
      }
      if (!batch.empty()) {
        absl::MutexLock lock(&completion_mu_);
        completions_.push_back(std::move(batch));
        completion_ready_.Signal();
      }
    }
  }

  void Complete() {
    pthread_setname_np(pthread_self(), "hub-committed");
    group_commit_internal::completing_for = this;
    while (true) {
      std::vector<Pending*> batch;
      {
        absl::MutexLock lock(&completion_mu_);
        while (completions_.empty() && !completion_stopping_) {
          completion_ready_.Wait(&completion_mu_);
        }
        if (completions_.empty()) return;  // stopping and drained
        batch = std::move(completions_.front());
        completions_.pop_front();
      }
      AnswerHere(batch);
    }
  }

  // Used only by the thread that set busy_: the writer thread, a caller
  // committing its own write (TryCommitHere: a Run) or a leader (Lead: a
  // Submit under a CommitOnThisThread).
  std::unique_ptr<Connection> conn_;
  Engine engine_;
  const int max_group_size_;
  const CommitObserver observer_;  // before thread_, which reads it
  const RollbackHook on_rollback_;
  mutable absl::Mutex mu_;
  absl::CondVar work_;  // signalled when queue_ becomes non-empty
  std::deque<Pending*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // A group is committing (on the writer thread or a caller's): conn_ and
  // engine_ belong to whoever set it.
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  // A caller's thread leads (Lead): it takes the queue when it can, so the
  // writer thread only watches. lead_term_ names each leadership;
  // lead_progress_ moves whenever a leader takes a group or lets go.
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t lead_term_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t lead_progress_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration leader_stall_timeout_ ABSL_GUARDED_BY(mu_) =
      kLeaderStallTimeout;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;

  // Submit() callbacks of committed groups, one batch per group.
  absl::Mutex completion_mu_;
  absl::CondVar completion_ready_;
  std::deque<std::vector<Pending*>> completions_
      ABSL_GUARDED_BY(completion_mu_);
  bool completion_stopping_ ABSL_GUARDED_BY(completion_mu_) = false;
  std::vector<std::thread> completion_threads_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_GROUP_COMMIT_WRITER_H_
