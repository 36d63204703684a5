#include "hub/services/malformed_request.h"

#include <string>

#include "gtest/gtest.h"
#include "hub/v1/presence.pb.h"
#include "status/status.h"

namespace hub {
namespace {

TEST(MalformedRequestErrorTest, NamesTheRequestTypeOfTheMethod) {
  absl::Status s = MalformedRequestError("/hub.v1.PresenceService/GetAgent");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(s), "REQUEST_MALFORMED");
  EXPECT_NE(s.message().find("hub.v1.GetAgentRequest"), std::string::npos)
      << s.message();
  EXPECT_EQ(ReasonOf(MalformedRequestError("/no.Such/Method")),
            "REQUEST_MALFORMED");
}

TEST(ReadFailedToParseTest, AnUntouchedMessageMeansAHalfClose) {
  v1::AttachRequest frame;
  frame.set_frame_id(7);
  MarkUnread(&frame);
  EXPECT_FALSE(ReadFailedToParse(frame));
  EXPECT_EQ(frame.frame_id(), 7);
}

TEST(ReadFailedToParseTest, AFrameThatDidNotParseClearedTheMark) {
  v1::AttachRequest frame;
  MarkUnread(&frame);
  // Field 1 with wire type 7 (none such): what gRPC's parse would refuse.
  ASSERT_FALSE(frame.ParseFromString(std::string("\x0f\x01", 2)));
  EXPECT_TRUE(ReadFailedToParse(frame));
}

TEST(ReadFailedToParseTest, TheMarkIsNeverSentBackOrSeenAsAField) {
  v1::AttachRequest frame;
  MarkUnread(&frame);
  v1::AttachRequest good;
  good.set_frame_id(3);
  ASSERT_TRUE(frame.ParseFromString(good.SerializeAsString()));
  EXPECT_EQ(frame.frame_id(), 3);
  EXPECT_EQ(frame.SerializeAsString(), good.SerializeAsString());
}

}  // namespace
}  // namespace hub
