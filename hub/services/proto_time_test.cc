#include "hub/services/proto_time.h"

#include "gtest/gtest.h"

namespace hub {
namespace {

TEST(ProtoTimeTest, TimestampsAreWholeMillisecondsRoundedTowardThePast) {
  const absl::Time t = absl::FromUnixNanos(1'700'000'000'123'456'789);
  google::protobuf::Timestamp p = ToProtoTimestamp(t);
  EXPECT_EQ(p.seconds(), 1'700'000'000);
  EXPECT_EQ(p.nanos(), 123'000'000);
  EXPECT_EQ(FromProtoTimestamp(p), absl::FromUnixMillis(1'700'000'000'123));
}

TEST(ProtoTimeTest, TimestampsBeforeTheEpochKeepNonNegativeNanos) {
  google::protobuf::Timestamp p =
      ToProtoTimestamp(absl::FromUnixNanos(-1'500'000));  // -1.5 ms
  EXPECT_EQ(p.seconds(), -1);
  EXPECT_EQ(p.nanos(), 998'000'000);  // -2 ms: toward the past
}

TEST(ProtoTimeTest, DurationsAreWholeMillisecondsTruncatedTowardZero) {
  google::protobuf::Duration p =
      ToProtoDuration(absl::Seconds(3) + absl::Microseconds(207'373));
  EXPECT_EQ(p.seconds(), 3);
  EXPECT_EQ(p.nanos(), 207'000'000);
  p = ToProtoDuration(-(absl::Seconds(1) + absl::Microseconds(1'500)));
  EXPECT_EQ(p.seconds(), -1);
  EXPECT_EQ(p.nanos(), -1'000'000);
}

}  // namespace
}  // namespace hub
