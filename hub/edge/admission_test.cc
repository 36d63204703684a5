#include "hub/edge/admission.h"

#include <string>

#include "gtest/gtest.h"
#include "hub/v1/presence.pb.h"
#include "hub/v1/reservation.pb.h"
#include "hub/v1/role_service.pb.h"
#include "registry/role_key.h"

namespace hub {
namespace {

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
constexpr char kOther[] = "prj_BBBBBBBBBBBBBBBBBBBBBB";

const MethodRule& RuleFor(const std::string& method) {
  for (const MethodRule& rule : AdmissionRules()) {
    if (rule.method == method) return rule;
  }
  static const MethodRule* none = new MethodRule();
  ADD_FAILURE() << "no row for " << method;
  return *none;
}

TEST(AdmissionTest, TheProjectOfARoleRequestIsItsKeysInEitherForm) {
  const MethodRule& rule = RuleFor("hub.v1.RoleService/GetRole");
  hub::v1::GetRoleRequest request;
  EXPECT_EQ(RequestProject(rule, request), "");
  request.mutable_role_key()->set_project_id(kProject);
  request.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
  EXPECT_EQ(RequestProject(rule, request), kProject);

  RoleKey key;
  key.project_id = kOther;
  key.kind = RoleKind::kCto;
  absl::StatusOr<std::string> wire = EncodeRoleKey(key);
  ASSERT_TRUE(wire.ok()) << wire.status();
  hub::v1::GetRoleRequest by_wire;
  by_wire.set_role_key_wire(*wire);
  EXPECT_EQ(RequestProject(rule, by_wire), kOther);

  // A key that does not resolve names no project: the method refuses it
  // with the key's own reason.
  hub::v1::GetRoleRequest broken;
  broken.set_role_key_wire("rk2.not-a-key");
  EXPECT_EQ(RequestProject(rule, broken), "");
}

TEST(AdmissionTest, AWatchNamesTheProjectOfItsKeyBeforeItsProjectField) {
  const MethodRule& rule = RuleFor("hub.v1.RoleService/WatchRoles");
  hub::v1::WatchRolesRequest request;
  request.set_project_id(kProject);
  EXPECT_EQ(RequestProject(rule, request), kProject);
  request.mutable_role_key()->set_project_id(kOther);
  request.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
  EXPECT_EQ(RequestProject(rule, request), kOther);
}

TEST(AdmissionTest, TheAgentIsReadThroughNestedFields) {
  const MethodRule& attach = RuleFor("hub.v1.PresenceService/Attach");
  hub::v1::AttachRequest frame;
  EXPECT_EQ(RequestAgent(attach, frame), "");
  frame.mutable_hello()->set_agent_id("agent-a");
  EXPECT_EQ(RequestAgent(attach, frame), "agent-a");

  const MethodRule& reserve = RuleFor("hub.v1.ReservationService/Reserve");
  hub::v1::ReserveRequest request;
  request.set_agent_id("agent-b");
  request.set_project_id(kProject);
  EXPECT_EQ(RequestAgent(reserve, request), "agent-b");
  EXPECT_EQ(RequestProject(reserve, request), kProject);
}

TEST(AdmissionTest, AFramesRuleChecksTheAgentItNamesForTheStreamsPrincipal) {
  // Without an authority every principal is the anonymous admin.
  absl::StatusOr<std::unique_ptr<Admission>> admission =
      Admission::Create(nullptr, nullptr);
  ASSERT_TRUE(admission.ok()) << admission.status();
  hub::v1::AttachRequest frame;
  frame.mutable_hello()->set_agent_id("agent-a");
  EXPECT_TRUE((*admission)->AdmitFrame(Principal(), frame).ok());

  // A frame of a type no row names is refused, not admitted.
  hub::v1::AttachResponse not_a_request;
  absl::Status refused = (*admission)->AdmitFrame(Principal(), not_a_request);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
}

TEST(AdmissionTest, WithoutAnAuthorityOwnersAreNotCheckedButProjectsAre) {
  absl::StatusOr<std::unique_ptr<Admission>> admission =
      Admission::Create(nullptr, nullptr);
  ASSERT_TRUE(admission.ok());
  Principal agent;
  agent.name = "alice";
  agent.kind = PrincipalKind::kAgent;
  agent.anonymous = false;
  agent.all_projects = false;
  agent.projects = {kProject};
  hub::v1::AttachRequest frame;
  frame.mutable_hello()->set_agent_id("agent-a");
  // No authority: ownership is not known, so it is not checked.
  EXPECT_TRUE((*admission)->AdmitFrame(agent, frame).ok());
  EXPECT_EQ(RequireProject(agent, kOther).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(RequireProject(agent, kProject).ok());
}

}  // namespace
}  // namespace hub
