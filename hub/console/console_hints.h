// ConsoleHints: the console's changes across hubs sharing one PostgreSQL
// database (docs/design/console.md, "Several hubs").
//
// A role change reaches every hub's console through the role change log; an
// agent's presence and a message's state do not (no log carries them). So
// each hub hints the others after it changed such rows: which agents, which
// messages, which roles' backlogs and which jobs, by id, in a signal
// (storage/signals.h) on the channel `hub_console` sent after the commit (from
// a connection of its own, never inside a write), and each hub with a console
// LISTENs there and re-renders the rows named (its ConsoleModel reads them from
// the shared store, as it reads its own). Changes that arrive while a send is
// in flight wait and go out together, at most one batch per `min_interval`; a
// batch larger than a notification's payload goes as several. A hint is never
// the data: one a hub misses (its listening connection was lost) is made good
// by telling every open page to load its snapshots again once the listener is
// back; one a hub could not send (the database unreachable) is made good by the
// sender: it tries again, backing off, until it can send, and then sends a
// "reset" in place of what it dropped, so that the other hubs' pages load
// their snapshots again (no new change needed).
//
// Responsible for the hints; not for what the rows hold (ConsoleModel).
// Thread-safe.
#ifndef HUB_HUB_CONSOLE_CONSOLE_HINTS_H_
#define HUB_HUB_CONSOLE_CONSOLE_HINTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hub/console/console_model.h"
#include "storage/signals.h"

namespace hub::console {

// The channel every hub's console listens on.
inline constexpr char kConsoleChannel[] = "hub_console";

struct ConsoleHintsOptions {
  // The store's signals (Store::signals()); must outlive the hints.
  storage::Signals* signals = nullptr;
  // This hub's id: its own hints come back to it and are ignored.
  std::string hub_instance_id;
  // Batches start at least this long apart.
  absl::Duration min_interval = absl::Milliseconds(20);
  // Of the messages of one batch, only the newest this many are named: the
  // console shows the most recent ones only.
  size_t max_messages = 200;
  // The payload of one notification at most (PostgreSQL's limit: 8000).
  size_t max_payload = 7000;
  // A batch that needs more notifications than this is sent as one "reset"
  // instead: every page loads its snapshots again.
  size_t max_notifications = 8;
  // After a failed send, the next try comes this long later, doubling up
  // to retry_max until one succeeds.
  absl::Duration retry_initial = absl::Milliseconds(100);
  absl::Duration retry_max = absl::Seconds(2);
  // The sender's connection's application_name is this, then the hub id
  // (pg_stat_activity shows which backend sends a hub's hints), unless the
  // conninfo names its connections, as every hub connection does.
  std::string application_name_prefix = "hub console hints ";
  // Told, on the sender's thread, when a batch could not be sent (once per
  // run of failures), and when the reset that makes good for it went out.
  std::function<void(const absl::Status&)> on_send_failed;
  std::function<void()> on_caught_up;
};

class ConsoleHints {
 public:
  // `model` (null: this hub has no console, it only sends) must outlive the
  // hints. Starts the sender and, with a model, the listener.
  ConsoleHints(ConsoleModel* model, ConsoleHintsOptions options);
  // Stop().
  ~ConsoleHints();
  ConsoleHints(const ConsoleHints&) = delete;
  ConsoleHints& operator=(const ConsoleHints&) = delete;

  // Rows this hub changed (committed): tell the other hubs. Never blocks
  // on the database.
  void AgentsChanged(const std::vector<std::string>& agent_ids);
  void MessagesChanged(const std::vector<std::string>& message_ids);
  void RoleChanged(const std::string& wire);
  void JobsChanged(const std::vector<std::string>& job_ids);
  // Stops sending and listening; what is queued is dropped. Idempotent.
  void Stop();

  // Notifications sent and received from other hubs, so far; batches that
  // could not be sent (each made good by a later reset).
  int64_t sent() const;
  int64_t received() const;
  int64_t failed() const;

  // The payloads one batch goes out as (exposed for its test).
  static std::vector<std::string> Payloads(
      const std::string& hub_id, const std::vector<std::string>& agents,
      const std::vector<std::string>& messages,
      const std::vector<std::string>& roles,
      const std::vector<std::string>& jobs, const ConsoleHintsOptions& limits);

 private:
  // Adds the ids not yet in `seen` to `list` (members of this object,
  // guarded by mu_) and wakes the sender.
  void Queue(const std::vector<std::string>& ids,
             std::vector<std::string>* list,
             absl::flat_hash_set<std::string>* seen);
  void RunSender();
  absl::Status Send(const std::vector<std::string>& payloads);
  void OnSignal(const storage::Signal& s);
  void OnResync();

  ConsoleModel* const model_;
  const ConsoleHintsOptions options_;
  std::unique_ptr<storage::SignalLink> link_;  // the sender thread's only

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::vector<std::string> agents_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> agent_set_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);  // oldest first
  absl::flat_hash_set<std::string> message_set_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> roles_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> role_set_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> jobs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> job_set_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  bool connected_once_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;
  std::unique_ptr<storage::SignalListener> listener_;
};

}  // namespace hub::console

#endif  // HUB_HUB_CONSOLE_CONSOLE_HINTS_H_
