// MessageService.RedriveDeadLetter against an in-process HubServer: a dead
// letter re-driven to an agent attached on its presence stream, pushed and
// acknowledged there; a role message re-driven into the role's backlog and
// handed to the holder the ensure it asked for activates; bad input, a
// second re-drive and a dead letter of a closed scope refused with their
// reasons.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "registry/role_key.h"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"

namespace hub {
namespace {

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;
using testing::NextMessage;
using testing::Reason;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

class RedriveGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartHub(testing::TestHubOptions(testing::FreshTestDbPath()));
  }

  // (Re)starts the hub, over a fresh database, with `options`.
  void StartHub(const HubServerOptions& options) {
    server_.reset();
    server_ = testing::StartTestHub(options);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    roles_ = hub::v1::RoleService::NewStub(channel);
    messages_ = hub::v1::MessageService::NewStub(channel);
  }

  // Publishes a 1 s message to `to` and waits (however long the sweep takes
  // on a busy machine) until it is a dead letter.
  std::string DeadLetter(const std::string& to) {
    hub::v1::PublishRequest request;
    request.set_from_agent_id("sender-1");
    request.set_to(to);
    request.set_project_id(kProject);
    request.mutable_ttl()->set_seconds(1);
    (*request.mutable_payload()->mutable_fields())["task"].set_string_value(
        "build");
    hub::v1::PublishResponse published;
    grpc::ClientContext context;
    grpc::Status s = messages_->Publish(&context, request, &published);
    EXPECT_TRUE(s.ok()) << s.error_message();
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!IsDeadLetter(published.message_id()) && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_TRUE(IsDeadLetter(published.message_id()));
    return published.message_id();
  }

  bool IsDeadLetter(const std::string& id) {
    grpc::ClientContext context;
    hub::v1::ListDeadLettersResponse dead;
    EXPECT_TRUE(messages_->ListDeadLetters(&context, {}, &dead).ok());
    for (const hub::v1::DeadLetter& d : dead.dead_letters()) {
      if (d.message_id() == id) return true;
    }
    return false;
  }

  grpc::Status Redrive(const std::string& id,
                       hub::v1::RedriveDeadLetterResponse* response) {
    grpc::ClientContext context;
    hub::v1::RedriveDeadLetterRequest request;
    request.set_message_id(id);
    return messages_->RedriveDeadLetter(&context, request, response);
  }

  // A message from sender-1 to `to`, with the hub's default ttl.
  grpc::Status PublishTo(const std::string& to,
                         hub::v1::PublishResponse* published) {
    hub::v1::PublishRequest request;
    request.set_from_agent_id("sender-1");
    request.set_to(to);
    grpc::ClientContext context;
    return messages_->Publish(&context, request, published);
  }

  hub::v1::ListPendingResponse Pending(const std::string& agent,
                                       bool peek = true) {
    grpc::ClientContext context;
    hub::v1::ListPendingRequest request;
    request.set_agent_id(agent);
    request.set_peek(peek);
    hub::v1::ListPendingResponse response;
    EXPECT_TRUE(messages_->ListPending(&context, request, &response).ok());
    return response;
  }

  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
  std::unique_ptr<hub::v1::MessageService::Stub> messages_;
};

