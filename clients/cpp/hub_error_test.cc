#include "clients/cpp/hub_error.h"

#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"

namespace hub::client {
namespace {

grpc::Status HubFailure(grpc::StatusCode code, const std::string& reason,
                        const std::string& key, const std::string& value) {
  google::rpc::ErrorInfo info;
  info.set_reason(reason);
  info.set_domain("hub.v1");
  (*info.mutable_metadata())[key] = value;
  google::rpc::Status details;
  details.set_code(code);
  details.set_message("text");
  details.add_details()->PackFrom(info);
  return grpc::Status(code, "text", details.SerializeAsString());
}

TEST(HubErrorTest, AFailedCallKeepsItsCodeMessageAndReason) {
  absl::Status s = FromGrpcStatus(
      HubFailure(grpc::StatusCode::FAILED_PRECONDITION, "STALE_PRESENCE_OWNER",
                 "presence_generation", "7"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "text");
  EXPECT_EQ(ReasonOf(s), "STALE_PRESENCE_OWNER");
  EXPECT_EQ(ErrorMetadata(s, "presence_generation"), "7");
  EXPECT_EQ(ErrorMetadata(s, "absent"), "");
  ASSERT_TRUE(ErrorInfoOf(s).has_value());
  EXPECT_EQ(ErrorInfoOf(s)->domain(), "hub.v1");
}

TEST(HubErrorTest, AStatusWithoutDetailsHasNoReason) {
  absl::Status s =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(s), "");
  EXPECT_FALSE(ErrorInfoOf(s).has_value());
}

TEST(HubErrorTest, UnparseableDetailsAreIgnoredNotFatal) {
  absl::Status s = FromGrpcStatus(
      grpc::Status(grpc::StatusCode::INTERNAL, "x", std::string("\xff\xff")));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ReasonOf(s), "");
}

TEST(HubErrorTest, OkStaysOk) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(HubErrorTest, InBandErrorsCarryTheirReasonLikeCallFailures) {
  absl::Status s = MakeHubError(absl::StatusCode::kFailedPrecondition,
                                "STALE_EPOCH", "fenced", {{"epoch", "3"}});
  EXPECT_EQ(ReasonOf(s), "STALE_EPOCH");
  EXPECT_EQ(ErrorMetadata(s, "epoch"), "3");
}

}  // namespace
}  // namespace hub::client
