// Messaging: messages between agents (TRIFLUX-HUB §6).
//
// Responsible for Publish (validation, the recipients an address names, the
// durable insert of the message and its inbox rows before the reply, the push
// to attached recipients), Ack, ListPending, role backlog (an EnsureRole when
// a role has no holder, the hand-off to the next holder), the expiry sweep
// with its dead-letter notices, dead letters, traces and Ask. Not responsible
// for gRPC, presence or who holds a role: it reads those and never decides
// them. Delivery is at-least-once: nothing is pushed before it is durable,
// and a message stays pending until its recipient acknowledges it.
//
// Time comes from the injected Clock; the owner calls Tick() (hubd: every
// 100 ms; the sweep runs at most once a second). Thread-safe.
#ifndef HUB_REGISTRY_MESSAGING_H_
#define HUB_REGISTRY_MESSAGING_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "registry/ack_coalescer.h"
#include "registry/activator.h"
#include "registry/clock.h"
#include "registry/fleet_events.h"
#include "registry/message_delivery.h"
#include "registry/presence.h"
#include "registry/project_scope.h"
#include "registry/role_registry.h"
#include "registry/uuid.h"
#include "storage/store.h"

namespace hub {

struct MessagingConfig {
  absl::Duration default_ttl = absl::Minutes(5);
  absl::Duration min_ttl = absl::Seconds(1);
  absl::Duration max_ttl = absl::Hours(24);
  size_t max_payload_bytes = 1024 * 1024;
  // A publish that would leave a recipient with more unacknowledged messages
  // than this is refused whole (LIMIT_EXCEEDED, max_pending_per_inbox).
  int64_t max_pending_per_inbox = 10000;
  // Message ids one Ack may carry.
  int max_ids_per_ack = 100;
  absl::Duration sweep_interval = absl::Seconds(1);
  absl::Duration max_ask_wait = absl::Seconds(30);
};

// Publish input, as the gRPC edge decodes it.
struct PublishInput {
  std::string from_agent_id;
  std::string to;
  std::string topic;  // "": the address's default
  // request | response | event | handoff | human_request | human_response;
  // "": response when correlation_id is set, else event. Anything else
  // (system included): MESSAGE_TYPE_INVALID.
  std::string type;
  int priority = 0;                   // 0: 5
  std::optional<absl::Duration> ttl;  // absent: 5 min
  std::string payload_json;           // "": {}
  std::string correlation_id;         // "": a new UUIDv7
  std::string trace_id;               // "": a new UUIDv7
  std::string project_id;             // for topic:cto only
  // Whom the caller may address (its token's projects): a role or an agent
  // outside it is PERMISSION_DENIED / PROJECT_SCOPE_MISMATCH, and a topic
  // reaches only the subscribers inside it. Default: everyone.
  ProjectScope scope;
};

struct PublishResult {
  MessageRecord message;  // as stored
  int recipient_count = 0;
  std::optional<ResolvedRoleKey> role;      // role addresses
  std::optional<EnsureReceipt> activation;  // role backlog, ensure accepted
};

struct AckResult {
  std::vector<std::string> acked;    // request order, de-duplicated
  std::vector<std::string> ignored;  // request order, de-duplicated
};

struct PendingQuery {
  std::string agent_id;
  std::string topic;  // "": any
  int page_size = 0;  // 0: 20; above 100: 100; negative: REQUEST_INVALID
  std::string page_token;
  bool peek = false;
  std::optional<int64_t> presence_generation;
};

struct PendingPage {
  std::vector<MessageDelivery> deliveries;
  std::string next_page_token;
  int64_t server_time_ms = 0;
};

struct DeadLetterView {
  DeadLetterRecord dead_letter;
  std::optional<MessageRecord> message;
};

struct DeadLetterQuery {
  std::string reason;         // "": any
  std::string from_agent_id;  // "": any
  int page_size = 0;          // 0: 50; above 1000: 1000
  std::string page_token;
  // Only dead letters of messages visible in this scope (InScope), applied
  // before paging.
  ProjectScope scope;
};

struct DeadLetterPage {
  std::vector<DeadLetterView> dead_letters;
  std::string next_page_token;
};

struct TracePage {
  std::vector<MessageRecord> messages;
  std::string next_page_token;
};

// What RedriveDeadLetter did.
struct RedriveOutcome {
  MessageRecord message;  // after: queued (or delivered), new expiry
  std::optional<DeadLetterRecord> dead_letter;  // the one removed
  // The recipients it is queued for again, by agent_id: every one that had
  // not acknowledged it, and a role message's live holder.
  std::vector<std::string> recipients;
  // Of those, the ones it was pushed to at once (a stream on this hub).
  std::vector<std::string> pushed;
  std::optional<ResolvedRoleKey> role;  // role messages
  // A role message with no live holder waits as its backlog; the ensure
  // asked for (trigger publish_no_holder, cause = the message id).
  std::optional<EnsureReceipt> activation;
};

enum class AskState { kAnswered, kDelivered, kQueued };

struct AskResult {
  AskState state = AskState::kQueued;
  PublishResult request;
  std::optional<MessageRecord> response;
};

class Messaging {
 public:
  // Everything injected must outlive the messaging. `activator` may be null
  // (role backlog then waits without an ensure).
  Messaging(storage::MessageStore* store, PresenceRegistry* presence,
            RoleRegistry* roles, Activator* activator, UuidV7Generator* ids,
            const Clock* clock, MessagingConfig config = {});
  // Waits for the acknowledgement writes in flight (AckCoalescer::Quiesce):
  // their answers touch this object.
  ~Messaging();
  Messaging(const Messaging&) = delete;
  Messaging& operator=(const Messaging&) = delete;

