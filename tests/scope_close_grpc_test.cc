// Closing a lead scope through gRPC against an in-process HubServer
// (TRIFLUX-HUB §5.2 "scope_closed", §9.5 #10, §9.14): CloseRoleScope removes
// the holder and candidates, dead-letters the backlog once (with the
// sender's notice), and the scope id is never used again; ListClosedScopes
// lists the records, filtered and paged.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "registry/clock.h"
#include "tests/hub_test_util.h"

namespace hub {
namespace {

using testing::CasRequestGuardedBy;
using testing::ErrorInfoOf;
using testing::Reason;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
constexpr char kScope[] = "scp_CCCCCCCCCCCCCCCCCCCCCC";
constexpr char kOtherScope[] = "scp_DDDDDDDDDDDDDDDDDDDDDD";
constexpr char kOtherProject[] = "prj_BBBBBBBBBBBBBBBBBBBBBB";

hub::v1::RoleKey Lead(const std::string& scope = kScope,
                      const std::string& project = kProject) {
  hub::v1::RoleKey key;
  key.set_project_id(project);
  key.set_kind(hub::v1::ROLE_KIND_LEAD);
  key.set_scope_id(scope);
  return key;
}

hub::v1::RoleKey Cto() {
  hub::v1::RoleKey key;
  key.set_project_id(kProject);
  key.set_kind(hub::v1::ROLE_KIND_CTO);
  return key;
}

void ExpectScopeClosed(const grpc::Status& s, const std::string& what) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << what << ": " << s.error_message();
  EXPECT_EQ(Reason(s), "ROLE_SCOPE_CLOSED")
      << what << ": " << s.error_message();
}

class ScopeCloseGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override { StartHub(testing::FreshTestDbPath()); }
  void TearDown() override { server_.reset(); }

  void StartHub(const std::string& db_path) {
    db_path_ = db_path;
    HubServerOptions options = testing::TestHubOptions(db_path);
    options.clock = &clock_;
    server_ = testing::StartTestHub(options);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    roles_ = hub::v1::RoleService::NewStub(channel);
    messages_ = hub::v1::MessageService::NewStub(channel);
  }

  void RestartHub() {
    server_.reset();
    StartHub(db_path_);
  }

