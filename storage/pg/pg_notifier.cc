#include "storage/pg/pg_notifier.h"

#include <pthread.h>

#include <utility>

namespace hub::storage::pg {

Notifier::Notifier(NotifierOptions options) : options_(std::move(options)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hub-pg-notify");  // top -H, perf
    Run();
  });
}

Notifier::~Notifier() { Stop(); }

void Notifier::Notify(const std::string& channel, const std::string& payload) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  queued_[channel] = payload;
  wake_.Signal();
}

void Notifier::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queued_.clear();
    wake_.Signal();
  }
  if (thread_.joinable()) thread_.join();
}

int64_t Notifier::sent() const {
  absl::MutexLock lock(&mu_);
  return sent_;
}

int64_t Notifier::failures() const {
  absl::MutexLock lock(&mu_);
  return failures_;
}

void Notifier::Run() {
  absl::Time next_batch = absl::InfinitePast();
  for (;;) {
    if (options_.before_batch) options_.before_batch();
    absl::flat_hash_map<std::string, std::string> batch;
    {
      absl::MutexLock lock(&mu_);
      // A CondVar, not Mutex::Await: ThreadSanitizer's shim sees its waits
      // (tools/tsan/README.md).
      while (!stopping_ && queued_.empty()) wake_.Wait(&mu_);
      while (!stopping_ && absl::Now() < next_batch) {
        wake_.WaitWithDeadline(&mu_, next_batch);
      }
      if (stopping_) break;
      batch.swap(queued_);
    }
    next_batch = absl::Now() + options_.min_interval;
    const absl::Status s = Send(batch);
    {
      absl::MutexLock lock(&mu_);
      if (s.ok()) {
        sent_ += static_cast<int64_t>(batch.size());
      } else {
        ++failures_;
      }
    }
    if (!s.ok() && options_.on_error) options_.on_error(s);
  }
  conn_.reset();
}

absl::StatusOr<std::unique_ptr<Connection>> OpenHintConnection(
    const std::string& conninfo, const std::string& name) {
  absl::StatusOr<std::unique_ptr<Connection>> opened =
      Connection::Open(conninfo, name);
  if (!opened.ok()) return opened.status();
  // NOTIFY gives its transaction an id, so its commit writes a commit
  // record; with synchronous_commit on, every hint would wait for a WAL
  // flush of its own, between the writers' flushes (measured: half the
  // compare-and-sets per second on a disk doing 300 fsyncs/s). A hint needs
  // no durability: the listener gets it once it commits, flushed or not.
  if (absl::StatusOr<Result> r =
          (*opened)->Exec("SET synchronous_commit = off");
      !r.ok()) {
    return r.status();
  }
  return opened;
}

absl::Status Notifier::Send(
    const absl::flat_hash_map<std::string, std::string>& batch) {
  // A connection opened before this batch may have died since (its backend
  // terminated, the server restarted) without libpq's knowing: the first
  // statement on it finds out. The batch then goes once more on a new
  // connection, so that a hint is dropped when the server cannot be
  // reached, not because the connection it met was stale. The channels sent
  // before the failure are sent again: a hint said twice means what it
  // means once.
  const bool reused = conn_ != nullptr && conn_->Healthy();
  absl::Status s = SendOnce(batch);
  if (s.ok() || !reused || conn_ != nullptr) return s;
  return SendOnce(batch);
}

absl::Status Notifier::SendOnce(
    const absl::flat_hash_map<std::string, std::string>& batch) {
  if (conn_ != nullptr && !conn_->Healthy()) conn_.reset();
  if (conn_ == nullptr) {
    absl::StatusOr<std::unique_ptr<Connection>> opened =
        OpenHintConnection(options_.conninfo, "hubd notifier");
    if (!opened.ok()) return opened.status();
    conn_ = std::move(*opened);
  }
  for (const auto& [channel, payload] : batch) {
    absl::StatusOr<Result> r =
        conn_->Run("SELECT pg_notify($1, $2)", {channel, payload});
    if (!r.ok()) {
      if (!conn_->Healthy()) conn_.reset();  // reconnect for the next batch
      return r.status();
    }
  }
  return absl::OkStatus();
}

}  // namespace hub::storage::pg
