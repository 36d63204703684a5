// Messaging: re-driving a dead letter (message.proto RedriveDeadLetter).
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "registry/messaging.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub {

absl::StatusOr<RedriveOutcome> Messaging::RedriveDeadLetter(
    const std::string& message_id, const ProjectScope& scope,
    const std::string& by) {
  if (message_id.empty() || message_id.size() > 64) {
    return WithMetadata(
        InvalidArgumentError("MESSAGE_ID_INVALID",
                             "message_id must be 1..64 characters"),
        "field", "message_id");
  }
  absl::StatusOr<MessageRecord> m = store_->GetMessage(message_id);
  if (!m.ok()) return m.status();
  {
    std::map<std::string, std::optional<std::string>> cache;
    absl::StatusOr<bool> visible = InScope(*m, scope, &cache);
    if (!visible.ok()) return visible.status();
    if (!*visible) {
      return WithMetadata(
          ReasonError(absl::StatusCode::kPermissionDenied,
                      "PROJECT_SCOPE_MISMATCH",
                      absl::StrCat("message '", message_id,
                                   "' is outside the caller's projects")),
          "message_id", message_id);
    }
  }
  RedriveOutcome outcome;
  storage::DeadLetterRedrive redrive;
  redrive.message_id = message_id;
  redrive.now_ms = UnixMillis(clock_->Now());
  // Refused as a publish to a full inbox is (docs/design/limits.md).
  redrive.max_pending_per_inbox = config_.max_pending_per_inbox;
  std::optional<RoleRecord> holder;
  uint64_t handovers_seen = 0;
  if (m->role_key_wire.has_value()) {
    RoleKeyRef ref;
    ref.wire = *m->role_key_wire;
    if (absl::StatusOr<ResolvedRoleKey> key = ResolveRoleKey(ref); key.ok()) {
      outcome.role = *key;
    }
    // As a publish: counted before the role is read, so that an activation
    // handing the backlog over meanwhile is noticed after the write.
    handovers_seen = Handovers(*m->role_key_wire);
    holder = LiveHolder(*m->role_key_wire, redrive.now_ms);
    // As a publish: never to its own author (it stays backlog).
    if (holder.has_value() && *holder->holder_agent_id != m->from_agent)
      redrive.add_recipient = *holder->holder_agent_id;
  }
  absl::StatusOr<storage::RedriveResult> done =
      store_->RedriveDeadLetter(redrive);
  if (!done.ok()) return done.status();
  outcome.message = std::move(done->message);
  outcome.dead_letter = std::move(done->dead_letter);
  outcome.recipients = std::move(done->recipients);
  const MessageRecord& requeued = outcome.message;
  if (events_ != nullptr) {
    events_->Publish(MessagesChanged{
        {requeued.id}, outcome.recipients, requeued.role_key_wire});
  }
  std::vector<std::string> elsewhere;
  for (const std::string& agent : outcome.recipients) {
    if (Push(requeued, agent, holder) == PushOutcome::kPushed) {
      outcome.pushed.push_back(agent);
    } else if (!presence_->StreamAttached(agent)) {
      elsewhere.push_back(agent);
    }
  }
  // Their streams, if any, are on other hubs: those push them.
  if (!elsewhere.empty()) PublishTo(events_, MessagesUnpushed{elsewhere});
  if (!outcome.pushed.empty())
    outcome.message.status = MessageStatus::kDelivered;
  if (requeued.role_key_wire.has_value()) {
    if (!holder.has_value() && activator_ != nullptr) {
      EnsureRequest ensure;
      ensure.role.wire = *requeued.role_key_wire;
      ensure.trigger = "publish_no_holder";
      ensure.cause_id = requeued.id;
      absl::StatusOr<EnsureReceipt> receipt = activator_->Ensure(ensure);
      if (receipt.ok()) outcome.activation = *receipt;
    }
    if (Handovers(*requeued.role_key_wire) != handovers_seen) {
      HandOverIfActive(requeued);
    }
  }
  if (events_ != nullptr) {
    MessageRedriven redriven;
    redriven.message = outcome.message;
    if (outcome.dead_letter.has_value()) {
      redriven.dead_letter_reason = outcome.dead_letter->reason;
    }
    redriven.recipients = outcome.recipients;
    redriven.pushed = outcome.pushed;
    redriven.by = by;
    events_->Publish(redriven);
  }
  return outcome;
}

}  // namespace hub