  static std::unique_ptr<grpc::ClientContext> Ctx() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    return context;
  }

  int64_t Register(const std::string& id,
                   const std::vector<std::string>& capabilities = {}) {
    hub::v1::RegisterAgentRequest request;
    request.set_agent_id(id);
    request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
    request.set_project_id(kProject);
    for (const std::string& c : capabilities) request.add_capabilities(c);
    hub::v1::RegisterAgentResponse response;
    grpc::Status s = presence_->RegisterAgent(Ctx().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.presence_generation();
  }

  grpc::Status Upsert(const std::string& agent,
                      const hub::v1::RoleKey& key = Lead()) {
    hub::v1::UpsertRoleCandidateRequest request;
    *request.mutable_role_key() = key;
    request.set_agent_id(agent);
    hub::v1::UpsertRoleCandidateResponse response;
    return roles_->UpsertRoleCandidate(Ctx().get(), request, &response);
  }

  grpc::Status Reserve(const hub::v1::ReserveRoleRequest& request,
                       hub::v1::Role* role = nullptr) {
    hub::v1::ReserveRoleResponse response;
    grpc::Status s = roles_->ReserveRole(Ctx().get(), request, &response);
    if (role != nullptr) *role = response.role();
    return s;
  }

  grpc::Status Cas(const hub::v1::Role& row, const hub::v1::RolePatch& patch,
                   hub::v1::Role* role = nullptr) {
    hub::v1::CompareAndSetRoleRequest request = CasRequestGuardedBy(row);
    *request.mutable_patch() = patch;
    hub::v1::CompareAndSetRoleResponse response;
    grpc::Status s = roles_->CompareAndSetRole(Ctx().get(), request, &response);
    if (role != nullptr) *role = response.role();
    return s;
  }

  // The lead of `scope` held ACTIVE by `holder` (reserved, then activated by
  // compare-and-set as an ACK would).
  hub::v1::Role ActiveLead(const std::string& holder,
                           const std::string& scope = kScope) {
    hub::v1::ReserveRoleRequest reserve;
    *reserve.mutable_role_key() = Lead(scope);
    reserve.mutable_patch()->set_holder_agent_id(holder);
    reserve.mutable_patch()->set_charter_version("tfx.lead-charter.v1");
    hub::v1::Role reserved;
    grpc::Status s = Reserve(reserve, &reserved);
    EXPECT_TRUE(s.ok()) << s.error_message();
    hub::v1::RolePatch active;
    active.set_state(hub::v1::ROLE_STATE_ACTIVE);
    active.set_charter_acked_epoch(reserved.epoch());
    *active.mutable_holder_lease_expires_at() = reserved.last_transition_at();
    active.mutable_holder_lease_expires_at()->set_seconds(
        active.holder_lease_expires_at().seconds() + 3600);
    hub::v1::Role role;
    s = Cas(reserved, active, &role);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(role.state(), hub::v1::ROLE_STATE_ACTIVE);
    return role;
  }

  grpc::Status Close(const hub::v1::RoleKey& key,
                     hub::v1::CloseRoleScopeResponse* response,
                     const std::string& reason = "scope finished") {
    hub::v1::CloseRoleScopeRequest request;
    *request.mutable_role_key() = key;
    request.set_reason(reason);
    return roles_->CloseRoleScope(Ctx().get(), request, response);
  }

  hub::v1::CloseRoleScopeResponse CloseOk(const hub::v1::RoleKey& key) {
    hub::v1::CloseRoleScopeResponse response;
    grpc::Status s = Close(key, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  grpc::Status Publish(const std::string& from, const std::string& to,
                       hub::v1::MessageType type,
                       hub::v1::PublishResponse* response = nullptr) {
    hub::v1::PublishRequest request;
    request.set_from_agent_id(from);
    request.set_to(to);
    request.set_type(type);
    hub::v1::PublishResponse ignored;
    return messages_->Publish(Ctx().get(), request,
                              response != nullptr ? response : &ignored);
  }

  std::vector<hub::v1::MessageDelivery> Pending(const std::string& agent) {
    hub::v1::ListPendingRequest request;
    request.set_agent_id(agent);
    request.set_peek(true);
    hub::v1::ListPendingResponse response;
    grpc::Status s = messages_->ListPending(Ctx().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {response.deliveries().begin(), response.deliveries().end()};
  }

  std::vector<hub::v1::DeadLetter> DeadLetters(const std::string& reason) {
    hub::v1::ListDeadLettersRequest request;
    request.set_reason(reason);
    hub::v1::ListDeadLettersResponse response;
    grpc::Status s =
        messages_->ListDeadLetters(Ctx().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {response.dead_letters().begin(), response.dead_letters().end()};
  }

  grpc::Status Ensure(const hub::v1::RoleKey& key,
                      hub::v1::EnsureRoleReceipt* receipt) {
    hub::v1::EnsureRoleRequest request;
    *request.mutable_role_key() = key;
    request.set_trigger(hub::v1::ENSURE_ROLE_TRIGGER_MANUAL);
    request.set_cause_id("test");
    hub::v1::EnsureRoleResponse response;
    grpc::Status s = roles_->EnsureRole(Ctx().get(), request, &response);
    *receipt = response.receipt();
    return s;
  }

  grpc::Status GetRole(const hub::v1::RoleKey& key) {
    hub::v1::GetRoleRequest request;
    *request.mutable_role_key() = key;
    hub::v1::GetRoleResponse response;
    return roles_->GetRole(Ctx().get(), request, &response);
  }

  grpc::Status ListClosed(const hub::v1::ListClosedScopesRequest& request,
                          hub::v1::ListClosedScopesResponse* response) {
    return roles_->ListClosedScopes(Ctx().get(), request, response);
  }

  int CandidateCount(const hub::v1::RoleKey& key) {
    hub::v1::ListRoleCandidatesRequest request;
    *request.mutable_role_key() = key;
    hub::v1::ListRoleCandidatesResponse response;
    EXPECT_TRUE(
        roles_->ListRoleCandidates(Ctx().get(), request, &response).ok());
    return response.candidates_size();
  }

  FakeClock clock_;
  std::string db_path_;
  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
  std::unique_ptr<hub::v1::MessageService::Stub> messages_;
};

TEST_F(ScopeCloseGrpcTest,
       ClosingRemovesTheHolderAndCandidatesAndDeadLettersTheBacklogOnce) {
  Register("lead-1", {"role:lead:candidate"});
  Register("lead-2", {"role:lead:candidate"});
  Register("sender");
  ASSERT_TRUE(Upsert("lead-1").ok());
  ASSERT_TRUE(Upsert("lead-2").ok());
  const hub::v1::Role active = ActiveLead("lead-1");
  const std::string to = "topic:role:" + active.role_key_wire();
  // A request handed to the holder and an event: both pending.
  hub::v1::PublishResponse request;
  ASSERT_TRUE(
      Publish("sender", to, hub::v1::MESSAGE_TYPE_REQUEST, &request).ok());
  EXPECT_EQ(request.recipient_count(), 1);
  ASSERT_TRUE(Publish("sender", to, hub::v1::MESSAGE_TYPE_EVENT).ok());
  ASSERT_EQ(Pending("lead-1").size(), 2u);

  const hub::v1::CloseRoleScopeResponse closed = CloseOk(Lead());
  EXPECT_FALSE(closed.already_closed());
  EXPECT_TRUE(closed.role_removed());
  EXPECT_EQ(closed.removed_role().holder_agent_id(), "lead-1");
  EXPECT_EQ(closed.removed_role().state(), hub::v1::ROLE_STATE_ACTIVE);
  EXPECT_EQ(closed.candidates_removed(), 2);
  EXPECT_EQ(closed.dead_lettered_count(), 2);
  EXPECT_EQ(closed.closed().dead_lettered_count(), 2);  // recorded
  EXPECT_EQ(closed.closed().role_key_wire(), active.role_key_wire());
  EXPECT_EQ(closed.closed().role_key().scope_id(), kScope);
  EXPECT_EQ(closed.closed().closed_by(), "anonymous");
  EXPECT_EQ(closed.closed().reason(), "scope finished");
  EXPECT_EQ(closed.closed().closed_at().seconds(),
            absl::ToUnixSeconds(clock_.Now()));

  EXPECT_EQ(Reason(GetRole(Lead())), "ROLE_NOT_FOUND");
  EXPECT_EQ(CandidateCount(Lead()), 0);
  EXPECT_TRUE(Pending("lead-1").empty());
  std::vector<hub::v1::DeadLetter> dead = DeadLetters("ROLE_SCOPE_CLOSED");
  ASSERT_EQ(dead.size(), 2u);
  for (const hub::v1::DeadLetter& d : dead) {
    EXPECT_EQ(d.message().status(), hub::v1::MESSAGE_STATUS_DEAD_LETTER);
    EXPECT_EQ(d.last_error(), "lead scope closed by anonymous: scope finished");
  }
  // The request's sender is told, once; the event's is not.
  std::vector<hub::v1::MessageDelivery> notices = Pending("sender");
  ASSERT_EQ(notices.size(), 1u);
  const hub::v1::Message& notice = notices[0].message();
  EXPECT_EQ(notice.type(), hub::v1::MESSAGE_TYPE_SYSTEM);
  EXPECT_EQ(notice.topic(), "handoff.dead_letter");
  EXPECT_EQ(notice.payload().fields().at("message_id").string_value(),
            request.message_id());
  EXPECT_EQ(notice.payload().fields().at("reason").string_value(),
            "ROLE_SCOPE_CLOSED");

  // Later expiry sweeps and a repeated close claim nothing more.
  clock_.Advance(absl::Hours(1));
  ASSERT_TRUE(server_->messaging()->SweepExpired().ok());
  const hub::v1::CloseRoleScopeResponse again = CloseOk(Lead());
  EXPECT_EQ(again.dead_lettered_count(), 0);
  EXPECT_EQ(again.closed().dead_lettered_count(), 2);  // the first close's
  EXPECT_EQ(DeadLetters("ROLE_SCOPE_CLOSED").size(), 2u);
  // Only the (unread) notice itself expired.
  std::vector<hub::v1::DeadLetter> expired = DeadLetters("ttl_expired");
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].message_id(), notice.message_id());
}

TEST_F(ScopeCloseGrpcTest,
       EnsureRoleOnAClosedLeadScopeAnswersScopeClosedAndWritesNothing) {
  Register("lead-1", {"role:lead:candidate"});
  ASSERT_TRUE(Upsert("lead-1").ok());
  CloseOk(Lead());
  hub::v1::EnsureRoleReceipt receipt;
  grpc::Status s = Ensure(Lead(), &receipt);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(receipt.accepted());
  EXPECT_EQ(receipt.disposition(),
            hub::v1::ENSURE_ROLE_DISPOSITION_SCOPE_CLOSED);
  EXPECT_EQ(receipt.state(), hub::v1::ROLE_STATE_UNSPECIFIED);
  EXPECT_EQ(receipt.epoch(), 0);
  EXPECT_EQ(receipt.role_key().scope_id(), kScope);
  EXPECT_EQ(Reason(GetRole(Lead())), "ROLE_NOT_FOUND");
  EXPECT_EQ(CandidateCount(Lead()), 0);
  // Another scope of the project is unaffected.
  ASSERT_TRUE(Upsert("lead-1", Lead(kOtherScope)).ok());
  ASSERT_TRUE(Ensure(Lead(kOtherScope), &receipt).ok());
  EXPECT_TRUE(receipt.accepted());
  EXPECT_NE(receipt.disposition(),
            hub::v1::ENSURE_ROLE_DISPOSITION_SCOPE_CLOSED);
}

TEST_F(ScopeCloseGrpcTest, AClosedScopeIdIsNeverUsedAgain) {
  Register("lead-1", {"role:lead:candidate"});
  Register("sender");
  const hub::v1::CloseRoleScopeResponse closed = CloseOk(Lead());
  EXPECT_FALSE(closed.role_removed());  // closing needs no row
  const std::string wire = closed.closed().role_key_wire();

  hub::v1::ReserveRoleRequest by_key;
  *by_key.mutable_role_key() = Lead();
  ExpectScopeClosed(Reserve(by_key), "ReserveRole by key");
  hub::v1::ReserveRoleRequest by_wire;
  by_wire.set_role_key_wire(wire);
  by_wire.mutable_patch()->set_holder_agent_id("lead-1");
  ExpectScopeClosed(Reserve(by_wire), "ReserveRole by wire");
  hub::v1::ReserveRoleRequest guarded = by_key;
  guarded.set_expected_version(3);
  ExpectScopeClosed(Reserve(guarded), "ReserveRole with guards");
  ExpectScopeClosed(Upsert("lead-1"), "UpsertRoleCandidate");

  hub::v1::ReportCandidateProbeRequest probe;
  *probe.mutable_role_key() = Lead();
  probe.set_agent_id("lead-1");
  probe.set_code(hub::v1::PROBE_CODE_TIMEOUT);
  hub::v1::ReportCandidateProbeResponse probed;
  ExpectScopeClosed(roles_->ReportCandidateProbe(Ctx().get(), probe, &probed),
                    "ReportCandidateProbe");

  for (hub::v1::MessageType type :
       {hub::v1::MESSAGE_TYPE_EVENT, hub::v1::MESSAGE_TYPE_REQUEST,
        hub::v1::MESSAGE_TYPE_HANDOFF}) {
    grpc::Status s = Publish("sender", "topic:role:" + wire, type);
    ExpectScopeClosed(s, "Publish");
    EXPECT_EQ(ErrorInfoOf(s).metadata().at("field"), "to");
  }
  hub::v1::AskRequest ask;
  ask.set_from_agent_id("sender");
  ask.set_to("topic:role:" + wire);
  ask.mutable_await_timeout()->set_nanos(100'000'000);
  hub::v1::AskResponse asked;
  ExpectScopeClosed(messages_->Ask(Ctx().get(), ask, &asked), "Ask");

  // Nothing was written: no role, no candidate, no message, no dead letter.
  EXPECT_EQ(Reason(GetRole(Lead())), "ROLE_NOT_FOUND");
  EXPECT_EQ(CandidateCount(Lead()), 0);
  EXPECT_TRUE(DeadLetters("").empty());
  hub::v1::ListRolesRequest list;
  hub::v1::ListRolesResponse listed;
  ASSERT_TRUE(roles_->ListRoles(Ctx().get(), list, &listed).ok());
  EXPECT_EQ(listed.roles_size(), 0);

  // Still closed after a restart.
  RestartHub();
  ExpectScopeClosed(Reserve(by_key), "ReserveRole after a restart");
  hub::v1::EnsureRoleReceipt receipt;
  ASSERT_TRUE(Ensure(Lead(), &receipt).ok());
  EXPECT_EQ(receipt.disposition(),
            hub::v1::ENSURE_ROLE_DISPOSITION_SCOPE_CLOSED);
}

TEST_F(ScopeCloseGrpcTest, ClosingAgainChangesNothingAndReportsTheFirstClose) {
  ActiveLead("lead-1");
  const hub::v1::CloseRoleScopeResponse first = CloseOk(Lead());
  clock_.Advance(absl::Seconds(30));
  hub::v1::CloseRoleScopeResponse again;
  hub::v1::CloseRoleScopeRequest by_wire;
  by_wire.set_role_key_wire(first.closed().role_key_wire());
  by_wire.set_reason("again");
  grpc::Status s = roles_->CloseRoleScope(Ctx().get(), by_wire, &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(again.already_closed());
  EXPECT_FALSE(again.role_removed());
  EXPECT_FALSE(again.has_removed_role());
  EXPECT_EQ(again.candidates_removed(), 0);
  EXPECT_EQ(again.dead_lettered_count(), 0);
  EXPECT_EQ(again.closed().closed_at().seconds(),
            first.closed().closed_at().seconds());
  EXPECT_EQ(again.closed().reason(), "scope finished");
}

TEST_F(ScopeCloseGrpcTest,
       ACtoKeyOrAnOverlongReasonIsRefusedAndChangesNothing) {
  hub::v1::ReserveRoleRequest reserve;
  *reserve.mutable_role_key() = Cto();
  ASSERT_TRUE(Reserve(reserve).ok());
  hub::v1::CloseRoleScopeResponse response;
  grpc::Status s = Close(Cto(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "ROLE_KIND_UNSUPPORTED");
  EXPECT_EQ(ErrorInfoOf(s).metadata().at("field"), "role_key.kind");
  EXPECT_TRUE(GetRole(Cto()).ok());

  s = Close(Lead(), &response, std::string(257, 'r'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "REQUEST_INVALID");
  hub::v1::ReserveRoleRequest lead;
  *lead.mutable_role_key() = Lead();
  EXPECT_TRUE(Reserve(lead).ok());  // not closed
}

TEST_F(ScopeCloseGrpcTest, TheHolderOfAClosedScopeLosesItsAuthority) {
  const int64_t generation = Register("lead-1", {"role:lead:candidate"});
  const hub::v1::Role active = ActiveLead("lead-1");
  CloseOk(Lead());
  hub::v1::RolePatch patch;
  patch.set_last_reason("still mine");
  ExpectScopeClosed(Cas(active, patch), "CompareAndSetRole");

  hub::v1::AckRoleActivationRequest ack;
  ack.set_agent_id("lead-1");
  ack.set_presence_generation(generation);
  hub::v1::RoleActivationAck* a = ack.mutable_ack();
  a->set_schema("tfx.role-activation-ack.v1");
  a->set_activation_id(active.activation_id());
  a->set_role_key_wire(active.role_key_wire());
  a->set_epoch(active.epoch());
  a->set_activation_seq(active.activation_seq());
  a->set_holder_agent_id("lead-1");
  a->set_reachable(true);
  a->mutable_charter_ack()->set_role_key_wire(active.role_key_wire());
  a->mutable_charter_ack()->set_epoch(active.epoch());
  a->mutable_charter_ack()->set_charter_version("tfx.lead-charter.v1");
  hub::v1::AckRoleActivationResponse acked;
  ExpectScopeClosed(roles_->AckRoleActivation(Ctx().get(), ack, &acked),
                    "AckRoleActivation");
}

TEST_F(ScopeCloseGrpcTest, WatchersSeeTheRoleRemovedWithItsLastState) {
  const hub::v1::Role active = ActiveLead("lead-1");
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  hub::v1::WatchRolesRequest request;
  request.set_project_id(kProject);
  auto stream = roles_->WatchRoles(&context, request);
  hub::v1::WatchRolesResponse item;
  ASSERT_TRUE(stream->Read(&item));
  EXPECT_EQ(item.change().kind(), hub::v1::ROLE_CHANGE_KIND_SNAPSHOT);
  ASSERT_TRUE(stream->Read(&item));
  ASSERT_TRUE(item.has_snapshot_end());

  CloseOk(Lead());
  ASSERT_TRUE(stream->Read(&item));
  EXPECT_EQ(item.change().kind(), hub::v1::ROLE_CHANGE_KIND_REMOVED);
  EXPECT_EQ(item.change().role().role_key_wire(), active.role_key_wire());
  EXPECT_EQ(item.change().role().version(), active.version());
  EXPECT_EQ(item.change().role().holder_agent_id(), "lead-1");
  EXPECT_EQ(item.change().previous_state(), hub::v1::ROLE_STATE_ACTIVE);

  // The next change the watcher sees is of another role.
  hub::v1::ReserveRoleRequest other;
  *other.mutable_role_key() = Lead(kOtherScope);
  ASSERT_TRUE(Reserve(other).ok());
  ASSERT_TRUE(stream->Read(&item));
  EXPECT_EQ(item.change().kind(), hub::v1::ROLE_CHANGE_KIND_CREATED);
  EXPECT_EQ(item.change().role().role_key().scope_id(), kOtherScope);
  context.TryCancel();
  while (stream->Read(&item)) {
  }
  stream->Finish();
}

TEST_F(ScopeCloseGrpcTest,
       AnActivationInFlightIsDroppedAndEnsuresStopJoiningIt) {
  // A candidate whose stream is attached but never answers its probe: the
  // activation flight waits in the probe.
  const int64_t generation = Register("lead-1", {"role:lead:candidate"});
  grpc::ClientContext attach;
  auto stream = presence_->Attach(&attach);
  hub::v1::AttachRequest hello;
  hello.mutable_hello()->set_agent_id("lead-1");
  hello.mutable_hello()->set_presence_generation(generation);
  ASSERT_TRUE(stream->Write(hello));
  hub::v1::AttachResponse frame;
  ASSERT_TRUE(stream->Read(&frame));
  ASSERT_TRUE(frame.has_attached());
  ASSERT_TRUE(Upsert("lead-1").ok());
  hub::v1::EnsureRoleReceipt receipt;
  ASSERT_TRUE(Ensure(Lead(), &receipt).ok());
  ASSERT_EQ(receipt.disposition(), hub::v1::ENSURE_ROLE_DISPOSITION_STARTED);
  // The candidate is also told of the reservation (role_change), in any
  // order with the probe.
  do {
    ASSERT_TRUE(stream->Read(&frame));
  } while (frame.event().has_role_change());
  ASSERT_TRUE(frame.event().has_role_probe()) << frame.DebugString();

  const hub::v1::CloseRoleScopeResponse closed = CloseOk(Lead());
  EXPECT_TRUE(closed.role_removed());
  EXPECT_EQ(closed.removed_role().state(), hub::v1::ROLE_STATE_ELECTED_PROBING);
  ASSERT_TRUE(Ensure(Lead(), &receipt).ok());
  EXPECT_EQ(receipt.disposition(),
            hub::v1::ENSURE_ROLE_DISPOSITION_SCOPE_CLOSED);
  // The probe's late answer changes nothing: the flight ends at its gate.
  hub::v1::AttachRequest reply;
  reply.mutable_probe_reply()->set_probe_id(
      frame.event().role_probe().probe_id());
  reply.mutable_probe_reply()->set_ready(true);
  ASSERT_TRUE(stream->Write(reply));
  EXPECT_EQ(Reason(GetRole(Lead())), "ROLE_NOT_FOUND");
  attach.TryCancel();
  while (stream->Read(&frame)) {
  }
  stream->Finish();
}

TEST_F(ScopeCloseGrpcTest,
       ClosedScopesAreListedAsRecordedAndFilteredByProject) {
  hub::v1::ListClosedScopesResponse listed;
  ASSERT_TRUE(ListClosed({}, &listed).ok());
  EXPECT_EQ(listed.closed_scopes_size(), 0);
  EXPECT_EQ(listed.next_page_token(), "");

  // A scope with a backlog of two, closed with a reason; one of another
  // project closed later without one.
  Register("sender");
  const std::string wire = CloseOk(Lead()).closed().role_key_wire();
  hub::v1::ReserveRoleRequest other;
  *other.mutable_role_key() = Lead(kOtherScope);
  hub::v1::Role open_lead;
  ASSERT_TRUE(Reserve(other, &open_lead).ok());
  const std::string to = "topic:role:" + open_lead.role_key_wire();
  ASSERT_TRUE(Publish("sender", to, hub::v1::MESSAGE_TYPE_EVENT).ok());
  ASSERT_TRUE(Publish("sender", to, hub::v1::MESSAGE_TYPE_EVENT).ok());
  clock_.Advance(absl::Seconds(5));
  hub::v1::CloseRoleScopeResponse second;
  ASSERT_TRUE(Close(Lead(kOtherScope), &second, "merged").ok());
  clock_.Advance(absl::Seconds(5));
  hub::v1::CloseRoleScopeResponse foreign;
  ASSERT_TRUE(Close(Lead(kScope, kOtherProject), &foreign, "").ok());

  ASSERT_TRUE(ListClosed({}, &listed).ok());
  ASSERT_EQ(listed.closed_scopes_size(), 3);
  for (int i = 1; i < listed.closed_scopes_size(); ++i) {
    EXPECT_LT(listed.closed_scopes(i - 1).role_key_wire(),
              listed.closed_scopes(i).role_key_wire());
  }
  EXPECT_EQ(listed.server_time().seconds(), absl::ToUnixSeconds(clock_.Now()));

  hub::v1::ListClosedScopesRequest by_project;
  by_project.set_project_id(kProject);
  ASSERT_TRUE(ListClosed(by_project, &listed).ok());
  ASSERT_EQ(listed.closed_scopes_size(), 2);
  const hub::v1::ClosedRoleScope* first = &listed.closed_scopes(0);
  const hub::v1::ClosedRoleScope* merged = &listed.closed_scopes(1);
  if (first->role_key_wire() != wire) std::swap(first, merged);
  EXPECT_EQ(first->role_key_wire(), wire);
  EXPECT_EQ(first->role_key().project_id(), kProject);
  EXPECT_EQ(first->role_key().kind(), hub::v1::ROLE_KIND_LEAD);
  EXPECT_EQ(first->role_key().scope_id(), kScope);
  EXPECT_EQ(first->closed_by(), "anonymous");
  EXPECT_EQ(first->reason(), "scope finished");
  EXPECT_TRUE(first->has_dead_lettered_count());
  EXPECT_EQ(first->dead_lettered_count(), 0);
  EXPECT_EQ(merged->role_key_wire(), open_lead.role_key_wire());
  EXPECT_EQ(merged->role_key().scope_id(), kOtherScope);
  EXPECT_EQ(merged->reason(), "merged");
  EXPECT_EQ(merged->dead_lettered_count(), 2);
  EXPECT_EQ(merged->closed_at().seconds(),
            second.closed().closed_at().seconds());
  EXPECT_GT(merged->closed_at().seconds(), first->closed_at().seconds());

  by_project.set_scope_id(kOtherScope);
  ASSERT_TRUE(ListClosed(by_project, &listed).ok());
  ASSERT_EQ(listed.closed_scopes_size(), 1);
  EXPECT_EQ(listed.closed_scopes(0).reason(), "merged");
  by_project.set_project_id(kOtherProject);
  ASSERT_TRUE(ListClosed(by_project, &listed).ok());
  EXPECT_EQ(listed.closed_scopes_size(), 0);
  by_project.set_scope_id(kScope);
  ASSERT_TRUE(ListClosed(by_project, &listed).ok());
  ASSERT_EQ(listed.closed_scopes_size(), 1);
  EXPECT_EQ(listed.closed_scopes(0).role_key_wire(),
            foreign.closed().role_key_wire());
  EXPECT_EQ(listed.closed_scopes(0).reason(), "");

  // Still listed after a restart (the records are the database's).
  RestartHub();
  ASSERT_TRUE(ListClosed({}, &listed).ok());
  EXPECT_EQ(listed.closed_scopes_size(), 3);
}

TEST_F(ScopeCloseGrpcTest, ClosedScopesPageInWireOrderWithOpaqueTokens) {
  // Seven closed scopes: pages of three, three and one.
  std::vector<std::string> wires;
  for (char letter = 'A'; letter < 'H'; ++letter) {
    wires.push_back(CloseOk(Lead(absl::StrCat("scp_", std::string(22, letter))))
                        .closed()
                        .role_key_wire());
  }
  std::sort(wires.begin(), wires.end());
  hub::v1::ListClosedScopesRequest request;
  request.set_project_id(kProject);
  request.set_page_size(3);
  std::vector<std::string> seen;
  std::vector<int> page_sizes;
  for (int pages = 0; pages < 10; ++pages) {
    hub::v1::ListClosedScopesResponse page;
    grpc::Status s = ListClosed(request, &page);
    ASSERT_TRUE(s.ok()) << s.error_message();
    page_sizes.push_back(page.closed_scopes_size());
    for (const hub::v1::ClosedRoleScope& c : page.closed_scopes()) {
      seen.push_back(c.role_key_wire());
    }
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  EXPECT_EQ(page_sizes, (std::vector<int>{3, 3, 1}));
  EXPECT_EQ(seen, wires);

  // A token is bound to its list and its filters.
  hub::v1::ListClosedScopesRequest first = request;
  first.clear_page_token();
  hub::v1::ListClosedScopesResponse page;
  ASSERT_TRUE(ListClosed(first, &page).ok());
  ASSERT_FALSE(page.next_page_token().empty());
  hub::v1::ListClosedScopesRequest other_filters;
  other_filters.set_page_token(page.next_page_token());
  grpc::Status s = ListClosed(other_filters, &page);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "PAGE_TOKEN_INVALID");
  EXPECT_EQ(ErrorInfoOf(s).metadata().at("field"), "page_token");
  hub::v1::ListRolesRequest roles;
  roles.set_project_id(kProject);
  roles.set_page_token(request.page_token());
  hub::v1::ListRolesResponse roles_page;
  s = roles_->ListRoles(Ctx().get(), roles, &roles_page);
  EXPECT_EQ(Reason(s), "PAGE_TOKEN_INVALID") << "a closed-scope token";
  hub::v1::ListClosedScopesRequest forged;
  forged.set_page_token("bm90LWEtdG9rZW4");
  EXPECT_EQ(Reason(ListClosed(forged, &page)), "PAGE_TOKEN_INVALID");
  hub::v1::ListClosedScopesRequest negative;
  negative.set_page_size(-1);
  s = ListClosed(negative, &page);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "REQUEST_INVALID");
  // Above 1000 is 1000, 0 is 100: all seven on one page.
  for (int size : {0, 5000}) {
    hub::v1::ListClosedScopesRequest big;
    big.set_page_size(size);
    ASSERT_TRUE(ListClosed(big, &page).ok());
    EXPECT_EQ(page.closed_scopes_size(), 7);
    EXPECT_EQ(page.next_page_token(), "");
  }
}

}  // namespace
}  // namespace hub
