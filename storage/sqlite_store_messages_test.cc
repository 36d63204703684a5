// Messages: insert with recipients, delivery and ack state, pending lists,
// and the B0 expiry sweep with first-writer-wins dead letters (§6.6).
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite_rows.h"
#include "storage/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::OpenOrDie;
using testing::RawDb;

constexpr int64_t kNow = 1'700'000'000'000;

MessageRecord Msg(const std::string& id, int64_t priority = 5,
                  int64_t created = kNow, int64_t ttl = 300'000) {
  MessageRecord m;
  m.id = id;
  m.type = "event";
  m.from_agent = "sender";
  m.to_agent = "agent-a";
  m.topic = "topic.x";
  m.priority = priority;
  m.ttl_ms = ttl;
  m.created_at_ms = created;
  m.expires_at_ms = created + ttl;
  m.correlation_id = "corr-" + id;
  m.trace_id = "trace-" + id;
  m.payload_json = R"({"n":1})";
  return m;
}

TEST(MessageStore, InsertStoresTheMessageAndOneInboxRowPerRecipient) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->InsertMessage(Msg("m1"), {"a", "b", "a"}).ok());
  absl::StatusOr<MessageRecord> m = store->GetMessage("m1");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->status, "queued");
  EXPECT_EQ(m->payload_json, R"({"n":1})");
  EXPECT_FALSE(m->role_key_wire.has_value());
  auto inbox = store->ListInbox("m1");
  ASSERT_EQ(inbox->size(), 2u);
  EXPECT_EQ((*inbox)[0].agent_id, "a");
  EXPECT_FALSE((*inbox)[0].delivered_at_ms.has_value());
}

TEST(MessageStore, DuplicateIdIsAlreadyExistsAndLeavesTheFirstIntact) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->InsertMessage(Msg("m1"), {"a"}).ok());
  MessageRecord again = Msg("m1", 9);
  absl::Status s = store->InsertMessage(again, {"b"});
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ReasonOf(s), "MESSAGE_EXISTS");
  EXPECT_EQ(store->GetMessage("m1")->priority, 5);
  EXPECT_EQ(store->ListInbox("m1")->size(), 1u);
}

TEST(MessageStore, OutOfRangePriorityIsAConstraintErrorWithNoRowsWritten) {
  auto store = OpenOrDie(FreshDbPath());
  absl::Status s = store->InsertMessage(Msg("m1", 10), {"a"});
  EXPECT_EQ(ReasonOf(s), "STORE_CONSTRAINT");
  EXPECT_EQ(ReasonOf(store->GetMessage("m1").status()), "MESSAGE_NOT_FOUND");
  EXPECT_TRUE(store->ListInbox("m1")->empty());
}

TEST(MessageStore, DeliveryThenAckByEveryRecipientMakesTheMessageAcked) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->InsertMessage(Msg("m1"), {"a", "b"}).ok());
  EXPECT_FALSE(*store->AckMessage("m1", "a", kNow));  // not delivered yet
  ASSERT_TRUE(store->MarkDelivered("m1", "a", kNow + 1).ok());
  ASSERT_TRUE(store->MarkDelivered("m1", "a", kNow + 2).ok());
  EXPECT_EQ(store->GetMessage("m1")->status, "delivered");
  auto inbox = store->ListInbox("m1");
  EXPECT_EQ((*inbox)[0].delivered_at_ms, kNow + 1);  // first delivery kept
  EXPECT_EQ((*inbox)[0].attempts, 2);

  EXPECT_TRUE(*store->AckMessage("m1", "a", kNow + 3));
  EXPECT_FALSE(*store->AckMessage("m1", "a", kNow + 4));  // already acked
  EXPECT_EQ(store->GetMessage("m1")->status, "delivered");
  ASSERT_TRUE(store->MarkDelivered("m1", "b", kNow + 5).ok());
  EXPECT_TRUE(*store->AckMessage("m1", "b", kNow + 6));
  EXPECT_EQ(store->GetMessage("m1")->status, "acked");
  EXPECT_EQ(ReasonOf(store->MarkDelivered("m1", "zed", kNow).status()),
            "DELIVERY_NOT_FOUND");
}

