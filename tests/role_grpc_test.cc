// RoleService through gRPC against an in-process server over a SqliteStore:
// TRIFLUX-HUB §9.2 scenarios 1, 2, 5, 6 and 7's reads, absent versus clear,
// the ActivationIdGuard, role keys, paging, WatchRoles, and exactly one
// compare-and-set success per version under contention.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "tests/role_grpc_fixture.h"

namespace hub::testing {
namespace {

using hub::v1::CompareAndSetRoleRequest;
using hub::v1::ReserveRoleRequest;
using hub::v1::Role;

// §9.2 scenario 1.
TEST_F(RoleGrpcTest, AReservationRoundTripsAndStaleGuardsAreRefused) {
  ReserveRoleRequest request;
  *request.mutable_role_key() = CtoKey();
  Role created;
  bool was_created = false;
  ASSERT_TRUE(Reserve(request, &created, &was_created).ok());
  EXPECT_TRUE(was_created);
  EXPECT_EQ(created.topic(), "topic:role:" + created.role_key_wire());
  EXPECT_EQ(created.role_key().project_id(), kProject);
  Role again = ReserveOk(CtoKey(), "agent-a");  // version 1, epoch 1
  EXPECT_EQ(GetOk(created.role_key_wire()).SerializeAsString(),
            again.SerializeAsString());
  hub::v1::ListRolesRequest by_project;
  by_project.set_project_id(kProject);
  hub::v1::ListRolesResponse listed;
  ASSERT_TRUE(List(by_project, &listed).ok());
  ASSERT_EQ(listed.roles_size(), 1);
  EXPECT_EQ(listed.roles(0).version(), 1);

  request.set_expected_version(again.version() - 1);
  grpc::Status s = Reserve(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(Reason(s), "STALE_VERSION");
  request.clear_expected_version();
  request.set_expected_epoch(again.epoch() - 1);
  s = Reserve(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "STALE_EPOCH");
  EXPECT_EQ(InfoOf(s).metadata().at("epoch"), "1");
}

// §9.2 scenario 2.
TEST_F(RoleGrpcTest, CompareAndSetWithAllFourGuardsActivatesOnce) {
  ReserveOk(CtoKey());
  Role row = ReserveOk(CtoKey(), "agent-a");
  CompareAndSetRoleRequest request = CasFrom(row);
  request.mutable_patch()->set_state(hub::v1::ROLE_STATE_ACTIVE);
  request.mutable_patch()->set_charter_acked_epoch(row.epoch());
  Role active;
  ASSERT_TRUE(Cas(request, &active).ok());
  EXPECT_EQ(active.version(), row.version() + 1);
  EXPECT_EQ(active.epoch(), row.epoch());
  EXPECT_EQ(active.state(), hub::v1::ROLE_STATE_ACTIVE);

  grpc::Status s = Cas(request);  // replay of the old version
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(Reason(s), "STALE_VERSION");
  EXPECT_EQ(InfoOf(s).metadata().at("version"), absl::StrCat(active.version()));
  EXPECT_EQ(InfoOf(s).metadata().at("holder_agent_id"), "agent-a");
  request = CasFrom(active);
  request.set_expected_epoch(active.epoch() + 1);
  s = Cas(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "STALE_EPOCH");
  request = CasFrom(active);
  request.mutable_expected_activation_id()->set_activation_id("other-id");
  s = Cas(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(s), "STALE_ACTIVATION_ID");
  EXPECT_EQ(InfoOf(s).metadata().at("activation_id"), active.activation_id());
}

// §9.2 scenario 5 (the expired-holder listing is the store's query).
TEST_F(RoleGrpcTest, AnActiveReservationSurvivesAReopenUnchanged) {
  ReserveRoleRequest request;
  *request.mutable_role_key() = CtoKey();
  request.mutable_patch()->set_holder_agent_id("agent-a");
  request.mutable_patch()->mutable_holder_lease_expires_at()->set_nanos(
      999'000'000);  // 999 ms
  Role reserved;
  ASSERT_TRUE(Reserve(request, &reserved).ok());
  CompareAndSetRoleRequest cas = CasFrom(reserved);
  cas.mutable_patch()->set_state(hub::v1::ROLE_STATE_ACTIVE);
  Role active;
  ASSERT_TRUE(Cas(cas, &active).ok());
  Stop();
  Start();
  EXPECT_EQ(GetOk(active.role_key_wire()).SerializeAsString(),
            active.SerializeAsString());
  EXPECT_EQ(store_->roles().ListRolesWithExpiredHolder(1'000)->size(), 1u);
  EXPECT_EQ(store_->roles().ListRolesWithExpiredHolder(998)->size(), 0u);
}

hub::v1::TransportLocator TmuxLocator() {
  hub::v1::TransportLocator l;
  l.set_schema_version("tfx.transport-locator.v1");
  l.set_transport_id("trn_tmux1");
  l.set_kind(hub::v1::TRANSPORT_KIND_TMUX);
  l.set_host_id("hst_host1");
  l.add_capabilities(hub::v1::TRANSPORT_CAPABILITY_PROBE);
  l.add_capabilities(hub::v1::TRANSPORT_CAPABILITY_WAKE);
  l.set_priority(100);
  l.mutable_expires_at()->set_seconds(absl::ToUnixSeconds(absl::Now()) + 3600);
  l.mutable_tmux()->set_session_name("work");
  l.mutable_tmux()->set_mux_server_id("mux_1");
  return l;
}

// §9.2 scenario 6.
TEST_F(RoleGrpcTest, ACandidateRecordsAFailedProbeAndGoesWithItsRole) {
  hub::v1::UpsertRoleCandidateRequest up;
  *up.mutable_role_key() = LeadKey();
  up.set_agent_id("agent-a");
  *up.mutable_candidate()->add_transport_locators() = TmuxLocator();
  hub::v1::UpsertRoleCandidateResponse upserted;
  {
    grpc::ClientContext context;
    grpc::Status s = stub_->UpsertRoleCandidate(&context, up, &upserted);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_TRUE(upserted.created());
  EXPECT_EQ(upserted.candidate().source(), hub::v1::CANDIDATE_SOURCE_OPERATOR);
  ASSERT_EQ(upserted.candidate().transport_locators_size(), 1);
  EXPECT_EQ(upserted.candidate().transport_locators(0).tmux().session_name(),
            "work");
  hub::v1::ReportCandidateProbeRequest probe;
  probe.set_role_key_wire(upserted.candidate().role_key_wire());
  probe.set_agent_id("agent-a");
  probe.set_code(hub::v1::PROBE_CODE_TIMEOUT);
  hub::v1::ReportCandidateProbeResponse probed;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->ReportCandidateProbe(&context, probe, &probed).ok());
  }
  EXPECT_EQ(probed.candidate().consecutive_probe_failures(), 1);
  EXPECT_TRUE(probed.candidate().has_excluded_until());
  EXPECT_EQ(probed.candidate().last_probe_code(), "timeout");
  hub::v1::ListRoleCandidatesRequest list;
  *list.mutable_role_key() = LeadKey();
  hub::v1::ListRoleCandidatesResponse listed;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->ListRoleCandidates(&context, list, &listed).ok());
  }
  ASSERT_EQ(listed.candidates_size(), 1);
  EXPECT_EQ(listed.candidates(0).consecutive_probe_failures(), 1);
  ASSERT_TRUE(
      store_->roles().DeleteRole(upserted.candidate().role_key_wire()).ok());
  listed.Clear();
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->ListRoleCandidates(&context, list, &listed).ok());
  EXPECT_EQ(listed.candidates_size(), 0);
}

grpc::Status Upsert(hub::v1::RoleService::Stub* stub,
                    const hub::v1::UpsertRoleCandidateRequest& request,
                    hub::v1::UpsertRoleCandidateResponse* response) {
  grpc::ClientContext context;
  return stub->UpsertRoleCandidate(&context, request, response);
}

grpc::Status Remove(hub::v1::RoleService::Stub* stub, const std::string& agent,
                    bool* removed) {
  grpc::ClientContext context;
  hub::v1::RemoveRoleCandidateRequest request;
  *request.mutable_role_key() = LeadKey();
  request.set_agent_id(agent);
  hub::v1::RemoveRoleCandidateResponse response;
  grpc::Status s = stub->RemoveRoleCandidate(&context, request, &response);
  *removed = response.removed();
  return s;
}

TEST_F(RoleGrpcTest,
       ARemovedCandidateIsNoLongerListedAndRemovingAgainIsNoError) {
  bool removed = true;
  // Nothing there yet (not even the role): no error.
  ASSERT_TRUE(Remove(stub_.get(), "agent-a", &removed).ok());
  EXPECT_FALSE(removed);
  for (const char* agent : {"agent-a", "agent-b"}) {
    hub::v1::UpsertRoleCandidateRequest up;
    *up.mutable_role_key() = LeadKey();
    up.set_agent_id(agent);
    hub::v1::UpsertRoleCandidateResponse upserted;
    ASSERT_TRUE(Upsert(stub_.get(), up, &upserted).ok());
  }
  ASSERT_TRUE(Remove(stub_.get(), "agent-a", &removed).ok());
  EXPECT_TRUE(removed);
  ASSERT_TRUE(Remove(stub_.get(), "agent-a", &removed).ok());
  EXPECT_FALSE(removed);
  hub::v1::ListRoleCandidatesRequest list;
  *list.mutable_role_key() = LeadKey();
  hub::v1::ListRoleCandidatesResponse listed;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->ListRoleCandidates(&context, list, &listed).ok());
  ASSERT_EQ(listed.candidates_size(), 1);
  EXPECT_EQ(listed.candidates(0).agent_id(), "agent-b");

