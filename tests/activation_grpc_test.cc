// The activator through gRPC against an in-process HubServer: a candidate
// attached over its presence stream is activated by EnsureRole, ACKs on the
// stream, and loses the role to the next candidate when its stream ends.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/hub.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"

namespace hub {
namespace {

using testing::Reason;

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;

hub::v1::RoleKey Cto() { return testing::CtoRoleKey(); }

class ActivationGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartHub(testing::TestHubOptions(testing::FreshTestDbPath()));
  }

  // (Re)starts the hub with `options` over a fresh database.
  void StartHub(const HubServerOptions& options) {
    presence_.reset();
    roles_.reset();
    server_.reset();
    server_ = testing::StartTestHub(options);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    roles_ = hub::v1::RoleService::NewStub(channel);
  }

  // A registered cto candidate of the project, attached over a stream.
  using Agent = testing::AttachedAgent;
  // Higher `priority` candidates are chosen first.
  Agent Candidate(const std::string& id, int64_t priority = 0) {
    Agent agent = testing::AttachOk(
        presence_.get(), id, testing::RegisterAgentOk(presence_.get(), id));
    testing::UpsertCandidateOk(roles_.get(), Cto(), id, priority);
    return agent;
  }

  hub::v1::EnsureRoleReceipt Ensure() {
    return testing::EnsureRoleOk(roles_.get(), Cto());
  }

  hub::v1::Role GetRole() {
    grpc::ClientContext context;
    hub::v1::GetRoleRequest request;
    *request.mutable_role_key() = Cto();
    hub::v1::GetRoleResponse response;
    EXPECT_TRUE(roles_->GetRole(&context, request, &response).ok());
    return response.role();
  }

  static hub::v1::RoleActivation NextActivation(Agent& agent) {
    return testing::NextActivation(agent);
  }

  static AttachRequest AckFrame(const hub::v1::RoleActivation& a) {
    return testing::ActivationAckFrame(a);
  }

  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
};

TEST_F(ActivationGrpcTest,
       AnAttachedCandidateIsActivatedOverItsStreamAndAcksThere) {
  Agent a = Candidate("agent-a");
  hub::v1::EnsureRoleReceipt receipt = Ensure();
  EXPECT_EQ(receipt.disposition(), hub::v1::ENSURE_ROLE_DISPOSITION_STARTED);
  EXPECT_EQ(receipt.holder_agent_id(), "agent-a");
  const hub::v1::RoleActivation activation = NextActivation(a);
  EXPECT_EQ(activation.epoch(), receipt.epoch());
  EXPECT_EQ(activation.schema(), "tfx.role-activation.v1");
  ASSERT_TRUE(a.stream->Write(AckFrame(activation)));
  AttachResponse answer;
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(a.stream.get(), &answer));
  ASSERT_TRUE(answer.has_activation_ack_result()) << answer.DebugString();
  EXPECT_EQ(answer.frame_id(), 42);
  EXPECT_EQ(GetRole().state(), hub::v1::ROLE_STATE_ACTIVE);
  EXPECT_EQ(Ensure().disposition(),
            hub::v1::ENSURE_ROLE_DISPOSITION_ALREADY_ACTIVE);
}

TEST_F(ActivationGrpcTest, WhenTheHoldersStreamEndsTheNextCandidateTakesOver) {
  Agent a = Candidate("agent-a", /*priority=*/10);
  Agent b = Candidate("agent-b", /*priority=*/5);
  EXPECT_EQ(Ensure().holder_agent_id(), "agent-a");
  const hub::v1::RoleActivation first = NextActivation(a);
  ASSERT_TRUE(a.stream->Write(AckFrame(first)));
  AttachResponse answer;
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(a.stream.get(), &answer));
  ASSERT_EQ(GetRole().state(), hub::v1::ROLE_STATE_ACTIVE);

  // agent-a's process dies: its stream ends and the grace runs out.
  a.context->TryCancel();
  const hub::v1::RoleActivation second = NextActivation(b);
  EXPECT_EQ(second.holder_agent_id(), "agent-b");
  EXPECT_GT(second.epoch(), first.epoch());
  ASSERT_TRUE(b.stream->Write(AckFrame(second)));
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(b.stream.get(), &answer));
  ASSERT_TRUE(answer.has_activation_ack_result());
  hub::v1::Role role = GetRole();
  EXPECT_EQ(role.state(), hub::v1::ROLE_STATE_ACTIVE);
  EXPECT_EQ(role.holder_agent_id(), "agent-b");

  // The old holder's ACK, sent late over the unary RPC, is fenced.
  grpc::ClientContext context;
  hub::v1::AckRoleActivationRequest late;
  *late.mutable_ack() = AckFrame(first).activation_ack();
  late.set_agent_id("agent-a");
  hub::v1::AckRoleActivationResponse response;
  grpc::Status s = roles_->AckRoleActivation(&context, late, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "STALE_EPOCH");
}

