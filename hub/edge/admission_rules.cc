// The admission table: what each method asks of its caller
// (docs/design/auth.md). One row per method of every service; a method
// without a row is refused, and admission_test walks every row against a
// real server.
#include <vector>

#include "hub/edge/admission.h"

namespace hub {
namespace {

MethodRule Row(std::string method, Access access,
               ProjectRule project = ProjectRule::kNone,
               std::string project_field = "", bool from_role_key = false,
               std::string agent_field = "") {
  MethodRule rule;
  rule.method = std::move(method);
  rule.access = access;
  rule.project = project;
  rule.project_field = std::move(project_field);
  rule.project_from_role_key = from_role_key;
  rule.agent_field = std::move(agent_field);
  return rule;
}

// A method about one agent, named in `agent_field`.
MethodRule AgentRow(std::string method, Access access,
                    std::string agent_field = "agent_id") {
  return Row(std::move(method), access, ProjectRule::kNone, "", false,
             std::move(agent_field));
}

// A method about one role (role_key or role_key_wire), maybe for an agent.
MethodRule RoleRow(std::string method, Access access,
                   std::string agent_field = "") {
  return Row(std::move(method), access, ProjectRule::kIfNamed, "", true,
             std::move(agent_field));
}

}  // namespace

const std::vector<MethodRule>& AdmissionRules() {
  using A = Access;
  using P = ProjectRule;
  static const std::vector<MethodRule>* const rules = new std::vector<
      MethodRule>{
      // HubService: the hub itself and role-key arithmetic.
      Row("hub.v1.HubService/GetStatus", A::kAnyPrincipal),
      Row("hub.v1.HubService/EncodeRoleKey", A::kAnyPrincipal),
      Row("hub.v1.HubService/DecodeRoleKey", A::kAnyPrincipal),

      // PresenceService. A registration claims an unowned agent id for
      // its caller, so its owner rule is the handler's.
      Row("hub.v1.PresenceService/RegisterAgent", A::kAnyPrincipal,
          P::kRequired, "project_id"),
      AgentRow("hub.v1.PresenceService/Heartbeat", A::kAgentOwner),
      AgentRow("hub.v1.PresenceService/Attach", A::kAgentOwner,
               "hello.agent_id"),
      AgentRow("hub.v1.PresenceService/Deregister", A::kAdminOrOwner),
      // The agent's project is known once it is read (RequireProject).
      Row("hub.v1.PresenceService/GetAgent", A::kAnyPrincipal),
      Row("hub.v1.PresenceService/ListAgents", A::kAnyPrincipal, P::kIfNamed,
          "project_id"),

      // MessageService. Recipients are scoped by the principal's
      // projects when the message is routed.
      AgentRow("hub.v1.MessageService/Publish", A::kSenderOwner,
               "from_agent_id"),
      AgentRow("hub.v1.MessageService/Ask", A::kSenderOwner, "from_agent_id"),
      AgentRow("hub.v1.MessageService/Ack", A::kAgentOwner),
      // Reading an inbox marks deliveries: the agent's own principal.
      AgentRow("hub.v1.MessageService/ListPending", A::kAgentOwner),
      Row("hub.v1.MessageService/ListDeadLetters", A::kAnyPrincipal),
      Row("hub.v1.MessageService/ListTrace", A::kAnyPrincipal),
      // The message's projects are checked once it is read.
      Row("hub.v1.MessageService/RedriveDeadLetter", A::kOperator),

      // ReservationService.
      Row("hub.v1.ReservationService/Reserve", A::kAgentOwner, P::kRequired,
          "project_id", false, "agent_id"),
      AgentRow("hub.v1.ReservationService/RenewReservation", A::kAgentOwner),
      AgentRow("hub.v1.ReservationService/ReleaseReservation", A::kAgentOwner),
      Row("hub.v1.ReservationService/ListReservations", A::kAnyPrincipal,
          P::kIfNamed, "project_id"),
      Row("hub.v1.ReservationService/CheckReservations", A::kAnyPrincipal,
          P::kRequired, "project_id"),
      // The reservation's project is checked once it is read.
      Row("hub.v1.ReservationService/ForceReleaseReservation", A::kOperator),
      Row("hub.v1.ReservationService/WatchReservations", A::kAnyPrincipal,
          P::kRequired, "project_id"),

      // RoleService.
      RoleRow("hub.v1.RoleService/ReserveRole", A::kOperator),
      RoleRow("hub.v1.RoleService/CompareAndSetRole", A::kOperator),
      RoleRow("hub.v1.RoleService/GetRole", A::kAnyPrincipal),
      Row("hub.v1.RoleService/ListRoles", A::kAnyPrincipal, P::kIfNamed,
          "project_id"),
      Row("hub.v1.RoleService/WatchRoles", A::kAnyPrincipal, P::kIfNamed,
          "project_id", /*from_role_key=*/true),
      RoleRow("hub.v1.RoleService/EnsureRole", A::kOperatorOrOwner, "agent_id"),
      // The holder's own acknowledgement and release.
      AgentRow("hub.v1.RoleService/AckRoleActivation", A::kAgentOwner),
      AgentRow("hub.v1.RoleService/ReleaseRole", A::kAgentOwner),
      RoleRow("hub.v1.RoleService/UpsertRoleCandidate", A::kOperatorOrOwner,
              "agent_id"),
      RoleRow("hub.v1.RoleService/RemoveRoleCandidate", A::kOperatorOrOwner,
              "agent_id"),
      RoleRow("hub.v1.RoleService/ListRoleCandidates", A::kAnyPrincipal),
      RoleRow("hub.v1.RoleService/ReportCandidateProbe", A::kOperator),
      RoleRow("hub.v1.RoleService/CloseRoleScope", A::kOperator),
      Row("hub.v1.RoleService/ListClosedScopes", A::kAnyPrincipal, P::kIfNamed,
          "project_id"),

      // JobService. A job's project is checked once it is read (Get,
      // Cancel, Retry); Cancel and Retry also need the job's supervisor
      // agent for an agent token.
      Row("hub.v1.JobService/CreateJob", A::kSenderOwner, P::kRequired,
          "project_id", false, "supervisor.agent_id"),
      Row("hub.v1.JobService/ClaimJob", A::kAgentOwner, P::kIfNamed,
          "project_id", false, "agent_id"),
      AgentRow("hub.v1.JobService/HeartbeatJob", A::kAgentOwner,
               "attempt.agent_id"),
      AgentRow("hub.v1.JobService/CompleteJob", A::kAgentOwner,
               "attempt.agent_id"),
      AgentRow("hub.v1.JobService/FailJob", A::kAgentOwner, "attempt.agent_id"),
      Row("hub.v1.JobService/GetJob", A::kAnyPrincipal),
      Row("hub.v1.JobService/ListJobs", A::kAnyPrincipal, P::kIfNamed,
          "project_id"),
      AgentRow("hub.v1.JobService/CancelJob", A::kOperatorOrOwner),
      AgentRow("hub.v1.JobService/RetryJob", A::kOperatorOrOwner),
      AgentRow("hub.v1.JobService/AddJobDependency", A::kOperatorOrOwner),

      // AdminService.
      Row("hub.v1.AdminService/BackupStore", A::kAdmin),
  };
  return *rules;
}

}  // namespace hub