  grpc::Status bad = Remove(stub_.get(), "", &removed);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(bad), "AGENT_ID_INVALID");
}

TEST_F(RoleGrpcTest, CandidateWritesFollowTheMaskRulesAndListAcrossRoles) {
  hub::v1::UpsertRoleCandidateRequest up;
  *up.mutable_role_key() = CtoKey();
  up.set_agent_id("agent-a");
  up.mutable_candidate()->set_priority(7);
  up.mutable_candidate()->mutable_excluded_until()->set_seconds(4'000'000'000);
  hub::v1::UpsertRoleCandidateResponse out;
  ASSERT_TRUE(Upsert(stub_.get(), up, &out).ok());
  EXPECT_TRUE(out.candidate().has_excluded_until());

  hub::v1::UpsertRoleCandidateRequest clear;
  *clear.mutable_role_key() = CtoKey();
  clear.set_agent_id("agent-a");
  clear.mutable_update_mask()->add_paths("excluded_until");
  ASSERT_TRUE(Upsert(stub_.get(), clear, &out).ok());
  EXPECT_FALSE(out.created());
  EXPECT_FALSE(out.candidate().has_excluded_until());
  EXPECT_EQ(out.candidate().priority(), 7);  // absent: kept

  clear.mutable_update_mask()->add_paths("priority");
  grpc::Status s = Upsert(stub_.get(), clear, &out);
  EXPECT_EQ(Reason(s), "REQUEST_INVALID");
  EXPECT_EQ(InfoOf(s).metadata().at("field"), "candidate.priority");

  hub::v1::UpsertRoleCandidateRequest both = up;
  *both.mutable_candidate()->add_transport_locators() = TmuxLocator();
  both.mutable_candidate()->set_transport_locators_json("[]");
  EXPECT_EQ(Reason(Upsert(stub_.get(), both, &out)),
            "TRANSPORT_LOCATORS_INVALID");
  hub::v1::UpsertRoleCandidateRequest bad_kind = up;
  hub::v1::TransportLocator locator = TmuxLocator();
  locator.set_kind(hub::v1::TRANSPORT_KIND_UNSPECIFIED);
  *bad_kind.mutable_candidate()->add_transport_locators() = locator;
  EXPECT_EQ(Reason(Upsert(stub_.get(), bad_kind, &out)),
            "TRANSPORT_KIND_UNSUPPORTED");
  hub::v1::UpsertRoleCandidateRequest bad_agent = up;
  bad_agent.set_agent_id("no");
  EXPECT_EQ(Reason(Upsert(stub_.get(), bad_agent, &out)), "AGENT_ID_INVALID");

  hub::v1::UpsertRoleCandidateRequest lead = up;
  *lead.mutable_role_key() = LeadKey();
  ASSERT_TRUE(Upsert(stub_.get(), lead, &out).ok());
  hub::v1::ListRoleCandidatesRequest list;
  list.set_agent_id("agent-a");
  list.set_page_size(1);
  std::vector<std::string> wires;
  for (int page = 0; page < 5; ++page) {
    hub::v1::ListRoleCandidatesResponse listed;
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->ListRoleCandidates(&context, list, &listed).ok());
    for (const auto& c : listed.candidates())
      wires.push_back(c.role_key_wire());
    if (listed.next_page_token().empty()) break;
    list.set_page_token(listed.next_page_token());
  }
  ASSERT_EQ(wires.size(), 2u);
  EXPECT_LT(wires[0], wires[1]);
}

