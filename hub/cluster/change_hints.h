// ChangeHints: tells the other hubs sharing a PostgreSQL database that this
// hub committed changes they read by cursor from a log, and wakes this
// hub's reader when they did (docs/design/multi-hub.md, "Role changes
// across hubs", whose hints work the same way).
//
// After this hub's commits, Committed signals `channel` with this hub's id
// as payload (storage/signals.h: coalesced, never inside a write); a
// listener on the channel calls `wake` for every other hub's hint and after
// every (re)connect (hints sent meanwhile are lost; what they stood for is
// in the log after the reader's cursor). Role changes and reservation
// changes propagate this way, each with a log and a reader of its own.
// Failures are logged once per outage, never fatal: the reader's poll
// covers for lost hints. Thread-safe.
#ifndef HUB_HUB_CLUSTER_CHANGE_HINTS_H_
#define HUB_HUB_CLUSTER_CHANGE_HINTS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "storage/signals.h"

namespace hub {

struct ChangeHintsOptions {
  // The store's signals (Store::signals()); must outlive the hints.
  storage::Signals* signals = nullptr;
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
  std::unique_ptr<storage::SignalSender> sender_;
  std::unique_ptr<storage::SignalListener> listener_;
  std::atomic<bool> hints_lost_{false};
};

}  // namespace hub

#endif  // HUB_HUB_CLUSTER_CHANGE_HINTS_H_
