// ChangeHints: tells the other hubs sharing a PostgreSQL database that this
// hub committed changes they read by cursor from a log, and wakes this
// hub's reader when they did (docs/design/multi-hub.md, "Role changes
// across hubs", whose hints work the same way).
//
// After this hub's commits, Committed sends `NOTIFY <channel>` with this
// hub's id as payload from a Notifier's autocommit connection (coalesced,
// never inside a write); a Listener on the channel calls `wake` for every
// other hub's hint and after every (re)connect (hints sent meanwhile are
// lost; what they stood for is in the log after the reader's cursor).
// Failures are logged once per outage, never fatal: the reader's poll
// covers for lost hints. Thread-safe.
#ifndef HUB_HUB_CHANGE_HINTS_H_
#define HUB_HUB_CHANGE_HINTS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "storage/pg/pg_listener.h"
#include "storage/pg/pg_notifier.h"

namespace hub {

struct ChangeHintsOptions {
  // The database's libpq connection string.
  std::string conninfo;
  // This hub's id: the payload of its hints.
  std::string hub_instance_id;
  std::string channel;
  // The prefix of the log events ("<what>_hint_not_sent", "<what>_hints_lost",
  // "<what>_hints_restored").
  std::string what;
};

class ChangeHints {
 public:
  // The notifier starts at once, the listener at Start.
  explicit ChangeHints(ChangeHintsOptions options);
  // Stop().
  ~ChangeHints();
  ChangeHints(const ChangeHints&) = delete;
  ChangeHints& operator=(const ChangeHints&) = delete;

  // Listens; `wake` runs on the listener's thread and must not block.
  void Start(std::function<void()> wake);
  // This hub committed: hint the other hubs. Any thread, never blocks.
  void Committed();
  // Idempotent; nothing is sent or woken once it returns.
  void Stop();

 private:
  const ChangeHintsOptions options_;
  storage::pg::Notifier notifier_;
  std::unique_ptr<storage::pg::Listener> listener_;
  std::atomic<bool> hints_lost_{false};
};

}  // namespace hub

#endif  // HUB_HUB_CHANGE_HINTS_H_
