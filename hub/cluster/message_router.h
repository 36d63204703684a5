// MessageRouter: messages published through one hub reach recipients whose
// presence streams are attached to another (hubs sharing a PostgreSQL
// database; docs/design/multi-hub.md, "Routing").
//
// The publishing hub commits first, then hints the hubs that hold the
// recipients it could not push to (a NOTIFY on each one's channel, from a
// Notifier's connection of its own, never inside the write). A hub, woken by
// a hint on its channel, by its listener's resync after every connect (a
// hint sent while it was disconnected is lost), or by a slow poll, reads
// the pending messages no push reached yet for the agents attached to it
// (MessageStore::ListUndelivered: a read of state, so a message that committed
// late is found by the next read, as no cursor could skip it) and pushes them,
// recording each delivery attempt first. At least once: a message pushed
// here and by an attach-time push at once arrives twice.
//
// The same listener carries a second kind of hint: a role reservation
// another hub made for an agent this hub holds (HandOverFlight, on the
// channel FlightChannel), which the flight listener takes (the activator's
// scan of such reservations). Thread-safe.
#ifndef HUB_HUB_CLUSTER_MESSAGE_ROUTER_H_
#define HUB_HUB_CLUSTER_MESSAGE_ROUTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "registry/clock.h"
#include "registry/messaging.h"
#include "registry/presence.h"
#include "storage/membership.h"
#include "storage/message_store.h"
#include "storage/signals.h"

namespace hub {

struct MessageRouterOptions {
  // The store's signals (Store::signals()); must outlive the router.
  storage::Signals* signals = nullptr;
  // This hub's id: the channel other hubs hint it on.
  std::string hub_instance_id;
  // The read that catches a hint lost in flight.
  absl::Duration poll_interval = absl::Seconds(1);
  // Messages read per round trip.
  int64_t batch = 512;
};

// The signal channel of a hub's inbox hints.
std::string InboxChannel(const std::string& hub_instance_id);
// The signal channel of a hub's handed-over role flights.
std::string FlightChannel(const std::string& hub_instance_id);

class MessageRouter {
 public:
  // Every pointer must outlive the router (or its Stop). `membership`
  // tells which hubs hold which agents.
  MessageRouter(storage::MessageStore* store, storage::Membership* membership,
                PresenceRegistry* presence, Messaging* messaging,
                const Clock* clock, MessageRouterOptions options);
  // Stop().
  ~MessageRouter();
  MessageRouter(const MessageRouter&) = delete;
  MessageRouter& operator=(const MessageRouter&) = delete;

  // Called on the listener's thread when another hub handed a role flight
  // to this one, and after every (re)connect of the listener (a hint sent
  // meanwhile is lost). Must not block. Set before Start.
  void SetFlightListener(std::function<void()> listener);
  // Starts listening on this hub's channels and the poll.
  void Start();
  // Hints `hub_id` that a role reservation waits for an agent it holds.
  // Never blocks on the database.
  void HandOverFlight(const std::string& hub_id);
  // A publish committed whose `agent_ids` no stream here took: hint the
  // hubs that hold them. Never blocks on the database (the router's thread
  // looks them up).
  void Unpushed(const std::vector<std::string>& agent_ids);
  // Pushes what waits for the agents attached here now, on the router's
  // thread (e.g. once this hub joined again).
  void Kick();
  // Stops listening, hinting and pushing; idempotent.
  void Stop();

  // Messages pushed here that were published through another hub.
  int64_t routed() const;

 private:
  void Run();
  // Hints the holders of `agent_ids`.
  void Hint(const std::vector<std::string>& agent_ids);
  // Reads and pushes what waits for the agents attached here.
  void Drain();

  storage::MessageStore* const store_;
  storage::Membership* const membership_;
  PresenceRegistry* const presence_;
  Messaging* const messaging_;
  const Clock* const clock_;
  const MessageRouterOptions options_;
  std::unique_ptr<storage::SignalSender> sender_;
  std::unique_ptr<storage::SignalListener> listener_;
  std::function<void()> flight_listener_;

  mutable absl::Mutex mu_;
  std::vector<std::string> to_hint_ ABSL_GUARDED_BY(mu_);
  bool drain_due_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t routed_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace hub

#endif  // HUB_HUB_CLUSTER_MESSAGE_ROUTER_H_