TEST_F(ActivationGrpcTest,
       AHolderThatSaysGoodbyeIsReplacedAtOnceWithoutItsDetachGrace) {
  // A grace far longer than the test may take: the successor can only be
  // activated because the goodbye skipped it.
  HubServerOptions options =
      testing::TestHubOptions(testing::FreshTestDbPath());
  options.presence.detach_grace = absl::Hours(1);
  StartHub(options);
  Agent a = Candidate("agent-a", /*priority=*/10);
  Agent b = Candidate("agent-b", /*priority=*/5);
  EXPECT_EQ(Ensure().holder_agent_id(), "agent-a");
  const hub::v1::RoleActivation first = NextActivation(a);
  ASSERT_TRUE(a.stream->Write(AckFrame(first)));
  AttachResponse answer;
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(a.stream.get(), &answer));
  ASSERT_EQ(GetRole().state(), hub::v1::ROLE_STATE_ACTIVE);

  // agent-a's session ends on purpose: goodbye, then the hub ends the
  // stream OK once agent-a is deregistered.
  AttachRequest goodbye;
  goodbye.set_frame_id(9);
  goodbye.mutable_goodbye();
  ASSERT_TRUE(a.stream->Write(goodbye));
  while (a.stream->Read(&answer)) {
    EXPECT_FALSE(answer.has_frame_error()) << answer.DebugString();
  }
  const grpc::Status ended = a.stream->Finish();
  EXPECT_TRUE(ended.ok()) << ended.error_code() << " " << ended.error_message();
  grpc::ClientContext context;
  hub::v1::GetAgentRequest get;
  get.set_agent_id("agent-a");
  hub::v1::GetAgentResponse agent;
  ASSERT_TRUE(presence_->GetAgent(&context, get, &agent).ok());
  EXPECT_EQ(agent.agent().status(), hub::v1::AGENT_STATUS_OFFLINE);

  const hub::v1::RoleActivation second = NextActivation(b);
  EXPECT_EQ(second.holder_agent_id(), "agent-b");
  EXPECT_GT(second.epoch(), first.epoch());
  ASSERT_TRUE(b.stream->Write(AckFrame(second)));
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(b.stream.get(), &answer));
  ASSERT_TRUE(answer.has_activation_ack_result()) << answer.DebugString();
  EXPECT_EQ(GetRole().holder_agent_id(), "agent-b");
}

