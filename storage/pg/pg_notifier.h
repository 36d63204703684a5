// Notifier: sends NOTIFY hints to other hubs after commits, from one
// autocommit connection of its own (synchronous_commit off: a hint needs no
// WAL flush): never inside a writer's transaction, where NOTIFY would
// serialize every commit of the cluster behind one lock.
//
// Notify() only queues. One thread sends what is queued, one pg_notify per
// channel; whatever is queued for a channel while a send is in flight goes
// out as one notification with the last payload given, so a burst of
// commits costs one NOTIFY per channel per round trip. A hint is never the
// data: one that cannot be sent (the server unreachable; a connection found
// dead is replaced and the hint sent again first) is dropped and on_error
// told; listeners re-read by cursor when they reconnect, and poll.
// Not responsible for what a payload means. Thread-safe.
#ifndef HUB_STORAGE_PG_PG_NOTIFIER_H_
#define HUB_STORAGE_PG_PG_NOTIFIER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/pg/pg_conn.h"

namespace hub::storage::pg {

// A connection of its own for sending hints (`name`: its application_name),
// with synchronous_commit off: a hint needs no durability.
absl::StatusOr<std::unique_ptr<Connection>> OpenHintConnection(
    const std::string& conninfo, const std::string& name);

struct NotifierOptions {
  // A libpq connection string or URI; connected on the first send, and
  // again after a failure.
  std::string conninfo;
  // A send that failed (its hints are dropped), on the notifier's thread.
  // Default: nothing.
  std::function<void(const absl::Status&)> on_error;
  // Called on the notifier's thread before each batch is taken from the
  // queue. A test seam (holding it shows the coalescing); default: nothing.
  std::function<void()> before_batch;
  // Batches start at least this long apart: what is queued meanwhile waits
  // and coalesces, so a steady stream of commits costs at most one NOTIFY
  // per channel per interval. Zero (default): a batch starts as soon as the
  // previous one is sent.
  absl::Duration min_interval = absl::ZeroDuration();
};

class Notifier {
 public:
  explicit Notifier(NotifierOptions options);
  // Stop().
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Queues NOTIFY `channel` with `payload` (coalesced as described above).
  // Never blocks on the database. After Stop, does nothing.
  void Notify(const std::string& channel, const std::string& payload);
  // Drops what is still queued, waits for a send in progress and joins the
  // thread. Idempotent.
  void Stop();

  // Notifications sent (one per channel per batch) and failed sends, so
  // far.
  int64_t sent() const;
  int64_t failures() const;

 private:
  void Run();
  // Sends one batch; the connection is (re)opened as needed, and the batch
  // sent again on a new one when the one it met had died.
  absl::Status Send(const absl::flat_hash_map<std::string, std::string>& batch);
  // One attempt of Send; drops the connection when it failed with it.
  absl::Status SendOnce(
      const absl::flat_hash_map<std::string, std::string>& batch);

  const NotifierOptions options_;
  std::unique_ptr<Connection> conn_;  // the thread's only

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  absl::flat_hash_map<std::string, std::string> queued_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_NOTIFIER_H_
