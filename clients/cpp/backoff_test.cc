#include "clients/cpp/backoff.h"

#include <vector>

#include "gtest/gtest.h"

namespace hub::client {
namespace {

// A scripted source of randomness: returns the given values in turn.
std::function<double()> Script(std::vector<double> values) {
  auto next = std::make_shared<size_t>(0);
  return [values, next] { return values[(*next)++ % values.size()]; };
}

BackoffPolicy Policy() {
  BackoffPolicy policy;
  policy.initial = absl::Milliseconds(100);
  policy.max = absl::Seconds(1);
  policy.multiplier = 2.0;
  policy.jitter = 0.2;
  return policy;
}

TEST(BackoffTest, WithoutJitterDelaysDoubleUpToTheMaximum) {
  BackoffPolicy policy = Policy();
  policy.jitter = 0;
  Backoff backoff(policy, Script({0.5}));
  std::vector<absl::Duration> delays;
  for (int i = 0; i < 6; ++i) delays.push_back(backoff.Next());
  EXPECT_EQ(delays, (std::vector<absl::Duration>{
                        absl::Milliseconds(100), absl::Milliseconds(200),
                        absl::Milliseconds(400), absl::Milliseconds(800),
                        absl::Seconds(1), absl::Seconds(1)}));
  EXPECT_EQ(backoff.attempts(), 6);
}

TEST(BackoffTest, JitterSpreadsEachDelayAroundItsBase) {
  // 0 -> the low end (base * 0.8), 0.5 -> the base, ~1 -> near base * 1.2.
  Backoff backoff(Policy(), Script({0.0, 0.5, 0.999999}));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(80));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(200));
  const absl::Duration high = backoff.Next();
  EXPECT_GT(high, absl::Milliseconds(479));
  EXPECT_LT(high, absl::Milliseconds(480) + absl::Microseconds(1));
}

TEST(BackoffTest, JitteredDelaysStayWithinTheirBoundsForAnyRandomValue) {
  Backoff backoff(Policy());  // real randomness
  absl::Duration base = absl::Milliseconds(100);
  for (int i = 0; i < 50; ++i) {
    const absl::Duration d = backoff.Next();
    EXPECT_GE(d, base * 0.8) << "attempt " << i;
    EXPECT_LE(d, base * 1.2) << "attempt " << i;
    base = std::min(absl::Seconds(1), base * 2);
  }
}

TEST(BackoffTest, ResetStartsAgainFromTheInitialDelay) {
  BackoffPolicy policy = Policy();
  policy.jitter = 0;
  Backoff backoff(policy, Script({0.5}));
  backoff.Next();
  backoff.Next();
  backoff.Next();
  backoff.Reset();
  EXPECT_EQ(backoff.attempts(), 0);
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, PoliciesOutOfRangeAreRejected) {
  EXPECT_TRUE(ValidateBackoffPolicy(Policy()).ok());
  BackoffPolicy p = Policy();
  p.initial = absl::ZeroDuration();
  EXPECT_EQ(ValidateBackoffPolicy(p).code(),
            absl::StatusCode::kInvalidArgument);
  p = Policy();
  p.max = absl::Milliseconds(10);
  EXPECT_FALSE(ValidateBackoffPolicy(p).ok());
  p = Policy();
  p.multiplier = 0.5;
  EXPECT_FALSE(ValidateBackoffPolicy(p).ok());
  p = Policy();
  p.jitter = 1.5;
  EXPECT_FALSE(ValidateBackoffPolicy(p).ok());
}

}  // namespace
}  // namespace hub::client
