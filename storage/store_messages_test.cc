// Messages on both engines: insert with recipients, delivery and ack state,
// pending lists, the B0 expiry sweep with first-writer-wins dead letters
// (§6.6) and the inbox limit; then, on PostgreSQL, two hubs over one
// database racing for the same rows.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/pg/pg_store.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/store_test_fixture.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::TestMessage;

constexpr int64_t kNow = 1'700'000'000'000;

absl::StatusOr<std::vector<InboxRecord>> Publish(Store& store,
                                                 const std::string& id,
                                                 const std::string& to,
                                                 int64_t limit,
                                                 int64_t ttl = 300'000) {
  return store.messages().InsertMessageDelivering(TestMessage(id, 5, kNow, ttl),
                                                  {to}, {to}, kNow, limit);
}

// Either engine's group-commit counters so far.
WriteStats Stats(Store& store) {
  if (auto* s = dynamic_cast<SqliteStore*>(&store)) return s->write_stats();
  if (auto* s = dynamic_cast<pg::PostgresStore*>(&store))
    return s->write_stats();
  return WriteStats{-1, -1, -1, -1};
}
int64_t Groups(Store& store) { return Stats(store).groups; }
// Groups replayed with savepoints (an operation failed after it wrote).
int64_t Replays(Store& store) { return Stats(store).replays; }

class MessageStore : public testing::StoreTest {
 protected:
  // An agent row at `generation`, written as raw SQL both engines accept.
  void AddAgent(const std::string& id, int64_t generation) {
    store();  // the schema first
    ASSERT_EQ(Exec(absl::StrCat(
                  "INSERT INTO agents (agent_id, cli, last_seen_ms, "
                  "lease_expires_ms, status, presence_generation) VALUES ('",
                  id, "', 'claude', ", kNow, ", ", kNow + 60'000,
                  ", 'online', ", generation, ")")),
              "");
  }
  // Makes every dead letter insert fail, as a disk or constraint fault would.
  void BreakDeadLetters() {
    if (postgres()) {
      ASSERT_EQ(Exec("CREATE FUNCTION dlq_fault() RETURNS trigger AS $$ "
                     "BEGIN RAISE EXCEPTION 'injected fault'; END $$ "
                     "LANGUAGE plpgsql; "
                     "CREATE TRIGGER dlq_fault BEFORE INSERT ON dead_letters "
                     "FOR EACH ROW EXECUTE FUNCTION dlq_fault()"),
                "");
    } else {
      ASSERT_EQ(Exec("CREATE TRIGGER dlq_fault BEFORE INSERT ON dead_letters "
                     "BEGIN SELECT RAISE(ABORT, 'injected fault'); END"),
                "");
    }
  }
};

TEST_P(MessageStore, InsertStoresTheMessageAndOneInboxRowPerRecipient) {
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m1"), {"a", "b", "a"})
                  .ok());
  absl::StatusOr<MessageRecord> m = store().messages().GetMessage("m1");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->status, MessageStatus::kQueued);
  EXPECT_EQ(m->payload_json, R"({"n":1})");
  EXPECT_FALSE(m->role_key_wire.has_value());
  auto inbox = store().messages().ListInbox("m1");
  ASSERT_EQ(inbox->size(), 2u);
  EXPECT_EQ((*inbox)[0].agent_id, "a");
  EXPECT_FALSE((*inbox)[0].delivered_at_ms.has_value());
}

TEST_P(MessageStore, DeliveringInsertReturnsTheDeliveredRowsOnce) {
  absl::StatusOr<std::vector<InboxRecord>> rows =
      store().messages().InsertMessageDelivering(
          TestMessage("m1"), {"a", "b", "c", "a"}, {"c", "a"}, kNow + 1, 0);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  // Both engines answer in recipients' order today; store.h says deliver_to
  // order. Which one is meant is open, so only the set is checked here.
  std::sort(rows->begin(), rows->end(),
            [](const InboxRecord& x, const InboxRecord& y) {
              return x.agent_id < y.agent_id;
            });
  EXPECT_EQ((*rows)[0].agent_id, "a");
  EXPECT_EQ((*rows)[1].agent_id, "c");
  EXPECT_EQ((*rows)[1].delivered_at_ms, kNow + 1);
  EXPECT_EQ((*rows)[1].attempts, 1);
  EXPECT_EQ(store().messages().GetMessage("m1")->status,
            MessageStatus::kDelivered);
  auto inbox = store().messages().ListInbox("m1");
  ASSERT_EQ(inbox->size(), 3u);
  EXPECT_FALSE((*inbox)[1].delivered_at_ms.has_value());  // b
  EXPECT_EQ((*inbox)[1].attempts, 0);

  absl::StatusOr<std::vector<InboxRecord>> stray =
      store().messages().InsertMessageDelivering(TestMessage("m2"), {"a"},
                                                 {"zed"}, kNow, 0);
  EXPECT_EQ(ReasonOf(stray.status()), "DELIVERY_NOT_FOUND");
  EXPECT_EQ(ReasonOf(store().messages().GetMessage("m2").status()),
            "MESSAGE_NOT_FOUND");
}

TEST_P(MessageStore, ManyDeliveriesAreRecordedInOneWriteAndMissingOnesLeftOut) {
  ASSERT_TRUE(
      store().messages().InsertMessage(TestMessage("m1"), {"a", "b"}).ok());
  ASSERT_TRUE(store().messages().InsertMessage(TestMessage("m2"), {"a"}).ok());
  ASSERT_TRUE(store().messages().MarkDeliveredIfUnacked("m2", "a", kNow).ok());
  const int64_t groups = Groups(store());
  absl::StatusOr<std::vector<InboxRecord>> marked =
      store().messages().MarkDeliveredManyIfUnacked(
          {{"m1", "a"}, {"m2", "a"}, {"m1", "zed"}, {"gone", "a"}}, kNow + 7);
  ASSERT_TRUE(marked.ok()) << marked.status();
  std::sort(marked->begin(), marked->end(),
            [](const InboxRecord& x, const InboxRecord& y) {
              return x.message_id < y.message_id;
            });
  ASSERT_EQ(marked->size(), 2u);
  EXPECT_EQ((*marked)[0].message_id, "m1");
  EXPECT_EQ((*marked)[0].agent_id, "a");
  EXPECT_EQ((*marked)[0].delivered_at_ms, kNow + 7);
  EXPECT_EQ((*marked)[0].attempts, 1);
  // A second attempt keeps the first delivery time.
  EXPECT_EQ((*marked)[1].message_id, "m2");
  EXPECT_EQ((*marked)[1].delivered_at_ms, kNow);
  EXPECT_EQ((*marked)[1].attempts, 2);
  EXPECT_EQ(store().messages().GetMessage("m1")->status,
            MessageStatus::kDelivered);
  EXPECT_FALSE(
      (*store().messages().ListInbox("m1"))[1].delivered_at_ms.has_value());
  if (postgres()) {
    EXPECT_EQ(Groups(store()), groups + 1);  // one write
  }
}