// §9.2 scenario 7, the read part.
TEST_F(RoleGrpcTest, ListingByKindReturnsOnlyThatKind) {
  ReserveOk(CtoKey());
  Role lead = ReserveOk(LeadKey());
  hub::v1::ListRolesRequest request;
  request.set_kind(hub::v1::ROLE_KIND_LEAD);
  hub::v1::ListRolesResponse response;
  ASSERT_TRUE(List(request, &response).ok());
  ASSERT_EQ(response.roles_size(), 1);
  EXPECT_EQ(response.roles(0).role_key_wire(), lead.role_key_wire());
  EXPECT_EQ(response.roles(0).role_key().scope_id(), kScope);
}

TEST_F(RoleGrpcTest, AMaskClearsTheActivationIdButAnAbsentFieldKeepsIt) {
  Role row = ReserveOk(CtoKey(), "agent-a");
  ASSERT_TRUE(row.has_activation_id());
  CompareAndSetRoleRequest keep = CasFrom(row);
  keep.mutable_patch()->set_blocked_reason("no_candidate");
  Role kept;
  ASSERT_TRUE(Cas(keep, &kept).ok());
  EXPECT_EQ(kept.activation_id(), row.activation_id());
  CompareAndSetRoleRequest clear = CasFrom(kept);
  clear.mutable_update_mask()->add_paths("activation_id");
  Role cleared;
  ASSERT_TRUE(Cas(clear, &cleared).ok());
  EXPECT_FALSE(cleared.has_activation_id());
  EXPECT_EQ(cleared.blocked_reason(), "no_candidate");
  CompareAndSetRoleRequest unlisted = CasFrom(cleared);
  unlisted.mutable_update_mask()->add_paths("activation_id");
  unlisted.mutable_patch()->set_blocked_reason("x");
  grpc::Status s = Cas(unlisted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "UPDATE_MASK_INVALID");
}