TEST_F(ActivationGrpcTest,
       HubOnlyTriggersAndBlankOrOverlongCauseIdsAreRefusedAndReserveNothing) {
  struct Case {
    hub::v1::EnsureRoleTrigger trigger;
    std::string cause_id;
  };
  for (const Case& c :
       {Case{hub::v1::ENSURE_ROLE_TRIGGER_HOLDER_OFFLINE, "cause"},
        Case{hub::v1::ENSURE_ROLE_TRIGGER_CANDIDATE_CHANGED, "cause"},
        Case{hub::v1::ENSURE_ROLE_TRIGGER_UNSPECIFIED, "cause"},
        Case{hub::v1::ENSURE_ROLE_TRIGGER_MANUAL, "  \t"},
        Case{hub::v1::ENSURE_ROLE_TRIGGER_MANUAL, std::string(257, 'c')}}) {
    grpc::ClientContext context;
    hub::v1::EnsureRoleRequest request;
    *request.mutable_role_key() = Cto();
    request.set_trigger(c.trigger);
    request.set_cause_id(c.cause_id);
    hub::v1::EnsureRoleResponse response;
    grpc::Status s = roles_->EnsureRole(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << c.trigger << " " << c.cause_id.size();
    EXPECT_EQ(Reason(s), "ENSURE_ROLE_REQUEST_INVALID");
  }
  grpc::ClientContext context;
  hub::v1::GetRoleRequest request;
  *request.mutable_role_key() = Cto();
  hub::v1::GetRoleResponse response;
  EXPECT_EQ(roles_->GetRole(&context, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ActivationGrpcTest,
       TheHubProbesTheCandidateOnItsStreamAndWakesItOnlyAfterItAnswers) {
  Agent a = Candidate("agent-a");
  const hub::v1::EnsureRoleReceipt receipt = Ensure();
  AttachResponse frame;
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(a.stream.get(), &frame));
  ASSERT_TRUE(frame.event().has_role_probe()) << frame.DebugString();
  const hub::v1::RoleProbe probe = frame.event().role_probe();
  EXPECT_FALSE(probe.probe_id().empty());
  EXPECT_EQ(frame.event().event_id(), probe.probe_id());
  EXPECT_EQ(probe.role_key_wire(), receipt.role_key_wire());
  EXPECT_EQ(probe.role_key().kind(), hub::v1::ROLE_KIND_CTO);
  EXPECT_EQ(probe.epoch(), receipt.epoch());
  EXPECT_EQ(probe.activation_id(), receipt.activation_id());
  EXPECT_TRUE(probe.has_deadline());
  EXPECT_EQ(GetRole().state(), hub::v1::ROLE_STATE_ELECTED_PROBING);

  AttachRequest reply;
  reply.set_frame_id(5);
  reply.mutable_probe_reply()->set_probe_id(probe.probe_id());
  reply.mutable_probe_reply()->set_ready(true);
  ASSERT_TRUE(a.stream->Write(reply));
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(a.stream.get(), &frame));
  ASSERT_TRUE(frame.event().has_role_activation()) << frame.DebugString();
  EXPECT_EQ(frame.event().role_activation().activation_id(),
            receipt.activation_id());
  // The probe is answered: answering it again is refused in-band.
  ASSERT_TRUE(a.stream->Write(reply));
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(a.stream.get(), &frame));
  ASSERT_TRUE(frame.has_frame_error()) << frame.DebugString();
  EXPECT_EQ(frame.frame_id(), 5);
  EXPECT_EQ(frame.frame_error().reason(),
            hub::v1::ERROR_REASON_REQUEST_INVALID);
}

TEST_F(ActivationGrpcTest,
       AnAttachedCandidateThatNeverAnswersIsUnreachableAndTheNextIsTried) {
  HubServerOptions options =
      testing::TestHubOptions(testing::FreshTestDbPath());
  // agent-hung's probe takes this long to fail; agent-b, which answers,
  // must do so within it, so it is generous for a busy machine.
  options.activator.config.probe_timeout = absl::Seconds(2);
  StartHub(options);
  Agent hung = Candidate("agent-hung", /*priority=*/10);
  Agent b = Candidate("agent-b", /*priority=*/5);
  EXPECT_EQ(Ensure().holder_agent_id(), "agent-hung");

  // agent-hung's stream stays attached (HTTP/2 keeps it alive) but the agent
  // reads nothing and answers nothing; agent-b is activated instead.
  const hub::v1::RoleActivation activation = NextActivation(b);
  EXPECT_EQ(activation.holder_agent_id(), "agent-b");
  ASSERT_TRUE(b.stream->Write(AckFrame(activation)));
  AttachResponse frame;
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(b.stream.get(), &frame));
  ASSERT_TRUE(frame.has_activation_ack_result()) << frame.DebugString();
  EXPECT_EQ(GetRole().holder_agent_id(), "agent-b");

  grpc::ClientContext context;
  hub::v1::ListRoleCandidatesRequest list;
  *list.mutable_role_key() = Cto();
  list.set_agent_id("agent-hung");
  hub::v1::ListRoleCandidatesResponse listed;
  ASSERT_TRUE(roles_->ListRoleCandidates(&context, list, &listed).ok());
  ASSERT_EQ(listed.candidates_size(), 1);
  EXPECT_EQ(listed.candidates(0).last_probe_code(), "timeout");
  EXPECT_EQ(listed.candidates(0).consecutive_probe_failures(), 1);

  // What the hung agent was sent: the probe, never the activation. Its
  // answer, now late, is refused.
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(hung.stream.get(), &frame));
  ASSERT_TRUE(frame.event().has_role_probe()) << frame.DebugString();
  AttachRequest late;
  late.set_frame_id(9);
  late.mutable_probe_reply()->set_probe_id(
      frame.event().role_probe().probe_id());
  late.mutable_probe_reply()->set_ready(true);
  ASSERT_TRUE(hung.stream->Write(late));
  while (hung.stream->Read(&frame)) {
    EXPECT_FALSE(frame.event().has_role_activation());
    if (frame.frame_id() == 9) break;
  }
  ASSERT_TRUE(frame.has_frame_error()) << frame.DebugString();
  EXPECT_EQ(frame.frame_error().reason(),
            hub::v1::ERROR_REASON_REQUEST_INVALID);
}

