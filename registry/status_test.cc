#include "registry/status.h"

#include "gtest/gtest.h"

namespace hub {
namespace {

TEST(ReasonErrorTest, CarriesCodeMessageAndReason) {
  absl::Status s = InvalidArgumentError("ROLE_KEY_INVALID", "not an object");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "not an object");
  EXPECT_EQ(ReasonOf(s), "ROLE_KEY_INVALID");
}

TEST(ReasonErrorTest, PlainStatusHasNoReason) {
  EXPECT_EQ(ReasonOf(absl::OkStatus()), "");
  EXPECT_EQ(ReasonOf(absl::InternalError("x")), "");
}

TEST(ReasonErrorTest, MetadataIsKeptByKeyAndLastValueWins) {
  absl::Status s = FailedPreconditionError("STALE_EPOCH", "old epoch");
  s = WithMetadata(s, "epoch", "3");
  s = WithMetadata(s, "expected_epoch", "2");
  s = WithMetadata(s, "epoch", "4");
  auto md = MetadataOf(s);
  ASSERT_EQ(md.size(), 2u);
  EXPECT_EQ(md["epoch"], "4");
  EXPECT_EQ(md["expected_epoch"], "2");
  EXPECT_EQ(ReasonOf(s), "STALE_EPOCH");
}

TEST(ReasonErrorTest, MetadataOnOkStatusIsIgnored) {
  EXPECT_TRUE(WithMetadata(absl::OkStatus(), "k", "v").ok());
}

}  // namespace
}  // namespace hub