TEST_F(RoleGrpcTest, TheNoneGuardMatchesOnlyARowWithoutAnActivationId) {
  Role row = ReserveOk(CtoKey());  // no holder: no activation id
  ASSERT_FALSE(row.has_activation_id());
  CompareAndSetRoleRequest request = CasFrom(row);
  Role written;
  ASSERT_TRUE(Cas(request, &written).ok());
  Role held = ReserveOk(CtoKey(), "agent-a");
  request = CasFrom(held);
  request.mutable_expected_activation_id()->set_none(true);
  EXPECT_EQ(Reason(Cas(request)), "STALE_ACTIVATION_ID");
  request.mutable_expected_activation_id()->set_none(false);
  grpc::Status s = Cas(request);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "INVALID_CAS");
  request.clear_expected_activation_id();
  EXPECT_EQ(Reason(Cas(request)), "INVALID_CAS");
  request = CasFrom(held);
  request.clear_expected_epoch();
  EXPECT_EQ(Reason(Cas(request)), "INVALID_CAS");
}

TEST_F(RoleGrpcTest, AKeyMayComeStructuredOrAsAWireButBothMustAgree) {
  Role row = ReserveOk(LeadKey());
  hub::v1::GetRoleRequest request;
  *request.mutable_role_key() = LeadKey();
  Role by_key;
  ASSERT_TRUE(Get(request, &by_key).ok());
  EXPECT_EQ(by_key.role_key_wire(), row.role_key_wire());
  request.set_role_key_wire(row.role_key_wire());
  ASSERT_TRUE(Get(request, &by_key).ok());
  *request.mutable_role_key() = CtoKey();
  grpc::Status s = Get(request, &by_key);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(s), "ROLE_KEY_MISMATCH");
  request.Clear();
  EXPECT_EQ(Reason(Get(request, &by_key)), "ROLE_KEY_INVALID");
  request.set_role_key_wire(row.role_key_wire() + "=");
  EXPECT_EQ(Reason(Get(request, &by_key)), "ROLE_KEY_NON_CANONICAL");
  request.Clear();
  *request.mutable_role_key() = CtoKey();
  s = Get(request, &by_key);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Reason(s), "ROLE_NOT_FOUND");
}