TEST_F(ActivationGrpcTest,
       EnsureOnBehalfOfAnAgentNeedsARegisteredAgentOfTheRolesProject) {
  auto ensure_as = [&](const std::string& agent_id) {
    grpc::ClientContext context;
    hub::v1::EnsureRoleRequest request;
    *request.mutable_role_key() = Cto();
    request.set_trigger(hub::v1::ENSURE_ROLE_TRIGGER_SESSION_START);
    request.set_cause_id("session-1");
    request.set_agent_id(agent_id);
    hub::v1::EnsureRoleResponse response;
    return roles_->EnsureRole(&context, request, &response);
  };
  grpc::Status s = ensure_as("agent-nobody");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Reason(s), "AGENT_NOT_FOUND");
  EXPECT_EQ(testing::ErrorInfoOf(s).metadata().at("agent_id"), "agent-nobody");

  grpc::ClientContext context;
  hub::v1::RegisterAgentRequest other;
  other.set_agent_id("agent-elsewhere");
  other.set_cli(hub::v1::AGENT_CLI_CODEX);
  other.set_project_id("prj_ZZZZZZZZZZZZZZZZZZZZZZ");
  hub::v1::RegisterAgentResponse registered;
  ASSERT_TRUE(presence_->RegisterAgent(&context, other, &registered).ok());
  s = ensure_as("agent-elsewhere");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Reason(s), "PROJECT_SCOPE_MISMATCH");
  // Refused before anything was written.
  grpc::ClientContext get_context;
  hub::v1::GetRoleRequest get;
  *get.mutable_role_key() = Cto();
  hub::v1::GetRoleResponse got;
  EXPECT_EQ(roles_->GetRole(&get_context, get, &got).error_code(),
            grpc::StatusCode::NOT_FOUND);

  Candidate("agent-a");
  EXPECT_TRUE(ensure_as("agent-a").ok());
}

TEST_F(ActivationGrpcTest, GetStatusCountsRolesByState) {
  Agent a = Candidate("agent-a");
  Ensure();
  grpc::ClientContext context;
  auto hub_stub = hub::v1::HubService::NewStub(grpc::CreateChannel(
      server_->address(), grpc::InsecureChannelCredentials()));
  hub::v1::GetStatusResponse status;
  ASSERT_TRUE(hub_stub->GetStatus(&context, {}, &status).ok());
  EXPECT_EQ(status.roles().elected_probing(), 1);
  EXPECT_EQ(status.open_presence_streams(), 1);
}

grpc::Status Release(hub::v1::RoleService::Stub* roles,
                     const std::string& agent, int64_t epoch,
                     hub::v1::ReleaseRoleResponse* response) {
  grpc::ClientContext context;
  hub::v1::ReleaseRoleRequest request;
  *request.mutable_role_key() = Cto();
  request.set_agent_id(agent);
  request.set_epoch(epoch);
  return roles->ReleaseRole(&context, request, response);
}

