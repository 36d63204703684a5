// PostgreSQL's statements for MessageStore (storage/message_ops.h): one
// transaction's reads and writes of messages, message_inbox, dead_letters
// and the inbox counts the writer keeps (hub_inbox_pending and
// hub_inbox_settled, storage/pg/schema.sql). Other hubs write the same rows
// at any moment (READ COMMITTED), so nothing here is cached across
// operations: the inbox limit reads a count the database keeps, under its
// row lock; an ack locks its message row; the sweep skips rows another
// transaction holds. See docs/design/postgres.md, "Messages".
#ifndef HUB_STORAGE_PG_PG_MESSAGE_ROWS_H_
#define HUB_STORAGE_PG_PG_MESSAGE_ROWS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/message_ops.h"
#include "storage/pg/pg_conn.h"
#include "storage/pg/pg_role_rows.h"

namespace hub::storage::pg {

class PostgresStore;

class PgMessageRows final : public MessageRows {
 public:
  explicit PgMessageRows(Connection& conn) : conn_(conn), roles_(conn) {}
  // The form storage/message_store_calls.h constructs; the store adds
  // nothing.
  PgMessageRows(Connection& conn, PostgresStore& store) : PgMessageRows(conn) {
    (void)store;
  }

  // The statement Insert runs first for `p`, when a publish starts with it
  // (no role scope to lock and check first, some recipients, every push
  // target among them, so nothing is refused before it): PostgresStore
  // pipelines it with its group's neighbours. nullopt otherwise.
  static std::optional<Statement> PublishFirst(const Publish& p);
  // PublishFirst's statement and its answer, already run: the next Insert
  // takes the answer instead of running the statement.
  void Answered(absl::StatusOr<Result> answer) {
    first_answer_ = std::move(answer);
  }

  RoleRows& Roles() override { return roles_; }

  absl::StatusOr<std::optional<MessageRecord>> Load(
      absl::string_view id) override;
  // A statement that returns no row when the message does not exist, so an
  // error after it leaves the group nothing to replay.
  absl::StatusOr<bool> Exists(absl::string_view id) override;
  // One statement (one round trip), the counts' lock and the limit in it.
  absl::StatusOr<bool> Insert(const Publish& p, bool within_limit) override;
  bool InsertLimits() const override { return true; }
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
  // SettleRowsOf (pg_message_sql.h), under the messages' row locks.
  absl::Status Settled(const std::vector<std::string>& ids) override;
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
  // MarkInboxDelivered of each (message id, agent id) in one statement:
  // the rows it marked.
  absl::StatusOr<std::vector<InboxRecord>> MarkInboxDeliveredMany(
      const std::vector<MessageStore::Delivery>& deliveries, int64_t now_ms);
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
  // CountRowsOf (pg_message_sql.h): every unacked row of the message.
  absl::Status Repending(absl::string_view message_id,
                         const std::vector<std::string>& agents) override;
  absl::StatusOr<std::vector<InboxRecord>> Inbox(
      absl::string_view message_id) override;

  absl::StatusOr<std::optional<DeadLetterRecord>> LoadDeadLetter(
      absl::string_view message_id) override;
  absl::StatusOr<std::optional<DeadLetterRecord>> DeleteDeadLetter(
      absl::string_view message_id) override;

  // FOR SHARE: a re-registration by another hub waits for the acks, or the
  // acks see it and refuse.
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
  // MessageStore::ListUndelivered.
  absl::StatusOr<std::vector<UndeliveredMessage>> Undelivered(
      const std::vector<std::string>& agent_ids, int64_t now_ms, int64_t limit);

  // The counts are rows: the transaction undoes them.
  void Undone() override {}

 private:
  Connection& conn_;
  PgRoleRows roles_;
  std::optional<absl::StatusOr<Result>> first_answer_;
};

}  // namespace hub::storage::pg

#endif  // HUB_STORAGE_PG_PG_MESSAGE_ROWS_H_