TEST_F(RoleGrpcTest, ListRolesPagesInWireOrderWithOpaqueTokens) {
  for (int i = 0; i < 5; ++i) ReserveOk(CtoKey(ProjectN(i)));
  hub::v1::ListRolesRequest request;
  request.set_page_size(2);
  std::vector<std::string> wires;
  int pages = 0;
  do {
    hub::v1::ListRolesResponse response;
    ASSERT_TRUE(List(request, &response).ok());
    for (const Role& r : response.roles()) wires.push_back(r.role_key_wire());
    request.set_page_token(response.next_page_token());
    ++pages;
  } while (!request.page_token().empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(wires.size(), 5u);
  EXPECT_TRUE(std::is_sorted(wires.begin(), wires.end()));
  request.set_page_token("bm9wZQ");
  hub::v1::ListRolesResponse response;
  EXPECT_EQ(Reason(List(request, &response)), "PAGE_TOKEN_INVALID");
  request.set_page_token("");
  request.set_page_size(-1);
  EXPECT_EQ(Reason(List(request, &response)), "REQUEST_INVALID");
}

TEST_F(RoleGrpcTest, BadInputGetsAStableReasonAndWritesNothing) {
  Role row = ReserveOk(CtoKey());
  CompareAndSetRoleRequest request = CasFrom(row);
  request.mutable_patch()->set_state(static_cast<hub::v1::RoleState>(42));
  EXPECT_EQ(Reason(Cas(request)), "ROLE_REACHABILITY_STATE_INVALID");
  request = CasFrom(row);
  request.mutable_update_mask()->add_paths("epoch");
  EXPECT_EQ(Reason(Cas(request)), "UPDATE_MASK_INVALID");
  request = CasFrom(row);
  request.mutable_patch()->set_holder_agent_id("topic:x");
  grpc::Status s = Cas(request);
  EXPECT_EQ(Reason(s), "AGENT_ID_INVALID");
  EXPECT_EQ(InfoOf(s).metadata().at("field"), "patch.holder_agent_id");
  request = CasFrom(row);
  request.mutable_patch()->set_state(hub::v1::ROLE_STATE_ACTIVE);
  EXPECT_EQ(Reason(Cas(request)), "REQUEST_INVALID");
  hub::v1::ListRolesRequest list;
  list.add_states(hub::v1::ROLE_STATE_UNSPECIFIED);
  hub::v1::ListRolesResponse listed;
  EXPECT_EQ(Reason(List(list, &listed)), "ROLE_REACHABILITY_STATE_INVALID");
  EXPECT_EQ(GetOk(row.role_key_wire()).version(), row.version());
  // Without an activator: EnsureRole still validates, then reports the
  // manager as unavailable; an ACK is refused as UNAVAILABLE.
  grpc::ClientContext context;
  hub::v1::EnsureRoleResponse ensured;
  EXPECT_EQ(Reason(stub_->EnsureRole(&context, {}, &ensured)),
            "ROLE_KEY_INVALID");
  grpc::ClientContext context2;
  hub::v1::EnsureRoleRequest ensure;
  *ensure.mutable_role_key() = CtoKey();
  ASSERT_TRUE(stub_->EnsureRole(&context2, ensure, &ensured).ok());
  EXPECT_FALSE(ensured.receipt().accepted());
  EXPECT_EQ(ensured.receipt().disposition(),
            hub::v1::ENSURE_ROLE_DISPOSITION_MANAGER_DISABLED);
  EXPECT_EQ(ensured.receipt().blocked_reason(), "activator_unavailable");
  grpc::ClientContext context3;
  hub::v1::AckRoleActivationRequest ack;
  ack.set_agent_id("agent-1");
  hub::v1::AckRoleActivationResponse acked;
  grpc::Status s3 = stub_->AckRoleActivation(&context3, ack, &acked);
  EXPECT_EQ(s3.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Reason(s3), "ROLE_ACTIVATOR_UNAVAILABLE");
}

}  // namespace
}  // namespace hub::testing
