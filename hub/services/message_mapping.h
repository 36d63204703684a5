// Mapping between hub.v1 message types and the messaging domain. Payloads
// travel as google.protobuf.Struct on the wire and as JSON object text in
// the domain and the store. Pure functions; the domain assigns every reason
// code except the few a type change needs (an unknown enum number).
#ifndef HUB_HUB_SERVICES_MESSAGE_MAPPING_H_
#define HUB_HUB_SERVICES_MESSAGE_MAPPING_H_

#include <string>

#include "absl/status/statusor.h"
#include "hub/v1/message.pb.h"
#include "registry/message_delivery.h"
#include "registry/messaging.h"
#include "storage/store.h"

namespace hub {

// "request" for MESSAGE_TYPE_REQUEST ...; "" for UNSPECIFIED; for SYSTEM or
// an unknown number a word Publish refuses (MESSAGE_TYPE_INVALID).
std::string MessageTypeWord(int type);
hub::v1::MessageType MessageTypeFromWord(const std::string& word);
hub::v1::MessageStatus MessageStatusToProto(MessageStatus status);

// REQUEST_INVALID if the payload is not representable as JSON.
absl::StatusOr<PublishInput> ToPublishInput(
    const hub::v1::PublishRequest& request);
absl::StatusOr<PublishInput> ToPublishInput(const hub::v1::AskRequest& request);

hub::v1::Message ToMessageProto(const MessageRecord& m);
hub::v1::MessageDelivery ToDeliveryProto(const MessageDelivery& d);
hub::v1::DeadLetter ToDeadLetterProto(const DeadLetterView& d);
void FillPublishResponse(const PublishResult& result,
                         hub::v1::PublishResponse* out);
void FillRedriveResponse(const RedriveOutcome& outcome,
                         hub::v1::RedriveDeadLetterResponse* out);
hub::v1::MessageAckResult ToAckResultProto(const AckResult& result);

}  // namespace hub

#endif  // HUB_HUB_SERVICES_MESSAGE_MAPPING_H_
