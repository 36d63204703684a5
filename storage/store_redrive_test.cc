// RedriveDeadLetter on both engines: a dead letter back in the queue for the
// recipients that had not acknowledged it (or a role's holder, or its
// backlog), fenced by the dead_letter status in the UPDATE, refused for a
// closed scope; then, on PostgreSQL, two hubs re-driving the same dead
// letters at once.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/store.h"
#include "storage/store_test_fixture.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::TestMessage;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kTtl = 10'000;
constexpr int64_t kLater = kNow + 60'000;  // after the expiry

class RedriveStore : public testing::StoreTest {
 protected:
  // Message `id` to `recipients`, expired by the sweep: a ttl_expired dead
  // letter.
  void ExpiredMessage(const std::string& id,
                      const std::vector<std::string>& recipients,
                      std::optional<std::string> role_wire = std::nullopt) {
    MessageRecord m = TestMessage(id, 5, kNow, kTtl);
    m.role_key_wire = std::move(role_wire);
    ASSERT_TRUE(store().messages().InsertMessage(m, recipients).ok());
    absl::StatusOr<std::vector<ExpiryTransition>> swept =
        store().messages().SweepExpiredMessages(kNow + kTtl);
    ASSERT_TRUE(swept.ok()) << swept.status();
    ASSERT_EQ(store().messages().GetMessage(id)->status,
              MessageStatus::kDeadLetter);
  }

  absl::StatusOr<RedriveResult> Redrive(
      const std::string& id, std::optional<std::string> add = std::nullopt,
      int64_t max_pending_per_inbox = 0) {
    DeadLetterRedrive r;
    r.message_id = id;
    r.now_ms = kLater;
    r.add_recipient = std::move(add);
    r.max_pending_per_inbox = max_pending_per_inbox;
    return store().messages().RedriveDeadLetter(r);
  }

  // `n` fresh messages (alive at kLater) pending for `agent`.
  void FillInbox(const std::string& agent, int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(
          store()
              .messages()
              .InsertMessage(TestMessage(absl::StrCat("fill-", agent, "-", i),
                                         5, kLater - 1, kTtl),
                             {agent})
              .ok());
    }
  }

  // The re-drive of `id` was refused as a publish to `agent`'s full inbox
  // is, and changed nothing.
  void ExpectRefusedForFullInbox(const absl::Status& status,
                                 const std::string& id,
                                 const std::string& agent, int64_t limit) {
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    EXPECT_EQ(ReasonOf(status), "LIMIT_EXCEEDED");
    std::map<std::string, std::string> md = MetadataOf(status);
    EXPECT_EQ(md["limit"], "max_pending_per_inbox");
    EXPECT_EQ(md["limit_value"], absl::StrCat(limit));
    EXPECT_EQ(md["agent_id"], agent);
    EXPECT_EQ(store().messages().GetMessage(id)->status,
              MessageStatus::kDeadLetter);
    EXPECT_EQ(store().messages().GetDeadLetter(id)->reason, "ttl_expired");
    EXPECT_EQ(*store().messages().CountPendingForAgent(agent, kLater, 1000),
              limit);
  }
};

TEST_P(RedriveStore, ARedriveQueuesTheMessageForEveryoneWhoHadNotAckedIt) {
  MessageRecord m = TestMessage("m1", 5, kNow, kTtl);
  ASSERT_TRUE(store().messages().InsertMessage(m, {"a", "b", "c"}).ok());
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "a", kNow + 1).ok());
  ASSERT_TRUE(*store().messages().AckMessage("m1", "a", kNow + 2));
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "b", kNow + 3).ok());
  ASSERT_EQ(store().messages().SweepExpiredMessages(kNow + kTtl)->size(), 1u);
  EXPECT_TRUE(store().messages().ListPendingForAgent("b", kLater, 10)->empty());

  absl::StatusOr<RedriveResult> r = Redrive("m1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->recipients, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(r->message.status, MessageStatus::kQueued);
  EXPECT_EQ(r->message.expires_at_ms, kLater + kTtl);
  EXPECT_EQ(r->message.created_at_ms, kNow);  // still the same message
  ASSERT_TRUE(r->dead_letter.has_value());
  EXPECT_EQ(r->dead_letter->reason, "ttl_expired");
  EXPECT_EQ(r->dead_letter->failed_at_ms, kNow + kTtl);

  EXPECT_EQ(store().messages().GetMessage("m1")->status,
            MessageStatus::kQueued);
  EXPECT_EQ(ReasonOf(store().messages().GetDeadLetter("m1").status()),
            "DEAD_LETTER_NOT_FOUND");
  EXPECT_TRUE(store().messages().ListDeadLetters({})->empty());
  for (const char* agent : {"b", "c"}) {
    absl::StatusOr<std::vector<MessageRecord>> pending =
        store().messages().ListPendingForAgent(agent, kLater, 10);
    ASSERT_EQ(pending->size(), 1u) << agent;
    EXPECT_EQ((*pending)[0].id, "m1");
    EXPECT_EQ(*store().messages().CountPendingForAgent(agent, kLater, 10), 1)
        << agent;
  }
  EXPECT_TRUE(store().messages().ListPendingForAgent("a", kLater, 10)->empty());
  const absl::StatusOr<std::vector<InboxRecord>> inbox =
      store().messages().ListInbox("m1");
  ASSERT_TRUE(inbox.ok()) << inbox.status();
  for (const InboxRecord& row : *inbox) {
    if (row.agent_id == "a") {
      EXPECT_EQ(row.acked_at_ms, kNow + 2);  // acknowledged stays so
    } else {
      EXPECT_FALSE(row.delivered_at_ms.has_value()) << row.agent_id;
    }
    if (row.agent_id == "b") {
      EXPECT_EQ(row.attempts, 1);  // attempts kept
    }
  }
  // Delivered and acknowledged as any message is.
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "b", kLater + 1).ok());
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "c", kLater + 1).ok());
  EXPECT_TRUE(*store().messages().AckMessage("m1", "b", kLater + 2));
  EXPECT_TRUE(*store().messages().AckMessage("m1", "c", kLater + 2));
  EXPECT_EQ(store().messages().GetMessage("m1")->status, MessageStatus::kAcked);
}

