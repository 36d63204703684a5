// An agent token's own candidacy, through gRPC (docs/design/auth.md, "An
// agent's own candidacy"): it may make its own agent a candidate of a role
// of its projects, stop being one, and ask for an election for it; it may
// not name another agent, a project outside its token, the fields that are
// an operator's (source, the probe record, a priority beyond the agent
// band) or a trigger other than SESSION_START and MANUAL; a token that owns
// no agent can only read. Every refusal writes nothing.
#include <string>
#include <vector>

#include "hub/services/role_service.h"
#include "tests/auth_grpc_fixture.h"

namespace hub::auth_grpc {
namespace {

using testing::ErrorInfoOf;

class AuthCandidacyGrpcTest : public AuthGrpcTest {
 protected:
  grpc::Status Upsert(const std::string& token,
                      const hub::v1::UpsertRoleCandidateRequest& request,
                      hub::v1::UpsertRoleCandidateResponse* response) {
    return roles_->UpsertRoleCandidate(As(token).get(), request, response);
  }

  // A candidacy of `agent_id` for the project's cto with `priority`.
  static hub::v1::UpsertRoleCandidateRequest Candidacy(
      const std::string& agent_id, int64_t priority = 0,
      const std::string& project = kProject) {
    hub::v1::UpsertRoleCandidateRequest request;
    *request.mutable_role_key() = Cto(project);
    request.set_agent_id(agent_id);
    request.mutable_candidate()->set_priority(priority);
    return request;
  }

  grpc::Status Remove(const std::string& token, const std::string& agent_id,
                      const std::string& project = kProject,
                      bool* removed = nullptr) {
    hub::v1::RemoveRoleCandidateRequest request;
    *request.mutable_role_key() = Cto(project);
    request.set_agent_id(agent_id);
    hub::v1::RemoveRoleCandidateResponse response;
    grpc::Status s =
        roles_->RemoveRoleCandidate(As(token).get(), request, &response);
    if (removed != nullptr) *removed = response.removed();
    return s;
  }

  grpc::Status Ensure(
      const std::string& token, const std::string& agent_id,
      hub::v1::EnsureRoleTrigger trigger = hub::v1::ENSURE_ROLE_TRIGGER_MANUAL,
      const std::string& project = kProject,
      hub::v1::EnsureRoleReceipt* receipt = nullptr) {
    hub::v1::EnsureRoleRequest request;
    *request.mutable_role_key() = Cto(project);
    request.set_trigger(trigger);
    request.set_cause_id("auth-candidacy-test");
    request.set_agent_id(agent_id);
    hub::v1::EnsureRoleResponse response;
    grpc::Status s = roles_->EnsureRole(As(token).get(), request, &response);
    if (receipt != nullptr) *receipt = response.receipt();
    return s;
  }