TEST_P(MessageStore, DuplicateIdIsAlreadyExistsAndLeavesTheFirstIntact) {
  ASSERT_TRUE(store().messages().InsertMessage(TestMessage("m1"), {"a"}).ok());
  MessageRecord again = TestMessage("m1", 9);
  absl::Status s = store().messages().InsertMessage(again, {"b"});
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ReasonOf(s), "MESSAGE_EXISTS");
  EXPECT_EQ(store().messages().GetMessage("m1")->priority, 5);
  EXPECT_EQ(store().messages().ListInbox("m1")->size(), 1u);
}

TEST_P(MessageStore, ATakenIdIsRefusedBeforeAnUnknownDeliveryTarget) {
  ASSERT_TRUE(store().messages().InsertMessage(TestMessage("m1"), {"a"}).ok());
  absl::StatusOr<std::vector<InboxRecord>> again =
      store().messages().InsertMessageDelivering(TestMessage("m1", 9), {"b"},
                                                 {"zed"}, kNow, 0);
  EXPECT_EQ(ReasonOf(again.status()), "MESSAGE_EXISTS");
  absl::StatusOr<std::vector<InboxRecord>> delivering =
      store().messages().InsertMessageDelivering(TestMessage("m1", 9), {"b"},
                                                 {"b"}, kNow, 0);
  EXPECT_EQ(ReasonOf(delivering.status()), "MESSAGE_EXISTS");
  EXPECT_EQ(store().messages().GetMessage("m1")->priority, 5);
  EXPECT_EQ(store().messages().ListInbox("m1")->size(), 1u);
}

TEST_P(MessageStore, OutOfRangePriorityIsAConstraintErrorWithNoRowsWritten) {
  absl::Status s =
      store().messages().InsertMessage(TestMessage("m1", 10), {"a"});
  EXPECT_EQ(ReasonOf(s), "STORE_CONSTRAINT");
  EXPECT_EQ(ReasonOf(store().messages().GetMessage("m1").status()),
            "MESSAGE_NOT_FOUND");
  EXPECT_TRUE(store().messages().ListInbox("m1")->empty());
}

TEST_P(MessageStore, AMessageToAClosedScopeIsRefusedInsideTheWrite) {
  store();  // the schema first
  ASSERT_EQ(Exec("INSERT INTO hub_closed_scopes (project_id, scope_id, "
                 "role_key_wire, closed_at_ms, closed_by, reason) "
                 "VALUES ('prj_1', 'scp_1', 'rk2.closed', 1, 'op', '')"),
            "");
  MessageRecord m = TestMessage("m1");
  m.role_key_wire = "rk2.closed";
  EXPECT_EQ(ReasonOf(store().messages().InsertMessage(m, {})),
            "ROLE_SCOPE_CLOSED");
  EXPECT_EQ(ReasonOf(store().messages().GetMessage("m1").status()),
            "MESSAGE_NOT_FOUND");
}

TEST_P(MessageStore, DeliveryThenAckByEveryRecipientMakesTheMessageAcked) {
  ASSERT_TRUE(
      store().messages().InsertMessage(TestMessage("m1"), {"a", "b"}).ok());
  EXPECT_FALSE(
      *store().messages().AckMessage("m1", "a", kNow));  // not delivered yet
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "a", kNow + 1).ok());
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "a", kNow + 2).ok());
  EXPECT_EQ(store().messages().GetMessage("m1")->status,
            MessageStatus::kDelivered);
  auto inbox = store().messages().ListInbox("m1");
  EXPECT_EQ((*inbox)[0].delivered_at_ms, kNow + 1);  // first delivery kept
  EXPECT_EQ((*inbox)[0].attempts, 2);

  EXPECT_TRUE(*store().messages().AckMessage("m1", "a", kNow + 3));
  EXPECT_FALSE(
      *store().messages().AckMessage("m1", "a", kNow + 4));  // already acked
  EXPECT_EQ(store().messages().GetMessage("m1")->status,
            MessageStatus::kDelivered);
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "b", kNow + 5).ok());
  EXPECT_TRUE(*store().messages().AckMessage("m1", "b", kNow + 6));
  EXPECT_EQ(store().messages().GetMessage("m1")->status, MessageStatus::kAcked);
  EXPECT_EQ(store().messages().ListInbox("m1")->at(1).acked_at_ms, kNow + 6);
  EXPECT_EQ(ReasonOf(store()
                         .messages()
                         .MarkDeliveredIfUnacked("m1", "zed", kNow)
                         .status()),
            "DELIVERY_NOT_FOUND");
}