TEST_P(RedriveStore, ASecondRedriveIsRefusedByTheStatusFenceAndChangesNothing) {
  ExpiredMessage("m1", {"a"});
  ASSERT_TRUE(Redrive("m1").ok());
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "a", kLater + 1).ok());

  absl::StatusOr<RedriveResult> again = Redrive("m1");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(again.status()), "MESSAGE_NOT_DEAD_LETTER");
  EXPECT_EQ(MetadataOf(again.status())["message_id"], "m1");
  EXPECT_EQ(MetadataOf(again.status())["status"], "delivered");
  // The delivery it would have reset is as it was.
  EXPECT_EQ(store().messages().ListInbox("m1")->at(0).delivered_at_ms,
            kLater + 1);

  ASSERT_TRUE(
      store().messages().InsertMessage(TestMessage("live"), {"a"}).ok());
  EXPECT_EQ(ReasonOf(Redrive("live").status()), "MESSAGE_NOT_DEAD_LETTER");
  absl::StatusOr<RedriveResult> missing = Redrive("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReasonOf(missing.status()), "MESSAGE_NOT_FOUND");
}

TEST_P(RedriveStore, ARoleMessageGoesToTheGivenHolderOrBackToTheBacklog) {
  ExpiredMessage("backlog", {}, "rk2.cto-key");
  ExpiredMessage("held", {}, "rk2.cto-key");

  absl::StatusOr<RedriveResult> waiting = Redrive("backlog");
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_TRUE(waiting->recipients.empty());
  absl::StatusOr<std::vector<MessageRecord>> backlog =
      store().messages().ListPendingRoleMessages("rk2.cto-key", kLater);
  ASSERT_EQ(backlog->size(), 1u);
  EXPECT_EQ((*backlog)[0].id, "backlog");

  absl::StatusOr<RedriveResult> handed = Redrive("held", "holder");
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_EQ(handed->recipients, (std::vector<std::string>{"holder"}));
  absl::StatusOr<std::vector<MessageRecord>> inbox =
      store().messages().ListPendingForAgent("holder", kLater, 10);
  ASSERT_EQ(inbox->size(), 1u);
  EXPECT_EQ((*inbox)[0].id, "held");
}

TEST_P(RedriveStore, AHolderThatWasARecipientAlreadyIsNotAddedTwice) {
  ExpiredMessage("m1", {"holder"}, "rk2.cto-key");
  absl::StatusOr<RedriveResult> r = Redrive("m1", "holder");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->recipients, (std::vector<std::string>{"holder"}));
  EXPECT_EQ(store().messages().ListInbox("m1")->size(), 1u);
}

TEST_P(RedriveStore, ADeadLetterOfAClosedScopeCannotBeRedriven) {
  ExpiredMessage("m1", {"holder"}, "rk2.closed");
  ASSERT_EQ(Exec("INSERT INTO hub_closed_scopes (project_id, scope_id, "
                 "role_key_wire, closed_at_ms, closed_by, reason) "
                 "VALUES ('prj_1', 'scp_1', 'rk2.closed', 1, 'op', '')"),
            "");
  absl::StatusOr<RedriveResult> r = Redrive("m1");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(r.status()), "ROLE_SCOPE_CLOSED");
  EXPECT_EQ(store().messages().GetMessage("m1")->status,
            MessageStatus::kDeadLetter);
  EXPECT_EQ(store().messages().GetDeadLetter("m1")->reason, "ttl_expired");
  EXPECT_TRUE(
      store().messages().ListPendingForAgent("holder", kLater, 10)->empty());
}