TEST_F(RedriveGrpcTest, ARedrivenDeadLetterIsPushedToTheAttachedAgentAndAcked) {
  testing::AttachedAgent b =
      testing::AttachOk(presence_.get(), "agent-b",
                        testing::RegisterAgentOk(presence_.get(), "agent-b"));
  const std::string id = DeadLetter("agent-b");
  // It reached the stream once and expired there, unacknowledged.
  EXPECT_EQ(NextMessage(b).message().message_id(), id);
  EXPECT_EQ(Pending("agent-b").deliveries_size(), 0);

  hub::v1::RedriveDeadLetterResponse redriven;
  grpc::Status s = Redrive(id, &redriven);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(redriven.message().message_id(), id);
  EXPECT_EQ(redriven.message().status(), hub::v1::MESSAGE_STATUS_DELIVERED);
  EXPECT_EQ(redriven.dead_letter().reason(), "ttl_expired");
  EXPECT_EQ(std::vector<std::string>(redriven.recipient_agent_ids().begin(),
                                     redriven.recipient_agent_ids().end()),
            std::vector<std::string>{"agent-b"});
  EXPECT_EQ(std::vector<std::string>(redriven.pushed_agent_ids().begin(),
                                     redriven.pushed_agent_ids().end()),
            std::vector<std::string>{"agent-b"});
  EXPECT_GT(redriven.message().expires_at().seconds(),
            redriven.message().created_at().seconds());
  EXPECT_FALSE(IsDeadLetter(id));

  const hub::v1::MessageDelivery again = NextMessage(b);
  EXPECT_EQ(again.message().message_id(), id);
  EXPECT_EQ(again.state(), hub::v1::DELIVERY_STATE_DELIVERED);
  EXPECT_EQ(again.attempts(), 2);  // the attempt before its expiry counts
  EXPECT_EQ(again.message().payload().fields().at("task").string_value(),
            "build");

  AttachRequest ack;
  ack.set_frame_id(9);
  ack.mutable_message_ack()->add_message_ids(id);
  ASSERT_TRUE(b.stream->Write(ack));
  AttachResponse answer;
  do {
    ASSERT_TRUE(b.stream->Read(&answer));
  } while (!answer.has_message_ack_result());
  ASSERT_EQ(answer.message_ack_result().acked_message_ids_size(), 1);
  EXPECT_EQ(answer.message_ack_result().acked_message_ids(0), id);
  EXPECT_EQ(Pending("agent-b").deliveries_size(), 0);

  // Acknowledged now, and no dead letter: a second re-drive is refused.
  s = Redrive(id, &redriven);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "MESSAGE_NOT_DEAD_LETTER");
}

TEST_F(RedriveGrpcTest, ARoleDeadLetterWaitsAsBacklogAndGoesToTheNextHolder) {
  // Nobody can hold the role when the message is published and expires.
  const std::string id = DeadLetter("topic:cto");

  testing::AttachedAgent h =
      testing::AttachOk(presence_.get(), "holder-1",
                        testing::RegisterAgentOk(presence_.get(), "holder-1"));
  testing::UpsertCandidateOk(roles_.get(), testing::CtoRoleKey(kProject),
                             "holder-1");
  hub::v1::RedriveDeadLetterResponse redriven;
  grpc::Status s = Redrive(id, &redriven);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(redriven.recipient_agent_ids_size(), 0);  // the role's backlog
  EXPECT_EQ(redriven.message().status(), hub::v1::MESSAGE_STATUS_QUEUED);
  ASSERT_TRUE(redriven.has_activation());
  EXPECT_EQ(redriven.activation().trigger(),
            hub::v1::ENSURE_ROLE_TRIGGER_PUBLISH_NO_HOLDER);
  EXPECT_EQ(redriven.activation().cause_id(), id);

  const hub::v1::RoleActivation a = testing::NextActivation(h);
  ASSERT_TRUE(h.stream->Write(testing::ActivationAckFrame(a, /*frame_id=*/0)));
  const hub::v1::MessageDelivery d = NextMessage(h);
  EXPECT_EQ(d.message().message_id(), id);
  EXPECT_EQ(d.role_epoch(), a.epoch());
  EXPECT_EQ(d.activation_id(), a.activation_id());
}