// A pusher reads what is undelivered or pending, and another path delivers
// it and the agent acknowledges it before the pusher marks it: that mark
// must change nothing (and so push nothing), for a single mark and a batch.
TEST_P(MessageStore, AMarkAfterTheAckChangesNothingAndReturnsNoRow) {
  ASSERT_TRUE(
      store().messages().InsertMessage(TestMessage("m1"), {"a", "b"}).ok());
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "a", kNow + 1).ok());
  ASSERT_TRUE(*store().messages().AckMessage("m1", "a", kNow + 2));

  absl::StatusOr<std::optional<InboxRecord>> again =
      store().messages().MarkDeliveredIfUnacked("m1", "a", kNow + 3);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->has_value());
  absl::StatusOr<std::vector<InboxRecord>> many =
      store().messages().MarkDeliveredManyIfUnacked({{"m1", "a"}, {"m1", "b"}},
                                                    kNow + 4);
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_EQ(many->size(), 1u);
  EXPECT_EQ((*many)[0].agent_id, "b");
  EXPECT_FALSE((*many)[0].acked_at_ms.has_value());
  absl::StatusOr<std::vector<InboxRecord>> inbox =
      store().messages().ListInbox("m1");
  ASSERT_TRUE(inbox.ok()) << inbox.status();
  EXPECT_EQ((*inbox)[0].attempts, 1);
  EXPECT_EQ((*inbox)[0].acked_at_ms, kNow + 2);

  // Nor is a message that left pending (dead-lettered) marked.
  ASSERT_TRUE(store().messages().InsertMessage(TestMessage("m2"), {"a"}).ok());
  ASSERT_TRUE(
      *store().messages().DeadLetterMessage("m2", "test", kNow + 5, {}));
  EXPECT_FALSE(store()
                   .messages()
                   .MarkDeliveredIfUnacked("m2", "a", kNow + 6)
                   ->has_value());
  EXPECT_TRUE(store()
                  .messages()
                  .MarkDeliveredManyIfUnacked({{"m2", "a"}}, kNow + 6)
                  ->empty());
  EXPECT_EQ(store().messages().ListInbox("m2")->at(0).attempts, 0);
}

TEST_P(MessageStore, PendingListIsPriorityThenAgeThenIdAndSkipsAckedOrExpired) {
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m-low", 3, kNow), {"a"})
                  .ok());
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m-b", 7, kNow + 5), {"a"})
                  .ok());
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m-a", 7, kNow + 5), {"a"})
                  .ok());
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m-old", 7, kNow), {"a"})
                  .ok());
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m-short", 9, kNow, 10), {"a"})
                  .ok());
  ASSERT_TRUE(
      store().messages().InsertMessage(TestMessage("m-acked", 9), {"a"}).ok());
  ASSERT_TRUE(
      store().messages().InsertMessage(TestMessage("m-other", 9), {"b"}).ok());
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m-acked", "a", kNow).ok());
  ASSERT_TRUE(*store().messages().AckMessage("m-acked", "a", kNow));

  auto pending = store().messages().ListPendingForAgent("a", kNow + 100, 10);
  ASSERT_TRUE(pending.ok()) << pending.status();
  std::vector<std::string> ids;
  for (const MessageRecord& m : *pending) ids.push_back(m.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"m-old", "m-a", "m-b", "m-low"}));
  EXPECT_EQ(store().messages().ListPendingForAgent("a", kNow + 100, 2)->size(),
            2u);
  EXPECT_EQ(store().messages().ListPendingForAgent("a", kNow + 100, 0)->size(),
            0u);
  EXPECT_EQ(store().messages().ListPendingForAgent("a", kNow + 100, -1)->size(),
            4u);
  EXPECT_EQ(store().messages().CountPendingForAgent("a", kNow + 100, 3).value(),
            3);
  EXPECT_EQ(
      store().messages().CountPendingForAgent("a", kNow + 100, 100).value(), 4);
  auto counts = store().messages().CountPendingByAgent(kNow + 100);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts,
            (std::vector<std::pair<std::string, int64_t>>{{"a", 4}, {"b", 1}}));
}

TEST_P(MessageStore, PendingPagesFollowTheKeyAndTheTopic) {
  for (int i = 0; i < 5; ++i) {
    MessageRecord m =
        TestMessage(absl::StrCat("m", i), i % 2 == 0 ? 9 : 1, kNow + i);
    if (i == 4) m.topic = "topic.y";
    ASSERT_TRUE(store().messages().InsertMessage(m, {"a"}).ok());
  }
  PendingPageQuery q;
  q.agent_id = "a";
  q.now_ms = kNow;
  q.limit = 2;
  std::vector<std::string> ids;
  while (true) {
    auto page = store().messages().ListPendingPage(q);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const MessageRecord& m : *page) ids.push_back(m.id);
    if (page->size() < 2) break;
    q.after = PendingPageQuery::Key{
        page->back().priority, page->back().created_at_ms, page->back().id};
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"m0", "m2", "m4", "m1", "m3"}));
  q.after.reset();
  q.limit = 0;
  q.topic = "topic.y";
  EXPECT_EQ(store().messages().ListPendingPage(q)->size(), 1u);
}

TEST_P(MessageStore, RoleBacklogIsListedInOrderAndHandedToANewHolder) {
  MessageRecord m1 = TestMessage("m1", 5);
  m1.role_key_wire = "rk2.w";
  MessageRecord m2 = TestMessage("m2", 8);
  m2.role_key_wire = "rk2.w";
  ASSERT_TRUE(store().messages().InsertMessage(m1, {}).ok());
  ASSERT_TRUE(store().messages().InsertMessage(m2, {}).ok());
  auto backlog = store().messages().ListPendingRoleMessages("rk2.w", kNow);
  ASSERT_TRUE(backlog.ok()) << backlog.status();
  ASSERT_EQ(backlog->size(), 2u);
  EXPECT_EQ((*backlog)[0].id, "m2");
  EXPECT_EQ((*backlog)[1].role_key_wire, "rk2.w");
  EXPECT_EQ(store().messages().AddRecipient("m1", "holder").value_or(false),
            true);
  // Idempotent, and says so.
  EXPECT_EQ(store().messages().AddRecipient("m1", "holder").value_or(true),
            false);
  EXPECT_EQ(store().messages().ListInbox("m1")->size(), 1u);
  EXPECT_EQ(
      ReasonOf(store().messages().AddRecipient("nope", "holder").status()),
      "MESSAGE_NOT_FOUND");
}

