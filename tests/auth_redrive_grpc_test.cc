// RedriveDeadLetter with tokens: only operators and admins, and only for a
// dead letter of a message in their projects (its sender's, addressee's or
// role's), as the dead-letter list they see.
#include <string>

#include "tests/auth_grpc_fixture.h"

namespace hub::auth_grpc {
namespace {

TEST_F(AuthGrpcTest, RedrivingADeadLetterNeedsAnOperatorOfItsProject) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "alice-1").ok());
  hub::v1::PublishRequest publish;
  publish.set_from_agent_id("alice-1");
  publish.set_to("alice-1");
  publish.mutable_ttl()->set_seconds(1);
  hub::v1::PublishResponse published;
  ASSERT_TRUE(messages_->Publish(As(kAlice).get(), publish, &published).ok());
  auto dead = [&] {
    hub::v1::ListDeadLettersResponse listed;
    EXPECT_TRUE(messages_->ListDeadLetters(As(kOps).get(), {}, &listed).ok());
    return listed.dead_letters_size() == 1;
  };
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!dead() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(dead());

  hub::v1::RedriveDeadLetterRequest request;
  request.set_message_id(published.message_id());
  hub::v1::RedriveDeadLetterResponse response;
  grpc::Status s =
      messages_->RedriveDeadLetter(As("").get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  s = messages_->RedriveDeadLetter(As(kAlice).get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(s), "PERMISSION_DENIED");
  s = messages_->RedriveDeadLetter(As(kOtherOps).get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(s), "PROJECT_SCOPE_MISMATCH");
  // None of the refusals changed it: an operator of its project re-drives
  // it.
  ASSERT_TRUE(dead());
  s = messages_->RedriveDeadLetter(As(kOps).get(), request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.recipient_agent_ids_size(), 1);
  EXPECT_FALSE(dead());
}

}  // namespace
}  // namespace hub::auth_grpc