TEST(MessageStore, PendingListIsPriorityThenAgeThenIdAndSkipsAckedOrExpired) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->InsertMessage(Msg("m-low", 3, kNow), {"a"}).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("m-b", 7, kNow + 5), {"a"}).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("m-a", 7, kNow + 5), {"a"}).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("m-old", 7, kNow), {"a"}).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("m-short", 9, kNow, 10), {"a"}).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("m-acked", 9), {"a"}).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("m-other", 9), {"b"}).ok());
  ASSERT_TRUE(store->MarkDelivered("m-acked", "a", kNow).ok());
  ASSERT_TRUE(*store->AckMessage("m-acked", "a", kNow));

  auto pending = store->ListPendingForAgent("a", kNow + 100, 10);
  ASSERT_TRUE(pending.ok());
  std::vector<std::string> ids;
  for (const MessageRecord& m : *pending) ids.push_back(m.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"m-old", "m-a", "m-b", "m-low"}));
  EXPECT_EQ(store->ListPendingForAgent("a", kNow + 100, 2)->size(), 2u);
}

TEST(MessageStore, RoleBacklogIsListedInOrderAndHandedToANewHolder) {
  auto store = OpenOrDie(FreshDbPath());
  MessageRecord m1 = Msg("m1", 5);
  m1.role_key_wire = "rk2.w";
  MessageRecord m2 = Msg("m2", 8);
  m2.role_key_wire = "rk2.w";
  ASSERT_TRUE(store->InsertMessage(m1, {}).ok());
  ASSERT_TRUE(store->InsertMessage(m2, {}).ok());
  auto backlog = store->ListPendingRoleMessages("rk2.w", kNow);
  ASSERT_EQ(backlog->size(), 2u);
  EXPECT_EQ((*backlog)[0].id, "m2");
  EXPECT_EQ(store->AddRecipient("m1", "holder").value_or(false), true);
  // Idempotent, and says so.
  EXPECT_EQ(store->AddRecipient("m1", "holder").value_or(true), false);
  EXPECT_EQ(store->ListInbox("m1")->size(), 1u);
  EXPECT_EQ(ReasonOf(store->AddRecipient("nope", "holder").status()),
            "MESSAGE_NOT_FOUND");
}

TEST(ExpirySweep, ClaimsQueuedAndDeliveredAtOrPastExpiryExactlyOnce) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->InsertMessage(Msg("queued", 5, kNow, 100), {"a"}).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("deliv", 5, kNow, 50), {"a"}).ok());
  ASSERT_TRUE(store->MarkDelivered("deliv", "a", kNow).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("future", 5, kNow, 101), {"a"}).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("acked", 5, kNow, 10), {"a"}).ok());
  ASSERT_TRUE(store->MarkDelivered("acked", "a", kNow).ok());
  ASSERT_TRUE(*store->AckMessage("acked", "a", kNow));

  auto sweep = store->SweepExpiredMessages(kNow + 100);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_EQ(sweep->size(), 2u);
  EXPECT_EQ((*sweep)[0].message_id, "deliv");
  EXPECT_EQ((*sweep)[0].previous_status, "delivered");
  EXPECT_EQ((*sweep)[1].message_id, "queued");
  EXPECT_EQ((*sweep)[1].previous_status, "queued");
  for (const ExpiryTransition& t : *sweep) {
    EXPECT_EQ(t.reason, "ttl_expired");
    EXPECT_EQ(t.failed_at_ms, kNow + 100);
    EXPECT_TRUE(t.dlq_inserted);
  }
  EXPECT_TRUE(store->SweepExpiredMessages(kNow + 100)->empty());
  EXPECT_EQ(store->GetMessage("queued")->status, "dead_letter");
  EXPECT_EQ(store->GetMessage("future")->status, "queued");
  EXPECT_EQ(store->GetMessage("acked")->status, "acked");
  EXPECT_EQ(store->GetDeadLetter("queued")->reason, "ttl_expired");
  EXPECT_EQ(ReasonOf(store->GetDeadLetter("acked").status()),
            "DEAD_LETTER_NOT_FOUND");
}

TEST(ExpirySweep, ReadsARangeOfItsIndexNotEveryPendingMessage) {
  const std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    // Many pending messages, few expired: the sweep's plan must not depend
    // on an empty table.
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(store
                      ->InsertMessage(Msg(absl::StrCat("m", i), 5, kNow,
                                          i < 5 ? 10 : 100'000),
                                      {"a"})
                      .ok());
    }
  }
  RawDb db(path);
  // As hub runs it (no statistics), and after ANALYZE.
  for (int analyzed = 0; analyzed < 2; ++analyzed) {
    if (analyzed == 1) {
      ASSERT_EQ(db.Exec("ANALYZE"), "");
    }
    const std::vector<std::string> plan =
        db.QueryPlan(rows::kExpiredMessagesSql);
    ASSERT_FALSE(plan.empty());
    EXPECT_NE(plan[0].find(
                  "USING INDEX idx_messages_expiry_pending (expires_at_ms<?)"),
              std::string::npos)
        << "analyzed=" << analyzed << ": " << plan[0];
  }
}