  // Validates, writes the message and its inbox rows durably, then pushes it
  // to attached recipients. Reasons: see message.proto Publish.
  absl::StatusOr<PublishResult> Publish(const PublishInput& input);
  // Runs a task that may block (wait for writes) off the caller's thread.
  using BlockingExecutor = std::function<void(std::function<void()>)>;
  // Publish without parking the caller: `done` runs once, with what Publish
  // would return, on the caller's thread when the request is refused before
  // the write, else on a store thread once the message is durable. A role
  // address without a live holder also starts an EnsureRole, which blocks:
  // that publish runs on `blocking` instead.
  void PublishAsync(const PublishInput& input,
                    storage::Callback<PublishResult> done,
                    const BlockingExecutor& blocking);
  // Acknowledges what was delivered to `agent_id`; ids not delivered to it
  // are ignored. AGENT_ID_INVALID, MESSAGE_ID_INVALID, REQUEST_INVALID,
  // LIMIT_EXCEEDED, AGENT_NOT_FOUND, STALE_PRESENCE_OWNER.
  // All ids are acknowledged in one durable write.
  absl::StatusOr<AckResult> Ack(const std::string& agent_id,
                                const std::vector<std::string>& message_ids,
                                std::optional<int64_t> presence_generation);
  // Ack without parking the caller: `done` runs on the caller's thread when
  // the request is refused before the write, else on a store thread once
  // the acknowledgements are durable. An agent's acks that come while two
  // of its earlier ones are being written are written together, as one
  // (AckCoalescer); each is still answered for its own ids.
  void AckAsync(const std::string& agent_id,
                const std::vector<std::string>& message_ids,
                std::optional<int64_t> presence_generation,
                storage::Callback<AckResult> done);
  // The agent's pending messages, priority DESC, created ASC, id ASC; unless
  // peek, each returned delivery is marked delivered.
  absl::StatusOr<PendingPage> ListPending(const PendingQuery& query);
  // Pushes every pending message of `agent_id` on its stream, in pending
  // order (called right after a presence stream attaches). Returns how many
  // were pushed. With `created_up_to_ms` (the attach time, read after the
  // stream was registered), messages created later are left out: a publish
  // that late saw the stream attached and pushed its message itself, so
  // pushing it here would only deliver it twice.
  int PushPending(const std::string& agent_id,
                  std::optional<int64_t> created_up_to_ms = std::nullopt);
  // Hands the role's backlog to its new holder (the activator's
  // on_role_active): adds the holder as a recipient of each pending role
  // message, durably and in pending order, and returns how many, with the
  // pushes of them in that order (fenced by `active`'s epoch) for the caller
  // to run once it may push on the holder's stream.
  BacklogHandover HandOverBacklog(const RoleRecord& active);
  // HandOverBacklog, then its pushes at once. Returns how many.
  int64_t OnRoleActive(const RoleRecord& active);
  // Whether role-addressed messages wait for `wire`'s holder (backlog that
  // is not expired); false when the store cannot tell.
  bool HasBacklog(const std::string& wire);
  absl::StatusOr<DeadLetterPage> ListDeadLetters(const DeadLetterQuery& query);
  // REQUEST_INVALID (trace_id), PAGE_TOKEN_INVALID.
  // Only messages visible in `scope` (InScope), applied before paging.
  absl::StatusOr<TracePage> ListTrace(const std::string& trace_id,
                                      int page_size,
                                      const std::string& page_token,
                                      const ProjectScope& scope = {});
  // Puts dead letter `message_id` back in the queue (message.proto
  // RedriveDeadLetter): for the recipients that had not acknowledged it or,
  // for a role message, also the role's live holder, else as the role's
  // backlog with an EnsureRole; fenced by its dead_letter status inside the
  // store's write. Pushes it to the recipients attached here. Only messages
  // visible in `scope` (PROJECT_SCOPE_MISMATCH). Reasons:
  // MESSAGE_ID_INVALID, MESSAGE_NOT_FOUND, PROJECT_SCOPE_MISMATCH,
  // MESSAGE_NOT_DEAD_LETTER, ROLE_SCOPE_CLOSED. Blocks on writes.
  // `by` names who asked (the principal), for its MessageRedriven event.
  absl::StatusOr<RedriveOutcome> RedriveDeadLetter(
      const std::string& message_id, const ProjectScope& scope = {},
      const std::string& by = "");
  // Publishes a REQUEST, then waits until `wait` (0 .. 30 s, else
  // REQUEST_INVALID) after the call, the request's write included, for the
  // first RESPONSE with its correlation id.
  absl::StatusOr<AskResult> Ask(PublishInput input, absl::Duration wait);
  // The expiry sweep (§6.6 B0): dead-letters expired messages and sends one
  // handoff.dead_letter notice per claimed request or handoff. Returns how
  // many messages it claimed.
  absl::StatusOr<int> SweepExpired();
  // After a lead scope was closed (the activator's on_scope_closed): one
  // handoff.dead_letter notice per dead-lettered request or handoff, to its
  // sender, as the expiry sweep sends them (reason ROLE_SCOPE_CLOSED), and
  // a MessageDeadLettered event for each message.
  void OnScopeClosed(const storage::ScopeCloseResult& closed);
  // Runs the sweep when due.
  void Tick();
  // Where the messaging tells what changed (registry/fleet_events.h):
  // MessagesChanged after a publish, a backlog handover, a delivery, an ack
  // or a re-drive committed; MessageDeadLettered for each message the sweep
  // or a scope's closing dead-letters; MessageRedriven after a re-drive's
  // pushes ran; MessagesUnpushed with a write's recipients that no stream of
  // this hub took. Published on the thread that finished the write (often a
  // store completion thread). Must outlive the messaging. REQUIRES: set
  // before any write; default: none.
  void SetEvents(const FleetEvents* events) { events_ = events; }
  // AckAsync's requests and the writes that carried them (metrics).
  const AckCoalescer& acks() const { return acks_; }
  // Ends every waiting Ask now (as if its wait ran out) and every later one
  // at once; refuses later acknowledgements (UNAVAILABLE /
  // HUB_SHUTTING_DOWN) and returns once the ones being written are
  // answered. For hub shutdown.
  void Shutdown();

