// MessageStore: messages, their inbox rows (one per recipient) and dead
// letters. Deliveries and acknowledgements are fenced in their UPDATE's
// WHERE clause by the status they move from, so a late delivery never
// follows an ack and an expiry is claimed once. The contracts every store
// method keeps are in storage/store.h.
#ifndef HUB_STORAGE_MESSAGE_STORE_H_
#define HUB_STORAGE_MESSAGE_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "records/message.h"
#include "storage/store_types.h"

namespace hub::storage {

// One message claimed by SweepExpiredMessages (or dead-lettered by
// CloseLeadScope).
struct ExpiryTransition {
  std::string message_id;
  MessageStatus previous_status = MessageStatus::kQueued;  // or delivered
  std::string reason;  // "ttl_expired" (or "ROLE_SCOPE_CLOSED")
  int64_t failed_at_ms = 0;
  bool dlq_inserted = false;  // false: an earlier dead letter row was kept
};

// Keyset pages of message listings. Each `after` is the listing's key of the
// last row already returned (rows strictly after it come back); limit 0 =
// every row.

// ListPendingPage: the agent's unacked queued|delivered messages with
// expires > now, priority DESC, created ASC, id ASC.
struct PendingPageQuery {
  std::string agent_id;
  int64_t now_ms = 0;
  std::optional<std::string> topic;
  struct Key {
    int64_t priority = 0;
    int64_t created_at_ms = 0;
    std::string id;
  };
  std::optional<Key> after;
  int64_t limit = 0;
};

// ListTraceMessages: one trace's messages, any status, created ASC, id ASC.
struct TracePageQuery {
  std::string trace_id;
  struct Key {
    int64_t created_at_ms = 0;
    std::string id;
  };
  std::optional<Key> after;
  int64_t limit = 0;
};

// ListDeadLetters: failed_at DESC, message_id ASC.
struct DeadLetterPageQuery {
  std::optional<std::string> reason;
  // Only dead letters whose message exists and was sent by this agent.
  std::optional<std::string> from_agent;
  struct Key {
    int64_t failed_at_ms = 0;
    std::string message_id;
  };
  std::optional<Key> after;
  int64_t limit = 0;
};

// A dead letter and its message, when the message row still exists.
struct DeadLetterRow {
  DeadLetterRecord dead_letter;
  std::optional<MessageRecord> message;
};

// ---- re-driving a dead letter (MessageStore::RedriveDeadLetter) ---------

struct DeadLetterRedrive {
  std::string message_id;
  int64_t now_ms = 0;
  // An agent to make a recipient in the same write unless it is one already
  // (a role message's live holder).
  std::optional<std::string> add_recipient;
  // When > 0, as a publish's: a recipient it would make pending again (or
  // add) that already has this many unacknowledged messages refuses the
  // re-drive before anything is written (InboxFullError).
  int64_t max_pending_per_inbox = 0;
};

struct RedriveResult {
  // The message after the re-drive: status queued, expires_at now + its ttl.
  MessageRecord message;
  // The dead letter the re-drive removed (nullopt if it had none).
  std::optional<DeadLetterRecord> dead_letter;
  // Every recipient that had not acknowledged the message (add_recipient
  // included), by agent_id: each row is pending again, delivered_at cleared.
  std::vector<std::string> recipients;
};

// FAILED_PRECONDITION / MESSAGE_NOT_DEAD_LETTER (metadata message_id,
// status): the message is not (or no longer) a dead letter.
absl::Status NotDeadLetterError(absl::string_view message_id,
                                MessageStatus status);

// OK, or FAILED_PRECONDITION / STALE_PRESENCE_OWNER when an acknowledging
// caller's `claimed` generation is not the agent's `current` one.
absl::Status CheckAckGeneration(int64_t current,
                                std::optional<int64_t> claimed);

// RESOURCE_EXHAUSTED / LIMIT_EXCEEDED: `agent_id` already has `limit`
// pending messages (limit max_pending_per_inbox, metadata agent_id).
absl::Status InboxFullError(absl::string_view agent_id, int64_t limit);

// A message waiting for its first delivery to one of its recipients
// (MessageStore::ListUndelivered).
struct UndeliveredMessage {
  std::string agent_id;
  MessageRecord message;
};

class MessageStore {
 public:
  virtual ~MessageStore() = default;