TEST(RoleBacklog, ReadsThePartialIndexOfPendingRoleMessages) {
  const std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    // Mostly agent messages and acked role messages, which the partial index
    // leaves out, and a few pending ones for two roles.
    for (int i = 0; i < 300; ++i) {
      MessageRecord m = Msg(absl::StrCat("m", i));
      if (i % 3 == 0) m.role_key_wire = i % 2 == 0 ? "role-a" : "role-b";
      if (i % 3 == 0 && i > 30) m.status = "acked";
      ASSERT_TRUE(store->InsertMessage(m, {"a"}).ok());
    }
  }
  RawDb db(path);
  EXPECT_EQ(db.Query("SELECT count(*) FROM messages INDEXED BY "
                     "idx_messages_role_pending WHERE role_key_wire IS NOT "
                     "NULL AND status IN ('queued', 'delivered')"),
            "11");
  for (int analyzed = 0; analyzed < 2; ++analyzed) {
    if (analyzed == 1) {
      ASSERT_EQ(db.Exec("ANALYZE"), "");
    }
    for (const char* sql : {rows::kRoleBacklogSql, rows::kAllRoleBacklogsSql,
                            rows::kScopeBacklogSql}) {
      const std::vector<std::string> plan = db.QueryPlan(sql);
      ASSERT_FALSE(plan.empty());
      EXPECT_NE(plan[0].find("USING INDEX idx_messages_role_pending"),
                std::string::npos)
          << "analyzed=" << analyzed << ": " << plan[0] << "\n"
          << sql;
    }
  }
}

TEST(ExpirySweep, AnEarlierDeadLetterReasonSurvivesAndIsNotReclaimed) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->InsertMessage(Msg("m1", 5, kNow, 10), {"a"}).ok());
  EXPECT_TRUE(*store->DeadLetterMessage("m1", "delivery_error", kNow + 1,
                                        std::string("socket closed")));
  EXPECT_FALSE(*store->DeadLetterMessage("m1", "other", kNow + 2, {}));
  EXPECT_TRUE(store->SweepExpiredMessages(kNow + 100)->empty());
  DeadLetterRecord d = *store->GetDeadLetter("m1");
  EXPECT_EQ(d.reason, "delivery_error");
  EXPECT_EQ(d.failed_at_ms, kNow + 1);
  EXPECT_EQ(d.last_error, "socket closed");
}

TEST(ExpirySweep, AnExistingDeadLetterRowIsKeptAndReportedNotInserted) {
  std::string path = FreshDbPath();
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store->InsertMessage(Msg("m1", 5, kNow, 10), {"a"}).ok());
  {
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("INSERT INTO dead_letters VALUES "
                       "('m1', 'manual', 42, 'operator')"),
              "");
  }
  auto sweep = store->SweepExpiredMessages(kNow + 100);
  ASSERT_EQ(sweep->size(), 1u);
  EXPECT_FALSE((*sweep)[0].dlq_inserted);
  EXPECT_EQ(store->GetDeadLetter("m1")->reason, "manual");
  EXPECT_EQ(store->GetDeadLetter("m1")->failed_at_ms, 42);
  EXPECT_EQ(store->GetMessage("m1")->status, "dead_letter");
}

TEST(ExpirySweep, AFailingDeadLetterInsertLeavesTheMessageQueued) {
  std::string path = FreshDbPath();
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store->InsertMessage(Msg("m1", 5, kNow, 10), {"a"}).ok());
  {
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("CREATE TRIGGER dlq_fault BEFORE INSERT ON dead_letters "
                       "BEGIN SELECT RAISE(ABORT, 'injected fault'); END"),
              "");
  }
  auto sweep = store->SweepExpiredMessages(kNow + 100);
  EXPECT_FALSE(sweep.ok());
  EXPECT_EQ(store->GetMessage("m1")->status, "queued");
  EXPECT_EQ(ReasonOf(store->GetDeadLetter("m1").status()),
            "DEAD_LETTER_NOT_FOUND");
}

