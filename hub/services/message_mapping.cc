#include "hub/services/message_mapping.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "hub/services/proto_time.h"
#include "hub/services/role_mapping.h"
#include "hub/services/struct_json.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub {
namespace {

constexpr absl::string_view kTypePrefix = "MESSAGE_TYPE_";

void FillRoleKey(const std::string& wire, hub::v1::RoleKey* key) {
  absl::StatusOr<RoleKey> decoded = DecodeRoleKey(wire);
  if (!decoded.ok()) return;
  key->set_project_id(decoded->project_id);
  key->set_kind(decoded->kind == RoleKind::kCto ? hub::v1::ROLE_KIND_CTO
                                                : hub::v1::ROLE_KIND_LEAD);
  key->set_scope_id(decoded->scope_id);
}

absl::StatusOr<std::string> PayloadJson(bool has_payload,
                                        const google::protobuf::Struct& s) {
  if (!has_payload) return std::string();
  absl::StatusOr<std::string> json = StructToJson(s);
  if (!json.ok()) {
    return WithMetadata(
        InvalidArgumentError(
            "REQUEST_INVALID",
            absl::StrCat("payload is not representable as JSON: ",
                         json.status().message())),
        "field", "payload");
  }
  return std::move(*json);
}

}  // namespace

std::string MessageTypeWord(int type) {
  if (type == hub::v1::MESSAGE_TYPE_UNSPECIFIED) return "";
  if (!hub::v1::MessageType_IsValid(type)) return absl::StrCat("#", type);
  const std::string& name =
      hub::v1::MessageType_Name(static_cast<hub::v1::MessageType>(type));
  return absl::AsciiStrToLower(name.substr(kTypePrefix.size()));
}

hub::v1::MessageType MessageTypeFromWord(const std::string& word) {
  hub::v1::MessageType type = hub::v1::MESSAGE_TYPE_UNSPECIFIED;
  hub::v1::MessageType_Parse(
      absl::StrCat(kTypePrefix, absl::AsciiStrToUpper(word)), &type);
  return type;
}

hub::v1::MessageStatus MessageStatusToProto(MessageStatus status) {
  switch (status) {
    case MessageStatus::kQueued:
      return hub::v1::MESSAGE_STATUS_QUEUED;
    case MessageStatus::kDelivered:
      return hub::v1::MESSAGE_STATUS_DELIVERED;
    case MessageStatus::kAcked:
      return hub::v1::MESSAGE_STATUS_ACKED;
    case MessageStatus::kDeadLetter:
      return hub::v1::MESSAGE_STATUS_DEAD_LETTER;
  }
  return hub::v1::MESSAGE_STATUS_UNSPECIFIED;  // Unreachable for a valid value.
}

namespace {

// The fields Publish and Ask share; `type` is the message type word.
template <typename Request>
absl::StatusOr<PublishInput> CommonPublishInput(const Request& request,
                                                std::string type) {
  PublishInput in;
  in.from_agent_id = request.from_agent_id();
  in.to = request.to();
  in.topic = request.topic();
  in.type = std::move(type);
  in.priority = request.priority();
  if (request.has_ttl()) {
    if (absl::Status s = CheckProtoDuration(request.ttl(), "ttl"); !s.ok()) {
      return s;
    }
    in.ttl = FromProtoDuration(request.ttl());
  }
  absl::StatusOr<std::string> payload =
      PayloadJson(request.has_payload(), request.payload());
  if (!payload.ok()) return payload.status();
  in.payload_json = std::move(*payload);
  in.correlation_id = request.correlation_id();
  in.trace_id = request.trace_id();
  in.project_id = request.project_id();
  return in;
}

}  // namespace

absl::StatusOr<PublishInput> ToPublishInput(
    const hub::v1::PublishRequest& request) {
  return CommonPublishInput(request, MessageTypeWord(request.type()));
}

absl::StatusOr<PublishInput> ToPublishInput(
    const hub::v1::AskRequest& request) {
  return CommonPublishInput(request, "request");
}

hub::v1::Message ToMessageProto(const MessageRecord& m) {
  hub::v1::Message out;
  out.set_message_id(m.id);
  out.set_type(MessageTypeFromWord(m.type));
  out.set_from_agent_id(m.from_agent);
  out.set_to(m.to_agent);
  out.set_topic(m.topic);
  out.set_priority(static_cast<int32_t>(m.priority));
  *out.mutable_ttl() = ToProtoDuration(absl::Milliseconds(m.ttl_ms));
  *out.mutable_created_at() =
      ToProtoTimestamp(absl::FromUnixMillis(m.created_at_ms));
  *out.mutable_expires_at() =
      ToProtoTimestamp(absl::FromUnixMillis(m.expires_at_ms));
  out.set_correlation_id(m.correlation_id);
  out.set_trace_id(m.trace_id);
  absl::StatusOr<google::protobuf::Value> payload = JsonToValue(m.payload_json);
  if (payload.ok() && payload->has_struct_value()) {
    out.mutable_payload()->Swap(payload->mutable_struct_value());
  } else {
    // A payload triflux stored that is not an object reads back wrapped:
    // {"value": <the JSON value>}, or the raw text when it is not JSON.
    google::protobuf::Value& value =
        (*out.mutable_payload()->mutable_fields())["value"];
    if (payload.ok()) {
      value = std::move(*payload);
    } else {
      value.set_string_value(m.payload_json);
    }
  }
  out.set_status(MessageStatusToProto(m.status));
  if (m.role_key_wire.has_value()) {
    out.set_role_key_wire(*m.role_key_wire);
    FillRoleKey(*m.role_key_wire, out.mutable_role_key());
  }
  return out;
}

