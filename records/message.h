// A message as hub records it, its delivery to one recipient, its dead
// letter, and the states of a message (TRIFLUX-HUB.md §4).
#ifndef HUB_RECORDS_MESSAGE_H_
#define HUB_RECORDS_MESSAGE_H_

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "records/stored_word.h"

namespace hub {

// A message is queued until a recipient holds it, delivered until every
// recipient acknowledged it, then acked; dead_letter when it expired or
// was refused (docs/design/messages.md). Stored as triflux's words,
// messages.status: "queued", "delivered", "acked", "dead_letter".
enum class MessageStatus { kQueued, kDelivered, kAcked, kDeadLetter };

// Every value and the word it is stored as.
inline constexpr StoredWord<MessageStatus> kMessageStatusWords[] = {
    {MessageStatus::kQueued, "queued"},
    {MessageStatus::kDelivered, "delivered"},
    {MessageStatus::kAcked, "acked"},
    {MessageStatus::kDeadLetter, "dead_letter"},
};

inline absl::string_view MessageStatusName(MessageStatus status) {
  return WordIn(kMessageStatusWords, status);
}
// The value stored as `word` (exact), or nullopt.
inline std::optional<MessageStatus> ParseMessageStatus(absl::string_view word) {
  return ValueIn<MessageStatus>(kMessageStatusWords, word);
}
// Streams the stored word (logs, test failure messages).
std::ostream& operator<<(std::ostream& out, MessageStatus value);

// Whether a message in `status` still waits for a recipient's ack: queued or
// delivered, neither acked nor dead.
inline bool IsPending(MessageStatus status) {
  return status == MessageStatus::kQueued ||
         status == MessageStatus::kDelivered;
}

struct MessageRecord {
  std::string id;    // UUIDv7
  std::string type;  // request|response|event|handoff|human_*|system
  std::string from_agent;
  std::string to_agent;
  std::string topic;
  int64_t priority = 5;  // 1..9
  int64_t ttl_ms = 0;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;
  std::string correlation_id;
  std::string trace_id;
  std::string payload_json = "{}";
  MessageStatus status = MessageStatus::kQueued;
  std::optional<std::string> role_key_wire;
};

// One recipient's delivery of a message (message_inbox).
struct InboxRecord {
  std::string message_id;
  std::string agent_id;
  std::optional<int64_t> delivered_at_ms;
  std::optional<int64_t> acked_at_ms;
  int64_t attempts = 0;
};

struct DeadLetterRecord {
  std::string message_id;
  std::string reason;
  int64_t failed_at_ms = 0;
  std::optional<std::string> last_error;
};

}  // namespace hub

#endif  // HUB_RECORDS_MESSAGE_H_