// ---- the inbox limit, decided inside the write

absl::StatusOr<std::vector<InboxRecord>> Publish(SqliteStore& store,
                                                 const std::string& id,
                                                 const std::string& to,
                                                 int64_t limit,
                                                 int64_t ttl = 300'000) {
  return store.InsertMessageDelivering(Msg(id, 5, kNow, ttl), {to}, {to}, kNow,
                                       limit);
}

TEST(InboxLimit, AFullInboxRefusesTheWholeMessageAndWritesNothing) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(Publish(*store, "m1", "a", 2).ok());
  ASSERT_TRUE(Publish(*store, "m2", "a", 2).ok());
  absl::StatusOr<std::vector<InboxRecord>> full =
      store->InsertMessageDelivering(Msg("m3"), {"a", "b"}, {"a", "b"}, kNow,
                                     2);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(full.status()), "LIMIT_EXCEEDED");
  EXPECT_EQ(MetadataOf(full.status())["limit"], "max_pending_per_inbox");
  EXPECT_EQ(MetadataOf(full.status())["agent_id"], "a");
  EXPECT_EQ(ReasonOf(store->GetMessage("m3").status()), "MESSAGE_NOT_FOUND");
  EXPECT_TRUE(store->ListInbox("m3")->empty());
  // Another recipient's inbox is not limited by a's.
  EXPECT_TRUE(Publish(*store, "m4", "b", 2).ok());
}

TEST(InboxLimit, AcknowledgingAMessageMakesRoomForTheNext) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(Publish(*store, "m1", "a", 1).ok());
  ASSERT_FALSE(Publish(*store, "m2", "a", 1).ok());
  ASSERT_TRUE(*store->AckMessage("m1", "a", kNow + 1));
  EXPECT_TRUE(Publish(*store, "m2", "a", 1).ok());
  EXPECT_FALSE(Publish(*store, "m3", "a", 1).ok());
}

TEST(InboxLimit, AnExpiredMessageStopsCountingOnceTheSweepClaimsIt) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(Publish(*store, "m1", "a", 1, /*ttl=*/10).ok());
  ASSERT_FALSE(Publish(*store, "m2", "a", 1).ok());
  ASSERT_EQ(store->SweepExpiredMessages(kNow + 100)->size(), 1u);
  EXPECT_TRUE(Publish(*store, "m2", "a", 1).ok());
}

TEST(InboxLimit, ARoleBacklogHandedToAHolderCountsInItsInbox) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(Publish(*store, "m1", "a", 2).ok());  // a's count is known
  ASSERT_TRUE(store->InsertMessage(Msg("backlog"), {}).ok());
  ASSERT_TRUE(store->AddRecipient("backlog", "a").ok());
  EXPECT_EQ(ReasonOf(Publish(*store, "m2", "a", 2).status()), "LIMIT_EXCEEDED");
}

TEST(InboxLimit, PendingMessagesFromBeforeARestartCount) {
  const std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(Publish(*store, "m1", "a", 0).ok());
    ASSERT_TRUE(Publish(*store, "m2", "a", 0).ok());
    ASSERT_TRUE(Publish(*store, "m3", "a", 0).ok());
    ASSERT_TRUE(*store->AckMessage("m3", "a", kNow));
  }
  auto store = OpenOrDie(path);
  EXPECT_EQ(ReasonOf(Publish(*store, "m4", "a", 2).status()), "LIMIT_EXCEEDED");
  EXPECT_TRUE(Publish(*store, "m4", "a", 3).ok());
}

TEST(InboxLimit, ConcurrentPublishesToOneInboxNeverOvershootIt) {
  auto store = OpenOrDie(FreshDbPath());
  constexpr int kPublishes = 64;
  constexpr int64_t kLimit = 10;
  // std:: primitives, which ThreadSanitizer sees (Debian's Abseil is not
  // instrumented: tools/tsan/README.md).
  std::mutex mu;
  std::condition_variable all_done;
  int accepted = 0, refused = 0, done = 0;
  for (int i = 0; i < kPublishes; ++i) {
    store->InsertMessageDeliveringAsync(
        Msg(absl::StrCat("m", i)), {"a"}, {}, kNow, kLimit,
        [&](absl::StatusOr<std::vector<InboxRecord>> r) {
          std::lock_guard<std::mutex> lock(mu);
          ++(r.ok() ? accepted : refused);
          if (!r.ok()) {
            EXPECT_EQ(ReasonOf(r.status()), "LIMIT_EXCEEDED");
          }
          if (++done == kPublishes) all_done.notify_one();
        });
  }
  std::unique_lock<std::mutex> lock(mu);
  all_done.wait(lock, [&] { return done == kPublishes; });
  EXPECT_EQ(accepted, kLimit);
  EXPECT_EQ(refused, kPublishes - kLimit);
  EXPECT_EQ(store->CountPendingForAgent("a", kNow, 1000).value(), kLimit);
}

