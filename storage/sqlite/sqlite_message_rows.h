// SQLite's statements for MessageStore (storage/message_ops.h): one
// transaction's reads and writes of messages, message_inbox and
// dead_letters. SQLite's one writer holds the whole database for a
// transaction, so these take no lock of their own; the pending inbox
// counts are SqliteStore's, in memory (SqliteStore::PendingInboxCounts),
// adjusted by every write here once its statements succeeded.
#ifndef HUB_STORAGE_SQLITE_SQLITE_MESSAGE_ROWS_H_
#define HUB_STORAGE_SQLITE_SQLITE_MESSAGE_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/message_ops.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/sqlite_role_rows.h"
#include "storage/sqlite/sqlite_store.h"

namespace hub::storage {

class SqliteMessageRows final : public MessageRows {
 public:
  // `store` keeps the pending inbox counts the writes change.
  SqliteMessageRows(Connection& conn, SqliteStore& store)
      : conn_(conn), store_(store), roles_(conn, store) {}

  RoleRows& Roles() override { return roles_; }

  absl::StatusOr<std::optional<MessageRecord>> Load(
      absl::string_view id) override;
  absl::StatusOr<bool> Exists(absl::string_view id) override;
  // The limit is checked before, from the counts in memory.
  absl::StatusOr<bool> Insert(const Publish& p, bool within_limit) override;
  bool InsertLimits() const override { return false; }
  absl::StatusOr<absl::flat_hash_map<std::string, int64_t>> PendingCounts(
      const std::vector<std::string>& agents) override;
  absl::Status MarkMessagesDelivered(
      const std::vector<std::string>& ids) override;
  absl::Status AckMessagesDone(const std::vector<std::string>& ids) override;
  absl::StatusOr<std::optional<bool>> DeadLetterIfPending(
      absl::string_view id, absl::string_view reason, int64_t now_ms,
      const std::optional<std::string>& last_error) override;
  absl::StatusOr<std::vector<ExpiryTransition>> SweepExpired(
      int64_t now_ms) override;
  // DeadLetterIfStatus adjusted the counts already.
  absl::Status Settled(const std::vector<std::string>& ids) override {
    (void)ids;
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<MessageRecord>> Requeue(absl::string_view id,
                                                       int64_t now_ms) override;

  absl::StatusOr<bool> AddRecipient(absl::string_view message_id,
                                    absl::string_view agent_id) override;
  absl::StatusOr<bool> InsertInboxRow(absl::string_view message_id,
                                      absl::string_view agent_id) override;
  absl::StatusOr<bool> HasInboxRow(absl::string_view message_id,
                                   absl::string_view agent_id) override;
  absl::StatusOr<std::optional<InboxRecord>> MarkInboxDelivered(
      absl::string_view message_id, absl::string_view agent_id,
      int64_t now_ms) override;
  absl::StatusOr<std::vector<std::string>> AckInboxRows(
      absl::string_view agent_id, const std::vector<std::string>& ids,
      int64_t now_ms) override;
  absl::StatusOr<std::vector<std::string>> AckedBefore(
      absl::string_view agent_id, const std::vector<std::string>& ids) override;
  absl::StatusOr<std::vector<std::string>> RedriveRecipients(
      absl::string_view message_id,
      const std::optional<std::string>& add) override;
  absl::StatusOr<std::vector<std::string>> ClearDelivered(
      absl::string_view message_id) override;
  absl::Status Repending(absl::string_view message_id,
                         const std::vector<std::string>& agents) override;
  absl::StatusOr<std::vector<InboxRecord>> Inbox(
      absl::string_view message_id) override;

  absl::StatusOr<std::optional<DeadLetterRecord>> LoadDeadLetter(
      absl::string_view message_id) override;
  absl::StatusOr<std::optional<DeadLetterRecord>> DeleteDeadLetter(
      absl::string_view message_id) override;

  absl::StatusOr<std::optional<int64_t>> PresenceGeneration(
      absl::string_view agent_id) override;

  absl::StatusOr<std::vector<MessageRecord>> PendingForAgent(
      absl::string_view agent_id, int64_t now_ms, int limit) override;
  absl::StatusOr<std::vector<MessageRecord>> PendingPage(
      const PendingPageQuery& q) override;
  absl::StatusOr<int64_t> CountPending(absl::string_view agent_id,
                                       int64_t now_ms, int64_t limit) override;
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
  CountPendingByAgent(int64_t now_ms) override;
  absl::StatusOr<std::vector<MessageRecord>> RoleBacklog(
      absl::string_view wire, int64_t now_ms) override;
  absl::StatusOr<std::vector<MessageRecord>> TracePage(
      const TracePageQuery& q) override;
  absl::StatusOr<std::vector<DeadLetterRow>> DeadLetterPage(
      const DeadLetterPageQuery& q) override;

  void Undone() override;

  // Moves one message from `from_status` to dead_letter and inserts its
  // dead letter row if absent (first writer wins); its unacknowledged rows
  // stop counting. Both or neither: the operation's savepoint undoes the
  // status change if the insert fails (and Undone drops the counts).
  // nullopt when the status fence was lost, else whether the dead letter
  // was inserted. Shared with SqliteRoleRows (a closed scope's backlog).
  absl::StatusOr<std::optional<bool>> DeadLetterIfStatus(
      absl::string_view id, std::optional<MessageStatus> from_status,
      absl::string_view reason, int64_t now_ms,
      const std::optional<std::string>& last_error);

 private:
  // A recipient's row; `delivered_at_ms` set: handed to its stream already
  // (one attempt). Whether it inserted one.
  absl::StatusOr<bool> InsertRow(absl::string_view message_id,
                                 absl::string_view agent_id,
                                 std::optional<int64_t> delivered_at_ms);

  Connection& conn_;
  SqliteStore& store_;
  SqliteRoleRows roles_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_SQLITE_SQLITE_MESSAGE_ROWS_H_
