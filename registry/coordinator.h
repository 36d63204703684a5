// Coordinator: the domain's reactions to what happens to an agent, in one
// place (docs/design/architecture.md, "Where the rules are").
//
//  - An agent that is gone (its stream's grace ran out, the sweep marked it
//    offline, it deregistered, a newer registration replaced it) loses its
//    roles: the activator fences every role it holds and elects again
//    (Activator::OnAgentGone). Then its path reservations end
//    (ReservationBook::OnAgentGone, fenced by the generation that went),
//    and so do its jobs' attempts, each job queued again or failed
//    (JobBook::OnAgentGone, fenced the same way).
//  - An agent that arrives (registers or attaches, naming a role candidacy)
//    is a candidate event for every role it is a candidate of
//    (Activator::OnCandidateArrived).
//  - A role that becomes active is handed its backlog; a closed scope's
//    dead-lettered requests notify their senders; a role that waits for a
//    holder is ensured when backlog waits for it (ConnectRolesToMessaging).
//
// The presence registry reports both from an RPC's or its tick's thread;
// the reactions write to the store and may wait for probes, so each runs
// on `executor`, in the order reported. Thread-safe.
#ifndef HUB_REGISTRY_COORDINATOR_H_
#define HUB_REGISTRY_COORDINATOR_H_

#include <functional>

#include "registry/activator.h"
#include "registry/jobs.h"
#include "registry/messaging.h"
#include "registry/presence.h"
#include "registry/reservations.h"

namespace hub {

// Sets the activator's hooks to their messaging reactions: on_role_active
// hands the role's backlog to its new holder, durably, before the ACK
// answers (which reports how many); on_scope_closed sends the notices of a
// closed scope's dead letters; has_backlog tells a candidate event which
// roles wait with messages. `messaging` is read each time a hook runs (the
// messaging is built after the activator); while it returns null nothing
// is handed and no role has backlog.
void ConnectRolesToMessaging(ActivatorOptions& options,
                             std::function<Messaging*()> messaging);

class Coordinator {
 public:
  // Runs a reaction later, on a thread of its own (hubd: the activator's
  // pool).
  using Executor = std::function<void(std::function<void()>)>;

  // Every pointer must outlive the presence registry's events and the work
  // handed to `executor` (drain it before destroying them); the
  // coordinator itself need not.
  // `jobs` may be null (no job reactions).
  Coordinator(PresenceRegistry* presence, Activator* activator,
              ReservationBook* reservations, JobBook* jobs, Executor executor);
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Subscribes to the presence registry's gone and arrival events (its
  // SetGoneListener and SetArrivalListener: call once, before serving).
  void Start();

 private:
  PresenceRegistry* const presence_;
  Activator* const activator_;
  ReservationBook* const reservations_;
  JobBook* const jobs_;
  const Executor executor_;
};

}  // namespace hub

#endif  // HUB_REGISTRY_COORDINATOR_H_