TEST_F(ActivationGrpcTest,
       AHolderThatStepsDownHandsTheRoleToTheNextCandidateWithNoGrace) {
  Agent a = Candidate("agent-a", /*priority=*/10);
  Agent b = Candidate("agent-b", /*priority=*/5);
  ASSERT_EQ(Ensure().holder_agent_id(), "agent-a");
  const hub::v1::RoleActivation first = NextActivation(a);
  ASSERT_TRUE(a.stream->Write(AckFrame(first)));
  AttachResponse answer;
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(a.stream.get(), &answer));
  ASSERT_EQ(GetRole().state(), hub::v1::ROLE_STATE_ACTIVE);

  hub::v1::ReleaseRoleResponse released;
  grpc::Status s = Release(roles_.get(), "agent-a", first.epoch(), &released);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(released.released().has_holder_agent_id())
      << released.DebugString();
  EXPECT_GT(released.released().epoch(), first.epoch());
  EXPECT_EQ(released.released().last_reason(), "released");
  // agent-a is still attached and the highest priority, yet passed over.
  EXPECT_EQ(released.next().disposition(),
            hub::v1::ENSURE_ROLE_DISPOSITION_STARTED);
  EXPECT_EQ(released.next().holder_agent_id(), "agent-b");
  EXPECT_EQ(released.next().trigger(),
            hub::v1::ENSURE_ROLE_TRIGGER_HOLDER_OFFLINE);
  const hub::v1::RoleActivation second = NextActivation(b);
  EXPECT_GT(second.epoch(), released.released().epoch() - 1);
  ASSERT_TRUE(b.stream->Write(AckFrame(second)));
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(b.stream.get(), &answer));
  ASSERT_TRUE(answer.has_activation_ack_result()) << answer.DebugString();
  EXPECT_EQ(GetRole().holder_agent_id(), "agent-b");

  // The old epoch is fenced: a second release of it, or a late ACK.
  s = Release(roles_.get(), "agent-a", first.epoch(), &released);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "STALE_EPOCH");
  EXPECT_EQ(testing::ErrorInfoOf(s).metadata().at("holder_agent_id"),
            "agent-b");
}

TEST_F(ActivationGrpcTest, OnlyTheHolderAtItsEpochCanStepDown) {
  Agent a = Candidate("agent-a");
  Agent b = Candidate("agent-b");
  hub::v1::ReleaseRoleResponse response;
  grpc::Status s = Release(roles_.get(), "agent-a", 1, &response);
  EXPECT_EQ(Reason(s), "STALE_EPOCH");  // not held yet (epoch 0)
  const hub::v1::EnsureRoleReceipt receipt = Ensure();
  const std::string holder = receipt.holder_agent_id();
  const std::string other = holder == "agent-a" ? "agent-b" : "agent-a";

  s = Release(roles_.get(), other, receipt.epoch(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "HOLDER_MISMATCH");
  s = Release(roles_.get(), holder, receipt.epoch() + 1, &response);
  EXPECT_EQ(Reason(s), "STALE_EPOCH");
  EXPECT_EQ(testing::ErrorInfoOf(s).metadata().at("epoch"),
            absl::StrCat(receipt.epoch()));
  s = Release(roles_.get(), holder, 0, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "REQUEST_INVALID");
  s = Release(roles_.get(), "", receipt.epoch(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // None of these changed the role.
  EXPECT_EQ(GetRole().epoch(), receipt.epoch());
  EXPECT_EQ(GetRole().holder_agent_id(), holder);
}

TEST_F(ActivationGrpcTest, ALoneHolderThatStepsDownLeavesTheRoleWaiting) {
  Agent a = Candidate("agent-a");
  Ensure();
  const hub::v1::RoleActivation activation = NextActivation(a);
  hub::v1::ReleaseRoleResponse released;
  ASSERT_TRUE(
      Release(roles_.get(), "agent-a", activation.epoch(), &released).ok());
  // Nobody else can take it. (JOINED when the release came while the
  // activation's own flight was still landing: the election follows its
  // landing.)
  EXPECT_TRUE(released.next().disposition() ==
                  hub::v1::ENSURE_ROLE_DISPOSITION_NO_CANDIDATE ||
              released.next().disposition() ==
                  hub::v1::ENSURE_ROLE_DISPOSITION_JOINED)
      << released.DebugString();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (GetRole().blocked_reason() != "no_candidate") {
    ASSERT_LT(absl::Now(), deadline) << GetRole().DebugString();
    absl::SleepFor(absl::Milliseconds(5));
  }
  const hub::v1::Role role = GetRole();
  EXPECT_EQ(role.state(), hub::v1::ROLE_STATE_ELECTABLE);
  EXPECT_FALSE(role.has_holder_agent_id());
  EXPECT_GT(role.epoch(), activation.epoch());
  // A new candidate takes it when it arrives, with no EnsureRole (agent-a
  // was passed over only in the election that followed its release).
  Agent c = Candidate("agent-c", /*priority=*/5);
  EXPECT_EQ(NextActivation(c).holder_agent_id(), "agent-c");
}

}  // namespace
}  // namespace hub
