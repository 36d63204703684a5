#include "registry/ack_coalescer.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status/status.h"

namespace hub {
namespace {

using ::testing::ElementsAre;

// A store whose writes wait until the test finishes them, in any order.
// Every test answers each write it was given: ~AckCoalescer waits for the
// writes in flight.
class FakeWrites {
 public:
  struct Call {
    std::string agent_id;
    std::vector<std::string> ids;
    std::optional<int64_t> generation;
    AckCoalescer::Written done;
  };

  AckCoalescer::Write Writer() {
    return
        [this](const std::string& agent_id, const std::vector<std::string>& ids,
               std::optional<int64_t> generation, AckCoalescer::Written done) {
          calls_.push_back(std::make_unique<Call>(
              Call{agent_id, ids, generation, std::move(done)}));
        };
  }

  size_t size() const { return calls_.size(); }
  const Call& call(size_t i) const { return *calls_[i]; }
  // Finishes write `i`: every id acknowledged except those in `unknown`.
  void Succeed(size_t i, const std::vector<std::string>& unknown = {}) {
    std::vector<bool> acked;
    for (const std::string& id : calls_[i]->ids) {
      acked.push_back(std::find(unknown.begin(), unknown.end(), id) ==
                      unknown.end());
    }
    std::move(calls_[i]->done)(std::move(acked));
  }
  void Fail(size_t i, absl::Status status) {
    std::move(calls_[i]->done)(std::move(status));
  }

