#include "storage/wal_checkpointer.h"

#include <pthread.h>

#include <utility>

namespace hub::storage {

absl::StatusOr<std::unique_ptr<WalCheckpointer>> WalCheckpointer::Start(
    const std::string& path, sqlite3* writer, int threshold_pages,
    int busy_timeout_ms) {
  absl::StatusOr<std::unique_ptr<Connection>> conn =
      Connection::Open(path, SQLITE_OPEN_READWRITE);
  if (!conn.ok()) return conn.status();
  sqlite3_busy_timeout((*conn)->raw(), busy_timeout_ms);
  std::unique_ptr<WalCheckpointer> checkpointer(
      new WalCheckpointer(std::move(*conn), writer, threshold_pages));
  sqlite3_wal_hook(writer, &WalCheckpointer::OnCommit, checkpointer.get());
  return checkpointer;
}

WalCheckpointer::WalCheckpointer(std::unique_ptr<Connection> conn,
                                 sqlite3* writer, int threshold_pages)
    : conn_(std::move(conn)),
      writer_(writer),
      threshold_pages_(threshold_pages < 1 ? 1 : threshold_pages),
      thread_([this] { Loop(); }) {}

WalCheckpointer::~WalCheckpointer() {
  // SQLite serializes this with the writer's commits (the connection's own
  // mutex): once it returns, no commit calls OnCommit any more.
  sqlite3_wal_hook(writer_, nullptr, nullptr);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

WalCheckpointer::Stats WalCheckpointer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

int WalCheckpointer::OnCommit(void* self, sqlite3* db, const char* schema,
                              int pages) {
  auto* c = static_cast<WalCheckpointer*>(self);
  if (pages < c->threshold_pages_) return SQLITE_OK;
  if (pages >= kHardLimitFactor * c->threshold_pages_) {
    // On the writer's connection, between its transactions: no commit can
    // overtake it, so it catches up (unless a reader holds old pages).
    sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                              nullptr);
    absl::MutexLock lock(&c->mu_);
    ++c->stats_.by_writer;
    return SQLITE_OK;
  }
  absl::MutexLock lock(&c->mu_);
  if (!c->wanted_) {
    c->wanted_ = true;
    ++c->stats_.requested;
  }
  return SQLITE_OK;
}

void WalCheckpointer::Loop() {
  pthread_setname_np(pthread_self(), "hub-checkpoint");
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WalCheckpointer* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return c->wanted_ || c->stopping_;
          },
          this));
      if (stopping_) return;
      wanted_ = false;
    }
    // PASSIVE: copies what no reader still needs, never blocks the writer.
    const int rc = sqlite3_wal_checkpoint_v2(
        conn_->raw(), "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    absl::MutexLock lock(&mu_);
    ++(rc == SQLITE_OK ? stats_.checkpoints : stats_.failures);
  }
}

}  // namespace hub::storage
