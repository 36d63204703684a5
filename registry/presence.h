// PresenceRegistry: who is present, under which generation, until when.
//
// Responsible for registration (durable, fenced by presence_generation),
// leases (kept in memory, renewed by heartbeats and by attached presence
// streams, checkpointed to the store in batches), the online -> stale ->
// offline sweep (durable, per row, fenced), presence streams (one per agent;
// a newer registration fences the old stream) and the detach grace after
// which an agent counts as gone for role purposes. Not responsible for roles
// or messages: it tells its listener when an agent is gone and nothing more.
//
// Time comes from the injected Clock and nothing runs on its own: the owner
// calls Tick() periodically (hubd: every 100 ms), so tests drive hours of
// protocol with a FakeClock. Thread-safe.
#ifndef HUB_REGISTRY_PRESENCE_H_
#define HUB_REGISTRY_PRESENCE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "registry/activation_envelope.h"
#include "registry/clock.h"
#include "registry/fleet_events.h"
#include "registry/message_delivery.h"
#include "registry/project_scope.h"
#include "registry/role_event.h"
#include "registry/uuid.h"
#include "storage/store.h"

namespace hub {

struct PresenceConfig {
  // Lease TTL bounds and default (triflux's MCP schema: 10 s .. 2 h, 30 s).
  absl::Duration min_ttl = absl::Seconds(10);
  absl::Duration max_ttl = absl::Hours(2);
  absl::Duration default_ttl = absl::Seconds(30);
  // After a presence stream ends, how long before the agent counts as gone
  // for role purposes unless it re-attaches.
  absl::Duration detach_grace = absl::Seconds(2);
  // stale -> offline once the lease is this far past (triflux: 5 minutes).
  absl::Duration offline_after = absl::Minutes(5);
  // How often Tick() writes renewed leases and runs the sweep. Leases are
  // renewed in memory at once; this bounds how stale the stored copy is.
  absl::Duration checkpoint_interval = absl::Seconds(1);
  absl::Duration sweep_interval = absl::Seconds(1);
  // What one registration may carry (docs/design/limits.md); more is
  // RESOURCE_EXHAUSTED / LIMIT_EXCEEDED naming the limit.
  int max_capabilities_per_agent = 64;
  int max_topics_per_agent = 64;
  int max_locators_per_agent = 16;
  size_t max_metadata_bytes = 64 * 1024;
};

// What the hub reports about itself and checks when a caller echoes it.
struct HubFence {
  std::optional<std::string> hub_instance_id;
  std::optional<std::string> store_fingerprint;
};

// Why an agent stopped counting as present for role purposes.
enum class AgentGoneReason {
  kStreamGrace,   // its stream ended and it did not re-attach within grace
  kOffline,       // the sweep marked it offline
  kDeregistered,  // it deregistered
  kSuperseded,    // a newer registration of the same id replaced it
};
absl::string_view AgentGoneReasonName(AgentGoneReason reason);

// Told when an agent (at a generation) is gone. Called from Tick() or from
// the RPC that caused it, with no registry lock held.
using AgentGoneListener = std::function<void(
    const std::string& agent_id, int64_t generation, AgentGoneReason reason)>;

// Told when an agent that may be a role candidate (its capabilities name
// one: "role:<kind>:candidate") registered or attached a presence stream,
// so the activator can ensure the roles that wait for it. Called with no
// registry lock held, on the thread that did it (a store thread for a
// registration, a stream's for an attach): must not block.
using AgentArrivalListener = std::function<void(const std::string& agent_id)>;

// Whether a capabilities JSON array names a role candidacy.
bool NamesRoleCandidacy(const std::string& capabilities_json);

// A reservation of the agent's that ended without its release
// (ReservationEndFanout), as pushed to its presence stream.
struct ReservationEndNotice {
  // The event's id (UUIDv7), unique per notice.
  std::string event_id;
  // The change that ended it (kForced, kExpired or kHolderGone), with the
  // reservation as it was.
  storage::ReservationChange change;
};

// A presence stream as the registry sees it (implemented by the gRPC edge).
class PresenceStream {
 public:
  virtual ~PresenceStream() = default;
  // Ends the stream because it lost authority (STALE_PRESENCE_OWNER,
  // AGENT_DEREGISTERED, PRESENCE_STREAM_REPLACED, HUB_SHUTTING_DOWN).
  // Called at most once, with no registry lock held; must not block.
  virtual void Fence(const absl::Status& status) = 0;
  // Pushes a role activation to the agent; false if the stream is closing.
  // Must not block.
  virtual bool DeliverActivation(const ActivationEnvelope& envelope) = 0;
  // Pushes a message to the agent; false if the stream is closing or does
  // not carry messages (then the message stays pending). Must not block.
  virtual bool DeliverMessage(const MessageDelivery& delivery) {
    (void)delivery;
    return false;
  }
  // Pushes a role probe to the agent; false if the stream is closing or
  // does not carry probes (then the probe fails at once). The answer comes
  // back through PresenceRegistry::AnswerProbe. Must not block; may answer
  // from inside the call.
  virtual bool DeliverProbe(const RoleProbeEnvelope& probe) {
    (void)probe;
    return false;
  }
  // Pushes a role change to the agent; false if the stream is closing or
  // does not carry role changes. Must not block.
  virtual bool DeliverRoleChange(const RoleChangeNotice& notice) {
    (void)notice;
    return false;
  }
  // Pushes the end of one of the agent's reservations; false if the stream
  // is closing or does not carry them. Must not block.
  virtual bool DeliverReservationEnd(const ReservationEndNotice& notice) {
    (void)notice;
    return false;
  }
};

// How a probe on a presence stream ended.
enum class StreamProbeResult {
  kReady,        // answered ready = true
  kNotReady,     // answered ready = false
  kTimeout,      // attached, but no answer in time (a hung agent)
  kNotAttached,  // no stream, or it ended before answering
};

struct RegisterInput {
  std::string agent_id;
  std::string cli;  // codex | gemini | claude | other
  std::optional<int64_t> pid;
  std::vector<std::string> capabilities;
  std::vector<std::string> topics;
  std::string metadata_json = "{}";
  std::optional<absl::Duration> ttl;
  // Identity (TRIFLUX-HUB §3.1). Absent = keep the stored value; a present
  // empty string clears it.
  std::optional<std::string> project_id;
  std::optional<std::string> session_id;
  std::optional<std::string> host_id;
  std::optional<std::string> transport_locators_json;
  // Structured locators already turned into triflux JSON objects.
  std::optional<std::vector<std::string>> transport_locator_objects;
  HubFence fence;
  // The authenticated principal registering, when tokens are on: the
  // registration claims the agent id for it in its own transaction, so a
  // refused registration claims nothing (storage::AgentRegistration::owner).
  std::optional<std::string> owner;
};

struct HeartbeatInput {
  std::string agent_id;
  std::optional<int64_t> generation;  // absent: legacy, unguarded
  std::optional<absl::Duration> ttl;  // absent: the agent's current TTL
  HubFence fence;
};

// An agent as stored, with the live presence facts layered on top.
struct AgentView {
  AgentRecord record;  // status, lease, last_seen, generation live
  absl::Duration ttl;
  bool stream_attached = false;
};

// ListAgents filters; they combine with AND, a list matches any element,
// and an empty one matches everything.
struct AgentFilter {
  std::vector<AgentStatus> statuses;
  std::optional<std::string> project_id;
  std::optional<std::string> topic;
  std::vector<std::string> clis;
  // Only agents of these projects (the caller's token; applied before
  // paging, so pages stay full and tokens stay valid).
  ProjectScope scope;
};

struct DeregisterOutcome {
  AgentView agent;
  bool changed = false;  // false: it was already offline
};

struct AgentPage {
  std::vector<AgentView> agents;
  std::string next_page_token;  // "" on the last page
};

struct PresenceCounts {
  int64_t online = 0;
  int64_t stale = 0;
  int64_t offline = 0;
  int64_t open_streams = 0;
};

class PresenceRegistry {
 public:
  // `store`, `membership` and `clock` must outlive the registry.
  // `membership`: the hubs sharing the store, or nullptr when this hub is
  // its only one (shared()).
  PresenceRegistry(storage::AgentStore* store,
                   const storage::Membership* membership, const Clock* clock,
                   PresenceConfig config, std::string hub_instance_id,
                   std::string store_fingerprint);
  ~PresenceRegistry();

