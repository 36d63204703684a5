#include "hub/blocking_pool.h"

#include <atomic>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace hub {
namespace {

TEST(BlockingPoolTest, RunsEveryScheduledTask) {
  std::atomic<int> ran{0};
  {
    BlockingPool pool(4);
    for (int i = 0; i < 1000; ++i) pool.Schedule([&ran] { ++ran; });
  }  // the destructor drains the queue
  EXPECT_EQ(ran.load(), 1000);
}

TEST(BlockingPoolTest, TasksThatBlockDoNotHoldUpTheOthers) {
  BlockingPool pool(8);
  absl::Notification release;
  absl::BlockingCounter all_blocked(7);
  for (int i = 0; i < 7; ++i) {
    pool.Schedule([&] {
      all_blocked.DecrementCount();
      release.WaitForNotification();
    });
  }
  all_blocked.Wait();  // seven threads are now waiting at once
  absl::Notification eighth;
  pool.Schedule([&eighth] { eighth.Notify(); });
  eighth.WaitForNotification();
  release.Notify();
}

}  // namespace
}  // namespace hub