  // Inserts the message and one inbox row per distinct recipient, atomically.
  // AlreadyExists (MESSAGE_EXISTS) if the id is taken.
  virtual absl::Status InsertMessage(
      const MessageRecord& message,
      const std::vector<std::string>& recipients) = 0;
  // InsertMessage and, in the same transaction, a first delivery attempt
  // (MarkDeliveredIfUnacked) for each of `deliver_to`, a subset of
  // `recipients`: the ones the caller is about to push the message to. Returns
  // their inbox rows in `deliver_to` order. One sync for the whole publish.
  //
  // When `max_pending_per_inbox` > 0, a recipient that already has that many
  // pending messages (unacknowledged, not yet expired by the sweep) refuses
  // the whole message before anything is written: RESOURCE_EXHAUSTED
  // LIMIT_EXCEEDED, limit max_pending_per_inbox, metadata agent_id. It is
  // decided inside the write: concurrent publishes do not overshoot.
  virtual absl::StatusOr<std::vector<InboxRecord>> InsertMessageDelivering(
      const MessageRecord& message, const std::vector<std::string>& recipients,
      const std::vector<std::string>& deliver_to, int64_t now_ms,
      int64_t max_pending_per_inbox) = 0;
  // The above without parking the caller (as AgentStore::RegisterAgentAsync).
  virtual void InsertMessageDeliveringAsync(
      const MessageRecord& message, const std::vector<std::string>& recipients,
      const std::vector<std::string>& deliver_to, int64_t now_ms,
      int64_t max_pending_per_inbox,
      Callback<std::vector<InboxRecord>> done) = 0;
  // Adds an inbox row if absent (role backlog handed to a new holder).
  // True when it added one, false when the agent was a recipient already.
  virtual absl::StatusOr<bool> AddRecipient(absl::string_view message_id,
                                            absl::string_view agent_id) = 0;
  // Records a delivery attempt (attempts +1, first delivered_at kept) and
  // moves the message queued -> delivered, fenced in the UPDATE's WHERE:
  // only a row still unacknowledged, of a message still queued or delivered,
  // changes. Callers read what to push before they mark it, and another
  // path may deliver it and the agent acknowledge it in between; the fence
  // makes that late mark change nothing, so nothing is pushed after an ack.
  // Returns the row as marked (what to push), or nullopt when the fence
  // held (acknowledged, or the message is terminal). NotFound
  // (DELIVERY_NOT_FOUND) when the agent is not a recipient.
  virtual absl::StatusOr<std::optional<InboxRecord>> MarkDeliveredIfUnacked(
      absl::string_view message_id, absl::string_view agent_id,
      int64_t now_ms) = 0;
  // MarkDeliveredIfUnacked for each (message id, agent id) of `deliveries`,
  // in one write: the rows it marked, in any order (a pair whose row is gone
  // or was acknowledged, or whose message is terminal, is left out).
  // Default: one MarkDeliveredIfUnacked per pair.
  struct Delivery {
    std::string message_id;
    std::string agent_id;
  };
  virtual absl::StatusOr<std::vector<InboxRecord>> MarkDeliveredManyIfUnacked(
      const std::vector<Delivery>& deliveries, int64_t now_ms);
  // Acks a delivered inbox row; when every recipient has acked, the message
  // becomes acked. Returns false if there was nothing to ack (not delivered
  // to that agent, already acked, or the message is terminal).
  virtual absl::StatusOr<bool> AckMessage(absl::string_view message_id,
                                          absl::string_view agent_id,
                                          int64_t now_ms) = 0;
  // AckMessage for each of `message_ids` (distinct) in one write, by the
  // agent's current owner: the agent must exist (AGENT_NOT_FOUND) and, when
  // `presence_generation` is given, still be at that generation
  // (STALE_PRESENCE_OWNER), checked in the same transaction as the acks.
  // Returns, in `message_ids` order, whether the agent's row is acknowledged
  // now: true when this call acked it or it was acked before, false when
  // there is nothing of this agent's to ack (never delivered to it, or the
  // message is terminal).
  virtual absl::StatusOr<std::vector<bool>> AckMessages(
      absl::string_view agent_id, const std::vector<std::string>& message_ids,
      int64_t now_ms, std::optional<int64_t> presence_generation) = 0;
  // The above without parking the caller (as AgentStore::RegisterAgentAsync).
  virtual void AckMessagesAsync(absl::string_view agent_id,
                                const std::vector<std::string>& message_ids,
                                int64_t now_ms,
                                std::optional<int64_t> presence_generation,
                                Callback<std::vector<bool>> done) = 0;
  // Pending messages (queued|delivered, unacked, expires > now) never
  // delivered to any of `agent_ids`: what a hub that holds their streams
  // still has to push when another hub took the publish. By agent_id, then
  // pending order; at most `limit`. A read of state, not a cursor: a row
  // that commits late is found by the next read. Stores one hub holds
  // (SQLite: every publish pushes to attached recipients itself) answer
  // UNIMPLEMENTED.
  virtual absl::StatusOr<std::vector<UndeliveredMessage>> ListUndelivered(
      const std::vector<std::string>& agent_ids, int64_t now_ms,
      int64_t limit) {
    (void)agent_ids;
    (void)now_ms;
    (void)limit;
    return absl::UnimplementedError(
        "this store has one hub: nothing is routed between hubs");
  }
  // NotFound (MESSAGE_NOT_FOUND) when absent.
  virtual absl::StatusOr<MessageRecord> GetMessage(absl::string_view id) = 0;
  virtual absl::StatusOr<std::vector<InboxRecord>> ListInbox(
      absl::string_view message_id) = 0;
  // Unacked messages for the agent, status queued|delivered, expires > now;
  // priority DESC, created ASC, id ASC.
  virtual absl::StatusOr<std::vector<MessageRecord>> ListPendingForAgent(
      absl::string_view agent_id, int64_t now_ms, int limit) = 0;
  // One keyset page of them (see PendingPageQuery).
  virtual absl::StatusOr<std::vector<MessageRecord>> ListPendingPage(
      const PendingPageQuery& query) = 0;
  // How many messages ListPendingForAgent would return, counting at most
  // `limit` (the answer is min(count, limit)).
  virtual absl::StatusOr<int64_t> CountPendingForAgent(
      absl::string_view agent_id, int64_t now_ms, int64_t limit) = 0;
  // CountPendingForAgent of every agent with a pending message, in one read
  // (no limit), by agent_id: the console's fleet view.
  virtual absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
  CountPendingByAgent(int64_t now_ms) = 0;
  // Role-addressed backlog: role_key_wire = wire, queued|delivered,
  // expires > now; priority DESC, created ASC, id ASC.
  virtual absl::StatusOr<std::vector<MessageRecord>> ListPendingRoleMessages(
      absl::string_view wire, int64_t now_ms) = 0;
  // §6.6 B0: claims every queued|delivered message with expires_at <= now
  // exactly once (fenced by its previous status) and inserts its dead letter
  // first-writer-wins, atomically per message.
  virtual absl::StatusOr<std::vector<ExpiryTransition>> SweepExpiredMessages(
      int64_t now_ms) = 0;
  // Moves a queued|delivered message to dead_letter with `reason`, atomic
  // with a first-writer-wins dead letter row. Returns false if the message
  // was already terminal. NotFound (MESSAGE_NOT_FOUND).
  virtual absl::StatusOr<bool> DeadLetterMessage(
      absl::string_view message_id, absl::string_view reason, int64_t now_ms,
      std::optional<std::string> last_error) = 0;
  // Puts a dead-lettered message back in the queue, in one write: its
  // status moves dead_letter -> queued in an UPDATE whose WHERE requires
  // dead_letter (the changed-row count checked: a second or concurrent
  // re-drive changes nothing and is FAILED_PRECONDITION /
  // MESSAGE_NOT_DEAD_LETTER), expires_at becomes now + ttl, every
  // unacknowledged inbox row is pending again (delivered_at cleared,
  // attempts kept), `add_recipient` gets a row, and the dead letter row is
  // deleted. NOT_FOUND / MESSAGE_NOT_FOUND when the message row is gone;
  // FAILED_PRECONDITION / ROLE_SCOPE_CLOSED for a message of a closed lead
  // scope (decided inside the write); RESOURCE_EXHAUSTED / LIMIT_EXCEEDED
  // (limit max_pending_per_inbox, metadata agent_id) when a recipient's
  // inbox is full (`max_pending_per_inbox`), also decided inside the write.
  virtual absl::StatusOr<RedriveResult> RedriveDeadLetter(
      const DeadLetterRedrive& redrive) = 0;
  // NotFound (DEAD_LETTER_NOT_FOUND) when absent.
  virtual absl::StatusOr<DeadLetterRecord> GetDeadLetter(
      absl::string_view message_id) = 0;
  // A trace's messages, any status: created ASC, id ASC (TracePageQuery).
  virtual absl::StatusOr<std::vector<MessageRecord>> ListTraceMessages(
      const TracePageQuery& query) = 0;
  // Dead letters with their messages: failed_at DESC, message_id ASC
  // (DeadLetterPageQuery).
  virtual absl::StatusOr<std::vector<DeadLetterRow>> ListDeadLetters(
      const DeadLetterPageQuery& query) = 0;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_MESSAGE_STORE_H_
