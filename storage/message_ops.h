// MessageStore's operations, written once for both engines. Each engine
// implements MessageRows, the statements of one transaction over messages,
// message_inbox and dead_letters in its own SQL, and keeps its recipients'
// pending inbox counts its own way (SQLite in memory, PostgreSQL as rows the
// writer keeps); the operations below decide the rest the same way on
// SQLite and PostgreSQL: what a write reads first, which refusal comes
// first, which outcome a fenced UPDATE that changed no row means, and in
// which order a dead letter, a re-drive and an ack write.
//
// Every delivery, ack, expiry and re-drive is fenced in its UPDATE's WHERE
// clause (the message's status, the inbox row's ack state) and decided by
// the rows it changed, never by the read before it: on PostgreSQL another
// hub may write the same rows.
#ifndef HUB_STORAGE_MESSAGE_OPS_H_
#define HUB_STORAGE_MESSAGE_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/message_store.h"
#include "storage/role_ops.h"

namespace hub::storage {

// One message to insert with its inbox rows (MessageStore::
// InsertMessageDelivering): `deliver_to` are the recipients about to be
// pushed to, whose rows start delivered at `now_ms`.
struct Publish {
  MessageRecord message;
  std::vector<std::string> recipients;
  std::vector<std::string> deliver_to;
  int64_t now_ms = 0;
  int64_t max_pending_per_inbox = 0;

  // The message starts out delivered: it is queued and pushed at once.
  bool Delivering() const {
    return !deliver_to.empty() && message.status == MessageStatus::kQueued;
  }
  // It counts against its recipients' inbox limit.
  bool Limited() const {
    return max_pending_per_inbox > 0 && IsPending(message.status) &&
           !recipients.empty();
  }
};

class MessageRows {
 public:
  virtual ~MessageRows() = default;

  // The role statements of the same transaction: a role message's scope.
  virtual RoleRows& Roles() = 0;

  // ---- messages
  virtual absl::StatusOr<std::optional<MessageRecord>> Load(
      absl::string_view id) = 0;
  virtual absl::StatusOr<bool> Exists(absl::string_view id) = 0;
  // Inserts `p.message` (delivered when p.Delivering()) and one inbox row
  // per distinct recipient, those of `p.deliver_to` delivered at p.now_ms
  // with one attempt; when the message is pending its rows count in their
  // agents' inboxes. With `within_limit` (engines whose InsertLimits()),
  // only when every recipient has a count and none holds
  // p.max_pending_per_inbox pending, decided under the counts' locks.
  // False: nothing was written (the id is taken, or the limit refused).
  virtual absl::StatusOr<bool> Insert(const Publish& p, bool within_limit) = 0;
  // Whether Insert decides the inbox limit itself; else PendingCounts is
  // read before it.
  virtual bool InsertLimits() const = 0;
  // The pending inbox count of each of `agents`, held until the write ends
  // (PostgreSQL: locked, in agent order, created when missing), so that
  // concurrent writes do not overshoot the limit.
  virtual absl::StatusOr<absl::flat_hash_map<std::string, int64_t>>
  PendingCounts(const std::vector<std::string>& agents) = 0;
  // queued -> delivered for those of `ids` still queued.
  virtual absl::Status MarkMessagesDelivered(
      const std::vector<std::string>& ids) = 0;
  // Of `ids`, the messages left pending with no unacknowledged row become
  // acked (the status fence in the WHERE).
  virtual absl::Status AckMessagesDone(const std::vector<std::string>& ids) = 0;
  // Moves the message to dead_letter WHERE it is pending, and inserts its
  // dead letter unless one exists. nullopt: the fence was lost (terminal,
  // or no such message); else whether the dead letter is this call's.
  virtual absl::StatusOr<std::optional<bool>> DeadLetterIfPending(
      absl::string_view id, absl::string_view reason, int64_t now_ms,
      const std::optional<std::string>& last_error) = 0;
  // Claims every pending message expired at `now_ms` (each fenced by the
  // status it had), moves it to dead_letter and inserts its dead letter
  // ("ttl_expired") first-writer-wins: message_id, previous_status and
  // dlq_inserted of each, in expiry order.
  virtual absl::StatusOr<std::vector<ExpiryTransition>> SweepExpired(
      int64_t now_ms) = 0;
  // After messages `ids` left pending: their unacknowledged rows stop
  // counting in their agents' inboxes (engines that do not count it in
  // the statements that moved them).
  virtual absl::Status Settled(const std::vector<std::string>& ids) = 0;
  // dead_letter -> queued WHERE the status is still dead_letter, expiry
  // now + ttl: the message as written, or nullopt when the fence was lost.
  virtual absl::StatusOr<std::optional<MessageRecord>> Requeue(
      absl::string_view id, int64_t now_ms) = 0;

