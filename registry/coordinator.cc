#include "registry/coordinator.h"

#include <string>
#include <utility>

namespace hub {

Coordinator::Coordinator(PresenceRegistry* presence, Activator* activator,
                         ReservationBook* reservations, JobBook* jobs,
                         Executor executor)
    : presence_(presence),
      activator_(activator),
      reservations_(reservations),
      jobs_(jobs),
      executor_(std::move(executor)) {}

void ConnectRolesToMessaging(ActivatorOptions& options,
                             std::function<Messaging*()> messaging) {
  options.on_role_active = [messaging](const RoleRecord& active) {
    Messaging* m = messaging();
    return m != nullptr ? m->HandOverBacklog(active) : BacklogHandover{};
  };
  options.on_scope_closed =
      [messaging](const storage::ScopeCloseResult& closed) {
        if (Messaging* m = messaging(); m != nullptr) m->OnScopeClosed(closed);
      };
  options.has_backlog = [messaging](const std::string& wire) {
    Messaging* m = messaging();
    return m != nullptr && m->HasBacklog(wire);
  };
}

void Coordinator::Start() {
  // The listeners and the reactions hold copies of what they use, so a
  // reaction still queued on the executor never reads the coordinator.
  presence_->SetGoneListener(
      [activator = activator_, reservations = reservations_, jobs = jobs_,
       executor = executor_](const std::string& agent_id, int64_t generation,
                             AgentGoneReason reason) {
        executor([activator, reservations, jobs, agent_id, generation,
                  reason] {
          // Jobs first: a re-queued job is claimable at once, while the
          // activator may wait on probes.
          if (jobs != nullptr) jobs->OnAgentGone(agent_id, generation);
          activator->OnAgentGone(agent_id, reason);
          reservations->OnAgentGone(agent_id, generation);
        });
      });
  presence_->SetArrivalListener([activator = activator_, executor = executor_](
                                    const std::string& agent_id) {
    executor(
        [activator, agent_id] { activator->OnCandidateArrived(agent_id); });
  });
}

}  // namespace hub