TEST_P(MessageStore, ExpirySweepClaimsQueuedAndDeliveredAtOrPastExpiryOnce) {
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("queued", 5, kNow, 100), {"a"})
                  .ok());
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("deliv", 5, kNow, 50), {"a"})
                  .ok());
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("deliv", "a", kNow).ok());
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("future", 5, kNow, 101), {"a"})
                  .ok());
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("acked", 5, kNow, 10), {"a"})
                  .ok());
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("acked", "a", kNow).ok());
  ASSERT_TRUE(*store().messages().AckMessage("acked", "a", kNow));

  auto sweep = store().messages().SweepExpiredMessages(kNow + 100);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_EQ(sweep->size(), 2u);
  EXPECT_EQ((*sweep)[0].message_id, "deliv");
  EXPECT_EQ((*sweep)[0].previous_status, MessageStatus::kDelivered);
  EXPECT_EQ((*sweep)[1].message_id, "queued");
  EXPECT_EQ((*sweep)[1].previous_status, MessageStatus::kQueued);
  for (const ExpiryTransition& t : *sweep) {
    EXPECT_EQ(t.reason, "ttl_expired");
    EXPECT_EQ(t.failed_at_ms, kNow + 100);
    EXPECT_TRUE(t.dlq_inserted);
  }
  EXPECT_TRUE(store().messages().SweepExpiredMessages(kNow + 100)->empty());
  EXPECT_EQ(store().messages().GetMessage("queued")->status,
            MessageStatus::kDeadLetter);
  EXPECT_EQ(store().messages().GetMessage("future")->status,
            MessageStatus::kQueued);
  EXPECT_EQ(store().messages().GetMessage("acked")->status,
            MessageStatus::kAcked);
  EXPECT_EQ(store().messages().GetDeadLetter("queued")->reason, "ttl_expired");
  EXPECT_EQ(ReasonOf(store().messages().GetDeadLetter("acked").status()),
            "DEAD_LETTER_NOT_FOUND");
  EXPECT_FALSE(
      *store().messages().AckMessage("deliv", "a", kNow + 101));  // terminal
}

TEST_P(MessageStore, AnEarlierDeadLetterReasonSurvivesAndIsNotReclaimed) {
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m1", 5, kNow, 10), {"a"})
                  .ok());
  EXPECT_TRUE(*store().messages().DeadLetterMessage(
      "m1", "delivery_error", kNow + 1, std::string("socket closed")));
  EXPECT_FALSE(
      *store().messages().DeadLetterMessage("m1", "other", kNow + 2, {}));
  EXPECT_EQ(
      ReasonOf(
          store().messages().DeadLetterMessage("nope", "x", kNow, {}).status()),
      "MESSAGE_NOT_FOUND");
  EXPECT_TRUE(store().messages().SweepExpiredMessages(kNow + 100)->empty());
  DeadLetterRecord d = *store().messages().GetDeadLetter("m1");
  EXPECT_EQ(d.reason, "delivery_error");
  EXPECT_EQ(d.failed_at_ms, kNow + 1);
  EXPECT_EQ(d.last_error, "socket closed");
}

TEST_P(MessageStore, AnExistingDeadLetterRowIsKeptAndReportedNotInserted) {
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m1", 5, kNow, 10), {"a"})
                  .ok());
  ASSERT_EQ(Exec("INSERT INTO dead_letters VALUES "
                 "('m1', 'manual', 42, 'operator')"),
            "");
  auto sweep = store().messages().SweepExpiredMessages(kNow + 100);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  ASSERT_EQ(sweep->size(), 1u);
  EXPECT_FALSE((*sweep)[0].dlq_inserted);
  EXPECT_EQ(store().messages().GetDeadLetter("m1")->reason, "manual");
  EXPECT_EQ(store().messages().GetDeadLetter("m1")->failed_at_ms, 42);
  EXPECT_EQ(store().messages().GetMessage("m1")->status,
            MessageStatus::kDeadLetter);
}

TEST_P(MessageStore, AFailingDeadLetterInsertLeavesTheMessageQueued) {
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m1", 5, kNow, 10), {"a"})
                  .ok());
  BreakDeadLetters();
  auto sweep = store().messages().SweepExpiredMessages(kNow + 100);
  EXPECT_FALSE(sweep.ok());
  EXPECT_FALSE(store().messages().DeadLetterMessage("m1", "x", kNow, {}).ok());
  EXPECT_EQ(store().messages().GetMessage("m1")->status,
            MessageStatus::kQueued);
  EXPECT_EQ(ReasonOf(store().messages().GetDeadLetter("m1").status()),
            "DEAD_LETTER_NOT_FOUND");
}

TEST_P(MessageStore, TracePagesAreCreatedThenIdOrder) {
  for (const char* id : {"t-b", "t-a", "t-c"}) {
    MessageRecord m = TestMessage(id, 5, id[2] == 'c' ? kNow - 1 : kNow);
    m.trace_id = "trace-1";
    m.status = id[2] == 'a' ? MessageStatus::kAcked
                            : MessageStatus::kQueued;  // any status
    ASSERT_TRUE(store().messages().InsertMessage(m, {"a"}).ok());
  }
  TracePageQuery q;
  q.trace_id = "trace-1";
  q.limit = 2;
  auto first = store().messages().ListTraceMessages(q);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].id, "t-c");
  EXPECT_EQ((*first)[1].id, "t-a");
  q.after = TracePageQuery::Key{(*first)[1].created_at_ms, (*first)[1].id};
  auto second = store().messages().ListTraceMessages(q);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].id, "t-b");
}

TEST_P(MessageStore, DeadLetterPagesAreNewestFirstWithTheirMessages) {
  ASSERT_TRUE(store().messages().InsertMessage(TestMessage("d1"), {"a"}).ok());
  MessageRecord other = TestMessage("d2");
  other.from_agent = "other";
  ASSERT_TRUE(store().messages().InsertMessage(other, {"a"}).ok());
  ASSERT_TRUE(*store().messages().DeadLetterMessage("d1", "r1", kNow + 1, {}));
  ASSERT_TRUE(*store().messages().DeadLetterMessage("d2", "r2", kNow + 2, {}));
  ASSERT_EQ(Exec("INSERT INTO dead_letters VALUES ('gone', 'r1', 5, NULL)"),
            "");
  DeadLetterPageQuery q;
  auto all = store().messages().ListDeadLetters(q);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].dead_letter.message_id, "d2");
  EXPECT_EQ((*all)[0].message->from_agent, "other");
  EXPECT_EQ((*all)[2].dead_letter.message_id, "gone");
  EXPECT_FALSE((*all)[2].message.has_value());
  q.reason = "r1";
  EXPECT_EQ(store().messages().ListDeadLetters(q)->size(), 2u);
  q.from_agent = "sender";
  EXPECT_EQ(store().messages().ListDeadLetters(q)->size(), 1u);
  q = DeadLetterPageQuery();
  q.limit = 1;
  q.after = DeadLetterPageQuery::Key{kNow + 2, "d2"};
  auto page = store().messages().ListDeadLetters(q);
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ(page->at(0).dead_letter.message_id, "d1");
}