hub::v1::MessageDelivery ToDeliveryProto(const MessageDelivery& d) {
  hub::v1::MessageDelivery out;
  *out.mutable_message() = ToMessageProto(d.message);
  out.set_recipient_agent_id(d.inbox.agent_id);
  if (d.inbox.acked_at_ms.has_value()) {
    out.set_state(hub::v1::DELIVERY_STATE_ACKED);
  } else if (d.message.status == MessageStatus::kDeadLetter) {
    out.set_state(hub::v1::DELIVERY_STATE_DEAD_LETTER);
  } else if (d.inbox.delivered_at_ms.has_value()) {
    out.set_state(hub::v1::DELIVERY_STATE_DELIVERED);
  } else {
    out.set_state(hub::v1::DELIVERY_STATE_PENDING);
  }
  if (d.inbox.delivered_at_ms.has_value()) {
    *out.mutable_delivered_at() =
        ToProtoTimestamp(absl::FromUnixMillis(*d.inbox.delivered_at_ms));
  }
  if (d.inbox.acked_at_ms.has_value()) {
    *out.mutable_acked_at() =
        ToProtoTimestamp(absl::FromUnixMillis(*d.inbox.acked_at_ms));
  }
  out.set_attempts(d.inbox.attempts);
  if (d.role_epoch.has_value()) out.set_role_epoch(*d.role_epoch);
  if (d.activation_id.has_value()) out.set_activation_id(*d.activation_id);
  return out;
}

hub::v1::DeadLetter ToDeadLetterProto(const DeadLetterView& d) {
  hub::v1::DeadLetter out;
  out.set_message_id(d.dead_letter.message_id);
  out.set_reason(d.dead_letter.reason);
  *out.mutable_failed_at() =
      ToProtoTimestamp(absl::FromUnixMillis(d.dead_letter.failed_at_ms));
  if (d.dead_letter.last_error.has_value()) {
    out.set_last_error(*d.dead_letter.last_error);
  }
  if (d.message.has_value())
    *out.mutable_message() = ToMessageProto(*d.message);
  return out;
}

void FillPublishResponse(const PublishResult& result,
                         hub::v1::PublishResponse* out) {
  const MessageRecord& m = result.message;
  out->set_message_id(m.id);
  out->set_recipient_count(result.recipient_count);
  *out->mutable_created_at() =
      ToProtoTimestamp(absl::FromUnixMillis(m.created_at_ms));
  *out->mutable_expires_at() =
      ToProtoTimestamp(absl::FromUnixMillis(m.expires_at_ms));
  out->set_type(MessageTypeFromWord(m.type));
  out->set_correlation_id(m.correlation_id);
  out->set_trace_id(m.trace_id);
  if (result.role.has_value()) {
    out->set_role_key_wire(result.role->wire);
    FillRoleKey(result.role->wire, out->mutable_role_key());
  }
  if (result.activation.has_value()) {
    *out->mutable_activation() = ToReceiptProto(*result.activation);
  }
}

void FillRedriveResponse(const RedriveOutcome& outcome,
                         hub::v1::RedriveDeadLetterResponse* out) {
  *out->mutable_message() = ToMessageProto(outcome.message);
  if (outcome.dead_letter.has_value()) {
    DeadLetterView view;
    view.dead_letter = *outcome.dead_letter;
    view.message = outcome.message;
    *out->mutable_dead_letter() = ToDeadLetterProto(view);
  }
  for (const std::string& agent : outcome.recipients) {
    out->add_recipient_agent_ids(agent);
  }
  for (const std::string& agent : outcome.pushed) {
    out->add_pushed_agent_ids(agent);
  }
  if (outcome.activation.has_value()) {
    *out->mutable_activation() = ToReceiptProto(*outcome.activation);
  }
}

hub::v1::MessageAckResult ToAckResultProto(const AckResult& result) {
  hub::v1::MessageAckResult out;
  for (const std::string& id : result.acked) out.add_acked_message_ids(id);
  for (const std::string& id : result.ignored) out.add_ignored_message_ids(id);
  return out;
}

}  // namespace hub