 private:
  std::vector<std::unique_ptr<Call>> calls_;
};

// What one request was answered.
struct Answer {
  bool answered = false;
  absl::StatusOr<std::vector<bool>> acked = std::vector<bool>{};
};

AckCoalescer::Done Into(Answer* answer) {
  return [answer](std::vector<std::string>,
                  absl::StatusOr<std::vector<bool>> acked) {
    answer->answered = true;
    answer->acked = std::move(acked);
  };
}

TEST(AckCoalescerTest, AnAgentAckingOneRequestAtATimeWritesEachAtOnce) {
  FakeWrites store;
  AckCoalescer acks(store.Writer(), 2, 1000);
  Answer first, second;
  acks.Ack("a", {"m1"}, 7, Into(&first));
  ASSERT_EQ(store.size(), 1u);
  EXPECT_THAT(store.call(0).ids, ElementsAre("m1"));
  EXPECT_EQ(store.call(0).generation, 7);
  store.Succeed(0);
  ASSERT_TRUE(first.answered);
  EXPECT_THAT(*first.acked, ElementsAre(true));

  acks.Ack("a", {"m2"}, 7, Into(&second));
  ASSERT_EQ(store.size(), 2u);
  store.Succeed(1);
  EXPECT_THAT(*second.acked, ElementsAre(true));
  EXPECT_EQ(acks.writes(), 2);
  EXPECT_EQ(acks.requests(), 2);
}

TEST(AckCoalescerTest, AcksThatComeWhileTwoAreWrittenGoTogetherAsOneWrite) {
  FakeWrites store;
  AckCoalescer acks(store.Writer(), 2, 1000);
  Answer a1, a2, a3, a4, a5;
  acks.Ack("a", {"m1"}, 1, Into(&a1));
  acks.Ack("a", {"m2"}, 1, Into(&a2));
  // Both writes run: the next three wait, merged.
  acks.Ack("a", {"m3", "m4"}, 1, Into(&a3));
  acks.Ack("a", {"m4", "m5"}, 1, Into(&a4));
  acks.Ack("a", {"m6"}, 1, Into(&a5));
  ASSERT_EQ(store.size(), 2u);
  EXPECT_FALSE(a3.answered);

  store.Succeed(1);  // the second write finishes first
  EXPECT_TRUE(a2.answered);
  EXPECT_FALSE(a1.answered);
  ASSERT_EQ(store.size(), 3u);
  EXPECT_THAT(store.call(2).ids, ElementsAre("m3", "m4", "m5", "m6"));
  EXPECT_EQ(store.call(2).generation, 1);

  // Each request is answered for its own ids, in its own order.
  store.Succeed(2, {"m5"});
  ASSERT_TRUE(a3.answered && a4.answered && a5.answered);
  EXPECT_THAT(*a3.acked, ElementsAre(true, true));
  EXPECT_THAT(*a4.acked, ElementsAre(true, false));
  EXPECT_THAT(*a5.acked, ElementsAre(true));
  store.Succeed(0);
  EXPECT_TRUE(a1.answered);
  EXPECT_EQ(acks.writes(), 3);
  EXPECT_EQ(acks.requests(), 5);
}

TEST(AckCoalescerTest,
     AFailedWriteFailsEveryRequestItCarriedAndTheNextStillRuns) {
  FakeWrites store;
  AckCoalescer acks(store.Writer(), 1, 1000);
  Answer a1, a2, a3, a4;
  acks.Ack("a", {"m1"}, 1, Into(&a1));
  acks.Ack("a", {"m2"}, 1, Into(&a2));
  acks.Ack("a", {"m3"}, 1, Into(&a3));
  ASSERT_EQ(store.size(), 1u);
  store.Succeed(0);
  ASSERT_EQ(store.size(), 2u);
  acks.Ack("a", {"m4"}, 1, Into(&a4));  // waits for the merged write
  store.Fail(1, absl::UnavailableError("the store is gone"));
  EXPECT_EQ(a2.acked.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(a3.acked.status().code(), absl::StatusCode::kUnavailable);
  ASSERT_EQ(store.size(), 3u);
  EXPECT_THAT(store.call(2).ids, ElementsAre("m4"));
  store.Succeed(2);
  EXPECT_THAT(*a4.acked, ElementsAre(true));
}

TEST(AckCoalescerTest, AcksOfDifferentGenerationsAreNeverWrittenTogether) {
  FakeWrites store;
  AckCoalescer acks(store.Writer(), 1, 1000);
  Answer a1, a2, a3, a4;
  acks.Ack("a", {"m1"}, 1, Into(&a1));
  acks.Ack("a", {"m2"}, 1, Into(&a2));
  acks.Ack("a", {"m3"}, 2, Into(&a3));
  acks.Ack("a", {"m4"}, std::nullopt, Into(&a4));
  store.Succeed(0);
  ASSERT_EQ(store.size(), 2u);
  EXPECT_THAT(store.call(1).ids, ElementsAre("m2"));
  EXPECT_EQ(store.call(1).generation, 1);
  store.Succeed(1);
  ASSERT_EQ(store.size(), 3u);
  EXPECT_THAT(store.call(2).ids, ElementsAre("m3"));
  EXPECT_EQ(store.call(2).generation, 2);
  store.Fail(2, absl::FailedPreconditionError("STALE_PRESENCE_OWNER"));
  EXPECT_FALSE(a3.acked.ok());
  ASSERT_EQ(store.size(), 4u);
  EXPECT_EQ(store.call(3).generation, std::nullopt);
  store.Succeed(3);
  EXPECT_THAT(*a4.acked, ElementsAre(true));
}

TEST(AckCoalescerTest, AMergedWriteHoldsAtMostTheLimitAndNeverSplitsARequest) {
  FakeWrites store;
  AckCoalescer acks(store.Writer(), 1, 3);
  Answer a0, a1, a2, a3;
  acks.Ack("a", {"m0"}, 1, Into(&a0));
  acks.Ack("a", {"m1", "m2"}, 1, Into(&a1));
  acks.Ack("a", {"m3", "m4"}, 1, Into(&a2));  // 4 > 3: a write of its own
  acks.Ack("a", {"m5"}, 1, Into(&a3));
  store.Succeed(0);
  ASSERT_EQ(store.size(), 2u);
  EXPECT_THAT(store.call(1).ids, ElementsAre("m1", "m2"));
  store.Succeed(1);
  ASSERT_EQ(store.size(), 3u);
  EXPECT_THAT(store.call(2).ids, ElementsAre("m3", "m4", "m5"));
  store.Succeed(2);
  EXPECT_THAT(*a2.acked, ElementsAre(true, true));
  EXPECT_THAT(*a3.acked, ElementsAre(true));
}

TEST(AckCoalescerTest, OneAgentsAcksNeverWaitForAnothers) {
  FakeWrites store;
  AckCoalescer acks(store.Writer(), 1, 1000);
  Answer a1, b1;
  acks.Ack("a", {"m1"}, 1, Into(&a1));
  acks.Ack("b", {"m1"}, 1, Into(&b1));
  ASSERT_EQ(store.size(), 2u);
  EXPECT_EQ(store.call(1).agent_id, "b");
  store.Succeed(1);
  EXPECT_TRUE(b1.answered);
  EXPECT_FALSE(a1.answered);
  store.Succeed(0);
  EXPECT_TRUE(a1.answered);
}

TEST(AckCoalescerTest, AStoreThatAnswersBeforeItsWriteReturnsKeepsTheOrder) {
  std::vector<std::string> order;
  int depth = 0;
  AckCoalescer* self = nullptr;
  Answer later;
  AckCoalescer acks(
      [&](const std::string&, const std::vector<std::string>& ids,
          std::optional<int64_t>, AckCoalescer::Written done) {
        order.push_back("write " + ids.front());
        // The first write's answer comes with an ack that arrives while it
        // is still being written: that one waits, then runs.
        if (++depth == 1) self->Ack("a", {"m2"}, 1, Into(&later));
        std::move(done)(std::vector<bool>(ids.size(), true));
        order.push_back("returned " + ids.front());
      },
      1, 1000);
  self = &acks;
  Answer first;
  acks.Ack(
      "a", {"m1"}, 1,
      [&](std::vector<std::string>, absl::StatusOr<std::vector<bool>> acked) {
        order.push_back("answered m1");
        first.answered = acked.ok();
      });
  EXPECT_TRUE(first.answered);
  EXPECT_TRUE(later.answered);
  EXPECT_THAT(order, ElementsAre("write m1", "answered m1", "write m2",
                                 "returned m2", "returned m1"));
  EXPECT_EQ(acks.writes(), 2);
}

TEST(AckCoalescerTest, NothingIsKeptForAnAgentOnceItsWritesAreDone) {
  FakeWrites store;
  AckCoalescer acks(store.Writer(), 2, 1000);
  Answer a1;
  acks.Ack("a", {"m1"}, 1, Into(&a1));
  store.Succeed(0);
  // A fresh round behaves as the first: no leftover in-flight count.
  Answer a2, a3;
  acks.Ack("a", {"m2"}, 1, Into(&a2));
  acks.Ack("a", {"m3"}, 1, Into(&a3));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_THAT(*a1.acked, ElementsAre(true));
  store.Succeed(1);
  store.Succeed(2);
}

TEST(AckCoalescerTest, QuiescingFailsTheWaitingRequestsAndWaitsForTheWrites) {
  FakeWrites store;
  AckCoalescer acks(store.Writer(), 1, 1000);
  Answer running;
  acks.Ack("a", {"m1"}, 1, Into(&running));
  absl::Notification waiting_answered;
  absl::StatusOr<std::vector<bool>> waiting;
  acks.Ack("a", {"m2"}, 1,
           [&](std::vector<std::string>, absl::StatusOr<std::vector<bool>> r) {
             waiting = std::move(r);
             waiting_answered.Notify();
           });
  ASSERT_EQ(store.size(), 1u);

  absl::Notification quiesced;
  std::thread owner([&] {
    acks.Quiesce();
    quiesced.Notify();
  });
  // The request behind the running write is failed, never written...
  waiting_answered.WaitForNotification();
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(waiting.status()), "HUB_SHUTTING_DOWN");
  // ...and Quiesce returns only once the running write has been answered.
  EXPECT_FALSE(quiesced.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  EXPECT_FALSE(running.answered);
  store.Succeed(0);
  owner.join();
  EXPECT_TRUE(quiesced.HasBeenNotified());
  EXPECT_THAT(*running.acked, ElementsAre(true));
  EXPECT_EQ(store.size(), 1u);
}

TEST(AckCoalescerTest, AnAckAfterQuiescingIsRefusedAtOnceAndNotWritten) {
  FakeWrites store;
  AckCoalescer acks(store.Writer(), 2, 1000);
  acks.Quiesce();
  Answer late;
  acks.Ack("a", {"m1"}, 1, Into(&late));
  ASSERT_TRUE(late.answered);
  EXPECT_EQ(late.acked.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(late.acked.status()), "HUB_SHUTTING_DOWN");
  EXPECT_EQ(store.size(), 0u);
  acks.Quiesce();  // again: nothing to wait for
}

}  // namespace
}  // namespace hub
