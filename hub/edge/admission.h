// Admission: the one step every RPC passes before its handler does its own
// work. It spends the call's limits (hub/edge/call_gate.h; a call that does not
// authenticate spends its host's budget), authenticates the caller
// (hub/edge/auth.h) and checks the authority the method's row of the admission
// table asks for (the caller's kind, the project the request names, the
// agent it acts for), in that order. The table (AdmissionRules, in
// admission_rules.cc) has one row per method of every service; a new RPC
// adds a row, and admission_test walks every row against a real server.
//
// What a request names indirectly (a reservation's or an agent's project,
// known only once it is read) is checked by the handler after the read,
// with RequireProject (hub/edge/auth.h); the reads that list many rows are
// scoped by the principal's projects (ScopeOf).
#ifndef HUB_HUB_EDGE_ADMISSION_H_
#define HUB_HUB_EDGE_ADMISSION_H_

#include <grpcpp/server_context.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "hub/edge/auth.h"
#include "hub/edge/call_gate.h"

namespace hub {

// What a method asks of its caller beyond a principal that authenticates.
enum class Access {
  // Any principal; the method scopes what it reads by the principal's
  // projects.
  kAnyPrincipal,
  // The principal owns the agent the request acts for.
  kAgentOwner,
  // The principal owns the agent the request is sent as, when it names one.
  kSenderOwner,
  // An operator or an admin.
  kOperator,
  // An operator or an admin; or an agent token that owns the agent the
  // request names (the method may keep further rules for agent tokens).
  kOperatorOrOwner,
  // An admin, or the owner of the agent the request names.
  kAdminOrOwner,
  // An admin.
  kAdmin,
};
absl::string_view AccessName(Access access);

// Whether the project a request names must be one of the principal's.
enum class ProjectRule {
  // The request names no project admission can read.
  kNone,
  // A well-formed project the request names must be the principal's; one it
  // does not name is the method's to scope or refuse.
  kIfNamed,
  // As kIfNamed, and a request that names none is refused for a principal
  // limited to some projects (PROJECT_SCOPE_MISMATCH).
  kRequired,
};

// One row of the admission table.
struct MethodRule {
  // "hub.v1.RoleService/ReserveRole".
  std::string method;
  Access access = Access::kAnyPrincipal;
  ProjectRule project = ProjectRule::kNone;
  // Where the request names its project: a top-level string field, or the
  // role it names (role_key or role_key_wire), which wins when both are set.
  std::string project_field;
  bool project_from_role_key = false;
  // The string field naming the agent the request acts for, a path through
  // message fields ("agent_id", "hello.agent_id"); "" when none.
  std::string agent_field;
};

// The table: one row per method of every service hub serves.
const std::vector<MethodRule>& AdmissionRules();

// What the table finds in a request.
std::string RequestProject(const MethodRule& rule,
                           const google::protobuf::Message& request);
std::string RequestAgent(const MethodRule& rule,
                         const google::protobuf::Message& request);

struct AdmittedStream {
  Principal principal;
  // The stream's slot (null without a gate); hold it while the stream runs.
  std::unique_ptr<StreamTicket> ticket;
};

class Admission {
 public:
  // Null `authority`: every caller is the anonymous admin. Null `gate`: no
  // limits. Fails when a row names an unknown method or two rows share a
  // request type.
  static absl::StatusOr<std::unique_ptr<Admission>> Create(
      const Authority* authority, CallGate* gate,
      const std::vector<MethodRule>& rules = AdmissionRules());
  // Admits everything as the anonymous admin (services built without a
  // server, as in unit tests).
  static const Admission& Open();

  // A unary call, its rule found by its request's type: the principal, or
  // the status to finish the call with (LIMIT_EXCEEDED, RATE_LIMITED,
  // UNAUTHENTICATED, PERMISSION_DENIED).
  absl::StatusOr<Principal> AdmitCall(
      const grpc::CallbackServerContext& context,
      const google::protobuf::Message& request) const;

  // A stream of `method` (its request type). `request` is a server
  // stream's request (checked like a call's); a bidi stream has none yet,
  // and its frames are checked with AdmitFrame. `on_idle` as
  // CallGate::AdmitStream (empty: no idle timeout).
  absl::StatusOr<AdmittedStream> AdmitStream(
      const grpc::CallbackServerContext& context,
      const google::protobuf::Descriptor* method,
      const google::protobuf::Message* request,
      std::function<void(const absl::Status&)> on_idle) const;

  // A bidi stream's frame: the authority its rule asks of what the frame
  // names (the agent a hello attaches), for the principal admitted at the
  // stream's start.
  absl::Status AdmitFrame(const Principal& principal,
                          const google::protobuf::Message& frame) const;

 private:
  Admission(const Authority* authority, CallGate* gate, bool open)
      : authority_(authority), gate_(gate), open_(open) {}
  const MethodRule* RuleOf(const google::protobuf::Descriptor* type) const;
  // The rule of requests of `type` (refused without one unless open_).
  absl::Status CheckRule(const Principal& principal,
                         const google::protobuf::Descriptor* type,
                         const google::protobuf::Message* request) const;
  absl::Status Check(const Principal& principal, const MethodRule& rule,
                     const google::protobuf::Message* request) const;

  const Authority* const authority_;
  CallGate* const gate_;
  // Admits every request without a rule (Open()); otherwise a request whose
  // type has no row is refused.
  const bool open_;
  absl::flat_hash_map<const google::protobuf::Descriptor*, MethodRule> rules_;
};

}  // namespace hub

#endif  // HUB_HUB_EDGE_ADMISSION_H_