  // The configuration it was built with (TTL bounds, limits).
  const PresenceConfig& config() const { return config_; }

  // Loads every agent from the store. Like etcd on recovery, extends every
  // lease that is not offline to at least now + its TTL, so a hub restart
  // never declares a present agent dead; agents that really died expire one
  // TTL later. Call once before serving.
  absl::Status Recover();

  void SetGoneListener(AgentGoneListener listener);
  void SetArrivalListener(AgentArrivalListener listener);
  // Where the registry publishes AgentChanged (registry/fleet_events.h),
  // with no registry lock held, on the thread that made the change. Must
  // outlive the registry; default: none.
  void SetEvents(const FleetEvents* events);

  // Registers or re-registers (generation + 1) durably. A previous
  // registration's stream is fenced with STALE_PRESENCE_OWNER.
  absl::StatusOr<AgentView> Register(const RegisterInput& input);
  // Register() without parking the caller: `done` runs once, with what
  // Register() would return, on the caller's thread for an invalid input and
  // on a store thread once the write is durable otherwise.
  void RegisterAsync(const RegisterInput& input,
                     storage::Callback<AgentView> done);
  // Renews the lease in memory (no disk sync unless it revives a stale
  // agent). AGENT_NOT_FOUND, STALE_PRESENCE_OWNER, AGENT_OFFLINE.
  absl::StatusOr<AgentView> Heartbeat(const HeartbeatInput& input);
  // Marks the agent offline (durable, fenced); idempotent when already
  // offline. Fences its stream with AGENT_DEREGISTERED.
  absl::StatusOr<DeregisterOutcome> Deregister(
      const std::string& agent_id, std::optional<int64_t> generation,
      const HubFence& fence);
  absl::StatusOr<AgentView> Get(const std::string& agent_id);
  absl::StatusOr<AgentPage> List(const AgentFilter& filter, int page_size,
                                 const std::string& page_token);

