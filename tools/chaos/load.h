// Load: the chaos driver's clients. Worker threads, each one agent with one
// long-lived channel per hub, run a random mix of registrations, heartbeats,
// reservations, acts of the roles they hold, publishes, list+acks and
// elections (EnsureRole) of a lead role per project that the attached agents
// are candidates of (EnsuredRole), and
// record in the Ledger what the hubs acknowledged. A worker starts on hub
// `index % hubs` and moves to the next hub when its hub refuses a call as
// unavailable (UNAVAILABLE: a dead hub, STORE_UNAVAILABLE, HUB_SEAT_LOST) or
// does not answer it in time (a paused hub).
//
// Not responsible for the hubs or the faults (the runs do that). Public
// methods are called from the driver's main thread.
#ifndef TOOLS_CHAOS_LOAD_H_
#define TOOLS_CHAOS_LOAD_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tools/chaos/attached_agent.h"
#include "tools/chaos/ledger.h"
#include "tools/chaos/push_log.h"

namespace hub::chaos {

struct LoadOptions {
  // host:port of each hub, in slot order.
  std::vector<std::string> addresses;
  int workers = 4;
  // Agents that stay attached through presence streams and take pushed
  // messages (AttachedAgent); the workers publish to them too. When there
  // are more than hubs, the first one per hub is sticky: it stays on its hub
  // through every fault.
  int attached = 0;
  // Projects whose cto roles the workers compete for.
  std::vector<std::string> projects;
  // Deadline of every call: how long a paused hub holds a worker.
  absl::Duration call_deadline = absl::Seconds(2);
  // Where acknowledged publishes and pushes are noted; may be null. Must
  // outlive the load.
  PushLog* push_log = nullptr;
};

struct OpCounts {
  std::atomic<int64_t> ok{0};
  std::atomic<int64_t> failed{0};
};

class Load {
 public:
  // `ledger` must outlive the load.
  Load(Ledger* ledger, LoadOptions options);
  // Stops the workers.
  ~Load();

  // Starts the worker threads.
  void Start(uint64_t seed);
  // Holds the workers between calls (no call is made) / lets them go on.
  void Hold();
  void Release();
  // A new hub process serves `slot`'s address: workers on it wait for their
  // channel to reconnect (HubClient::WaitForConnected) before the next call.
  void HubRestarted(int slot);
  // Workers stop writing and each reads and acks its agent's inbox until it
  // was delivered every acknowledged publish to it, and the attached agents
  // wait for theirs to be pushed; false if that took longer than `timeout`.
  bool Drain(absl::Duration timeout);
  // Joins the workers.
  void Stop();

  // Cuts the presence stream of one attached agent (`random` picks which,
  // the hub it attaches to next and how long it stays away, up to `away`).
  // A description of the cut; "" without attached agents.
  std::string CutStream(uint64_t random, absl::Duration away);
  const std::vector<std::unique_ptr<AttachedAgent>>& attached() const {
    return attached_;
  }

  // The database is stopped (after `pg_ctl stop` returned) / about to be
  // started (before `pg_ctl start` runs). A worker's call (any but a
  // heartbeat, which a hub answers from memory while its seat is live) sent
  // and answered wholly in between must not be answered OK: nothing could
  // have committed or read it.
  void DatabaseDown();
  void DatabaseUp();
  // One line per call answered OK while the database was down.
  std::vector<std::string> false_oks() const;
  // Why calls failed while the database was down, "CODE REASON" -> count.
  std::map<std::string, int64_t> down_failures() const;

  // When a call last succeeded (absl::GetCurrentTimeNanos(), any worker).
  int64_t last_ok_ns() const { return last_ok_ns_.load(); }
  // From now on, each worker notes its first successful call that started
  // at or after `since_ns` (absl::GetCurrentTimeNanos(): a fault's moment).
  void MarkFault(int64_t since_ns);
  // Waits until every worker had such a call since the last MarkFault; how
  // long after the mark the last of them was answered, or nullopt after
  // `timeout`.
  std::optional<absl::Duration> WaitAllServed(absl::Duration timeout) const;
  // Why calls failed so far, "CODE REASON" -> count.
  std::map<std::string, int64_t> failures() const;
  // "acknowledged/attempted: ..." and "failures: ..." lines.
  std::string Summary() const;

 private:
  friend class Worker;
  struct WorkerSlot {
    // When the worker's first successful call since the mark was answered;
    // 0 while there was none.
    std::atomic<int64_t> served_ns{0};
    std::atomic<bool> drained{false};
  };
  void Failed(const absl::Status& status);
  // A call sent in database phase `phase_at_start` was answered with
  // `status` (every worker call but heartbeats).
  void Answered(const char* what, int64_t phase_at_start,
                const absl::Status& status);

  Ledger* const ledger_;
  const LoadOptions options_;
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<AttachedAgent>> attached_;
  std::unique_ptr<WorkerSlot[]> slots_;
  std::unique_ptr<std::atomic<int64_t>[]> hub_runs_;  // per hub slot
  std::atomic<bool> stop_{false};
  std::atomic<bool> hold_{false};
  std::atomic<bool> drain_{false};
  std::atomic<int64_t> last_ok_ns_{0};
  std::atomic<int64_t> fault_mark_ns_{0};
  // Odd while the database is down: +1 on DatabaseDown and on DatabaseUp.
  std::atomic<int64_t> db_phase_{0};
  OpCounts registers_, heartbeats_, reserves_, acts_, publishes_, acks_,
      ensures_;
  // Why calls failed, "CODE REASON" -> count (UNAVAILABLE while a hub is
  // down; STALE_EPOCH and friends from lost races).
  mutable absl::Mutex failures_mu_;
  std::map<std::string, int64_t> failures_ ABSL_GUARDED_BY(failures_mu_);
  // What EnsureRole answered, disposition -> count.
  std::map<std::string, int64_t> dispositions_ ABSL_GUARDED_BY(failures_mu_);
  std::vector<std::string> false_oks_ ABSL_GUARDED_BY(failures_mu_);
  std::map<std::string, int64_t> down_failures_ ABSL_GUARDED_BY(failures_mu_);
};

}  // namespace hub::chaos

#endif  // TOOLS_CHAOS_LOAD_H_
