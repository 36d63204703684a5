#include "tools/chaos/push_log.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hub::chaos {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kMs = 1000000;

hub::v1::MessageDelivery Delivery(const std::string& id,
                                  hub::v1::DeliveryState state) {
  hub::v1::MessageDelivery d;
  d.mutable_message()->set_message_id(id);
  d.set_state(state);
  d.set_attempts(1);
  return d;
}

std::vector<std::string> Violations(const PushLog& log) {
  std::vector<std::string> found;
  log.Check(&found);
  return found;
}

TEST(PushLogTest, APushThatReadsAckedIsAViolation) {
  PushLog log;
  log.Pushed("a", 0, 1 * kMs, 2 * kMs,
             Delivery("m1", hub::v1::DELIVERY_STATE_DELIVERED));
  log.Pushed("a", 0, 1 * kMs, 3 * kMs,
             Delivery("m1", hub::v1::DELIVERY_STATE_ACKED));
  EXPECT_THAT(Violations(log),
              ElementsAre(HasSubstr("m1 was pushed to a by hub 0 reading "
                                    "ACKED")));
}

TEST(PushLogTest, ARepeatBeforeTheAckIsNotAViolation) {
  PushLog log;
  log.Pushed("a", 0, 1 * kMs, 2 * kMs,
             Delivery("m1", hub::v1::DELIVERY_STATE_DELIVERED));
  log.Pushed("a", 1, 1 * kMs, 3 * kMs,
             Delivery("m1", hub::v1::DELIVERY_STATE_DELIVERED));
  EXPECT_THAT(Violations(log), IsEmpty());
  EXPECT_THAT(log.Summary(), HasSubstr("repeats of a message to one agent: 1"));
}

TEST(PushLogTest,
     AMessagePublishedDuringAPauseOnAStreamFromBeforeItIsAZombiePush) {
  PushLog log;
  log.Paused(2, 100 * kMs, 200 * kMs);
  log.Published("m1", 150 * kMs);
  log.Pushed("a", 2, 50 * kMs, 210 * kMs,
             Delivery("m1", hub::v1::DELIVERY_STATE_DELIVERED));
  EXPECT_THAT(Violations(log),
              ElementsAre(HasSubstr("hub 2, paused at 100 ms and resumed at "
                                    "200 ms, pushed message m1")));
}

TEST(PushLogTest, AfterAPauseOnlyNewStreamsAndOlderMessagesMayBePushed) {
  PushLog log;
  log.Paused(2, 100 * kMs, 200 * kMs);
  log.Published("old", 90 * kMs);
  log.Published("new", 150 * kMs);
  // A message published before the pause, on the stream from before it: the
  // hub may have read it before it stopped.
  log.Pushed("a", 2, 50 * kMs, 210 * kMs,
             Delivery("old", hub::v1::DELIVERY_STATE_DELIVERED));
  // A stream attached after the hub rejoined.
  log.Pushed("a", 2, 300 * kMs, 310 * kMs,
             Delivery("new", hub::v1::DELIVERY_STATE_DELIVERED));
  // Another hub's stream.
  log.Pushed("b", 1, 50 * kMs, 160 * kMs,
             Delivery("new", hub::v1::DELIVERY_STATE_DELIVERED));
  EXPECT_THAT(Violations(log), IsEmpty());
}

TEST(PushLogTest, AStreamThatLivedThroughAPauseMustEndWithHubSeatLost) {
  PushLog log;
  log.Paused(1, 100 * kMs, 200 * kMs);
  log.StreamEnded("a", 1, 50 * kMs, 205 * kMs, "HUB_SEAT_LOST");
  log.StreamEnded("b", 1, 50 * kMs, 206 * kMs, "");
  // Ended during the pause (the client gave up): nothing to check.
  log.StreamEnded("c", 1, 50 * kMs, 150 * kMs, "");
  // Attached after the pause.
  log.StreamEnded("d", 1, 300 * kMs, 400 * kMs, "");
  EXPECT_THAT(Violations(log),
              ElementsAre(HasSubstr("ended b's stream (attached at 50 ms) at "
                                    "206 ms without HUB_SEAT_LOST (no "
                                    "reason)")));
  EXPECT_THAT(log.Summary(), HasSubstr("2 streams lived through one"));
}

}  // namespace
}  // namespace hub::chaos