  // Attaches `stream` as the agent's presence stream at `generation` (which
  // must be current). A previous stream of the same agent is fenced with
  // PRESENCE_STREAM_REPLACED. While attached, the lease is renewed by Tick().
  // Returns the stream id to pass to Detach.
  absl::StatusOr<uint64_t> Attach(const std::string& agent_id,
                                  int64_t generation, const HubFence& fence,
                                  std::shared_ptr<PresenceStream> stream);
  // The stream ended. Starts the detach grace if it was the agent's current
  // stream; otherwise does nothing.
  void Detach(const std::string& agent_id, uint64_t stream_id);
  // Checks a frame received on an attached stream: OK while `stream_id` is
  // the agent's current stream at `generation`. A stream this hub took away
  // to end it (deregistered, its hold or the hub's seat lost, shutting down)
  // gets the reason it is being ended with; one a newer stream replaced,
  // PRESENCE_STREAM_REPLACED.
  absl::Status CheckStream(const std::string& agent_id, int64_t generation,
                           uint64_t stream_id);

  // The agent's lease end if it is live at `now_ms` (online, lease after
  // now): the predicate role decisions use. Read from memory, where leases
  // are authoritative; on a shared store, for an agent this hub does not
  // hold, or holds without a stream and whose lease is over in memory (the
  // hold may be stale: another hub's claim does not tell this one), from
  // the store. nullopt for an unknown or not-live agent.
  std::optional<int64_t> LiveLease(const std::string& agent_id, int64_t now_ms);

