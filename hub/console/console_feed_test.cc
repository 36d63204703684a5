#include "hub/console/console_feed.h"

#include <thread>

#include "gtest/gtest.h"

namespace hub::console {
namespace {

TEST(ConsoleFeedTest, ChangesAreNumberedInPostOrderAndReadAfterACursor) {
  ConsoleFeed feed;
  EXPECT_EQ(feed.head(), 0);
  EXPECT_EQ(feed.Post("agent", {"prj_a"}, "{\"a\":1}"), 1);
  EXPECT_EQ(feed.Post("role", {}, "{\"r\":2}"), 2);
  ConsoleBatch batch = feed.WaitAfter(0, absl::ZeroDuration());
  ASSERT_EQ(batch.changes.size(), 2u);
  EXPECT_EQ(batch.changes[0].seq, 1);
  EXPECT_EQ(batch.changes[0].kind, "agent");
  EXPECT_EQ(batch.changes[0].projects, std::vector<std::string>{"prj_a"});
  EXPECT_EQ(batch.changes[1].json, "{\"r\":2}");
  EXPECT_FALSE(batch.lost);
  EXPECT_EQ(batch.head, 2);
  batch = feed.WaitAfter(1, absl::ZeroDuration());
  ASSERT_EQ(batch.changes.size(), 1u);
  EXPECT_EQ(batch.changes[0].seq, 2);
}

TEST(ConsoleFeedTest, AWaiterWithNothingNewTimesOutEmpty) {
  ConsoleFeed feed;
  feed.Post("agent", {}, "{}");
  ConsoleBatch batch = feed.WaitAfter(1, absl::Milliseconds(1));
  EXPECT_TRUE(batch.changes.empty());
  EXPECT_FALSE(batch.lost);
  EXPECT_FALSE(batch.closed);
}

TEST(ConsoleFeedTest, ACursorOlderThanTheRingIsToldItLostChanges) {
  ConsoleFeed feed(2);
  for (int i = 0; i < 5; ++i) feed.Post("agent", {}, "{}");
  EXPECT_TRUE(feed.WaitAfter(1, absl::ZeroDuration()).lost);
  ConsoleBatch kept = feed.WaitAfter(3, absl::ZeroDuration());
  EXPECT_FALSE(kept.lost);
  ASSERT_EQ(kept.changes.size(), 2u);
  EXPECT_EQ(kept.changes[0].seq, 4);
}

TEST(ConsoleFeedTest, APostWakesAWaitingStreamAndCloseEndsEveryWait) {
  ConsoleFeed feed;
  ConsoleBatch got;
  std::thread waiter([&] { got = feed.WaitAfter(0, absl::Seconds(60)); });
  feed.Post("event", {}, "{\"e\":1}");
  waiter.join();
  ASSERT_EQ(got.changes.size(), 1u);
  std::thread closed_waiter(
      [&] { got = feed.WaitAfter(1, absl::Seconds(60)); });
  feed.Close();
  closed_waiter.join();
  EXPECT_TRUE(got.closed);
  EXPECT_TRUE(got.changes.empty());
}

TEST(ConsoleFeedTest, ABatchHoldsAtMostTheLimit) {
  ConsoleFeed feed;
  for (int i = 0; i < 10; ++i) feed.Post("agent", {}, "{}");
  ConsoleBatch batch = feed.WaitAfter(0, absl::ZeroDuration(), 3);
  ASSERT_EQ(batch.changes.size(), 3u);
  EXPECT_EQ(batch.changes[2].seq, 3);
}

}  // namespace
}  // namespace hub::console