  // ---- several hubs over one store (docs/design/multi-hub.md, "Routing")
  // Pushes messages published through another hub to the streams of their
  // recipients here: the delivery attempts of those whose agents have a
  // stream here are recorded first, in one write
  // (MessageStore::MarkDeliveredManyIfUnacked), then each row that write marked
  // is pushed: one the agent acknowledged since it was read is not. How many
  // were pushed; the rest stay pending (no stream here, or the push failed)
  // or are settled.
  int64_t PushRoutedMany(
      const std::vector<storage::UndeliveredMessage>& waiting);
  // Runs `hook` in each blocking Publish() (and each role publish that waits
  // for a holder), after the publish looked for holders and attached
  // streams and before its write: lets a test put an attach or a role change
  // in that gap. REQUIRES: set before any publish.
  void SetBeforePublishWriteForTesting(std::function<void()> hook) {
    before_write_for_testing_ = std::move(hook);
  }

 private:
  struct Waiter {
    std::optional<MessageRecord> response;
  };
  struct Address {
    std::vector<std::string> recipients;
    std::optional<ResolvedRoleKey> role;
    std::optional<RoleRecord> holder_role;  // an active holder
    std::string default_topic;
    // A role address: the role's hand-over count (Handovers) read before
    // the role itself. A different count after the write means an
    // activation handed over the backlog meanwhile, maybe without this
    // message.
    uint64_t handovers_seen = 0;
  };

  // A validated publish, ready for its write.
  struct Prepared {
    int64_t now_ms = 0;
    MessageRecord message;
    std::vector<std::string> recipients;  // sorted, unique
    std::vector<std::string> deliver_to;  // the attached ones, same order
    Address address;
  };

