#include "hub/services/error_mapping.h"

#include <google/protobuf/stubs/common.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "status/status.h"

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

TEST(ToGrpcStatusTest, EveryAbslCodeButUnknownKeepsItsNumber) {
  for (int c = 1; c <= 16; ++c) {
    if (c == static_cast<int>(absl::StatusCode::kUnknown)) continue;
    absl::Status s(static_cast<absl::StatusCode>(c), "x");
    EXPECT_EQ(static_cast<int>(ToGrpcStatus(s).error_code()), c);
  }
}

// The ErrorInfo of `g`, which must carry exactly one.
google::rpc::ErrorInfo InfoOf(const grpc::Status& g) {
  google::rpc::Status details;
  EXPECT_TRUE(details.ParseFromString(g.error_details()));
  EXPECT_EQ(details.details_size(), 1);
  google::rpc::ErrorInfo info;
  if (details.details_size() > 0) {
    EXPECT_TRUE(details.details(0).UnpackTo(&info));
  }
  return info;
}

bool ValidUtf8(const std::string& s) {
  return google::protobuf::internal::IsStructurallyValidUTF8(s);
}

TEST(ToGrpcStatusTest, StatusWithoutReasonGetsTheGenericReasonOfItsCode) {
  grpc::Status g = ToGrpcStatus(absl::UnavailableError("db locked"));
  EXPECT_EQ(InfoOf(g).reason(), "INTERNAL");
  EXPECT_EQ(InfoOf(g).domain(), "hub.v1");
  EXPECT_EQ(g.error_message(), "INTERNAL: db locked");
  EXPECT_EQ(InfoOf(ToGrpcStatus(absl::InvalidArgumentError("x"))).reason(),
            "REQUEST_INVALID");
  EXPECT_EQ(InfoOf(ToGrpcStatus(absl::ResourceExhaustedError("x"))).reason(),
            "LIMIT_EXCEEDED");
}

TEST(ToGrpcStatusTest, UnknownIsNeverSentAndBecomesInternal) {
  grpc::Status g = ToGrpcStatus(absl::UnknownError("boom"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(InfoOf(g).reason(), "INTERNAL");
}

TEST(ToGrpcStatusTest, ACallTheClientGaveUpOnCarriesNoDetail) {
  for (const absl::Status& s :
       {absl::CancelledError("gone"), absl::DeadlineExceededError("late")}) {
    google::rpc::Status details;
    ASSERT_TRUE(details.ParseFromString(ToGrpcStatus(s).error_details()));
    EXPECT_EQ(details.details_size(), 0);
  }
}

TEST(ToGrpcStatusTest, InvalidUtf8NeverReachesTheClient) {
  // A value cut at a byte count ("\xC3" is half an "é") and a raw byte.
  absl::Status s = WithMetadata(
      NotFoundError("AGENT_NOT_FOUND", "no agent \"a\xC3\xA9\xC3\""),
      "agent_id", "a\xFF");
  grpc::Status g = ToGrpcStatus(s);
  EXPECT_TRUE(ValidUtf8(g.error_message())) << g.error_message();
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(g.error_details()));
  EXPECT_TRUE(ValidUtf8(details.message()));
  const google::rpc::ErrorInfo info = InfoOf(g);
  EXPECT_EQ(info.reason(), "AGENT_NOT_FOUND");
  EXPECT_EQ(info.metadata().at("agent_id"), "a\xEF\xBF\xBD");
}

TEST(ToGrpcStatusTest, EchoedValuesAndTheWholeDetailAreBounded) {
  const std::string huge(6000, 'h');
  absl::Status s = FailedPreconditionError(
      "STALE_HUB_INSTANCE", absl::StrCat("hub instance ", huge, " is stale"));
  s = WithMetadata(std::move(s), "hub_instance_id", huge);
  for (int i = 0; i < 40; ++i) {
    s = WithMetadata(std::move(s), absl::StrCat("key_", i), huge);
  }
  grpc::Status g = ToGrpcStatus(s);
  EXPECT_LE(g.error_message().size(), kMaxErrorMessageBytes);
  EXPECT_TRUE(absl::StartsWith(g.error_message(), "STALE_HUB_INSTANCE: "));
  EXPECT_LE(g.error_details().size(), kMaxErrorDetailBytes);
  const google::rpc::ErrorInfo info = InfoOf(g);
  EXPECT_EQ(info.reason(), "STALE_HUB_INSTANCE");
  EXPECT_GE(info.metadata().size(), 5u) << "as much metadata as fits is kept";
  for (const auto& [key, value] : info.metadata()) {
    EXPECT_LE(value.size(), kMaxErrorValueBytes) << key;
    EXPECT_TRUE(absl::EndsWith(value, "\xE2\x80\xA6")) << key;
  }
}

TEST(ToErrorStatusTest,
     TheInBandFormIsBoundedAndKeepsTheReasonOutOfTheMessage) {
  absl::Status s =
      WithMetadata(FailedPreconditionError(
                       "STALE_PRESENCE_OWNER",
                       absl::StrCat("stale \xC3", std::string(900, 'x'))),
                   "agent_id", std::string(6000, 'a'));
  hub::v1::ErrorStatus e = ToErrorStatus(s);
  EXPECT_EQ(e.code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(e.reason(), hub::v1::ERROR_REASON_STALE_PRESENCE_OWNER);
  EXPECT_TRUE(absl::StartsWith(e.message(), "stale \xEF\xBF\xBD"));
  EXPECT_LE(e.message().size(), kMaxErrorMessageBytes);
  EXPECT_LE(e.metadata().at("agent_id").size(), kMaxErrorValueBytes);
  EXPECT_LE(e.ByteSizeLong(), kMaxErrorDetailBytes);
}

}  // namespace
}  // namespace hub