  // Whether the agent has a presence stream attached now.
  bool StreamAttached(const std::string& agent_id);
  // The agents with a presence stream attached now, by agent_id.
  std::vector<std::string> AttachedAgents();
  // The agents subscribed to `topic` (their last registration listed it)
  // whose status is online or stale, sorted. From memory: an index kept by
  // registrations, not a scan of every agent.
  // On a shared store, from the store (other hubs register subscribers).
  absl::StatusOr<std::vector<std::string>> TopicSubscribers(
      const std::string& topic);
  // Pushes `envelope` on the agent's attached stream; false when none.
  bool DeliverActivation(const std::string& agent_id,
                         const ActivationEnvelope& envelope);
  // Pushes `delivery` on the agent's attached stream; false when none.
  bool DeliverMessage(const std::string& agent_id,
                      const MessageDelivery& delivery);
  // Pushes `notice` on the agent's attached stream; false when none.
  bool DeliverRoleChange(const std::string& agent_id,
                         const RoleChangeNotice& notice);
  // Pushes `notice` on the agent's attached stream; false when none.
  bool DeliverReservationEnd(const std::string& agent_id,
                             const ReservationEndNotice& notice);
  // Probes the agent over its attached stream: pushes `probe` (its probe_id
  // and deadline set here) and blocks until the agent answers, the stream
  // ends, or `timeout` (real time) passes. Call without locks held, off
  // gRPC threads (the activator's pool).
  StreamProbeResult ProbeStream(const std::string& agent_id,
                                RoleProbeEnvelope probe,
                                absl::Duration timeout);
  // A probe_reply frame received on stream `stream_id` of `agent_id`.
  // REQUEST_INVALID (metadata field=probe_id) when no probe with that id
  // waits for an answer from this stream: unknown, already answered, or
  // late (its prober gave up).
  absl::Status AnswerProbe(const std::string& agent_id, uint64_t stream_id,
                           const std::string& probe_id, bool ready);

  // Runs what is due: detach graces, lease renewal for attached streams,
  // the lease checkpoint and the stale/offline sweep.
  void Tick();
  // How long until the earliest running detach grace ends (zero when one is
  // due now), or nullopt when no grace runs. The owner's ticker sleeps no
  // longer than this, so an agent counts as gone when its grace ends rather
  // than up to one tick later. May be early (a re-attach does not move it);
  // Tick() brings it up to date.
  std::optional<absl::Duration> TimeToNextGraceEnd() const;
  // Called (on the thread that ended a stream, under the registry's
  // listener lock, so never again once SetGraceWakeup(nullptr) returned)
  // when a grace starts that ends before every other running one, so that
  // a ticker sleeping longer than the grace can wake and sleep again for
  // TimeToNextGraceEnd(). Must be quick and must not call the registry.
  void SetGraceWakeup(std::function<void()> wakeup);
  // Fences every attached stream (hub shutting down) and checkpoints leases.
  void Shutdown();

  // ---- several hubs over one store (docs/design/multi-hub.md)
  // On a shared store (a membership given), this hub holds only the
  // presence of the agents it registered, attached, heartbeated through or
  // took over; the rest is read from the store, and every write for
  // presence is fenced by the hub's seat.
  bool shared() const { return shared_; }
  // Whether this hub may act for the presence it holds right now (its seat
  // by its own clock): checked before every push on a stream, so a hub
  // paused past its lease pushes nothing once it runs again. Default:
  // always. Set before serving.
  void SetAuthorityCheck(std::function<bool()> check) {
    may_act_ = std::move(check);
  }
  // Agents the membership took over from a dead hub: this hub holds them
  // now, detached, with their detach grace starting now. Idempotent.
  void Adopt(const std::vector<storage::TakenAgent>& agents);
  // This hub lost its seat: it holds nothing any more. Every attached
  // stream is fenced with `why`, every running grace dropped (the hub that
  // takes the agents over runs its own), every waiting probe ended.
  void DropHolds(const absl::Status& why);
  // Shared store: whether this hub holds the agent (at `generation`, when
  // given).
  bool Held(const std::string& agent_id,
            std::optional<int64_t> generation = std::nullopt);

  PresenceCounts Counts();

 private:
  struct Entry;
  struct Shard;
  class Locked;
  struct PendingProbe;

  // Ends the probes waiting for an answer from `stream_id` (0: all).
  void EndProbes(uint64_t stream_id);

