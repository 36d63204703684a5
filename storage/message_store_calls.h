// MessageStore over one engine, written once for SQLite and PostgreSQL:
// each method runs message_ops.h's operation in one of the engine's reads
// or writes over the engine's MessageRows. What differs between the engines
// is their statements (the Rows class, with each engine's inbox counts) and
// what PostgreSQL adds in its subclass (storage/pg/pg_store_messages.cc): a
// publish that is one statement goes ahead with its group's neighbours,
// several deliveries are marked in one write, and messages committed by
// another hub are listed for the hub that holds their recipients' streams.
#ifndef HUB_STORAGE_MESSAGE_STORE_CALLS_H_
#define HUB_STORAGE_MESSAGE_STORE_CALLS_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "storage/message_ops.h"
#include "storage/message_store.h"

namespace hub::storage {

// The writer's order key of a write whose first row locks are its
// recipients' inbox counts, taken in agent order: the smallest recipient.
// With it two hubs' groups of publishes to a and b lock a first
// (storage/group_commit_writer.h, order keys).
inline std::string InboxOrderKey(const std::vector<std::string>& recipients) {
  if (recipients.empty()) return {};
  return absl::StrCat("inbox:",
                      *std::min_element(recipients.begin(), recipients.end()));
}

// `Engine` (a friend: its Read, Write and WriteAsync are private) runs
// functions of its Connection; `Rows` is its MessageRows over one
// Connection of that engine; `kOrderKeys`: its Write takes an order key.
template <typename Engine, typename Rows, bool kOrderKeys>
class MessageCalls : public MessageStore {
 public:
  explicit MessageCalls(Engine& engine) : engine_(engine) {}

  absl::Status InsertMessage(
      const MessageRecord& message,
      const std::vector<std::string>& recipients) override {
    Publish p{message, recipients, {}, 0, 0};
    return Write<std::vector<InboxRecord>>(
               [&](Rows& rows) { return InsertMessageWith(rows, p); },
               InboxOrderKey(recipients))
        .status();
  }
  absl::StatusOr<std::vector<InboxRecord>> InsertMessageDelivering(
      const MessageRecord& message, const std::vector<std::string>& recipients,
      const std::vector<std::string>& deliver_to, int64_t now_ms,
      int64_t max_pending_per_inbox) override {
    Publish p{message, recipients, deliver_to, now_ms, max_pending_per_inbox};
    return Write<std::vector<InboxRecord>>(
        [&](Rows& rows) { return InsertMessageWith(rows, p); },
        InboxOrderKey(recipients));
  }
  void InsertMessageDeliveringAsync(
      const MessageRecord& message, const std::vector<std::string>& recipients,
      const std::vector<std::string>& deliver_to, int64_t now_ms,
      int64_t max_pending_per_inbox,
      Callback<std::vector<InboxRecord>> done) override {
    WriteAsync<std::vector<InboxRecord>>(
        [p = Publish{message, recipients, deliver_to, now_ms,
                     max_pending_per_inbox}](Rows& rows) {
          return InsertMessageWith(rows, p);
        },
        std::move(done), InboxOrderKey(recipients));
  }
  absl::StatusOr<bool> AddRecipient(absl::string_view message_id,
                                    absl::string_view agent_id) override {
    return Write<bool>(
        [&](Rows& rows) {
          return AddRecipientWith(rows, message_id, agent_id);
        },
        InboxOrderKey({std::string(agent_id)}));
  }
  absl::StatusOr<std::optional<InboxRecord>> MarkDeliveredIfUnacked(
      absl::string_view message_id, absl::string_view agent_id,
      int64_t now_ms) override {
    return Write<std::optional<InboxRecord>>([&](Rows& rows) {
      return MarkDeliveredWith(rows, message_id, agent_id, now_ms);
    });
  }
  absl::StatusOr<bool> AckMessage(absl::string_view message_id,
                                  absl::string_view agent_id,
                                  int64_t now_ms) override {
    return Write<bool>([&](Rows& rows) -> absl::StatusOr<bool> {
      absl::StatusOr<absl::flat_hash_set<std::string>> acked =
          AckWith(rows, agent_id, {std::string(message_id)}, now_ms);
      if (!acked.ok()) return acked.status();
      return !acked->empty();
    });
  }
  absl::StatusOr<std::vector<bool>> AckMessages(
      absl::string_view agent_id, const std::vector<std::string>& message_ids,
      int64_t now_ms, std::optional<int64_t> presence_generation) override {
    return Write<std::vector<bool>>([&](Rows& rows) {
      return AckMessagesWith(rows, agent_id, message_ids, now_ms,
                             presence_generation);
    });
  }
  void AckMessagesAsync(absl::string_view agent_id,
                        const std::vector<std::string>& message_ids,
                        int64_t now_ms,
                        std::optional<int64_t> presence_generation,
                        Callback<std::vector<bool>> done) override {
    WriteAsync<std::vector<bool>>(
        [agent = std::string(agent_id), message_ids, now_ms,
         presence_generation](Rows& rows) {
          return AckMessagesWith(rows, agent, message_ids, now_ms,
                                 presence_generation);
        },
        std::move(done));
  }
  absl::StatusOr<std::vector<ExpiryTransition>> SweepExpiredMessages(
      int64_t now_ms) override {
    return Write<std::vector<ExpiryTransition>>(
        [&](Rows& rows) { return SweepWith(rows, now_ms); });
  }
  absl::StatusOr<bool> DeadLetterMessage(
      absl::string_view message_id, absl::string_view reason, int64_t now_ms,
      std::optional<std::string> last_error) override {
    return Write<bool>([&](Rows& rows) {
      return DeadLetterWith(rows, message_id, reason, now_ms, last_error);
    });
  }
  absl::StatusOr<RedriveResult> RedriveDeadLetter(
      const DeadLetterRedrive& redrive) override {
    return Write<RedriveResult>(
        [&](Rows& rows) { return RedriveWith(rows, redrive); });
  }