  // The candidates of the project's cto, as the admin sees them.
  std::vector<hub::v1::RoleCandidate> Candidates(
      const std::string& project = kProject) {
    hub::v1::ListRoleCandidatesRequest request;
    *request.mutable_role_key() = Cto(project);
    hub::v1::ListRoleCandidatesResponse response;
    grpc::Status s =
        roles_->ListRoleCandidates(As(kAdmin).get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {response.candidates().begin(), response.candidates().end()};
  }

  // Whether the project's cto has a registry row (an upsert creates one).
  bool RoleExists(const std::string& project = kProject) {
    hub::v1::GetRoleRequest request;
    *request.mutable_role_key() = Cto(project);
    hub::v1::GetRoleResponse response;
    return roles_->GetRole(As(kAdmin).get(), request, &response).ok();
  }
};

// PERMISSION_DENIED with `reason` and `key` = `value` in its metadata.
void ExpectDenied(const grpc::Status& s, const std::string& reason,
                  const std::string& key, const std::string& value) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << s.error_message();
  EXPECT_EQ(Reason(s), reason) << s.error_message();
  if (!key.empty()) {
    const google::rpc::ErrorInfo info = ErrorInfoOf(s);
    ASSERT_TRUE(info.metadata().contains(key)) << s.error_message();
    EXPECT_EQ(info.metadata().at(key), value);
  }
}

TEST_F(AuthCandidacyGrpcTest, AnAgentTokenMakesItsOwnAgentACandidateAndStops) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "agent-a").ok());
  hub::v1::UpsertRoleCandidateResponse upserted;
  grpc::Status s = Upsert(kAlice, Candidacy("agent-a", 7), &upserted);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(upserted.created());
  EXPECT_EQ(upserted.candidate().priority(), 7);
  // Its own locators are its own to state, as at registration.
  hub::v1::UpsertRoleCandidateRequest again =
      Candidacy("agent-a", RoleServiceImpl::kMaxAgentPriority, kProject);
  again.mutable_candidate()->set_transport_locators_json("[]");
  s = Upsert(kAlice, again, &upserted);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(upserted.created());
  EXPECT_EQ(upserted.candidate().priority(),
            RoleServiceImpl::kMaxAgentPriority);
  s = Upsert(kAlice, Candidacy("agent-a", -RoleServiceImpl::kMaxAgentPriority),
             &upserted);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(Candidates().size(), 1u);
  EXPECT_EQ(Candidates()[0].priority(), -RoleServiceImpl::kMaxAgentPriority);

  bool removed = false;
  s = Remove(kAlice, "agent-a", kProject, &removed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(removed);
  EXPECT_TRUE(Candidates().empty());
  s = Remove(kAlice, "agent-a", kProject, &removed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(removed);
}

TEST_F(AuthCandidacyGrpcTest, AnotherAgentsCandidacyIsRefusedAndUntouched) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "agent-a").ok());
  ASSERT_TRUE(Register(kBob, "agent-b").ok());
  hub::v1::UpsertRoleCandidateResponse upserted;
  ASSERT_TRUE(Upsert(kOps, Candidacy("agent-a", 3), &upserted).ok());

  // Bob's token names Alice's agent: refused before anything is written.
  ExpectDenied(Upsert(kBob, Candidacy("agent-a", 9), &upserted),
               "PERMISSION_DENIED", "agent_id", "agent-a");
  ExpectDenied(Remove(kBob, "agent-a"), "PERMISSION_DENIED", "agent_id",
               "agent-a");
  ExpectDenied(Ensure(kBob, "agent-a"), "PERMISSION_DENIED", "agent_id",
               "agent-a");
  // Nor an id nobody registered: an agent token owns only what it
  // registered.
  ExpectDenied(Upsert(kBob, Candidacy("agent-unregistered"), &upserted),
               "PERMISSION_DENIED", "agent_id", "agent-unregistered");
  std::vector<hub::v1::RoleCandidate> rows = Candidates();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].agent_id(), "agent-a");
  EXPECT_EQ(rows[0].priority(), 3);
  // Bob's own candidacy goes through beside it.
  grpc::Status s = Upsert(kBob, Candidacy("agent-b", 1), &upserted);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Candidates().size(), 2u);
}

TEST_F(AuthCandidacyGrpcTest, ATokenThatOwnsNoAgentOnlyReads) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "agent-a").ok());
  hub::v1::UpsertRoleCandidateResponse upserted;
  ASSERT_TRUE(Upsert(kOps, Candidacy("agent-a"), &upserted).ok());
  // Bob registered nothing: his agent token reads, and writes nothing.
  hub::v1::ListRoleCandidatesRequest list;
  *list.mutable_role_key() = Cto();
  hub::v1::ListRoleCandidatesResponse listed;
  ASSERT_TRUE(roles_->ListRoleCandidates(As(kBob).get(), list, &listed).ok());
  EXPECT_EQ(listed.candidates_size(), 1);
  for (const char* agent : {"agent-a", "agent-b"}) {
    ExpectDenied(Upsert(kBob, Candidacy(agent), &upserted), "PERMISSION_DENIED",
                 "agent_id", agent);
    ExpectDenied(Remove(kBob, agent), "PERMISSION_DENIED", "agent_id", agent);
    ExpectDenied(Ensure(kBob, agent), "PERMISSION_DENIED", "agent_id", agent);
  }
  // Naming no agent at all is no way around it.
  ExpectDenied(Upsert(kBob, Candidacy(""), &upserted), "PERMISSION_DENIED",
               "field", "agent_id");
  ExpectDenied(Ensure(kBob, ""), "PERMISSION_DENIED", "field", "agent_id");
  ASSERT_EQ(Candidates().size(), 1u);
  hub::v1::GetRoleRequest get;
  *get.mutable_role_key() = Cto();
  hub::v1::GetRoleResponse role;
  ASSERT_TRUE(roles_->GetRole(As(kBob).get(), get, &role).ok());
  EXPECT_EQ(role.role().epoch(), 0);
}