// ---- the inbox limit, decided inside the write

TEST_P(MessageStore, AFullInboxRefusesTheWholeMessageAndWritesNothing) {
  ASSERT_TRUE(Publish(store(), "m1", "a", 2).ok());
  ASSERT_TRUE(Publish(store(), "m2", "a", 2).ok());
  absl::StatusOr<std::vector<InboxRecord>> full =
      store().messages().InsertMessageDelivering(TestMessage("m3"), {"b", "a"},
                                                 {"a", "b"}, kNow, 2);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(full.status()), "LIMIT_EXCEEDED");
  EXPECT_EQ(MetadataOf(full.status())["limit"], "max_pending_per_inbox");
  EXPECT_EQ(MetadataOf(full.status())["agent_id"], "a");
  EXPECT_EQ(ReasonOf(store().messages().GetMessage("m3").status()),
            "MESSAGE_NOT_FOUND");
  EXPECT_TRUE(store().messages().ListInbox("m3")->empty());
  // Another recipient's inbox is not limited by a's.
  EXPECT_TRUE(Publish(store(), "m4", "b", 2).ok());
}

TEST_P(MessageStore, AFullInboxIsRefusedBeforeATakenIdAndCountsNothingTwice) {
  ASSERT_TRUE(Publish(store(), "m1", "a", 3).ok());
  ASSERT_TRUE(Publish(store(), "m2", "b", 3).ok());
  ASSERT_TRUE(Publish(store(), "m3", "b", 3).ok());
  // Both recipients have counts now: a holds 1, b 2.
  const int64_t replays = Replays(store());
  absl::StatusOr<std::vector<InboxRecord>> full =
      store().messages().InsertMessageDelivering(TestMessage("m4"), {"a", "b"},
                                                 {"a"}, kNow, 2);
  EXPECT_EQ(ReasonOf(full.status()), "LIMIT_EXCEEDED");
  // Refused before it wrote anything: its group needs no replay.
  EXPECT_EQ(Replays(store()), replays);
  EXPECT_EQ(MetadataOf(full.status())["agent_id"], "b");
  EXPECT_EQ(ReasonOf(store().messages().GetMessage("m4").status()),
            "MESSAGE_NOT_FOUND");
  EXPECT_EQ(ReasonOf(Publish(store(), "m1", "a", 1).status()),
            "LIMIT_EXCEEDED");
  EXPECT_EQ(ReasonOf(Publish(store(), "m1", "a", 3).status()),
            "MESSAGE_EXISTS");
  // Nothing refused was counted: a has room for exactly one more at 2.
  absl::StatusOr<std::vector<InboxRecord>> fits =
      store().messages().InsertMessageDelivering(TestMessage("m5"), {"a", "a"},
                                                 {"a"}, kNow, 2);
  ASSERT_TRUE(fits.ok()) << fits.status();
  ASSERT_EQ(fits->size(), 1u);
  EXPECT_EQ(fits->at(0).agent_id, "a");
  EXPECT_EQ(ReasonOf(Publish(store(), "m6", "a", 2).status()),
            "LIMIT_EXCEEDED");
}

TEST_P(MessageStore, AcknowledgingAMessageMakesRoomForTheNext) {
  ASSERT_TRUE(Publish(store(), "m1", "a", 1).ok());
  ASSERT_FALSE(Publish(store(), "m2", "a", 1).ok());
  ASSERT_TRUE(*store().messages().AckMessage("m1", "a", kNow + 1));
  EXPECT_TRUE(Publish(store(), "m2", "a", 1).ok());
  EXPECT_FALSE(Publish(store(), "m3", "a", 1).ok());
}

TEST_P(MessageStore, AnExpiredMessageStopsCountingOnceTheSweepClaimsIt) {
  ASSERT_TRUE(Publish(store(), "m1", "a", 1, /*ttl=*/10).ok());
  ASSERT_FALSE(Publish(store(), "m2", "a", 1).ok());
  ASSERT_EQ(store().messages().SweepExpiredMessages(kNow + 100)->size(), 1u);
  EXPECT_TRUE(Publish(store(), "m2", "a", 1).ok());
}

TEST_P(MessageStore, ARoleBacklogHandedToAHolderCountsInItsInbox) {
  ASSERT_TRUE(Publish(store(), "m1", "a", 2).ok());  // a's count is known
  ASSERT_TRUE(
      store().messages().InsertMessage(TestMessage("backlog"), {}).ok());
  ASSERT_TRUE(store().messages().AddRecipient("backlog", "a").ok());
  EXPECT_EQ(ReasonOf(Publish(store(), "m2", "a", 2).status()),
            "LIMIT_EXCEEDED");
}

TEST_P(MessageStore, PendingMessagesFromBeforeARestartCount) {
  ASSERT_TRUE(Publish(store(), "m1", "a", 0).ok());
  ASSERT_TRUE(Publish(store(), "m2", "a", 0).ok());
  ASSERT_TRUE(Publish(store(), "m3", "a", 0).ok());
  ASSERT_TRUE(*store().messages().AckMessage("m3", "a", kNow));
  Reopen();
  EXPECT_EQ(ReasonOf(Publish(store(), "m4", "a", 2).status()),
            "LIMIT_EXCEEDED");
  EXPECT_TRUE(Publish(store(), "m4", "a", 3).ok());
}

// Publishes `count` messages to agent a at once through `store`; adds the
// accepted and refused ones to the counters.
void PublishAtOnce(Store& store, const std::string& prefix, int count,
                   int64_t limit, std::atomic<int>& accepted,
                   std::atomic<int>& refused) {
  // std:: primitives, which ThreadSanitizer sees (Debian's Abseil is not
  // instrumented: tools/tsan/README.md).
  std::mutex mu;
  std::condition_variable all_done;
  int done = 0;
  for (int i = 0; i < count; ++i) {
    store.messages().InsertMessageDeliveringAsync(
        TestMessage(absl::StrCat(prefix, i)), {"a"}, {}, kNow, limit,
        [&](absl::StatusOr<std::vector<InboxRecord>> r) {
          ++(r.ok() ? accepted : refused);
          if (!r.ok()) {
            EXPECT_EQ(ReasonOf(r.status()), "LIMIT_EXCEEDED") << r.status();
          }
          std::lock_guard<std::mutex> lock(mu);
          if (++done == count) all_done.notify_one();
        });
  }
  std::unique_lock<std::mutex> lock(mu);
  all_done.wait(lock, [&] { return done == count; });
}

