// RoleChangeFanout: pushes committed role changes onto the presence streams
// of the agents they concern.
//
// For every change the role registry publishes (never for the rows that
// exist when it starts), the agents told are: the role's holder after the
// change, its holder before the change (so that a fenced holder learns its
// epoch is over) and every registered candidate of the role. Each gets the
// change once, on its attached presence stream; an agent without one gets
// nothing (it re-reads its roles after attaching).
//
// The registry's publication callback only records the change and its
// previous holder (in memory, in version order) and queues it: the lookup
// of the roles' candidates (one store read for all the changes queued
// since the last drain) and the stream pushes run on the injected
// executor, one drain at a time, so changes reach each stream in the order
// they were published and no role writer waits for them. That
// also keeps the pushes off the thread of an activation ACK, which holds
// its own stream's lock while the role row is written. Thread-safe.
#ifndef HUB_REGISTRY_ROLE_CHANGE_FANOUT_H_
#define HUB_REGISTRY_ROLE_CHANGE_FANOUT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "registry/presence.h"
#include "registry/role_event.h"
#include "registry/role_registry.h"
#include "registry/uuid.h"
#include "storage/store.h"

namespace hub {

class RoleChangeFanout {
 public:
  using Executor = std::function<void(std::function<void()>)>;

  // Every pointer must outlive the fanout; so must the work handed to
  // `executor` (drain the executor before destroying the fanout).
  RoleChangeFanout(RoleRegistry* roles, PresenceRegistry* presence,
                   storage::RoleStore* store, UuidV7Generator* ids,
                   Executor executor);
  ~RoleChangeFanout();
  RoleChangeFanout(const RoleChangeFanout&) = delete;
  RoleChangeFanout& operator=(const RoleChangeFanout&) = delete;

  // Starts following every role; the rows that exist now are remembered
  // (their holders count as "before" for the next change), not pushed.
  absl::Status Start();
  // Stops following roles. Changes already queued are still pushed.
  void Stop();

 private:
  struct Seen {
    int64_t version = -1;
    RoleState state = RoleState::kElectable;
    std::optional<std::string> holder;
  };
  struct Pending {
    RoleEvent event;
    std::optional<RoleState> previous_state;
    std::optional<std::string> previous_holder;
  };

  void OnEvent(const RoleEvent& event);
  void Drain();
  // Tells the change to its holders and `candidates` (agent ids).
  void Push(const Pending& change, const std::vector<std::string>& candidates);

  RoleRegistry* const roles_;
  PresenceRegistry* const presence_;
  storage::RoleStore* const store_;
  UuidV7Generator* const ids_;
  const Executor executor_;

  absl::Mutex mu_;
  // Per role: the newest version published (or read at Start).
  absl::flat_hash_map<std::string, Seen> seen_ ABSL_GUARDED_BY(mu_);
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;

  std::unique_ptr<RoleWatch> watch_;
};

}  // namespace hub

#endif  // HUB_REGISTRY_ROLE_CHANGE_FANOUT_H_