TEST_F(AuthCandidacyGrpcTest, ARoleOutsideTheTokensProjectsIsRefused) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "agent-a").ok());
  ASSERT_TRUE(Register(kCarol, "agent-c", kOtherProject).ok());
  hub::v1::UpsertRoleCandidateResponse upserted;
  // Carol's own agent, but a role of a project her token does not hold.
  ExpectDenied(Upsert(kCarol, Candidacy("agent-c", 0, kProject), &upserted),
               "PROJECT_SCOPE_MISMATCH", "", "");
  ExpectDenied(Remove(kCarol, "agent-c", kProject), "PROJECT_SCOPE_MISMATCH",
               "", "");
  ExpectDenied(
      Ensure(kCarol, "agent-c", hub::v1::ENSURE_ROLE_TRIGGER_MANUAL, kProject),
      "PROJECT_SCOPE_MISMATCH", "", "");
  ExpectDenied(
      Upsert(kAlice, Candidacy("agent-a", 0, kOtherProject), &upserted),
      "PROJECT_SCOPE_MISMATCH", "", "");
  // Nothing was written: not even the role row an upsert creates first.
  EXPECT_FALSE(RoleExists(kProject));
  EXPECT_FALSE(RoleExists(kOtherProject));
  // In her own project she may.
  grpc::Status s =
      Upsert(kCarol, Candidacy("agent-c", 0, kOtherProject), &upserted);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(AuthCandidacyGrpcTest, TheOperatorsFieldsAreRefusedToAnAgentToken) {
  Start(/*tls=*/false);
  ASSERT_TRUE(Register(kAlice, "agent-a").ok());
  EXPECT_FALSE(RoleExists());
  struct Refusal {
    const char* field;
    std::function<void(hub::v1::UpsertRoleCandidateRequest*)> spoil;
  };
  const std::vector<Refusal> refusals = {
      {"candidate.source",
       [](hub::v1::UpsertRoleCandidateRequest* r) {
         r->mutable_candidate()->set_source(hub::v1::CANDIDATE_SOURCE_GRANT);
       }},
      {"candidate.consecutive_probe_failures",
       [](hub::v1::UpsertRoleCandidateRequest* r) {
         r->mutable_candidate()->set_consecutive_probe_failures(0);
       }},
      {"candidate.excluded_until",  // clearing it is writing it
       [](hub::v1::UpsertRoleCandidateRequest* r) {
         r->mutable_update_mask()->add_paths("priority");
         r->mutable_update_mask()->add_paths("excluded_until");
       }},
      {"candidate.last_probe_at",
       [](hub::v1::UpsertRoleCandidateRequest* r) {
         r->mutable_candidate()->mutable_last_probe_at()->set_seconds(1);
       }},
      {"candidate.last_probe_code",
       [](hub::v1::UpsertRoleCandidateRequest* r) {
         r->mutable_candidate()->set_last_probe_code("ok");
       }},
      {"candidate.priority",
       [](hub::v1::UpsertRoleCandidateRequest* r) {
         r->mutable_candidate()->set_priority(
             RoleServiceImpl::kMaxAgentPriority + 1);
       }},
      {"candidate.priority",
       [](hub::v1::UpsertRoleCandidateRequest* r) {
         r->mutable_candidate()->set_priority(
             -RoleServiceImpl::kMaxAgentPriority - 1);
       }},
  };
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.field);
    hub::v1::UpsertRoleCandidateRequest request = Candidacy("agent-a", 1);
    refusal.spoil(&request);
    hub::v1::UpsertRoleCandidateResponse upserted;
    ExpectDenied(Upsert(kAlice, request, &upserted), "PERMISSION_DENIED",
                 "field", refusal.field);
    EXPECT_TRUE(Candidates().empty()) << "a refused upsert wrote";
    // An operator may send the very same request.
    grpc::Status s = Upsert(kOps, request, &upserted);
    EXPECT_TRUE(s.ok()) << s.error_message();
    ASSERT_TRUE(Remove(kOps, "agent-a").ok());
  }

  // An operator ranks Alice above the agent band and quarantines her; her
  // own re-declaration changes her priority and leaves the quarantine.
  hub::v1::UpsertRoleCandidateRequest ranked =
      Candidacy("agent-a", 5 * RoleServiceImpl::kMaxAgentPriority);
  ranked.mutable_candidate()->mutable_excluded_until()->set_seconds(
      absl::ToUnixSeconds(absl::Now() + absl::Hours(1)));
  hub::v1::UpsertRoleCandidateResponse upserted;
  ASSERT_TRUE(Upsert(kOps, ranked, &upserted).ok());
  grpc::Status s = Upsert(kAlice, Candidacy("agent-a", 2), &upserted);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(upserted.candidate().priority(), 2);
  EXPECT_EQ(upserted.candidate().excluded_until().seconds(),
            ranked.candidate().excluded_until().seconds());
}

