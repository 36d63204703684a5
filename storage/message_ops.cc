#include "storage/message_ops.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub::storage {
namespace {

// LIMIT_EXCEEDED for the first of `agents` whose inbox holds `limit`
// pending messages, read under the counts' locks.
absl::Status CheckInboxLimit(MessageRows& rows,
                             const std::vector<std::string>& agents,
                             int64_t limit) {
  if (agents.empty()) return absl::OkStatus();
  absl::StatusOr<absl::flat_hash_map<std::string, int64_t>> counts =
      rows.PendingCounts(agents);
  if (!counts.ok()) return counts.status();
  for (const std::string& agent : agents) {
    auto it = counts->find(agent);
    if (it != counts->end() && it->second >= limit) {
      return InboxFullError(agent, limit);
    }
  }
  return absl::OkStatus();
}

absl::Status MessageExists(absl::string_view id) {
  return ReasonError(absl::StatusCode::kAlreadyExists, "MESSAGE_EXISTS",
                     absl::StrCat("message '", id, "' already exists"));
}

// Why an insert that wrote nothing wrote nothing: a full inbox when the
// insert decided the limit (the counts are read again, under their locks),
// else the taken id. A recipient without a count row is created by that
// read, and the insert runs again without the limit.
absl::Status ExplainNoInsert(MessageRows& rows, const Publish& p) {
  if (!p.Limited() || !rows.InsertLimits()) {
    return MessageExists(p.message.id);
  }
  if (absl::Status s =
          CheckInboxLimit(rows, p.recipients, p.max_pending_per_inbox);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<bool> written = rows.Insert(p, /*within_limit=*/false);
  if (!written.ok()) return written.status();
  if (!*written) return MessageExists(p.message.id);
  return absl::OkStatus();
}

}  // namespace

absl::Status MessageNotFound(absl::string_view id) {
  return NotFoundError("MESSAGE_NOT_FOUND",
                       absl::StrCat("message '", id, "' not found"));
}

absl::Status DeliveryNotFound(absl::string_view message_id,
                              absl::string_view agent_id) {
  return NotFoundError("DELIVERY_NOT_FOUND",
                       absl::StrCat("message '", message_id,
                                    "' has no recipient '", agent_id, "'"));
}

absl::StatusOr<std::vector<InboxRecord>> InsertMessageWith(MessageRows& rows,
                                                           const Publish& p) {
  const MessageRecord& m = p.message;
  // Inside the write, under the scope's lock (shared; a close takes it
  // exclusively): a lead scope closed after the publish was checked still
  // refuses its message, and a close that is running waits for this insert
  // and then dead-letters it.
  if (m.role_key_wire.has_value()) {
    if (absl::Status s = GuardOpenScope(rows.Roles(), *m.role_key_wire);
        !s.ok()) {
      return s;
    }
  }
  const bool limited = p.Limited();
  // A push target that is no recipient is refused after the refusals that
  // come before it.
  if (!p.deliver_to.empty()) {
    const absl::flat_hash_set<absl::string_view> recipients(
        p.recipients.begin(), p.recipients.end());
    for (const std::string& agent : p.deliver_to) {
      if (recipients.contains(agent)) continue;
      if (limited) {
        if (absl::Status s =
                CheckInboxLimit(rows, p.recipients, p.max_pending_per_inbox);
            !s.ok()) {
          return s;
        }
      }
      absl::StatusOr<bool> taken = rows.Exists(m.id);
      if (!taken.ok()) return taken.status();
      if (*taken) return MessageExists(m.id);
      return DeliveryNotFound(m.id, agent);
    }
  }
  if (limited && !rows.InsertLimits()) {
    if (absl::Status s =
            CheckInboxLimit(rows, p.recipients, p.max_pending_per_inbox);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<bool> written =
      rows.Insert(p, /*within_limit=*/limited && rows.InsertLimits());
  if (!written.ok()) return written.status();
  if (!*written) {
    if (absl::Status s = ExplainNoInsert(rows, p); !s.ok()) return s;
  }
  std::vector<InboxRecord> delivered;
  absl::flat_hash_set<absl::string_view> now_delivered(p.deliver_to.begin(),
                                                       p.deliver_to.end());
  for (const std::string& agent : p.recipients) {
    // erase(): a recipient named twice is reported once.
    if (now_delivered.erase(agent) == 0) continue;
    InboxRecord row;
    row.message_id = m.id;
    row.agent_id = agent;
    row.delivered_at_ms = p.now_ms;
    row.attempts = 1;
    delivered.push_back(std::move(row));
  }
  return delivered;
}

absl::StatusOr<bool> AddRecipientWith(MessageRows& rows,
                                      absl::string_view message_id,
                                      absl::string_view agent_id) {
  absl::StatusOr<bool> added = rows.AddRecipient(message_id, agent_id);
  if (!added.ok() || *added) return added;
  absl::StatusOr<bool> exists = rows.Exists(message_id);
  if (!exists.ok()) return exists.status();
  if (!*exists) return MessageNotFound(message_id);
  return false;  // a recipient already
}

absl::StatusOr<std::optional<InboxRecord>> MarkDeliveredWith(
    MessageRows& rows, absl::string_view message_id, absl::string_view agent_id,
    int64_t now_ms) {
  // The fence: a row acknowledged, or a message settled, since the caller
  // read it changes nothing (MessageStore::MarkDeliveredIfUnacked).
  absl::StatusOr<std::optional<InboxRecord>> row =
      rows.MarkInboxDelivered(message_id, agent_id, now_ms);
  if (!row.ok()) return row.status();
  if (!row->has_value()) {
    absl::StatusOr<bool> found = rows.HasInboxRow(message_id, agent_id);
    if (!found.ok()) return found.status();
    if (!*found) return DeliveryNotFound(message_id, agent_id);
    return row;
  }
  if (absl::Status s = rows.MarkMessagesDelivered({std::string(message_id)});
      !s.ok()) {
    return s;
  }
  return row;
}

absl::StatusOr<absl::flat_hash_set<std::string>> AckWith(
    MessageRows& rows, absl::string_view agent_id,
    const std::vector<std::string>& ids, int64_t now_ms) {
  absl::StatusOr<std::vector<std::string>> acked =
      rows.AckInboxRows(agent_id, ids, now_ms);
  if (!acked.ok()) return acked.status();
  if (!acked->empty()) {
    if (absl::Status s = rows.AckMessagesDone(*acked); !s.ok()) return s;
  }
  return absl::flat_hash_set<std::string>(
      std::make_move_iterator(acked->begin()),
      std::make_move_iterator(acked->end()));
}

absl::StatusOr<std::vector<bool>> AckMessagesWith(
    MessageRows& rows, absl::string_view agent_id,
    const std::vector<std::string>& message_ids, int64_t now_ms,
    std::optional<int64_t> presence_generation) {
  // The acknowledging owner is checked in the acks' own transaction (its
  // row held until it ends): a re-registration committed before them makes
  // the whole write stale, one committed after waits for it.
  absl::StatusOr<std::optional<int64_t>> generation =
      rows.PresenceGeneration(agent_id);
  if (!generation.ok()) return generation.status();
  if (!generation->has_value()) {
    return ToStatus(PresenceOutcome::kNotFound, agent_id);
  }
  if (absl::Status stale =
          CheckAckGeneration(**generation, presence_generation);
      !stale.ok()) {
    return stale;
  }
  absl::StatusOr<absl::flat_hash_set<std::string>> acked =
      AckWith(rows, agent_id, message_ids, now_ms);
  if (!acked.ok()) return acked.status();
  // Nothing to ack: acknowledged before by this agent counts as
  // acknowledged.
  std::vector<std::string> rest;
  for (const std::string& id : message_ids) {
    if (!acked->contains(id)) rest.push_back(id);
  }
  if (!rest.empty()) {
    absl::StatusOr<std::vector<std::string>> before =
        rows.AckedBefore(agent_id, rest);
    if (!before.ok()) return before.status();
    for (std::string& id : *before) acked->insert(std::move(id));
  }
  std::vector<bool> out;
  out.reserve(message_ids.size());
  for (const std::string& id : message_ids) out.push_back(acked->contains(id));
  return out;
}

absl::StatusOr<std::vector<ExpiryTransition>> SweepWith(MessageRows& rows,
                                                        int64_t now_ms) {
  absl::StatusOr<std::vector<ExpiryTransition>> claimed =
      rows.SweepExpired(now_ms);
  if (!claimed.ok()) return claimed.status();
  std::vector<std::string> ids;
  ids.reserve(claimed->size());
  for (ExpiryTransition& t : *claimed) {
    ids.push_back(t.message_id);
    t.reason = "ttl_expired";
    t.failed_at_ms = now_ms;
  }
  if (absl::Status s = rows.Settled(ids); !s.ok()) return s;
  return claimed;
}

absl::StatusOr<bool> DeadLetterWith(MessageRows& rows,
                                    absl::string_view message_id,
                                    absl::string_view reason, int64_t now_ms,
                                    const std::optional<std::string>& error) {
  // The status fence waits for, then re-checks, a concurrent writer's row.
  absl::StatusOr<std::optional<bool>> moved =
      rows.DeadLetterIfPending(message_id, reason, now_ms, error);
  if (!moved.ok()) return moved.status();
  if (!moved->has_value()) {
    absl::StatusOr<bool> exists = rows.Exists(message_id);
    if (!exists.ok()) return exists.status();
    if (!*exists) return MessageNotFound(message_id);
    return false;  // terminal already
  }
  if (absl::Status s = rows.Settled({std::string(message_id)}); !s.ok()) {
    return s;
  }
  return true;
}

absl::StatusOr<RedriveResult> RedriveWith(MessageRows& rows,
                                          const DeadLetterRedrive& r) {
  absl::StatusOr<std::optional<MessageRecord>> m = rows.Load(r.message_id);
  if (!m.ok()) return m.status();
  if (!m->has_value()) return MessageNotFound(r.message_id);
  // Under the scope's lock (shared), as a role message's insert: a close
  // committed before is seen here, one running waits for this write and
  // then dead-letters the message again.
  if (const std::optional<std::string>& wire = (*m)->role_key_wire;
      wire.has_value()) {
    if (absl::Status s = GuardOpenScope(rows.Roles(), *wire); !s.ok()) {
      return s;
    }
  }
  // As a publish's, before any write: the inboxes it would make pending
  // again (or add) are counted under their locks, in agent order.
  if (r.max_pending_per_inbox > 0 &&
      (*m)->status == MessageStatus::kDeadLetter) {
    absl::StatusOr<std::vector<std::string>> would =
        rows.RedriveRecipients(r.message_id, r.add_recipient);
    if (!would.ok()) return would.status();
    std::sort(would->begin(), would->end());
    if (absl::Status s = CheckInboxLimit(rows, *would, r.max_pending_per_inbox);
        !s.ok()) {
      return s;
    }
  }
  // The fence: a concurrent re-drive waits for this row's lock, re-reads it
  // queued and changes nothing.
  absl::StatusOr<std::optional<MessageRecord>> after =
      rows.Requeue(r.message_id, r.now_ms);
  if (!after.ok()) return after.status();
  if (!after->has_value()) {
    absl::StatusOr<std::optional<MessageRecord>> now = rows.Load(r.message_id);
    if (!now.ok()) return now.status();
    if (!now->has_value()) return MessageNotFound(r.message_id);
    return NotDeadLetterError(r.message_id, (*now)->status);
  }
  RedriveResult result;
  result.message = std::move(**after);
  absl::StatusOr<std::vector<std::string>> again =
      rows.ClearDelivered(r.message_id);
  if (!again.ok()) return again.status();
  result.recipients = std::move(*again);
  if (r.add_recipient.has_value()) {
    absl::StatusOr<bool> added =
        rows.InsertInboxRow(r.message_id, *r.add_recipient);
    if (!added.ok()) return added.status();
    if (*added) result.recipients.push_back(*r.add_recipient);
  }
  if (absl::Status s = rows.Repending(r.message_id, result.recipients);
      !s.ok()) {
    return s;
  }
  std::sort(result.recipients.begin(), result.recipients.end());
  absl::StatusOr<std::optional<DeadLetterRecord>> removed =
      rows.DeleteDeadLetter(r.message_id);
  if (!removed.ok()) return removed.status();
  result.dead_letter = std::move(*removed);
  return result;
}

absl::StatusOr<MessageRecord> GetMessageWith(MessageRows& rows,
                                             absl::string_view id) {
  absl::StatusOr<std::optional<MessageRecord>> m = rows.Load(id);
  if (!m.ok()) return m.status();
  if (!m->has_value()) return MessageNotFound(id);
  return std::move(**m);
}

absl::StatusOr<DeadLetterRecord> GetDeadLetterWith(
    MessageRows& rows, absl::string_view message_id) {
  absl::StatusOr<std::optional<DeadLetterRecord>> row =
      rows.LoadDeadLetter(message_id);
  if (!row.ok()) return row.status();
  if (!row->has_value()) {
    return NotFoundError(
        "DEAD_LETTER_NOT_FOUND",
        absl::StrCat("no dead letter for message '", message_id, "'"));
  }
  return std::move(**row);
}

}  // namespace hub::storage