TEST_P(MessageStore, ConcurrentPublishesToOneInboxNeverOvershootIt) {
  constexpr int kPublishes = 64;
  constexpr int64_t kLimit = 10;
  std::atomic<int> accepted{0}, refused{0};
  PublishAtOnce(store(), "m", kPublishes, kLimit, accepted, refused);
  EXPECT_EQ(accepted.load(), kLimit);
  EXPECT_EQ(refused.load(), kPublishes - kLimit);
  EXPECT_EQ(store().messages().CountPendingForAgent("a", kNow, 1000).value(),
            kLimit);
}

// A burst queues up behind the writer and commits in groups (on
// PostgreSQL the publishes' statements then go out together): the new ones
// are taken in the order they were made, up to the limit, and the taken id
// is refused, with one of the two reasons that hold for it by the time the
// group commits: on PostgreSQL a publish whose one statement wrote nothing
// learns why after its neighbours' statements ran, as if made after them.
TEST_P(MessageStore, ABurstOfPublishesIsTakenInTheOrderItWasMadeUpToTheLimit) {
  ASSERT_TRUE(Publish(store(), "dup", "a", 10).ok());
  const int64_t replays = Replays(store());
  constexpr int kPublishes = 20;
  std::vector<std::string> ids;
  for (int i = 0; i < kPublishes; ++i) {
    ids.push_back(i == 5 ? std::string("dup") : absl::StrCat("m", i));
  }
  std::vector<absl::StatusOr<std::vector<InboxRecord>>> answers(
      kPublishes, absl::UnknownError(""));
  std::mutex mu;
  std::condition_variable all_done;
  int done = 0;
  for (int i = 0; i < kPublishes; ++i) {
    store().messages().InsertMessageDeliveringAsync(
        TestMessage(ids[i], 5, kNow), {"a"}, {"a"}, kNow, 10,
        [&, i](absl::StatusOr<std::vector<InboxRecord>> r) {
          std::lock_guard<std::mutex> lock(mu);
          answers[i] = std::move(r);
          if (++done == kPublishes) all_done.notify_one();
        });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    all_done.wait(lock, [&] { return done == kPublishes; });
  }
  // "dup" holds one of a's 10 places: the first nine new ones get the rest.
  int accepted = 0;
  for (int i = 0; i < kPublishes; ++i) {
    SCOPED_TRACE(ids[i]);
    if (i == 5) {
      const std::string reason(ReasonOf(answers[i].status()));
      EXPECT_TRUE(reason == "MESSAGE_EXISTS" || reason == "LIMIT_EXCEEDED")
          << answers[i].status();
    } else if (accepted < 9) {
      ASSERT_TRUE(answers[i].ok()) << answers[i].status();
      ASSERT_EQ(answers[i]->size(), 1u);
      EXPECT_EQ((*answers[i])[0].message_id, ids[i]);
      ++accepted;
    } else {
      EXPECT_EQ(ReasonOf(answers[i].status()), "LIMIT_EXCEEDED");
    }
  }
  EXPECT_EQ(store().messages().CountPendingForAgent("a", kNow, 1000).value(),
            10);
  EXPECT_EQ(Replays(store()), replays);  // refusals wrote nothing to undo
}

TEST_P(MessageStore, AFailedSweepLeavesTheCountAsTheDatabaseHasIt) {
  ASSERT_TRUE(Publish(store(), "m1", "a", 2, /*ttl=*/10).ok());
  ASSERT_TRUE(Publish(store(), "m2", "a", 2).ok());
  BreakDeadLetters();
  ASSERT_FALSE(store().messages().SweepExpiredMessages(kNow + 100).ok());
  // m1 is still queued, so a's inbox is still full.
  EXPECT_EQ(ReasonOf(Publish(store(), "m3", "a", 2).status()),
            "LIMIT_EXCEEDED");
}

// PostgreSQL keeps each inbox's pending count as hub_inbox_pending.pending
// less hub_inbox_settled.settled (the store's writer in its statements, the
// triggers for every other session); it must equal the rows it stands for
// after every kind of write, the store's and an operator's.
constexpr char kPendingCountsSql[] =
    "(SELECT agent_id, sum(n) AS pending FROM (SELECT agent_id, pending AS n "
    "FROM hub_inbox_pending UNION ALL SELECT agent_id, -settled "
    "FROM hub_inbox_settled) AS x GROUP BY agent_id)";