TEST_F(AuthCandidacyGrpcTest, AnAgentTokenAsksForAnElectionForItsOwnAgent) {
  Start(/*tls=*/false);
  int64_t generation = 0;
  ASSERT_TRUE(Register(kAlice, "agent-a", kProject, &generation).ok());
  ASSERT_TRUE(Register(kBob, "agent-b").ok());
  Stream alice = Attach(kAlice, "agent-a", generation);
  ASSERT_TRUE(alice.attached);
  hub::v1::UpsertRoleCandidateResponse upserted;
  ASSERT_TRUE(Upsert(kAlice, Candidacy("agent-a", 1), &upserted).ok());

  // Triggers that name hub or operator events are not an agent's to send;
  // CHARTER_ISSUED would re-elect an active holder under a new epoch.
  for (hub::v1::EnsureRoleTrigger trigger :
       {hub::v1::ENSURE_ROLE_TRIGGER_CHARTER_ISSUED,
        hub::v1::ENSURE_ROLE_TRIGGER_LEASE_EXPIRED,
        hub::v1::ENSURE_ROLE_TRIGGER_RESTART_RECOVERY}) {
    SCOPED_TRACE(hub::v1::EnsureRoleTrigger_Name(trigger));
    ExpectDenied(Ensure(kAlice, "agent-a", trigger), "PERMISSION_DENIED",
                 "field", "trigger");
  }
  // A trigger no client may send stays a validation error.
  grpc::Status invalid =
      Ensure(kAlice, "agent-a", hub::v1::ENSURE_ROLE_TRIGGER_UNSPECIFIED);
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(invalid), "ENSURE_ROLE_REQUEST_INVALID");
  // An election for another agent, or for none, is refused.
  ExpectDenied(Ensure(kAlice, "agent-b"), "PERMISSION_DENIED", "agent_id",
               "agent-b");
  ExpectDenied(Ensure(kAlice, ""), "PERMISSION_DENIED", "field", "agent_id");
  hub::v1::GetRoleRequest get;
  *get.mutable_role_key() = Cto();
  hub::v1::GetRoleResponse role;
  ASSERT_TRUE(roles_->GetRole(As(kAdmin).get(), get, &role).ok());
  EXPECT_EQ(role.role().epoch(), 0) << "a refused ensure reserved";

  // MANUAL for its own agent runs the normal election, which picks it.
  hub::v1::EnsureRoleReceipt receipt;
  grpc::Status s =
      Ensure(kAlice, "agent-a", hub::v1::ENSURE_ROLE_TRIGGER_MANUAL, kProject,
             &receipt);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(receipt.accepted());
  EXPECT_EQ(receipt.disposition(), hub::v1::ENSURE_ROLE_DISPOSITION_STARTED);
  EXPECT_EQ(receipt.holder_agent_id(), "agent-a");
  EXPECT_EQ(receipt.epoch(), 1);
  AttachResponse frame;
  bool probed = false;
  while (!probed && alice.stream->Read(&frame)) {
    probed = frame.event().has_role_probe();
  }
  EXPECT_TRUE(probed);
  // SESSION_START is an agent's too; the election under way is joined.
  s = Ensure(kAlice, "agent-a", hub::v1::ENSURE_ROLE_TRIGGER_SESSION_START,
             kProject, &receipt);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(receipt.disposition(), hub::v1::ENSURE_ROLE_DISPOSITION_JOINED);
  alice.context->TryCancel();
}

}  // namespace
}  // namespace hub::auth_grpc