  // ---- message_inbox
  // Inserts `agent_id`'s row of message `message_id` if the message exists
  // and the agent has none, counted in its inbox when the message is
  // pending. Whether it inserted one.
  virtual absl::StatusOr<bool> AddRecipient(absl::string_view message_id,
                                            absl::string_view agent_id) = 0;
  // Inserts a row (not counted: Repending counts a re-drive's rows).
  // Whether it inserted one.
  virtual absl::StatusOr<bool> InsertInboxRow(absl::string_view message_id,
                                              absl::string_view agent_id) = 0;
  virtual absl::StatusOr<bool> HasInboxRow(absl::string_view message_id,
                                           absl::string_view agent_id) = 0;
  // A delivery attempt (attempts + 1, the first delivered_at kept) WHERE
  // the row is unacknowledged and its message pending: the row written,
  // or nullopt.
  virtual absl::StatusOr<std::optional<InboxRecord>> MarkInboxDelivered(
      absl::string_view message_id, absl::string_view agent_id,
      int64_t now_ms) = 0;
  // Acks `agent_id`'s delivered, unacknowledged rows of the pending
  // messages among `ids` (fenced in the WHERE); the ids it acked, whose
  // rows stop counting in the agent's inbox.
  virtual absl::StatusOr<std::vector<std::string>> AckInboxRows(
      absl::string_view agent_id, const std::vector<std::string>& ids,
      int64_t now_ms) = 0;
  // Of `ids`, those whose row of `agent_id` was acknowledged before.
  virtual absl::StatusOr<std::vector<std::string>> AckedBefore(
      absl::string_view agent_id, const std::vector<std::string>& ids) = 0;
  // The agents a re-drive of `message_id` makes pending: its
  // unacknowledged rows' and `add`'s unless it has a row.
  virtual absl::StatusOr<std::vector<std::string>> RedriveRecipients(
      absl::string_view message_id, const std::optional<std::string>& add) = 0;
  // Clears delivered_at of the message's unacknowledged rows: their agents.
  virtual absl::StatusOr<std::vector<std::string>> ClearDelivered(
      absl::string_view message_id) = 0;
  // After a re-drive made `message_id` pending again: its unacknowledged
  // rows (of `agents`) count in their inboxes again.
  virtual absl::Status Repending(absl::string_view message_id,
                                 const std::vector<std::string>& agents) = 0;
  virtual absl::StatusOr<std::vector<InboxRecord>> Inbox(
      absl::string_view message_id) = 0;

  // ---- dead_letters
  virtual absl::StatusOr<std::optional<DeadLetterRecord>> LoadDeadLetter(
      absl::string_view message_id) = 0;
  virtual absl::StatusOr<std::optional<DeadLetterRecord>> DeleteDeadLetter(
      absl::string_view message_id) = 0;

  // ---- agents: the acknowledging owner's generation, held until the
  // write ends (PostgreSQL: FOR SHARE); nullopt without the agent.
  virtual absl::StatusOr<std::optional<int64_t>> PresenceGeneration(
      absl::string_view agent_id) = 0;

