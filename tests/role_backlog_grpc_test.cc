// A role's backlog through gRPC against an in-process HubServer, with no
// EnsureRole call anywhere: messages published to a role that has nobody to
// hold it wait, and the first candidate that arrives (registers, upserts
// itself, attaches) is activated and handed them, also after a restart. The
// activation ACK says how many backlog messages it handed over, on the
// stream and on the unary RPC.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"

namespace hub {
namespace {

using hub::v1::AttachResponse;

// Generous: these bound a hang, not a speed (the hub's own retry of a
// candidate event takes milliseconds).
constexpr absl::Duration kStreamDeadline = absl::Seconds(60);

class RoleBacklogGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_path_ = testing::FreshTestDbPath();
    Start();
  }

  void Start() {
    server_.reset();
    server_ = testing::StartTestHub(db_path_);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    roles_ = hub::v1::RoleService::NewStub(channel);
    messages_ = hub::v1::MessageService::NewStub(channel);
  }

  // Publishes to the project's cto from `from`; the role hands it to nobody
  // (no holder, or the holder is `from`).
  std::string PublishToCto(int priority, const std::string& from = "sender-1") {
    grpc::ClientContext context;
    hub::v1::PublishRequest request;
    request.set_from_agent_id(from);
    request.set_to("topic:cto");
    request.set_project_id(testing::kStreamProject);
    request.set_priority(priority);
    hub::v1::PublishResponse response;
    grpc::Status s = messages_->Publish(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.recipient_count(), 0);
    return response.message_id();
  }