TEST_P(RedriveStore, ARedrivenMessageCountsAgainstTheInboxLimitAgain) {
  // The limit is decided inside the write from counts the store keeps (in
  // memory on SQLite, by triggers on PostgreSQL): the re-drive moves them.
  ASSERT_TRUE(store()
                  .messages()
                  .InsertMessageDelivering(TestMessage("m1", 5, kNow, kTtl),
                                           {"a"}, {}, kNow, 1)
                  .ok());
  ASSERT_EQ(store().messages().SweepExpiredMessages(kNow + kTtl)->size(), 1u);
  ASSERT_TRUE(Redrive("m1").ok());
  absl::StatusOr<std::vector<InboxRecord>> full =
      store().messages().InsertMessageDelivering(TestMessage("m2", 5, kLater),
                                                 {"a"}, {}, kLater, 1);
  EXPECT_EQ(ReasonOf(full.status()), "LIMIT_EXCEEDED");
}

TEST_P(RedriveStore, ARedriveToAFullInboxIsRefusedAsAPublishAndChangesNothing) {
  ExpiredMessage("m1", {"a", "b"});
  FillInbox("b", 2);
  absl::StatusOr<RedriveResult> r = Redrive("m1", std::nullopt, 2);
  ExpectRefusedForFullInbox(r.status(), "m1", "b", 2);
  // "a" was not made pending either.
  EXPECT_EQ(*store().messages().CountPendingForAgent("a", kLater, 1000), 0);
  // Room again (one of b's acknowledged): the re-drive goes through.
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("fill-b-0", "b", kLater).ok());
  ASSERT_TRUE(*store().messages().AckMessage("fill-b-0", "b", kLater));
  r = Redrive("m1", std::nullopt, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->recipients, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*store().messages().CountPendingForAgent("b", kLater, 1000), 2);
}

TEST_P(RedriveStore, ARedriveToARoleHolderWithAFullInboxIsRefused) {
  ExpiredMessage("m1", {}, "rk2.lead");
  FillInbox("holder", 1);
  ExpectRefusedForFullInbox(Redrive("m1", "holder", 1).status(), "m1", "holder",
                            1);
  EXPECT_TRUE(store().messages().ListInbox("m1")->empty());
}

TEST_P(RedriveStore, AnAcknowledgedRecipientDoesNotCountAgainstTheLimit) {
  // "a" acked it: the re-drive makes only "c" pending, and a's full inbox
  // is no reason to refuse.
  MessageRecord m = TestMessage("m1", 5, kNow, kTtl);
  ASSERT_TRUE(store().messages().InsertMessage(m, {"a", "c"}).ok());
  ASSERT_TRUE(
      store().messages().MarkDeliveredIfUnacked("m1", "a", kNow + 1).ok());
  ASSERT_TRUE(*store().messages().AckMessage("m1", "a", kNow + 2));
  ASSERT_EQ(store().messages().SweepExpiredMessages(kNow + kTtl)->size(), 1u);
  FillInbox("a", 1);
  absl::StatusOr<RedriveResult> r = Redrive("m1", "a", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->recipients, (std::vector<std::string>{"c"}));
}

// Many re-drives of the same dead letters at once, through two hubs over one
// PostgreSQL database (or one SQLite store from two threads): each dead
// letter is re-driven exactly once, every other attempt refused.
TEST_P(RedriveStore, ConcurrentRedrivesQueueEachDeadLetterExactlyOnce) {
  constexpr int kRaced = 30;
  for (int i = 0; i < kRaced; ++i) {
    ASSERT_TRUE(store()
                    .messages()
                    .InsertMessage(
                        TestMessage(absl::StrCat("m", i), 5, kNow, kTtl), {"a"})
                    .ok());
  }
  ASSERT_EQ(store().messages().SweepExpiredMessages(kNow + kTtl)->size(),
            static_cast<size_t>(kRaced));
  std::unique_ptr<Store> other;
  if (postgres()) {
    other = Open();
    ASSERT_NE(other, nullptr);
  }
  Store* hubs[2] = {&store(), other != nullptr ? other.get() : &store()};
  std::atomic<int> won{0};
  std::atomic<int> refused{0};
  std::atomic<int> failed{0};
  auto racer = [&](Store* hub) {
    for (int i = 0; i < kRaced; ++i) {
      DeadLetterRedrive r;
      r.message_id = absl::StrCat("m", i);
      r.now_ms = kLater;
      absl::StatusOr<RedriveResult> done = hub->messages().RedriveDeadLetter(r);
      if (done.ok()) {
        ++won;
      } else if (ReasonOf(done.status()) == "MESSAGE_NOT_DEAD_LETTER") {
        ++refused;
      } else {
        ++failed;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(racer, hubs[t % 2]);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(won.load(), kRaced);
  EXPECT_EQ(refused.load(), 3 * kRaced);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(*store().messages().CountPendingForAgent("a", kLater, 1000),
            kRaced);
  EXPECT_TRUE(store().messages().ListDeadLetters({})->empty());
}

HUB_STORE_TEST_SUITE(RedriveStore);

}  // namespace
}  // namespace hub::storage
