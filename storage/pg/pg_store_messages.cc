// PostgresStore's MessageStore: the shared MessageCalls over PgMessageRows,
// with PostgreSQL's additions:
// - a publish that starts with its one statement (PgMessageRows::
//   PublishFirst) goes ahead with its group's neighbours in one round trip
//   (storage/group_commit_writer.h);
// - several deliveries are marked in one write of two statements;
// - the messages committed by another hub that no push reached yet are
//   listed for the hub that holds their recipients' streams.
// See docs/design/postgres.md, "Messages".
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/message_ops.h"
#include "storage/message_store_calls.h"
#include "storage/pg/pg_message_rows.h"
#include "storage/pg/pg_store.h"

namespace hub::storage::pg {

class PgMessageStore final
    : public MessageCalls<PostgresStore, PgMessageRows, /*kOrderKeys=*/true> {
 public:
  using MessageCalls::MessageCalls;

  void InsertMessageDeliveringAsync(
      const MessageRecord& message, const std::vector<std::string>& recipients,
      const std::vector<std::string>& deliver_to, int64_t now_ms,
      int64_t max_pending_per_inbox,
      Callback<std::vector<InboxRecord>> done) override {
    Publish p{message, recipients, deliver_to, now_ms, max_pending_per_inbox};
    std::optional<Statement> first = PgMessageRows::PublishFirst(p);
    if (!first.has_value()) {
      MessageCalls::InsertMessageDeliveringAsync(
          message, recipients, deliver_to, now_ms, max_pending_per_inbox,
          std::move(done));
      return;
    }
    std::string order_key = InboxOrderKey(recipients);
    engine().WriteAsyncFirst<std::vector<InboxRecord>>(
        std::move(*first),
        [p = std::move(p)](const Statement&, absl::StatusOr<Result> answer,
                           Connection& conn) {
          PgMessageRows rows(conn);
          rows.Answered(std::move(answer));
          return InsertMessageWith(rows, p);
        },
        std::move(done), std::move(order_key));
  }

  absl::StatusOr<std::vector<InboxRecord>> MarkDeliveredManyIfUnacked(
      const std::vector<Delivery>& deliveries, int64_t now_ms) override {
    if (deliveries.empty()) return std::vector<InboxRecord>();
    return Write<std::vector<InboxRecord>>(
        [&](PgMessageRows& rows) -> absl::StatusOr<std::vector<InboxRecord>> {
          absl::StatusOr<std::vector<InboxRecord>> marked =
              rows.MarkInboxDeliveredMany(deliveries, now_ms);
          if (!marked.ok() || marked->empty()) return marked;
          std::vector<std::string> ids;
          ids.reserve(marked->size());
          for (const InboxRecord& row : *marked) ids.push_back(row.message_id);
          if (absl::Status s = rows.MarkMessagesDelivered(ids); !s.ok()) {
            return s;
          }
          return marked;
        });
  }

  absl::StatusOr<std::vector<UndeliveredMessage>> ListUndelivered(
      const std::vector<std::string>& agent_ids, int64_t now_ms,
      int64_t limit) override {
    if (agent_ids.empty()) return std::vector<UndeliveredMessage>();
    return Read<std::vector<UndeliveredMessage>>([&](PgMessageRows& rows) {
      return rows.Undelivered(agent_ids, now_ms, limit);
    });
  }
};

std::unique_ptr<MessageStore> PostgresStore::NewMessageStore() {
  return std::make_unique<PgMessageStore>(*this);
}

}  // namespace hub::storage::pg