  absl::StatusOr<Prepared> Prepare(const PublishInput& input);
  // Validates an Ack; returns its ids de-duplicated, in request order.
  absl::StatusOr<std::vector<std::string>> CheckAck(
      const std::string& agent_id, const std::vector<std::string>& message_ids);
  bool NeedsEnsure(const Prepared& p) const;
  // A role message an activation may have missed: hands it to the role's
  // live holder if there is one now and it is not a recipient yet.
  void HandOverIfActive(const MessageRecord& m);
  // How many backlog hand-overs (OnRoleActive) have started for `wire`.
  uint64_t Handovers(const std::string& wire);
  absl::StatusOr<PublishResult> PublishPrepared(Prepared p);
  // After the write: pushes, wakes askers, starts the ensure if needed.
  // Pushes that write run on `blocking` (inline when it is empty: the
  // caller is not a store thread).
  absl::StatusOr<PublishResult> Published(
      Prepared p, absl::StatusOr<std::vector<InboxRecord>> delivered,
      const BlockingExecutor& blocking = nullptr);
  // Pushes the message to recipients whose stream attached between the
  // publish's look and its write (see the .cc).
  void PushToLateAttachers(const Prepared& p, const BlockingExecutor& blocking);
  absl::StatusOr<MessageRecord> Validate(const PublishInput& input,
                                         int64_t now_ms);
  absl::StatusOr<Address> Resolve(const PublishInput& input,
                                  const std::string& payload_json,
                                  int64_t now_ms);
  absl::StatusOr<std::vector<std::string>> TopicSubscribers(
      const std::string& topic);
  const FleetEvents* events_ = nullptr;
  std::optional<RoleRecord> LiveHolder(const std::string& wire, int64_t now_ms);
  // The project of agent `agent_id` (nullopt: no such agent, or it has
  // none), remembered in `cache` for one query.
  absl::StatusOr<std::optional<std::string>> AgentProject(
      const std::string& agent_id,
      std::map<std::string, std::optional<std::string>>* cache);
  // Whether a message is visible in `scope`: its sender, its addressed agent
  // or its role belongs to one of the scope's projects.
  absl::StatusOr<bool> InScope(
      const MessageRecord& m, const ProjectScope& scope,
      std::map<std::string, std::optional<std::string>>* cache);
  absl::Status CheckAgent(const std::string& agent_id,
                          std::optional<int64_t> generation);
  enum class PushOutcome {
    kPushed,
    // Acknowledged by the agent (or settled) since the caller read it:
    // nothing was marked and nothing pushed.
    kSettled,
    // No stream here, the mark failed or the stream refused it: the row
    // stays pending for a later push.
    kNotPushed,
  };
  // Marks the message delivered to `agent_id` if it is attached and the row
  // is still unacknowledged (MessageStore::MarkDeliveredIfUnacked), then pushes
  // what the mark returned.
  PushOutcome Push(const MessageRecord& message, const std::string& agent_id,
                   const std::optional<RoleRecord>& role);
  void WakeAskers(const MessageRecord& response);
  void SendDeadLetterNotice(const MessageRecord& expired,
                            const storage::ExpiryTransition& transition);

  storage::MessageStore* const store_;
  // AckAsync's writes; declared after store_, which it writes to.
  AckCoalescer acks_;
  PresenceRegistry* const presence_;
  RoleRegistry* const roles_;
  Activator* const activator_;
  UuidV7Generator* const ids_;
  const Clock* const clock_;
  const MessagingConfig config_;
  // Hand-overs started per role wire (one entry per role ever activated
  // while this hub ran).
  absl::Mutex handover_mu_;
  absl::flat_hash_map<std::string, uint64_t> handovers_
      ABSL_GUARDED_BY(handover_mu_);
  std::function<void()> before_write_for_testing_;

  absl::Mutex ask_mu_;
  absl::CondVar ask_cv_;
  std::map<std::string, std::list<Waiter*>> waiters_ ABSL_GUARDED_BY(ask_mu_);
  bool shutting_down_ ABSL_GUARDED_BY(ask_mu_) = false;

  absl::Mutex tick_mu_;
  int64_t last_sweep_ms_ ABSL_GUARDED_BY(tick_mu_) = -1;
};

// The lower-case type words Publish accepts (system excluded).
bool IsPublishableMessageType(absl::string_view type);

}  // namespace hub

#endif  // HUB_REGISTRY_MESSAGING_H_