  Shard& ShardFor(absl::string_view agent_id);
  // The agent's attached stream, unless it has none or is offline.
  std::shared_ptr<PresenceStream> LiveStream(const std::string& agent_id);
  absl::Status CheckFence(const HubFence& fence) const;
  absl::Status StaleOwner(const std::string& agent_id,
                          int64_t current_generation) const;
  void NotifyArrival(const std::string& agent_id);
  void NotifyChanged(const std::string& agent_id);
  void Notify(const std::string& agent_id, int64_t generation,
              AgentGoneReason reason);
  AgentView ViewOf(AgentRecord record, const Entry& entry) const;
  // The part of a registration after its write: memory, fencing, notices.
  absl::StatusOr<AgentView> Registered(const std::string& agent_id,
                                       int64_t now_ms, int64_t ttl_ms,
                                       absl::StatusOr<AgentRecord> record);
  absl::StatusOr<AgentView> Overlay(AgentRecord record);
  void Checkpoint(int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);
  // Shared store: makes this hub the agent's presence holder at
  // `generation` (default: the stored one) in the store, then in memory;
  // the lease renewed for `ttl_ms` (default: the stored TTL).
  absl::StatusOr<AgentView> Hold(const std::string& agent_id,
                                 std::optional<int64_t> generation,
                                 std::optional<int64_t> ttl_ms, int64_t now);
  // Shared store: a grace ran out; ends the hold in the store. True when
  // the agent is gone, false when another hub holds it (or the store could
  // not say: the grace is retried at the next tick).
  bool Release(const std::string& agent_id, int64_t generation, int64_t now);
  // Shared store: the store says another hub holds the agent: forget the
  // hold, fence its stream with `why`.
  void LoseHold(const std::string& agent_id, int64_t generation,
                const absl::Status& why);
  void Sweep(int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);

  storage::AgentStore* const store_;
  const Clock* const clock_;
  const PresenceConfig config_;
  const std::string hub_instance_id_;
  const std::string store_fingerprint_;
  const bool shared_;
  std::function<bool()> may_act_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<uint64_t> next_stream_id_{1};

  absl::Mutex listener_mu_;
  AgentGoneListener listener_ ABSL_GUARDED_BY(listener_mu_);
  AgentArrivalListener arrival_listener_ ABSL_GUARDED_BY(listener_mu_);
  const FleetEvents* events_ ABSL_GUARDED_BY(listener_mu_) = nullptr;
  std::function<void()> grace_wakeup_ ABSL_GUARDED_BY(listener_mu_);

  UuidV7Generator probe_ids_;
  absl::Mutex probe_mu_;  // a leaf: nothing is locked while holding it
  absl::flat_hash_map<std::string, std::shared_ptr<PendingProbe>> probes_
      ABSL_GUARDED_BY(probe_mu_);

  // Records `topics` as the agent's subscriptions at `generation` unless a
  // later registration already did.
  void IndexTopics(const std::string& agent_id, int64_t generation,
                   std::vector<std::string> topics);

  // Topic -> subscribed agents, and each agent's topics at the generation
  // that set them.
  struct Subscription {
    int64_t generation = 0;
    std::vector<std::string> topics;
  };
  absl::Mutex topics_mu_;
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>>
      subscribers_ ABSL_GUARDED_BY(topics_mu_);
  absl::flat_hash_map<std::string, Subscription> subscriptions_
      ABSL_GUARDED_BY(topics_mu_);

  // The earliest detached_at_ms of the agents in a shard's `detaching` set,
  // or kNoDetach. Lowered by Detach(), recomputed by Tick().
  static constexpr int64_t kNoDetach = std::numeric_limits<int64_t>::max();
  std::atomic<int64_t> earliest_detach_ms_{kNoDetach};
  // True when `detached_at_ms` became the earliest.
  bool LowerEarliestDetach(int64_t detached_at_ms);

  absl::Mutex tick_mu_;  // one Tick at a time
  int64_t last_checkpoint_ms_ ABSL_GUARDED_BY(tick_mu_) = 0;
  int64_t last_sweep_ms_ ABSL_GUARDED_BY(tick_mu_) = 0;
};

}  // namespace hub

#endif  // HUB_REGISTRY_PRESENCE_H_
