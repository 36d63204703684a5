#include "registry/uuid.h"

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "registry/clock.h"

namespace hub {
namespace {

constexpr int64_t kStartMs = 1'700'000'000'123;

absl::Time Millis(int64_t ms) { return absl::FromUnixMillis(ms); }

// The 12-bit counter field (rand_a) of a UUIDv7 text.
int Counter(const std::string& id) {
  return std::stoi(id.substr(15, 3), nullptr, 16);
}

TEST(UuidV7Test, IdsHaveTheVersion7VariantAndLowerCaseHexLayout) {
  FakeClock clock(Millis(kStartMs));
  UuidV7Generator generator(&clock);
  for (int i = 0; i < 1000; ++i) {
    const std::string id = generator.Next();
    ASSERT_TRUE(IsUuidV7(id)) << id;
    ASSERT_EQ(id.size(), 36u);
  }
}

TEST(UuidV7Test, FormatCheckRejectsOtherVersionsVariantsAndUpperCase) {
  EXPECT_TRUE(IsUuidV7("0189f7a4-1c2b-7def-8123-456789abcdef"));
  EXPECT_TRUE(IsUuidV7("0189f7a4-1c2b-7def-b123-456789abcdef"));
  EXPECT_FALSE(IsUuidV7("0189f7a4-1c2b-4def-8123-456789abcdef"));  // v4
  EXPECT_FALSE(IsUuidV7("0189f7a4-1c2b-7def-c123-456789abcdef"));  // variant
  EXPECT_FALSE(IsUuidV7("0189F7A4-1C2B-7DEF-8123-456789ABCDEF"));
  EXPECT_FALSE(IsUuidV7("0189f7a41c2b7def8123456789abcdef"));
  EXPECT_FALSE(IsUuidV7("0189f7a4-1c2b-7def-8123-456789abcdef0"));
  EXPECT_FALSE(IsUuidV7("0189f7a4-1c2b-7def-8123-456789abcdeg"));
  EXPECT_FALSE(UuidV7UnixMillis("not-a-uuid").has_value());
}

TEST(UuidV7Test, TimestampFieldEqualsTheClockWhenTheClockMovesForward) {
  FakeClock clock(Millis(kStartMs));
  UuidV7Generator generator(&clock);
  for (int step = 0; step < 5; ++step) {
    const std::string id = generator.Next();
    EXPECT_EQ(UuidV7UnixMillis(id), kStartMs + step * 7) << id;
    EXPECT_EQ(Counter(id), 0) << "counter restarts in a new ms";
    clock.Advance(absl::Milliseconds(7));
  }
}

TEST(UuidV7Test, TenThousandIdsInOneMillisecondStrictlyIncreaseByBorrowing) {
  FakeClock clock(Millis(kStartMs));
  UuidV7Generator generator(&clock);
  std::vector<std::string> ids;
  for (int i = 0; i < 10'000; ++i) ids.push_back(generator.Next());
  for (size_t i = 1; i < ids.size(); ++i) {
    ASSERT_LT(ids[i - 1], ids[i]) << i;
  }
  // 4096 ids per ms: id 4096 is the first in the borrowed next ms.
  EXPECT_EQ(UuidV7UnixMillis(ids[4095]), kStartMs);
  EXPECT_EQ(Counter(ids[4095]), 4095);
  EXPECT_EQ(UuidV7UnixMillis(ids[4096]), kStartMs + 1);
  EXPECT_EQ(Counter(ids[4096]), 0);
  EXPECT_EQ(UuidV7UnixMillis(ids[9999]), kStartMs + 2);
  // When the clock reaches the borrowed ms, ids keep increasing.
  clock.Advance(absl::Milliseconds(2));
  const std::string next = generator.Next();
  EXPECT_LT(ids.back(), next);
  EXPECT_EQ(UuidV7UnixMillis(next), kStartMs + 2);
}

TEST(UuidV7Test, IdsKeepIncreasingWhenTheClockStepsBackwards) {
  FakeClock clock(Millis(kStartMs));
  UuidV7Generator generator(&clock);
  const std::string before = generator.Next();
  clock.Set(Millis(kStartMs - 60'000));  // NTP steps a minute back
  std::string previous = before;
  for (int i = 0; i < 100; ++i) {
    const std::string id = generator.Next();
    ASSERT_LT(previous, id);
    EXPECT_EQ(UuidV7UnixMillis(id), kStartMs) << "stays on the last ms";
    previous = id;
    clock.Advance(absl::Milliseconds(1));
  }
  clock.Set(Millis(kStartMs + 5));
  const std::string after = generator.Next();
  EXPECT_LT(previous, after);
  EXPECT_EQ(UuidV7UnixMillis(after), kStartMs + 5);
}

TEST(UuidV7Test, ConcurrentCallersGetUniqueIdsInIssueOrderPerThread) {
  FakeClock clock(Millis(kStartMs));
  UuidV7Generator generator(&clock);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2'000;
  std::vector<std::vector<std::string>> per_thread(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        per_thread[t].push_back(generator.Next());
        if (i % 500 == 0) clock.Advance(absl::Milliseconds(1));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<std::string> all;
  for (const auto& ids : per_thread) {
    ASSERT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    ASSERT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
    all.insert(all.end(), ids.begin(), ids.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(),
            static_cast<size_t>(kThreads * kPerThread));
}

TEST(UuidV7Test, RandomTailDiffersBetweenGenerators) {
  FakeClock clock(Millis(kStartMs));
  UuidV7Generator a(&clock);
  UuidV7Generator b(&clock);
  // Same ms and counter: only the 62 random bits can tell them apart.
  EXPECT_NE(a.Next().substr(19), b.Next().substr(19));
}

}  // namespace
}  // namespace hub