TEST(InboxLimit, AFailedSweepLeavesTheCountAsTheDatabaseHasIt) {
  const std::string path = FreshDbPath();
  auto store = OpenOrDie(path);
  ASSERT_TRUE(Publish(*store, "m1", "a", 2, /*ttl=*/10).ok());
  ASSERT_TRUE(Publish(*store, "m2", "a", 2).ok());
  RawDb raw(path);
  ASSERT_EQ(raw.Exec("CREATE TRIGGER dlq_fault BEFORE INSERT ON dead_letters "
                     "BEGIN SELECT RAISE(ABORT, 'injected fault'); END"),
            "");
  ASSERT_FALSE(store->SweepExpiredMessages(kNow + 100).ok());
  // m1 is still queued, so a's inbox is still full.
  EXPECT_EQ(ReasonOf(Publish(*store, "m3", "a", 2).status()), "LIMIT_EXCEEDED");
}

TEST(AckMessages, AcksEachIdInOneWriteAndCountsEarlierAcksAsAcknowledged) {
  auto store = OpenOrDie(FreshDbPath());
  AgentRegistration a;
  a.agent_id = "a";
  a.cli = "claude";
  a.now_ms = kNow;
  ASSERT_TRUE(store->RegisterAgent(a).ok());  // acks come from its owner
  ASSERT_TRUE(Publish(*store, "m1", "a", 0).ok());
  ASSERT_TRUE(Publish(*store, "m2", "a", 0).ok());
  ASSERT_TRUE(store->InsertMessage(Msg("queued"), {"a"}).ok());  // not pushed
  ASSERT_TRUE(Publish(*store, "other", "b", 0).ok());
  ASSERT_TRUE(*store->AckMessage("m2", "a", kNow));
  const auto before = store->write_stats().groups;
  absl::StatusOr<std::vector<bool>> acked = store->AckMessages(
      "a", {"m1", "m2", "queued", "other", "missing"}, kNow + 1, std::nullopt);
  ASSERT_TRUE(acked.ok()) << acked.status();
  EXPECT_EQ(*acked, (std::vector<bool>{true, true, false, false, false}));
  EXPECT_EQ(store->write_stats().groups, before + 1);
  EXPECT_EQ(store->GetMessage("m1")->status, "acked");
  EXPECT_EQ(store->GetMessage("queued")->status, "queued");
  EXPECT_EQ(store->GetMessage("other")->status, "delivered");
}

TEST(AckMessages, AStaleOwnerOrAnUnknownAgentAcksNothing) {
  auto store = OpenOrDie(FreshDbPath());
  AgentRegistration a;
  a.agent_id = "agent-a";
  a.cli = "claude";
  a.now_ms = kNow;
  ASSERT_TRUE(store->RegisterAgent(a).ok());
  ASSERT_TRUE(store->RegisterAgent(a).ok());  // generation 2 owns it now
  ASSERT_TRUE(Publish(*store, "m1", "agent-a", 0).ok());

  absl::StatusOr<std::vector<bool>> stale =
      store->AckMessages("agent-a", {"m1"}, kNow + 1, /*generation=*/1);
  EXPECT_EQ(ReasonOf(stale.status()), "STALE_PRESENCE_OWNER");
  EXPECT_EQ(store->GetMessage("m1")->status, "delivered");
  EXPECT_EQ(
      ReasonOf(store->AckMessages("nobody", {"m1"}, kNow + 1, std::nullopt)
                   .status()),
      "AGENT_NOT_FOUND");
  absl::StatusOr<std::vector<bool>> current =
      store->AckMessages("agent-a", {"m1"}, kNow + 1, /*generation=*/2);
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_EQ(*current, std::vector<bool>{true});
  EXPECT_EQ(store->GetMessage("m1")->status, "acked");
}

}  // namespace
}  // namespace hub::storage