  absl::StatusOr<MessageRecord> GetMessage(absl::string_view id) override {
    return Read<MessageRecord>(
        [&](Rows& rows) { return GetMessageWith(rows, id); });
  }
  absl::StatusOr<std::vector<InboxRecord>> ListInbox(
      absl::string_view message_id) override {
    return Read<std::vector<InboxRecord>>(
        [&](Rows& rows) { return rows.Inbox(message_id); });
  }
  absl::StatusOr<std::vector<MessageRecord>> ListPendingForAgent(
      absl::string_view agent_id, int64_t now_ms, int limit) override {
    return Read<std::vector<MessageRecord>>([&](Rows& rows) {
      return rows.PendingForAgent(agent_id, now_ms, limit);
    });
  }
  absl::StatusOr<std::vector<MessageRecord>> ListPendingPage(
      const PendingPageQuery& query) override {
    return Read<std::vector<MessageRecord>>(
        [&](Rows& rows) { return rows.PendingPage(query); });
  }
  absl::StatusOr<int64_t> CountPendingForAgent(absl::string_view agent_id,
                                               int64_t now_ms,
                                               int64_t limit) override {
    return Read<int64_t>(
        [&](Rows& rows) { return rows.CountPending(agent_id, now_ms, limit); });
  }
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
  CountPendingByAgent(int64_t now_ms) override {
    return Read<std::vector<std::pair<std::string, int64_t>>>(
        [&](Rows& rows) { return rows.CountPendingByAgent(now_ms); });
  }
  absl::StatusOr<std::vector<MessageRecord>> ListPendingRoleMessages(
      absl::string_view wire, int64_t now_ms) override {
    return Read<std::vector<MessageRecord>>(
        [&](Rows& rows) { return rows.RoleBacklog(wire, now_ms); });
  }
  absl::StatusOr<DeadLetterRecord> GetDeadLetter(
      absl::string_view message_id) override {
    return Read<DeadLetterRecord>(
        [&](Rows& rows) { return GetDeadLetterWith(rows, message_id); });
  }
  absl::StatusOr<std::vector<MessageRecord>> ListTraceMessages(
      const TracePageQuery& query) override {
    return Read<std::vector<MessageRecord>>(
        [&](Rows& rows) { return rows.TracePage(query); });
  }
  absl::StatusOr<std::vector<DeadLetterRow>> ListDeadLetters(
      const DeadLetterPageQuery& query) override {
    return Read<std::vector<DeadLetterRow>>(
        [&](Rows& rows) { return rows.DeadLetterPage(query); });
  }

 protected:
  Engine& engine() { return engine_; }

  template <typename T, typename Fn>
  absl::StatusOr<T> Read(Fn fn) {
    return engine_.template Read<T>([&](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn, engine_);
      return fn(rows);
    });
  }
  // A write that fails drops what its rows changed outside the database.
  template <typename T, typename Fn>
  absl::StatusOr<T> Write(Fn fn, std::string order_key = {}) {
    auto run = [&](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn, engine_);
      absl::StatusOr<T> result = fn(rows);
      if (!result.ok()) rows.Undone();
      return result;
    };
    if constexpr (kOrderKeys) {
      return engine_.template Write<T>(run, std::move(order_key));
    } else {
      return engine_.template Write<T>(run);
    }
  }
  template <typename T, typename Fn>
  void WriteAsync(Fn fn, Callback<T> done, std::string order_key = {}) {
    auto run = [this, fn = std::move(fn)](auto& conn) -> absl::StatusOr<T> {
      Rows rows(conn, engine_);
      absl::StatusOr<T> result = fn(rows);
      if (!result.ok()) rows.Undone();
      return result;
    };
    if constexpr (kOrderKeys) {
      engine_.template WriteAsync<T>(run, std::move(done),
                                     std::move(order_key));
    } else {
      engine_.template WriteAsync<T>(run, std::move(done));
    }
  }

 private:
  Engine& engine_;
};

}  // namespace hub::storage

#endif  // HUB_STORAGE_MESSAGE_STORE_CALLS_H_
