// Listener: a dedicated PostgreSQL connection that LISTENs on channels and
// turns what arrives into callbacks, for hints between hubs (a NOTIFY sent
// after a commit, storage/pg/pg_notifier.h).
//
// A notification is a hint, never the data: one sent while the listener is
// not connected is lost for good. So after every connect, once LISTEN is in
// effect, the listener calls `on_resync`, whose job is to re-read by cursor
// whatever the hints stand for; together with a slow poll by the caller
// (for a hint lost in flight), nothing is missed. Not responsible for that
// cursor, nor for what a payload means.
//
// One thread per listener: it waits on the connection's socket with poll(),
// reconnects with exponential backoff when the connection is lost (a server
// restart, a terminated backend, a silent network: the connection is checked
// after check_interval without traffic) and is stopped through an eventfd.
// Thread-safe.
#ifndef HUB_STORAGE_PG_PG_LISTENER_H_
#define HUB_STORAGE_PG_PG_LISTENER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "storage/pg/pg_conn.h"

namespace hub::storage::pg {

struct ListenerOptions {
  // A libpq connection string or URI.
  std::string conninfo;
  // The channels to LISTEN on (at least one; any text, quoted as an
  // identifier, so case and spaces are kept).
  std::vector<std::string> channels;
  // Each notification on one of the channels, in arrival order, on the
  // listener's thread. Must not block, must not stop the listener.
  std::function<void(const Notification&)> on_notify;
  // After every connect, once LISTEN is in effect, on the listener's thread,
  // before any notification of that connection is delivered. Must not block
  // for long (notifications wait meanwhile), must not stop the listener.
  std::function<void()> on_resync;
  // Each connect that failed and each connection lost, on the listener's
  // thread, before it waits to reconnect. Default: nothing.
  std::function<void(const absl::Status&)> on_error;
  // Reconnect waits: min_backoff after a loss, doubling on each failed
  // connect up to max_backoff.
  absl::Duration min_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  // A connection idle this long is checked with a round trip.
  absl::Duration check_interval = absl::Seconds(10);
};

class Listener {
 public:
  // Starts the thread, which connects in the background (a server that is
  // down is retried, with on_error told of each failure).
  explicit Listener(ListenerOptions options);
  // Stop().
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Closes the connection and joins the thread; after it returns no
  // callback runs. A connect in progress is waited for. Idempotent.
  void Stop();

  // The server process of the current connection; 0 while disconnected.
  int backend_pid() const { return backend_pid_.load(); }
  // Connections made so far, each followed by on_resync.
  int64_t connects() const { return connects_.load(); }

 private:
  void Run();
  // Serves one connection until it is lost (its status) or Stop (OK).
  absl::Status Serve(Connection& conn);
  // Waits up to `wait`; true when Stop was called.
  bool Stopped(absl::Duration wait);

  const ListenerOptions options_;
  int wake_fd_ = -1;  // an eventfd Stop writes to
  std::atomic<bool> stopping_{false};
  std::atomic<int> backend_pid_{0};
  std::atomic<int64_t> connects_{0};
  std::thread thread_;
};

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_LISTENER_H_
