// PostgresStore: messages. IN PROGRESS: placeholders to be replaced.
#include <utility>

#include "status/status.h"
#include "storage/pg/pg_rows.h"
#include "storage/pg/pg_store.h"

namespace hub::storage::pg {
namespace {

absl::Status NotYet() {
  return ReasonError(absl::StatusCode::kUnimplemented, "NOT_YET",
                     "not implemented yet");
}

}  // namespace

absl::Status PostgresStore::InsertMessage(
    const MessageRecord& message, const std::vector<std::string>& recipients) {
  return NotYet();
}

absl::StatusOr<std::vector<InboxRecord>> PostgresStore::InsertMessageDelivering(
    const MessageRecord& message, const std::vector<std::string>& recipients,
    const std::vector<std::string>& deliver_to, int64_t now_ms,
    int64_t max_pending_per_inbox) {
  return NotYet();
}

void PostgresStore::InsertMessageDeliveringAsync(
    const MessageRecord& message, const std::vector<std::string>& recipients,
    const std::vector<std::string>& deliver_to, int64_t now_ms,
    int64_t max_pending_per_inbox, Callback<std::vector<InboxRecord>> done) {
  std::move(done)(NotYet());
}

absl::StatusOr<bool> PostgresStore::AddRecipient(absl::string_view message_id,
                                                 absl::string_view agent_id) {
  return NotYet();
}

absl::StatusOr<InboxRecord> PostgresStore::MarkDelivered(
    absl::string_view message_id, absl::string_view agent_id, int64_t now_ms) {
  return NotYet();
}

absl::StatusOr<bool> PostgresStore::AckMessage(absl::string_view message_id,
                                               absl::string_view agent_id,
                                               int64_t now_ms) {
  return NotYet();
}

absl::StatusOr<std::vector<bool>> PostgresStore::AckMessages(
    absl::string_view agent_id, const std::vector<std::string>& message_ids,
    int64_t now_ms, std::optional<int64_t> presence_generation) {
  return NotYet();
}

void PostgresStore::AckMessagesAsync(
    absl::string_view agent_id, const std::vector<std::string>& message_ids,
    int64_t now_ms, std::optional<int64_t> presence_generation,
    Callback<std::vector<bool>> done) {
  std::move(done)(NotYet());
}

absl::StatusOr<MessageRecord> PostgresStore::GetMessage(absl::string_view id) {
  return NotYet();
}

absl::StatusOr<std::vector<InboxRecord>> PostgresStore::ListInbox(
    absl::string_view message_id) {
  return NotYet();
}

absl::StatusOr<std::vector<MessageRecord>> PostgresStore::ListPendingForAgent(
    absl::string_view agent_id, int64_t now_ms, int limit) {
  return NotYet();
}

absl::StatusOr<std::vector<MessageRecord>> PostgresStore::ListPendingPage(
    const PendingPageQuery& query) {
  return NotYet();
}

absl::StatusOr<int64_t> PostgresStore::CountPendingForAgent(
    absl::string_view agent_id, int64_t now_ms, int64_t limit) {
  return NotYet();
}

absl::StatusOr<std::vector<MessageRecord>>
PostgresStore::ListPendingRoleMessages(absl::string_view wire, int64_t now_ms) {
  return NotYet();
}

absl::StatusOr<std::vector<ExpiryTransition>>
PostgresStore::SweepExpiredMessages(int64_t now_ms) {
  return NotYet();
}

absl::StatusOr<bool> PostgresStore::DeadLetterMessage(
    absl::string_view message_id, absl::string_view reason, int64_t now_ms,
    std::optional<std::string> last_error) {
  return NotYet();
}

absl::StatusOr<DeadLetterRecord> PostgresStore::GetDeadLetter(
    absl::string_view message_id) {
  return NotYet();
}

absl::StatusOr<std::vector<MessageRecord>> PostgresStore::ListTraceMessages(
    const TracePageQuery& query) {
  return NotYet();
}

absl::StatusOr<std::vector<DeadLetterRow>> PostgresStore::ListDeadLetters(
    const DeadLetterPageQuery& query) {
  return NotYet();
}

}  // namespace hub::storage::pg
