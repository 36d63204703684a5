#include "hub/console/console_login_limit.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "registry/clock.h"

namespace hub::console {
namespace {

LoginLimitOptions Limits(int failures, size_t addresses = 100) {
  LoginLimitOptions o;
  o.max_failures = failures;
  o.window = absl::Seconds(60);
  o.max_addresses = addresses;
  return o;
}

TEST(LoginLimiter, AnAddressIsRefusedAfterItsFailuresUntilTheWindowEnds) {
  FakeClock clock;
  LoginLimiter limiter(&clock, Limits(3));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(limiter.RetryAfter("10.0.0.1"), absl::ZeroDuration()) << i;
    limiter.Failed("10.0.0.1");
    clock.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(limiter.RetryAfter("10.0.0.1"), absl::Seconds(57));
  EXPECT_EQ(limiter.RetryAfter("10.0.0.2"), absl::ZeroDuration());
  clock.Advance(absl::Seconds(56));
  EXPECT_EQ(limiter.RetryAfter("10.0.0.1"), absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(limiter.RetryAfter("10.0.0.1"), absl::ZeroDuration());
  // A new window: three more tries.
  limiter.Failed("10.0.0.1");
  EXPECT_EQ(limiter.RetryAfter("10.0.0.1"), absl::ZeroDuration());
}

TEST(LoginLimiter, ASuccessfulLoginForgetsTheFailures) {
  FakeClock clock;
  LoginLimiter limiter(&clock, Limits(2));
  limiter.Failed("a");
  limiter.Succeeded("a");
  limiter.Failed("a");
  EXPECT_EQ(limiter.RetryAfter("a"), absl::ZeroDuration());
  EXPECT_EQ(limiter.tracked(), 1u);
}

TEST(LoginLimiter, MemoryStaysBoundedAndEndedWindowsGoFirst) {
  FakeClock clock;
  LoginLimiter limiter(&clock, Limits(1, /*addresses=*/10));
  limiter.Failed("old");
  clock.Advance(absl::Seconds(61));  // its window ended
  limiter.Failed("guesser");
  for (int i = 0; i < 1000; ++i) {
    limiter.Failed(absl::StrCat("spray-", i));
    EXPECT_LE(limiter.tracked(), 10u);
  }
  EXPECT_EQ(limiter.tracked(), 10u);
  // The spray took the oldest places, never more than the bound; the most
  // recent addresses are still refused.
  EXPECT_GT(limiter.RetryAfter("spray-999"), absl::ZeroDuration());
}

TEST(LoginLimiter, ConcurrentFailuresFromOneAddressAreAllCounted) {
  FakeClock clock;
  LoginLimiter limiter(&clock, Limits(400));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) limiter.Failed("one");
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT(limiter.RetryAfter("one"), absl::ZeroDuration());
}

}  // namespace
}  // namespace hub::console