TEST_P(MessageStore, ThePendingCountsFollowEveryChange) {
  if (!postgres()) GTEST_SKIP() << "SQLite counts in the writer's memory";
  const auto check = [&](const std::string& when) {
    EXPECT_EQ(Query(absl::StrCat(
                  "SELECT count(*) FROM (SELECT i.agent_id, count(*) AS n "
                  "FROM message_inbox i JOIN messages m ON m.id = "
                  "i.message_id WHERE i.acked_at_ms IS NULL AND m.status "
                  "IN ('queued', 'delivered') GROUP BY i.agent_id) AS c "
                  "FULL JOIN ",
                  kPendingCountsSql,
                  " AS p USING (agent_id) "
                  "WHERE COALESCE(c.n, 0) <> COALESCE(p.pending, 0)")),
              "0")
        << when;
  };
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessageDelivering(TestMessage("m1"), {"a", "b"}, {"a"},
                                           kNow, 5)
                  .ok());
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("m2", 5, kNow, 10), {"a"})
                  .ok());
  MessageRecord done = TestMessage("m3");
  done.status = MessageStatus::kAcked;
  ASSERT_TRUE(store().messages().InsertMessage(done, {"a"}).ok());
  check("after the inserts");
  EXPECT_EQ(Query(absl::StrCat("SELECT pending FROM ", kPendingCountsSql,
                               " AS p WHERE agent_id = 'a'")),
            "2");
  ASSERT_TRUE(store().messages().AddRecipient("m2", "c").ok());
  ASSERT_TRUE(store().messages().AddRecipient("m3", "c").ok());
  check("after AddRecipient");
  ASSERT_TRUE(*store().messages().AckMessage("m1", "a", kNow));
  check("after an ack");
  ASSERT_TRUE(store().messages().MarkDeliveredIfUnacked("m1", "b", kNow).ok());
  ASSERT_TRUE(*store().messages().AckMessage("m1", "b", kNow));
  EXPECT_EQ(store().messages().GetMessage("m1")->status, MessageStatus::kAcked);
  check("after the last ack");
  ASSERT_EQ(store().messages().SweepExpiredMessages(kNow + 100)->size(), 1u);
  check("after the sweep");
  ASSERT_TRUE(
      store().messages().InsertMessage(TestMessage("m4"), {"a", "c"}).ok());
  ASSERT_TRUE(*store().messages().DeadLetterMessage("m4", "x", kNow, {}));
  check("after a dead letter");
  DeadLetterRedrive redrive;
  redrive.message_id = "m4";
  redrive.now_ms = kNow + 200;
  redrive.add_recipient = "d";
  ASSERT_TRUE(store().messages().RedriveDeadLetter(redrive).ok());
  check("after a re-drive that adds a recipient");
  // Another session's writes (an operator's SQL) are counted by triggers.
  ASSERT_EQ(Exec("UPDATE message_inbox SET acked_at_ms = 1 "
                 "WHERE message_id = 'm4' AND agent_id = 'a'"),
            "");
  check("after an operator's ack");
  ASSERT_EQ(Exec("INSERT INTO message_inbox (message_id, agent_id, attempts) "
                 "VALUES ('m4', 'e', 0)"),
            "");
  check("after an operator's insert");
  ASSERT_TRUE(*store().messages().DeadLetterMessage("m4", "x", kNow + 200, {}));
  check("after a second dead letter");
  MessageRecord backlog = TestMessage("r1");
  backlog.role_key_wire = "rk2.lead-key";
  ASSERT_TRUE(store().messages().InsertMessage(backlog, {"f"}).ok());
  ASSERT_TRUE(store().messages().AddRecipient("r1", "g").ok());
  check("after a role message");
  absl::StatusOr<ScopeCloseResult> closed =
      store().roles().CloseLeadScope(testing::ScopeClosing());
  ASSERT_TRUE(closed.ok()) << closed.status();
  ASSERT_EQ(closed->dead_lettered.size(), 1u);
  check("after a scope's close dead-lettered its backlog");
  ASSERT_TRUE(store().messages().InsertMessage(TestMessage("m5"), {"a"}).ok());
  ASSERT_EQ(Exec("DELETE FROM messages WHERE id = 'm5'"), "");
  check("after a delete");
  EXPECT_EQ(Query(absl::StrCat("SELECT sum(pending) FROM ", kPendingCountsSql,
                               " AS p")),
            "0");
}

// ---- AckMessages

TEST_P(MessageStore, AckMessagesAcksEachIdInOneWriteCountingEarlierAcks) {
  AddAgent("a", 1);  // acks come from its owner
  ASSERT_TRUE(Publish(store(), "m1", "a", 0).ok());
  ASSERT_TRUE(Publish(store(), "m2", "a", 0).ok());
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessage(TestMessage("queued"), {"a"})
                  .ok());  // not pushed
  ASSERT_TRUE(Publish(store(), "other", "b", 0).ok());
  ASSERT_TRUE(*store().messages().AckMessage("m2", "a", kNow));
  const int64_t before = Groups(store());
  absl::StatusOr<std::vector<bool>> acked = store().messages().AckMessages(
      "a", {"m1", "m2", "queued", "other", "missing"}, kNow + 1, std::nullopt);
  ASSERT_TRUE(acked.ok()) << acked.status();
  EXPECT_EQ(*acked, (std::vector<bool>{true, true, false, false, false}));
  EXPECT_EQ(Groups(store()), before + 1);
  EXPECT_EQ(store().messages().GetMessage("m1")->status, MessageStatus::kAcked);
  EXPECT_EQ(store().messages().GetMessage("queued")->status,
            MessageStatus::kQueued);
  EXPECT_EQ(store().messages().GetMessage("other")->status,
            MessageStatus::kDelivered);
}

TEST_P(MessageStore, AckMessagesByAStaleOwnerOrAnUnknownAgentAcksNothing) {
  AddAgent("agent-a", 2);  // generation 2 owns it now
  ASSERT_TRUE(Publish(store(), "m1", "agent-a", 0).ok());

  absl::StatusOr<std::vector<bool>> stale = store().messages().AckMessages(
      "agent-a", {"m1"}, kNow + 1, /*generation=*/1);
  EXPECT_EQ(ReasonOf(stale.status()), "STALE_PRESENCE_OWNER");
  EXPECT_EQ(store().messages().GetMessage("m1")->status,
            MessageStatus::kDelivered);
  EXPECT_EQ(ReasonOf(store()
                         .messages()
                         .AckMessages("nobody", {"m1"}, kNow + 1, std::nullopt)
                         .status()),
            "AGENT_NOT_FOUND");
  std::mutex mu;
  std::condition_variable answered;
  std::optional<absl::StatusOr<std::vector<bool>>> current;
  store().messages().AckMessagesAsync("agent-a", {"m1"}, kNow + 1,
                                      /*generation=*/2,
                                      [&](absl::StatusOr<std::vector<bool>> r) {
                                        std::lock_guard<std::mutex> lock(mu);
                                        current.emplace(std::move(r));
                                        answered.notify_one();
                                      });
  std::unique_lock<std::mutex> lock(mu);
  answered.wait(lock, [&] { return current.has_value(); });
  ASSERT_TRUE(current->ok()) << current->status();
  EXPECT_EQ(**current, std::vector<bool>{true});
  EXPECT_EQ(store().messages().GetMessage("m1")->status, MessageStatus::kAcked);
}

// ---- two hubs over one PostgreSQL database

constexpr int kRaced = 40;