  hub::v1::Role GetCto() {
    grpc::ClientContext context;
    hub::v1::GetRoleRequest request;
    *request.mutable_role_key() = testing::CtoRoleKey();
    hub::v1::GetRoleResponse response;
    grpc::Status s = roles_->GetRole(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.role();
  }

  // Waits until the publishes' own ensure (it runs after the publish
  // answered) has found nobody and said so on the row.
  void AwaitNoCandidate() {
    const absl::Time deadline = absl::Now() + kStreamDeadline;
    while (GetCto().blocked_reason() != "no_candidate") {
      ASSERT_LT(absl::Now(), deadline) << "the role never said no_candidate";
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  // What a new agent session does: registers as a cto candidate of the
  // project, upserts itself as one, attaches its presence stream.
  testing::AttachedAgent ArriveAsCandidate(const std::string& id) {
    const int64_t generation = testing::RegisterAgentOk(presence_.get(), id);
    testing::UpsertCandidateOk(roles_.get(), testing::CtoRoleKey(), id);
    return testing::AttachOk(presence_.get(), id, generation, kStreamDeadline);
  }

  // Reads frames until the answer to frame `frame_id`.
  static AttachResponse AnswerTo(testing::AttachedAgent& agent,
                                 int64_t frame_id) {
    AttachResponse frame;
    while (agent.stream->Read(&frame)) {
      if (!frame.has_event() && frame.frame_id() == frame_id) return frame;
    }
    ADD_FAILURE() << "the stream ended before answering frame " << frame_id;
    return {};
  }

  // The ids of the next `n` messages pushed on the stream, in order.
  static std::vector<std::string> NextMessageIds(testing::AttachedAgent& agent,
                                                 size_t n) {
    std::vector<std::string> ids;
    AttachResponse frame;
    while (ids.size() < n && agent.stream->Read(&frame)) {
      if (frame.event().has_message()) {
        ids.push_back(frame.event().message().message().message_id());
      }
    }
    EXPECT_EQ(ids.size(), n) << "the stream ended early";
    return ids;
  }

  // The ids of `agent`'s pending messages (ListPending, peek).
  std::vector<std::string> PendingIds(const std::string& agent) {
    grpc::ClientContext context;
    hub::v1::ListPendingRequest request;
    request.set_agent_id(agent);
    request.set_peek(true);
    hub::v1::ListPendingResponse response;
    grpc::Status s = messages_->ListPending(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> ids;
    for (const hub::v1::MessageDelivery& d : response.deliveries())
      ids.push_back(d.message().message_id());
    return ids;
  }

  std::string db_path_;
  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
  std::unique_ptr<hub::v1::MessageService::Stub> messages_;
};

TEST_F(RoleBacklogGrpcTest,
       TheFirstCandidateToArriveIsActivatedAndGetsTheBacklogInPriorityOrder) {
  const std::string low = PublishToCto(3);
  const std::string high = PublishToCto(9);
  const std::string mid = PublishToCto(5);
  AwaitNoCandidate();

  testing::AttachedAgent a = ArriveAsCandidate("agent-a");
  const hub::v1::RoleActivation activation = testing::NextActivation(a);
  EXPECT_EQ(activation.holder_agent_id(), "agent-a");
  ASSERT_TRUE(a.stream->Write(testing::ActivationAckFrame(activation, 7)));
  const AttachResponse answer = AnswerTo(a, 7);
  ASSERT_TRUE(answer.has_activation_ack_result()) << answer.DebugString();
  EXPECT_FALSE(answer.activation_ack_result().idempotent());
  EXPECT_EQ(answer.activation_ack_result().backlog_delivered_count(), 3);

  EXPECT_EQ(NextMessageIds(a, 3), (std::vector<std::string>{high, mid, low}));
  const hub::v1::Role role = GetCto();
  EXPECT_EQ(role.state(), hub::v1::ROLE_STATE_ACTIVE);
  EXPECT_EQ(role.holder_agent_id(), "agent-a");
}

TEST_F(RoleBacklogGrpcTest, TheUnaryAckSaysHowManyBacklogMessagesItHandedOver) {
  PublishToCto(4);
  PublishToCto(4);
  testing::AttachedAgent a = ArriveAsCandidate("agent-a");
  const hub::v1::RoleActivation activation = testing::NextActivation(a);

  grpc::ClientContext context;
  hub::v1::AckRoleActivationRequest request;
  *request.mutable_ack() =
      testing::ActivationAckFrame(activation).activation_ack();
  request.set_agent_id("agent-a");
  hub::v1::AckRoleActivationResponse response;
  grpc::Status s = roles_->AckRoleActivation(&context, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.result().backlog_delivered_count(), 2);
  NextMessageIds(a, 2);

  // A repeated ACK hands over nothing more.
  grpc::ClientContext again_context;
  hub::v1::AckRoleActivationResponse again;
  s = roles_->AckRoleActivation(&again_context, request, &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(again.result().idempotent());
  EXPECT_EQ(again.result().backlog_delivered_count(), 0);
}

TEST_F(RoleBacklogGrpcTest, AnAckWithNoBacklogSaysItHandedOverNone) {
  testing::AttachedAgent a = ArriveAsCandidate("agent-a");
  testing::EnsureRoleOk(roles_.get(), testing::CtoRoleKey());
  const hub::v1::RoleActivation activation = testing::NextActivation(a);
  ASSERT_TRUE(a.stream->Write(testing::ActivationAckFrame(activation, 3)));
  const AttachResponse answer = AnswerTo(a, 3);
  ASSERT_TRUE(answer.has_activation_ack_result()) << answer.DebugString();
  EXPECT_EQ(answer.activation_ack_result().backlog_delivered_count(), 0);
}

TEST_F(RoleBacklogGrpcTest,
       ABacklogWrittenBeforeARestartReachesACandidateThatArrivesAfterIt) {
  const std::string first = PublishToCto(2);
  const std::string second = PublishToCto(8);
  Start();  // the same database: recovery ensures the role, finds nobody

  testing::AttachedAgent a = ArriveAsCandidate("agent-a");
  const hub::v1::RoleActivation activation = testing::NextActivation(a);
  ASSERT_TRUE(a.stream->Write(testing::ActivationAckFrame(activation, 1)));
  EXPECT_EQ(AnswerTo(a, 1).activation_ack_result().backlog_delivered_count(),
            2);
  EXPECT_EQ(NextMessageIds(a, 2), (std::vector<std::string>{second, first}));
}

TEST_F(RoleBacklogGrpcTest,
       ACandidateKnownBeforeItAttachesIsActivatedWhenItsStreamArrives) {
  // Registered and upserted, but not reachable: the publish's ensure finds
  // nobody it can reach.
  const int64_t generation =
      testing::RegisterAgentOk(presence_.get(), "agent-b");
  testing::UpsertCandidateOk(roles_.get(), testing::CtoRoleKey(), "agent-b");
  const std::string id = PublishToCto(5);
  AwaitNoCandidate();

  testing::AttachedAgent b = testing::AttachOk(presence_.get(), "agent-b",
                                               generation, kStreamDeadline);
  const hub::v1::RoleActivation activation = testing::NextActivation(b);
  ASSERT_TRUE(b.stream->Write(testing::ActivationAckFrame(activation, 2)));
  EXPECT_EQ(AnswerTo(b, 2).activation_ack_result().backlog_delivered_count(),
            1);
  EXPECT_EQ(NextMessageIds(b, 1), (std::vector<std::string>{id}));
}

// A message to a role is for the role's holders other than its author
// (docs/design/messages.md, "A role message and its author"): its author,
// holding the role when it sends or elected later, never gets it; the next
// holder that is not its author does.
TEST_F(RoleBacklogGrpcTest, AMessageToTheRoleIsNeverHandedToItsOwnAuthor) {
  const std::string own = PublishToCto(5, "agent-a");
  const std::string other = PublishToCto(5);
  AwaitNoCandidate();

  // agent-a becomes the cto: it is handed the other sender's message only.
  testing::AttachedAgent a = ArriveAsCandidate("agent-a");
  const hub::v1::RoleActivation activation = testing::NextActivation(a);
  ASSERT_TRUE(a.stream->Write(testing::ActivationAckFrame(activation, 1)));
  EXPECT_EQ(AnswerTo(a, 1).activation_ack_result().backlog_delivered_count(),
            1);
  EXPECT_EQ(NextMessageIds(a, 1), (std::vector<std::string>{other}));

  // What it sends to the role while it holds it stays backlog too, and the
  // role stays as it is (no election for it).
  const std::string later = PublishToCto(5, "agent-a");
  hub::v1::Role role = GetCto();
  EXPECT_EQ(role.state(), hub::v1::ROLE_STATE_ACTIVE);
  EXPECT_EQ(role.holder_agent_id(), "agent-a");
  EXPECT_EQ(role.epoch(), activation.epoch());
  EXPECT_EQ(PendingIds("agent-a"), (std::vector<std::string>{other}));

  // It handles the other sender's message and steps down; the next holder
  // gets both of its messages, oldest first.
  {
    grpc::ClientContext context;
    hub::v1::AckRequest request;
    request.set_agent_id("agent-a");
    request.add_message_ids(other);
    hub::v1::AckResponse response;
    grpc::Status s = messages_->Ack(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  testing::AttachedAgent b = ArriveAsCandidate("agent-b");
  {
    grpc::ClientContext context;
    hub::v1::ReleaseRoleRequest request;
    *request.mutable_role_key() = testing::CtoRoleKey();
    request.set_agent_id("agent-a");
    request.set_epoch(activation.epoch());
    hub::v1::ReleaseRoleResponse response;
    grpc::Status s = roles_->ReleaseRole(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  const hub::v1::RoleActivation next = testing::NextActivation(b);
  EXPECT_EQ(next.holder_agent_id(), "agent-b");
  ASSERT_TRUE(b.stream->Write(testing::ActivationAckFrame(next, 2)));
  EXPECT_EQ(AnswerTo(b, 2).activation_ack_result().backlog_delivered_count(),
            2);
  EXPECT_EQ(NextMessageIds(b, 2), (std::vector<std::string>{own, later}));
  EXPECT_EQ(PendingIds("agent-a"), (std::vector<std::string>{}));
}

}  // namespace
}  // namespace hub
