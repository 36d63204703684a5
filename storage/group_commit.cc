#include "storage/group_commit.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "status/status.h"

namespace hub::storage {
namespace {

// Transaction control through the connection's prepared-statement cache.
absl::Status Step(Connection& conn, const char* sql) {
  absl::StatusOr<Stmt> stmt = conn.Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  return stmt->Run();
}

// Ends the transaction if SQLite has not already.
void RollBackIfOpen(Connection& conn) {
  if (sqlite3_get_autocommit(conn.raw()) == 0) {
    conn.Exec("ROLLBACK").IgnoreError();
  }
}

// The writer whose completion thread this is, if it is one.
thread_local const GroupCommitWriter* completing_for = nullptr;

}  // namespace

GroupCommitWriter::GroupCommitWriter(std::unique_ptr<Connection> conn,
                                     int max_group_size, int completion_threads,
                                     CommitObserver observer,
                                     RollbackHook on_rollback)
    : conn_(std::move(conn)),
      max_group_size_(max_group_size < 1 ? 1 : max_group_size),
      observer_(std::move(observer)),
      on_rollback_(std::move(on_rollback)),
      thread_([this] { Loop(); }) {
  for (int i = 0; i < std::max(1, completion_threads); ++i) {
    completion_threads_.emplace_back([this] { Complete(); });
  }
}

GroupCommitWriter::~GroupCommitWriter() {
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

void GroupCommitWriter::Enqueue(Pending* pending) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(pending);
  if (queue_.size() == 1) work_.Signal();
}

absl::Status GroupCommitWriter::Run(Op op) {
  Pending pending;
  pending.op = std::move(op);
  // A completion thread waiting here cannot also be the one that wakes it.
  pending.wake_from_writer = completing_for == this;
  Enqueue(&pending);
  pending.done.WaitForNotification();
  return pending.result;
}

void GroupCommitWriter::Submit(Op op, Done done) {
  auto* pending = new Pending;
  pending->op = std::move(op);
  pending->callback = std::move(done);
  Enqueue(pending);
}

GroupCommitWriter::Stats GroupCommitWriter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

int GroupCommitWriter::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

void GroupCommitWriter::Loop() {
  pthread_setname_np(pthread_self(), "hub-writer");  // for top -H, perf
  while (true) {
    std::deque<Pending*> group;
    {
      absl::MutexLock lock(&mu_);
      while (queue_.empty() && !stopping_) work_.Wait(&mu_);
      if (queue_.empty()) return;  // stopping and drained
      while (!queue_.empty() &&
             static_cast<int>(group.size()) < max_group_size_) {
        group.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    const absl::Time started = absl::Now();
    const bool committed = CommitGroup(group);
    if (!committed && on_rollback_) on_rollback_();
    if (observer_) {
      observer_(static_cast<int>(group.size()), absl::Now() - started);
    }
    {
      absl::MutexLock lock(&mu_);
      ++stats_.groups;
      stats_.ops += static_cast<int64_t>(group.size());
    }
    // Waking the callers is left to a completion thread too: on the writer
    // thread a wake-up per caller is CPU the next group waits for.
    std::vector<Pending*> batch;
    batch.reserve(group.size());
    for (Pending* p : group) {
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

void GroupCommitWriter::Complete() {
  pthread_setname_np(pthread_self(), "hub-committed");
  completing_for = this;
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
    // Parked callers first (a wake-up each), then the callbacks in order.
    std::vector<Pending*> callbacks;
    for (Pending* p : batch) {
      if (p->callback) {
        callbacks.push_back(p);
      } else {
        p->done.Notify();  // p may be gone after this
      }
    }
    for (Pending* p : callbacks) {
      std::move(p->callback)(std::move(p->result));
      delete p;
    }
  }
}

GroupCommitWriter::Ran GroupCommitWriter::RunOps(std::deque<Pending*>& group,
                                                 bool savepoints) {
  Connection& conn = *conn_;
  for (Pending* p : group) {
    const int64_t changes_before = sqlite3_total_changes64(conn.raw());
    absl::Status s = savepoints ? Step(conn, "SAVEPOINT op") : absl::OkStatus();
    if (s.ok()) s = p->op(conn);
    if (sqlite3_get_autocommit(conn.raw()) != 0) {
      // SQLITE_FULL, IOERR and the like may roll back the transaction
      // itself: every earlier op of the group is undone with it.
      absl::Status lost =
          s.ok() ? UnavailableError("STORE_UNAVAILABLE",
                                    "SQLite rolled the transaction back")
                 : s;
      for (Pending* q : group) q->result = lost;
      return Ran::kLost;
    }
    p->result = s;
    if (!savepoints) {
      // A failed op that changed no row (a validation, a constraint that
      // aborted its one statement, a missing row) left nothing to undo.
      if (!s.ok() && sqlite3_total_changes64(conn.raw()) != changes_before) {
        return Ran::kNeedsSavepoints;
      }
      continue;
    }
    if (s.ok()) {
      s = Step(conn, "RELEASE op");
      p->result = s;
    } else {
      absl::Status undo = Step(conn, "ROLLBACK TO op");
      if (undo.ok()) undo = Step(conn, "RELEASE op");
      if (!undo.ok()) {
        for (Pending* q : group) q->result = undo;
        return Ran::kLost;
      }
    }
  }
  return Ran::kAll;
}

bool GroupCommitWriter::CommitGroup(std::deque<Pending*>& group) {
  Connection& conn = *conn_;
  auto fail_all = [&](const absl::Status& s) {
    RollBackIfOpen(conn);
    for (Pending* p : group) p->result = s;
    return false;
  };
  // First without savepoints: almost every op succeeds, or fails before it
  // wrote anything, and then a savepoint per op is pure cost.
  bool savepoints = false;
  while (true) {
    absl::Status begin = Step(conn, "BEGIN IMMEDIATE");
    if (!begin.ok()) return fail_all(begin);
    Ran ran = RunOps(group, savepoints);
    if (ran == Ran::kLost) return fail_all(group.front()->result);
    if (ran == Ran::kAll) break;
    // An op failed after writing: undo the whole group and run it again,
    // each op in its own savepoint, so that only that op's writes are undone.
    absl::Status undo = Step(conn, "ROLLBACK");
    if (!undo.ok()) return fail_all(undo);
    if (on_rollback_) on_rollback_();
    {
      absl::MutexLock lock(&mu_);
      ++stats_.replays;
    }
    savepoints = true;
  }
  absl::Status commit = Step(conn, "COMMIT");
  if (!commit.ok()) {
    RollBackIfOpen(conn);
    for (Pending* p : group) {
      if (p->result.ok()) p->result = commit;
    }
    return false;
  }
  return true;
}

}  // namespace hub::storage