TEST_F(RedriveGrpcTest, BadIdsUnknownMessagesAndLiveMessagesAreRefused) {
  hub::v1::RedriveDeadLetterResponse response;
  grpc::Status s = Redrive("", &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "MESSAGE_ID_INVALID");
  s = Redrive(std::string(65, 'm'), &response);
  EXPECT_EQ(Reason(s), "MESSAGE_ID_INVALID");
  s = Redrive("0190aaaa-0000-7000-8000-000000000000", &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Reason(s), "MESSAGE_NOT_FOUND");

  testing::RegisterAgentOk(presence_.get(), "agent-b");
  hub::v1::PublishResponse published;
  ASSERT_TRUE(PublishTo("agent-b", &published).ok());
  s = Redrive(published.message_id(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "MESSAGE_NOT_DEAD_LETTER");
  EXPECT_EQ(Pending("agent-b").deliveries_size(), 1);
}

TEST_F(RedriveGrpcTest, ADeadLetterOfAClosedScopeStaysDead) {
  hub::v1::RoleKey lead;
  lead.set_project_id(kProject);
  lead.set_kind(hub::v1::ROLE_KIND_LEAD);
  lead.set_scope_id("scp_CCCCCCCCCCCCCCCCCCCCCC");
  absl::StatusOr<std::string> wire = EncodeRoleKey(
      RoleKey{kProject, RoleKind::kLead, "scp_CCCCCCCCCCCCCCCCCCCCCC"});
  ASSERT_TRUE(wire.ok()) << wire.status();

  hub::v1::PublishRequest request;
  request.set_from_agent_id("sender-1");
  request.set_to("topic:role:" + *wire);
  hub::v1::PublishResponse published;
  grpc::ClientContext publish_context;
  ASSERT_TRUE(messages_->Publish(&publish_context, request, &published).ok());
  grpc::ClientContext close_context;
  hub::v1::CloseRoleScopeRequest close;
  *close.mutable_role_key() = lead;
  close.set_reason("done");
  hub::v1::CloseRoleScopeResponse closed;
  ASSERT_TRUE(roles_->CloseRoleScope(&close_context, close, &closed).ok());
  ASSERT_TRUE(IsDeadLetter(published.message_id()));

  hub::v1::RedriveDeadLetterResponse response;
  grpc::Status s = Redrive(published.message_id(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "ROLE_SCOPE_CLOSED");
  EXPECT_TRUE(IsDeadLetter(published.message_id()));
}

TEST_F(RedriveGrpcTest, ARedriveToAFullInboxIsRefusedAsAPublishIs) {
  HubServerOptions options =
      testing::TestHubOptions(testing::FreshTestDbPath());
  options.messaging.max_pending_per_inbox = 1;
  StartHub(options);
  testing::RegisterAgentOk(presence_.get(), "agent-b");
  const std::string dead = DeadLetter("agent-b");
  // agent-b's inbox is full again (one pending message, the limit).
  hub::v1::PublishResponse published;
  ASSERT_TRUE(PublishTo("agent-b", &published).ok());

  hub::v1::RedriveDeadLetterResponse response;
  grpc::Status s = Redrive(dead, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Reason(s), "LIMIT_EXCEEDED");
  google::rpc::ErrorInfo info = testing::ErrorInfoOf(s);
  EXPECT_EQ(info.metadata().at("limit"), "max_pending_per_inbox");
  EXPECT_EQ(info.metadata().at("limit_value"), "1");
  EXPECT_EQ(info.metadata().at("agent_id"), "agent-b");
  // Nothing changed: still a dead letter, the inbox holds the one message.
  EXPECT_TRUE(IsDeadLetter(dead));
  ASSERT_EQ(Pending("agent-b").deliveries_size(), 1);
  // The same refusal as a publish to that inbox.
  grpc::Status full = PublishTo("agent-b", &published);
  EXPECT_EQ(full.error_code(), s.error_code());
  EXPECT_EQ(Reason(full), Reason(s));

  // Once agent-b acknowledges its message, the re-drive goes through.
  hub::v1::ListPendingResponse delivered = Pending("agent-b", /*peek=*/false);
  ASSERT_EQ(delivered.deliveries_size(), 1);
  grpc::ClientContext ack_context;
  hub::v1::AckRequest ack;
  ack.set_agent_id("agent-b");
  ack.add_message_ids(delivered.deliveries(0).message().message_id());
  hub::v1::AckResponse acked;
  ASSERT_TRUE(messages_->Ack(&ack_context, ack, &acked).ok());
  ASSERT_EQ(acked.result().acked_message_ids_size(), 1);
  s = Redrive(dead, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(IsDeadLetter(dead));
  ASSERT_EQ(Pending("agent-b").deliveries_size(), 1);
  EXPECT_EQ(Pending("agent-b").deliveries(0).message().message_id(), dead);
}

}  // namespace
}  // namespace hub