  // ---- reads (MessageStore's listings, as its header describes them)
  virtual absl::StatusOr<std::vector<MessageRecord>> PendingForAgent(
      absl::string_view agent_id, int64_t now_ms, int limit) = 0;
  virtual absl::StatusOr<std::vector<MessageRecord>> PendingPage(
      const PendingPageQuery& query) = 0;
  virtual absl::StatusOr<int64_t> CountPending(absl::string_view agent_id,
                                               int64_t now_ms,
                                               int64_t limit) = 0;
  virtual absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
  CountPendingByAgent(int64_t now_ms) = 0;
  virtual absl::StatusOr<std::vector<MessageRecord>> RoleBacklog(
      absl::string_view wire, int64_t now_ms) = 0;
  virtual absl::StatusOr<std::vector<MessageRecord>> TracePage(
      const TracePageQuery& query) = 0;
  virtual absl::StatusOr<std::vector<DeadLetterRow>> DeadLetterPage(
      const DeadLetterPageQuery& query) = 0;

  // The write fails after statements that changed counts the engine keeps
  // outside the database, and its transaction undoes them: drop them.
  virtual void Undone() = 0;
};

absl::Status MessageNotFound(absl::string_view id);
absl::Status DeliveryNotFound(absl::string_view message_id,
                              absl::string_view agent_id);

// MessageStore::InsertMessageDelivering. Refusals come before any row is
// written, in this order: closed scope (under the scope's lock), full
// inbox, taken id, a push target that is no recipient. The delivered rows
// in `recipients` order, a recipient named twice once.
absl::StatusOr<std::vector<InboxRecord>> InsertMessageWith(MessageRows& rows,
                                                           const Publish& p);
// MessageStore::AddRecipient: the insert first; the message is looked up
// only when it inserted nothing.
absl::StatusOr<bool> AddRecipientWith(MessageRows& rows,
                                      absl::string_view message_id,
                                      absl::string_view agent_id);
// MessageStore::MarkDeliveredIfUnacked: the fenced mark, then the message
// queued -> delivered; a lost fence is DELIVERY_NOT_FOUND only without a row.
absl::StatusOr<std::optional<InboxRecord>> MarkDeliveredWith(
    MessageRows& rows, absl::string_view message_id, absl::string_view agent_id,
    int64_t now_ms);
// The acks of `ids` by `agent_id`: the rows, then their messages whose
// every row is acked. The ids it acked now.
absl::StatusOr<absl::flat_hash_set<std::string>> AckWith(
    MessageRows& rows, absl::string_view agent_id,
    const std::vector<std::string>& ids, int64_t now_ms);
// MessageStore::AckMessages: the owner's generation, then AckWith, then
// the ids acked before looked up.
absl::StatusOr<std::vector<bool>> AckMessagesWith(
    MessageRows& rows, absl::string_view agent_id,
    const std::vector<std::string>& message_ids, int64_t now_ms,
    std::optional<int64_t> presence_generation);
// MessageStore::SweepExpiredMessages and DeadLetterMessage.
absl::StatusOr<std::vector<ExpiryTransition>> SweepWith(MessageRows& rows,
                                                        int64_t now_ms);
absl::StatusOr<bool> DeadLetterWith(MessageRows& rows,
                                    absl::string_view message_id,
                                    absl::string_view reason, int64_t now_ms,
                                    const std::optional<std::string>& error);
// MessageStore::RedriveDeadLetter: the message read, its scope guarded, the
// inboxes it would fill counted, then the fenced requeue, its rows pending
// again, the added recipient, the dead letter deleted.
absl::StatusOr<RedriveResult> RedriveWith(MessageRows& rows,
                                          const DeadLetterRedrive& r);
// MessageStore::GetMessage and GetDeadLetter.
absl::StatusOr<MessageRecord> GetMessageWith(MessageRows& rows,
                                             absl::string_view id);
absl::StatusOr<DeadLetterRecord> GetDeadLetterWith(
    MessageRows& rows, absl::string_view message_id);

}  // namespace hub::storage

#endif  // HUB_STORAGE_MESSAGE_OPS_H_
