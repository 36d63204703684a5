// FleetEvents: the one typed stream of what changed in the fleet, for the
// observers outside the domain: the console and its hints to other hubs,
// metrics, the log, and cross-hub message routing. The registries publish
// (PresenceRegistry, Messaging, and the jobs' JobChangeTap); each observer
// subscribes once, with the events it follows, and never reaches into a
// registry for it.
//
// The domain's own reactions (an agent that goes loses its roles and its
// reservations; an arriving candidate is ensured) are not here: they are
// decisions, made in registry/coordinator.h.
#ifndef HUB_REGISTRY_FLEET_EVENTS_H_
#define HUB_REGISTRY_FLEET_EVENTS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "records/message.h"
#include "storage/message_store.h"

namespace hub {

// What an observer sees of an agent changed: a registration, a
// deregistration, a stream attached or detached, a detach grace ended, a
// status change by the sweep or a stale agent's return (not plain lease
// renewals).
struct AgentChanged {
  std::string agent_id;
};

// Messages, pending inboxes and a role's backlog that may have changed: after
// a publish committed (the message, its recipients, sorted, and its role
// wire for a role address), after role backlog was handed to a holder (the
// messages, the holder and the wire), after a delivery was recorded (the
// message only), after an ack committed (the messages named, the acking
// agent) and after a re-drive.
struct MessagesChanged {
  std::vector<std::string> message_ids;
  std::vector<std::string> agent_ids;
  std::optional<std::string> role_wire;
};

// A message the expiry sweep or a scope's closing dead-lettered, as stored
// (only its id if it could not be read).
struct MessageDeadLettered {
  MessageRecord message;
  storage::ExpiryTransition transition;
};

// A dead letter re-driven and pushed where it could be.
struct MessageRedriven {
  MessageRecord message;           // after: queued (or delivered)
  std::string dead_letter_reason;  // of the dead letter it was
  std::vector<std::string> recipients;
  std::vector<std::string> pushed;
  std::string by;  // the principal that asked
};

// Recipients of a committed write that no stream of this hub took (another
// hub may hold them), sorted.
struct MessagesUnpushed {
  std::vector<std::string> agent_ids;
};

// A job's committed change (created, claimed, heartbeat, completed, failed,
// retried, cancelled, ended by its worker's leaving or its deadline, or a
// superseded attempt's late result kept): the job as it is now is the
// store's.
struct JobChanged {
  std::string job_id;
  std::string project_id;
};

using FleetEvent =
    std::variant<AgentChanged, MessagesChanged, MessageDeadLettered,
                 MessageRedriven, MessagesUnpushed, JobChanged>;

class FleetEvents {
 public:
  using Subscriber = std::function<void(const FleetEvent& event)>;

  // Adds a subscriber; it hears every event published after this returns.
  void Subscribe(Subscriber subscriber);

  // Tells every subscriber, in the order they subscribed, on the caller's
  // thread with no lock held: often a store completion thread or an RPC's,
  // so a subscriber must not block.
  void Publish(const FleetEvent& event) const;

 private:
  using Subscribers = std::vector<Subscriber>;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Subscribers> subscribers_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<const Subscribers>();
};

// Publishes to `events` when it is set: the registries' events are optional
// (unit tests build them without a stream).
inline void PublishTo(const FleetEvents* events, const FleetEvent& event) {
  if (events != nullptr) events->Publish(event);
}

}  // namespace hub

#endif  // HUB_REGISTRY_FLEET_EVENTS_H_
