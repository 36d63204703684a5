#include "hub/error_mapping.h"

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "registry/status.h"

namespace hub {
namespace {

TEST(ToGrpcStatusTest, OkStaysOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(ToGrpcStatusTest, ReasonAndMetadataBecomeErrorInfoDetails) {
  absl::Status s = WithMetadata(
      FailedPreconditionError("STALE_EPOCH", "epoch 3 is not current"),
      "current_epoch", "4");
  grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(g.error_message(), "STALE_EPOCH: epoch 3 is not current");

  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(g.error_details()));
  EXPECT_EQ(details.code(), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "STALE_EPOCH");
  EXPECT_EQ(info.domain(), "hub.v1");
  EXPECT_EQ(info.metadata().at("current_epoch"), "4");
}

TEST(ToGrpcStatusTest, EveryAbslCodeKeepsItsNumber) {
  for (int c = 1; c <= 16; ++c) {
    absl::Status s(static_cast<absl::StatusCode>(c), "x");
    EXPECT_EQ(static_cast<int>(ToGrpcStatus(s).error_code()), c);
  }
}

TEST(ToGrpcStatusTest, StatusWithoutReasonCarriesNoErrorInfo) {
  grpc::Status g = ToGrpcStatus(absl::UnavailableError("db locked"));
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(g.error_details()));
  EXPECT_EQ(details.details_size(), 0);
  EXPECT_EQ(g.error_message(), "db locked");
}

}  // namespace
}  // namespace hub