TEST_P(MessageStore, TwoHubsAckingOneMessageAckItExactlyOnce) {
  if (!postgres()) GTEST_SKIP() << "one SQLite file has one hub";
  std::unique_ptr<Store> other = Open();
  ASSERT_NE(other, nullptr);
  for (int i = 0; i < kRaced; ++i) {
    // One row for a, pushed; and one for each of b and c, acked by
    // different hubs at once: the last ack must still see the other's.
    ASSERT_TRUE(store()
                    .messages()
                    .InsertMessageDelivering(TestMessage(absl::StrCat("m", i)),
                                             {"a", "b", "c"}, {"a", "b", "c"},
                                             kNow, 0)
                    .ok());
  }
  std::vector<int> wins(kRaced, 0);
  std::mutex mu;
  auto acker = [&](Store* hub, const std::string& second) {
    for (int i = 0; i < kRaced; ++i) {
      const std::string id = absl::StrCat("m", i);
      absl::StatusOr<bool> a = hub->messages().AckMessage(id, "a", kNow + 1);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(
          hub->messages().AckMessage(id, second, kNow + 1).value_or(false));
      std::lock_guard<std::mutex> lock(mu);
      wins[i] += *a ? 1 : 0;
    }
  };
  std::thread t1(acker, &store(), "b");
  std::thread t2(acker, other.get(), "c");
  t1.join();
  t2.join();
  for (int i = 0; i < kRaced; ++i) {
    EXPECT_EQ(wins[i], 1) << "m" << i;
    EXPECT_EQ(store().messages().GetMessage(absl::StrCat("m", i))->status,
              MessageStatus::kAcked)
        << "m" << i;
  }
}

// Lets two threads start each step together.
class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t round = round_;
    if (++waiting_ == parties_) {
      waiting_ = 0;
      ++round_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return round_ != round; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int parties_;
  int waiting_ = 0;
  int64_t round_ = 0;
};

TEST_P(MessageStore, AnAckRacingAnotherHubsSweepEndsInOneFinalState) {
  if (!postgres()) GTEST_SKIP() << "one SQLite file has one hub";
  std::unique_ptr<Store> other = Open();
  ASSERT_NE(other, nullptr);
  constexpr int kMessages = 100;
  for (int i = 0; i < kMessages; ++i) {
    // m<i> expires at kNow + i + 1: the sweep's clock below reaches it
    // about when the acks do.
    ASSERT_TRUE(
        store()
            .messages()
            .InsertMessageDelivering(
                TestMessage(absl::StrCat("m", i), 5, kNow + i, /*ttl=*/1),
                {"a"}, {"a"}, kNow, 0)
            .ok());
  }
  std::map<std::string, bool> acked;
  std::map<std::string, int> swept;
  Barrier step(2);
  std::thread ack([&] {
    for (int i = 0; i < kMessages; ++i) {
      const std::string id = absl::StrCat("m", i);
      step.Wait();
      absl::StatusOr<bool> r = store().messages().AckMessage(id, "a", kNow + i);
      EXPECT_TRUE(r.ok()) << r.status();
      acked[id] = r.value_or(false);
    }
  });
  std::thread sweep([&] {
    for (int i = 0; i < kMessages; ++i) {
      step.Wait();
      auto r = other->messages().SweepExpiredMessages(kNow + i + 1);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) continue;
      for (const ExpiryTransition& t : *r) ++swept[t.message_id];
    }
  });
  ack.join();
  sweep.join();
  // What the sweep skipped while an ack held the row, a last sweep settles.
  absl::StatusOr<std::vector<ExpiryTransition>> last =
      other->messages().SweepExpiredMessages(kNow + kMessages + 1);
  ASSERT_TRUE(last.ok()) << last.status();
  for (const ExpiryTransition& t : *last) ++swept[t.message_id];
  int acks = 0;
  for (int i = 0; i < kMessages; ++i) {
    const std::string id = absl::StrCat("m", i);
    const MessageStatus status = store().messages().GetMessage(id)->status;
    acks += acked[id] ? 1 : 0;
    EXPECT_EQ(acked[id], status == MessageStatus::kAcked)
        << id << " " << MessageStatusName(status);
    EXPECT_EQ(swept[id], acked[id] ? 0 : 1) << id;
    EXPECT_EQ(store().messages().GetDeadLetter(id).ok(), !acked[id]) << id;
  }
  RecordProperty("acked", acks);
}

TEST_P(MessageStore, TwoHubsSweepingReportEachTransitionOnce) {
  if (!postgres()) GTEST_SKIP() << "one SQLite file has one hub";
  std::unique_ptr<Store> other = Open();
  ASSERT_NE(other, nullptr);
  constexpr int kMessages = 200;
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(
        store()
            .messages()
            .InsertMessage(TestMessage(absl::StrCat("m", i), 5, kNow + i, 10),
                           {"a"})
            .ok());
  }
  std::vector<std::string> reports[2];
  Barrier step(2);
  auto sweeper = [&](Store* hub, std::vector<std::string>* seen) {
    // Both sweep the same clock at once, a few messages newly due each time.
    for (int64_t t = kNow; t <= kNow + kMessages + 10; t += 3) {
      step.Wait();
      auto r = hub->messages().SweepExpiredMessages(t);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) continue;
      for (const ExpiryTransition& e : *r) {
        EXPECT_TRUE(e.dlq_inserted);
        seen->push_back(e.message_id);
      }
    }
  };
  std::thread t1(sweeper, &store(), &reports[0]);
  std::thread t2(sweeper, other.get(), &reports[1]);
  t1.join();
  t2.join();
  std::multiset<std::string> all(reports[0].begin(), reports[0].end());
  all.insert(reports[1].begin(), reports[1].end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kMessages));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(),
            static_cast<size_t>(kMessages));
  RecordProperty("first_hub", static_cast<int>(reports[0].size()));
}

TEST_P(MessageStore, TwoHubsPublishingToOneInboxNeverOvershootIt) {
  if (!postgres()) GTEST_SKIP() << "one SQLite file has one hub";
  std::unique_ptr<Store> other = Open();
  ASSERT_NE(other, nullptr);
  constexpr int kEach = 32;
  constexpr int64_t kLimit = 10;
  std::atomic<int> accepted{0}, refused{0};
  std::thread t1(
      [&] { PublishAtOnce(store(), "x", kEach, kLimit, accepted, refused); });
  std::thread t2(
      [&] { PublishAtOnce(*other, "y", kEach, kLimit, accepted, refused); });
  t1.join();
  t2.join();
  EXPECT_EQ(accepted.load(), kLimit);
  EXPECT_EQ(refused.load(), 2 * kEach - kLimit);
  EXPECT_EQ(store().messages().CountPendingForAgent("a", kNow, 1000).value(),
            kLimit);
}

HUB_STORE_TEST_SUITE(MessageStore);

}  // namespace
}  // namespace hub::storage
