#include "storage/pg/pg_listener.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub::storage::pg {
namespace {

int PollMillis(absl::Duration wait) {
  return static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))), 0,
      int64_t{24} * 3600 * 1000));
}

}  // namespace

Listener::Listener(ListenerOptions options) : options_(std::move(options)) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hub-pg-listen");  // top -H, perf
    Run();
  });
}

Listener::~Listener() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Listener::Stop() {
  if (stopping_.exchange(true)) {
    if (thread_.joinable()) thread_.join();
    return;
  }
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

bool Listener::Stopped(absl::Duration wait) {
  if (stopping_.load()) return true;
  pollfd wake = {wake_fd_, POLLIN, 0};
  while (poll(&wake, 1, PollMillis(wait)) < 0 && errno == EINTR) {
  }
  return stopping_.load();
}

void Listener::Run() {
  std::string listen;
  for (const std::string& channel : options_.channels) {
    absl::StrAppend(&listen, "LISTEN ", QuotedIdentifier(channel), ";");
  }
  absl::Duration backoff = options_.min_backoff;
  while (!stopping_.load()) {
    absl::StatusOr<std::unique_ptr<Connection>> conn =
        Connection::Open(options_.conninfo, "hubd listener");
    absl::Status status = conn.status();
    if (status.ok()) status = (*conn)->Exec(listen).status();
    if (!status.ok()) {
      if (options_.on_error) options_.on_error(status);
      if (Stopped(backoff)) return;
      backoff = std::min(backoff * 2, options_.max_backoff);
      continue;
    }
    backoff = options_.min_backoff;
    backend_pid_.store((*conn)->BackendPid());
    connects_.fetch_add(1);
    // LISTEN is in effect: whatever is sent from now on arrives, so what
    // was sent before is for the resync to find.
    if (options_.on_resync) options_.on_resync();
    status = Serve(**conn);
    backend_pid_.store(0);
    conn->reset();
    if (stopping_.load()) return;
    if (options_.on_error) options_.on_error(status);
    if (Stopped(backoff)) return;
  }
}

absl::Status Listener::Serve(Connection& conn) {
  for (;;) {
    for (const Notification& n : conn.TakeNotifications()) {
      if (options_.on_notify) options_.on_notify(n);
    }
    if (!conn.Healthy() || conn.Socket() < 0) {
      return UnavailableError("STORE_UNAVAILABLE",
                              "lost the PostgreSQL connection");
    }
    pollfd fds[2] = {{conn.Socket(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int ready = poll(fds, 2, PollMillis(options_.check_interval));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return UnavailableError("STORE_UNAVAILABLE",
                              absl::StrCat("poll failed: errno ", errno));
    }
    if (fds[1].revents != 0 || stopping_.load()) return absl::OkStatus();
    // Quiet for check_interval: a round trip proves the connection alive
    // (a notification read meanwhile is delivered above).
    absl::Status s =
        ready == 0 ? conn.Exec("SELECT 1").status() : conn.ConsumeInput();
    if (!s.ok()) return s;
  }
}

}  // namespace hub::storage::pg
