// Malformed requests for every RPC of every hub.v1 service, through gRPC
// against an in-process HubServer: missing, oversized, out-of-range and
// wrong-kind fields each get their documented status and reason, never
// UNKNOWN or INTERNAL. One table per RPC; requests are text-format protos.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "tests/hub_test_util.h"
#include "tests/rpc_caller.h"

namespace hub {
namespace {

using grpc::StatusCode;
using testing::Rpc;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
constexpr char kScope[] = "scp_Zz9-_aB3cD4eF5gH6iJ7kL";

const std::string kCto = absl::StrCat("role_key { project_id: \"", kProject,
                                      "\" kind: ROLE_KIND_CTO }");
const std::string kLead =
    absl::StrCat("role_key { project_id: \"", kProject,
                 "\" kind: ROLE_KIND_LEAD scope_id: \"", kScope, "\" }");
const std::string kLong(300, 'x');  // longer than any id or label
const std::string kLocator =
    "schema_version: \"tfx.transport-locator.v1\" transport_id: \"trn_1\" "
    "kind: TRANSPORT_KIND_TMUX host_id: \"hst_abc\" "
    "capabilities: TRANSPORT_CAPABILITY_PROBE expires_at { seconds: "
    "4102444800 } tmux { session_name: \"s\" mux_server_id: \"mux_1\" }";

struct Case {
  std::string name;
  std::string request;  // text format
  StatusCode code;
  std::string reason;
};

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::StartTestHub(testing::FreshTestDbPath());
    ASSERT_NE(server_, nullptr);
    stubs_ = std::make_unique<testing::HubStubs>(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
    // An agent of the project, for cases that need one to exist.
    ExpectOk(Rpc::kRegisterAgent,
             absl::StrCat("agent_id: \"agent-a\" cli: AGENT_CLI_CLAUDE "
                          "project_id: \"",
                          kProject, "\""));
  }

  std::optional<grpc::Status> Call(Rpc rpc, const std::string& request) {
    return testing::CallRpc(stubs_.get(), static_cast<int>(rpc), request,
                            /*text=*/true);
  }

  void ExpectOk(Rpc rpc, const std::string& request) {
    std::optional<grpc::Status> s = Call(rpc, request);
    ASSERT_TRUE(s.has_value()) << "unparsable: " << request;
    EXPECT_TRUE(s->ok()) << testing::RpcName(static_cast<int>(rpc)) << ": "
                         << s->error_message();
  }

  void Run(Rpc rpc, const std::vector<Case>& cases) {
    for (const Case& c : cases) {
      SCOPED_TRACE(
          absl::StrCat(testing::RpcName(static_cast<int>(rpc)), " / ", c.name));
      std::optional<grpc::Status> s = Call(rpc, c.request);
      ASSERT_TRUE(s.has_value()) << "unparsable: " << c.request;
      EXPECT_NE(s->error_code(), StatusCode::UNKNOWN) << s->error_message();
      EXPECT_NE(s->error_code(), StatusCode::INTERNAL) << s->error_message();
      EXPECT_EQ(s->error_code(), c.code) << s->error_message();
      EXPECT_EQ(testing::Reason(*s), c.reason) << s->error_message();
    }
  }

  std::unique_ptr<HubServer> server_;
  std::unique_ptr<testing::HubStubs> stubs_;
};

constexpr StatusCode kInvalid = StatusCode::INVALID_ARGUMENT;

TEST_F(BadInputTest, GetStatusIgnoresNothingItCouldMisread) {
  // GetStatus has no request fields: only unknown fields can be sent, and
  // they are ignored.
  ExpectOk(Rpc::kGetStatus, "");
}

TEST_F(BadInputTest, EncodeRoleKeyRefusesMalformedKeys) {
  Run(Rpc::kEncodeRoleKey,
      {
          {"missing key", "", kInvalid, "ROLE_KEY_INVALID"},
          {"missing project", "role_key { kind: ROLE_KIND_CTO }", kInvalid,
           "PROJECT_ID_INVALID"},
          {"oversized project",
           absl::StrCat("role_key { project_id: \"", kLong,
                        "\" kind: ROLE_KIND_CTO }"),
           kInvalid, "PROJECT_ID_INVALID"},
          {"kind unspecified",
           absl::StrCat("role_key { project_id: \"", kProject, "\" }"),
           kInvalid, "ROLE_KIND_UNSUPPORTED"},
          {"kind out of range",
           absl::StrCat("role_key { project_id: \"", kProject, "\" kind: 42 }"),
           kInvalid, "ROLE_KIND_UNSUPPORTED"},
          {"cto with scope",
           absl::StrCat("role_key { project_id: \"", kProject,
                        "\" kind: ROLE_KIND_CTO scope_id: \"", kScope, "\" }"),
           kInvalid, "ROLE_SCOPE_FORBIDDEN"},
          {"lead without scope",
           absl::StrCat("role_key { project_id: \"", kProject,
                        "\" kind: ROLE_KIND_LEAD }"),
           kInvalid, "SCOPE_REQUIRED"},
          {"scope of the wrong kind",
           absl::StrCat("role_key { project_id: \"", kProject,
                        "\" kind: ROLE_KIND_LEAD scope_id: \"", kProject,
                        "\" }"),
           kInvalid, "SCOPE_ID_INVALID"},
      });
}

TEST_F(BadInputTest, DecodeRoleKeyRefusesMalformedWires) {
  Run(Rpc::kDecodeRoleKey,
      {
          {"missing wire", "", kInvalid, "ROLE_KEY_WIRE_PREFIX"},
          {"oversized wire", absl::StrCat("wire: \"rk2.", kLong, kLong, "\""),
           kInvalid, "ROLE_KEY_WIRE_INVALID"},
          {"wrong prefix", "wire: \"rk1.eyJ9\"", kInvalid,
           "ROLE_KEY_WIRE_PREFIX"},
          {"not base64url", "wire: \"rk2.a+b/\"", kInvalid,
           "ROLE_KEY_NON_CANONICAL"},
          {"a JSON array", "wire: \"rk2.WzFd\"", kInvalid, "ROLE_KEY_INVALID"},
          {"padded", "wire: \"rk2.eyJ9==\"", kInvalid,
           "ROLE_KEY_NON_CANONICAL"},
      });
}

TEST_F(BadInputTest, RegisterAgentRefusesMalformedRegistrations) {
  const std::string ok = "agent_id: \"agent-b\" cli: AGENT_CLI_CLAUDE ";
  Run(Rpc::kRegisterAgent,
      {
          {"missing agent_id", "cli: AGENT_CLI_CLAUDE", kInvalid,
           "AGENT_ID_INVALID"},
          {"oversized agent_id",
           absl::StrCat("agent_id: \"", kLong, "\" cli: AGENT_CLI_CLAUDE"),
           kInvalid, "AGENT_ID_INVALID"},
          {"topic address as agent_id",
           "agent_id: \"topic:x\" cli: AGENT_CLI_CLAUDE", kInvalid,
           "AGENT_ID_INVALID"},
          {"missing cli", "agent_id: \"agent-b\"", kInvalid,
           "AGENT_CLI_INVALID"},
          {"cli out of range", "agent_id: \"agent-b\" cli: 77", kInvalid,
           "AGENT_CLI_INVALID"},
          {"pid zero", ok + "pid: 0", kInvalid, "REQUEST_INVALID"},
          {"pid past 2^31", ok + "pid: 2147483648", kInvalid,
           "REQUEST_INVALID"},
          {"ttl below 10 s", ok + "heartbeat_ttl { seconds: 9 }", kInvalid,
           "HEARTBEAT_TTL_INVALID"},
          {"ttl negative", ok + "heartbeat_ttl { seconds: -30 }", kInvalid,
           "HEARTBEAT_TTL_INVALID"},
          {"ttl nanos out of range",
           ok + "heartbeat_ttl { seconds: 30 nanos: 2000000000 }", kInvalid,
           "REQUEST_INVALID"},
          {"empty capability", ok + "capabilities: \"\"", kInvalid,
           "REQUEST_INVALID"},
          {"role topic", ok + "topics: \"role:x\"", kInvalid, "TOPIC_INVALID"},
          {"oversized topic", absl::StrCat(ok, "topics: \"", kLong, "\""),
           kInvalid, "TOPIC_INVALID"},
          {"project of the wrong kind",
           absl::StrCat(ok, "project_id: \"", kScope, "\""), kInvalid,
           "PROJECT_ID_INVALID"},
          {"blank session", ok + "session_id: \"   \"", kInvalid,
           "SESSION_ID_INVALID"},
          {"host without prefix", ok + "host_id: \"host-1\"", kInvalid,
           "HOST_ID_INVALID"},
          {"locator JSON not JSON", ok + "transport_locators_json: \"[{\"",
           kInvalid, "TRANSPORT_LOCATORS_JSON_INVALID"},
          {"locator JSON not an array", ok + "transport_locators_json: \"{}\"",
           kInvalid, "TRANSPORT_LOCATORS_INVALID"},
          {"locators both ways",
           absl::StrCat(ok, "transport_locators { ", kLocator,
                        " } transport_locators_json: \"[]\""),
           kInvalid, "TRANSPORT_LOCATORS_INVALID"},
          {"locator without case",
           ok +
               "transport_locators { schema_version: "
               "\"tfx.transport-locator.v1\" transport_id: \"t\" kind: "
               "TRANSPORT_KIND_TMUX host_id: \"hst_abc\" expires_at { "
               "seconds: " +
               std::to_string(absl::ToUnixSeconds(absl::Now()) + 10) + " } }",
           kInvalid, "TRANSPORT_LOCATOR_INVALID"},
          {"locator kind out of range",
           ok + "transport_locators { schema_version: "
                "\"tfx.transport-locator.v1\" transport_id: \"t\" kind: 9 "
                "host_id: \"hst_abc\" tmux { session_name: \"s\" "
                "mux_server_id: \"m\" } }",
           kInvalid, "TRANSPORT_KIND_UNSUPPORTED"},
          {"locator expired",
           ok + "transport_locators { schema_version: "
                "\"tfx.transport-locator.v1\" transport_id: \"t\" kind: "
                "TRANSPORT_KIND_TMUX host_id: \"hst_abc\" expires_at { "
                "seconds: 1 } tmux { session_name: \"s\" mux_server_id: "
                "\"m\" } }",
           kInvalid, "TRANSPORT_EXPIRY_INVALID"},
          {"stale hub instance", ok + "hub_instance_id: \"other\"",
           StatusCode::FAILED_PRECONDITION, "STALE_HUB_INSTANCE"},
          {"too many topics",
           absl::StrCat(ok,
                        [] {
                          std::string topics;
                          for (int i = 0; i < 65; ++i)
                            absl::StrAppend(&topics, "topics: \"t", i, "\" ");
                          return topics;
                        }()),
           StatusCode::RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED"},
      });
  EXPECT_FALSE(server_->presence()->Get("agent-b").ok());
}

TEST_F(BadInputTest, HeartbeatRefusesMalformedRenewals) {
  Run(Rpc::kHeartbeat,
      {
          {"missing agent_id", "", kInvalid, "AGENT_ID_INVALID"},
          {"oversized agent_id", absl::StrCat("agent_id: \"", kLong, "\""),
           kInvalid, "AGENT_ID_INVALID"},
          {"ttl out of range", "agent_id: \"agent-a\" ttl { seconds: 86400 }",
           kInvalid, "HEARTBEAT_TTL_INVALID"},
          {"ttl with mixed signs",
           "agent_id: \"agent-a\" ttl { seconds: 30 nanos: -5 }", kInvalid,
           "REQUEST_INVALID"},
          {"unknown agent", "agent_id: \"agent-zz\"", StatusCode::NOT_FOUND,
           "AGENT_NOT_FOUND"},
          {"stale generation", "agent_id: \"agent-a\" presence_generation: 999",
           StatusCode::FAILED_PRECONDITION, "STALE_PRESENCE_OWNER"},
          {"stale fingerprint",
           "agent_id: \"agent-a\" store_fingerprint: \"x\"",
           StatusCode::FAILED_PRECONDITION, "STORE_FINGERPRINT_MISMATCH"},
      });
}

TEST_F(BadInputTest, DeregisterRefusesMalformedRequests) {
  Run(Rpc::kDeregister,
      {
          {"missing agent_id", "", kInvalid, "AGENT_ID_INVALID"},
          {"bad charset", "agent_id: \"a b c\"", kInvalid, "AGENT_ID_INVALID"},
          {"unknown agent", "agent_id: \"agent-zz\"", StatusCode::NOT_FOUND,
           "AGENT_NOT_FOUND"},
          {"stale generation", "agent_id: \"agent-a\" presence_generation: -1",
           StatusCode::FAILED_PRECONDITION, "STALE_PRESENCE_OWNER"},
      });
  EXPECT_EQ(server_->presence()->Get("agent-a")->record.status,
            AgentStatus::kOnline);
}

TEST_F(BadInputTest, GetAgentRefusesMalformedIds) {
  Run(Rpc::kGetAgent,
      {
          {"missing agent_id", "", kInvalid, "AGENT_ID_INVALID"},
          {"too short", "agent_id: \"ab\"", kInvalid, "AGENT_ID_INVALID"},
          {"oversized", absl::StrCat("agent_id: \"", kLong, "\""), kInvalid,
           "AGENT_ID_INVALID"},
          {"unknown", "agent_id: \"agent-zz\"", StatusCode::NOT_FOUND,
           "AGENT_NOT_FOUND"},
      });
}

TEST_F(BadInputTest, ListAgentsRefusesMalformedFilters) {
  Run(Rpc::kListAgents,
      {
          {"project of the wrong kind",
           absl::StrCat("project_id: \"", kScope, "\""), kInvalid,
           "PROJECT_ID_INVALID"},
          {"role topic", "topic: \"role:x\"", kInvalid, "TOPIC_INVALID"},
          {"cli out of range", "clis: 99", kInvalid, "AGENT_CLI_INVALID"},
          {"status unspecified", "statuses: AGENT_STATUS_UNSPECIFIED", kInvalid,
           "REQUEST_INVALID"},
          {"negative page size", "page_size: -1", kInvalid, "REQUEST_INVALID"},
          {"forged page token", "page_token: \"bm9wZQ\"", kInvalid,
           "PAGE_TOKEN_INVALID"},
      });
}

TEST_F(BadInputTest, AttachRefusesMalformedFrames) {
  const std::string hello = absl::StrCat(
      "hello { agent_id: \"agent-a\" presence_generation: ",
      server_->presence()->Get("agent-a")->record.presence_generation, " }");
  Run(Rpc::kAttach,
      {
          {"first frame not hello", "heartbeat { }", kInvalid,
           "REQUEST_INVALID"},
          {"empty first frame", "frame_id: 1", kInvalid, "REQUEST_INVALID"},
          {"hello without agent", "hello { }", kInvalid, "AGENT_ID_INVALID"},
          {"hello for an unknown agent",
           "hello { agent_id: \"agent-zz\" presence_generation: 1 }",
           StatusCode::NOT_FOUND, "AGENT_NOT_FOUND"},
          {"hello with a stale generation",
           "hello { agent_id: \"agent-a\" presence_generation: 999 }",
           StatusCode::FAILED_PRECONDITION, "STALE_PRESENCE_OWNER"},
          {"hello with a lease out of range",
           "hello { agent_id: \"agent-a\" presence_generation: 1 lease_ttl { "
           "seconds: 1 } }",
           kInvalid, "HEARTBEAT_TTL_INVALID"},
          {"second hello", hello + "\n---\n" + hello, kInvalid,
           "REQUEST_INVALID"},
          {"heartbeat ttl out of range",
           hello + "\n---\nheartbeat { ttl { seconds: -1 } }", kInvalid,
           "HEARTBEAT_TTL_INVALID"},
          {"heartbeat ttl not a Duration",
           hello + "\n---\nheartbeat { ttl { seconds: 1 nanos: -1 } }",
           kInvalid, "REQUEST_INVALID"},
          {"empty later frame", hello + "\n---\nframe_id: 7", kInvalid,
           "REQUEST_INVALID"},
          {"message ack without ids", hello + "\n---\nmessage_ack { }",
           kInvalid, "REQUEST_INVALID"},
      });
}

TEST_F(BadInputTest, ReserveRoleRefusesMalformedReservations) {
  Run(Rpc::kReserveRole,
      {
          {"missing key", "", kInvalid, "ROLE_KEY_INVALID"},
          {"key and wire disagree",
           kCto + " role_key_wire: "
                  "\"rk2.eyJwcm9qZWN0X2lkIjoicHJqX0JCQkJCQkJCQkJCQkJCQkJCQk"
                  "JCQkIiLCJyb2xlX2tpbmQiOiJjdG8ifQ\"",
           kInvalid, "ROLE_KEY_MISMATCH"},
          {"bad wire", "role_key_wire: \"rk2.!\"", kInvalid,
           "ROLE_KEY_NON_CANONICAL"},
          {"mask names no field", kCto + " update_mask { paths: \"nope\" }",
           kInvalid, "UPDATE_MASK_INVALID"},
          {"mask names a field twice",
           kCto + " update_mask { paths: \"state\" paths: \"state\" }",
           kInvalid, "UPDATE_MASK_INVALID"},
          {"state out of range",
           kCto + " patch { state: 17 } update_mask { paths: \"state\" }",
           kInvalid, "ROLE_REACHABILITY_STATE_INVALID"},
          {"holder id malformed",
           kCto + " patch { holder_agent_id: \"a b\" } update_mask { paths: "
                  "\"holder_agent_id\" }",
           kInvalid, "AGENT_ID_INVALID"},
      });
}

TEST_F(BadInputTest, CompareAndSetRoleRefusesMalformedGuards) {
  const std::string guard =
      " expected_version: 0 expected_epoch: 0 expected_activation_seq: 0 "
      "expected_activation_id { none: true } ";
  Run(Rpc::kCompareAndSetRole,
      {
          {"missing key", guard, kInvalid, "ROLE_KEY_INVALID"},
          {"incomplete guard", kCto + " expected_version: 0", kInvalid,
           "INVALID_CAS"},
          {"no guard at all", kCto, kInvalid, "INVALID_CAS"},
          {"mask names no field",
           kCto + guard + "update_mask { paths: \"epoch\" }", kInvalid,
           "UPDATE_MASK_INVALID"},
          {"clearing the state",
           kCto + guard +
               "patch { state: ROLE_STATE_UNSPECIFIED } update_mask { paths: "
               "\"state\" }",
           kInvalid, "REQUEST_INVALID"},
          {"no such role", kCto + guard, StatusCode::NOT_FOUND,
           "ROLE_NOT_FOUND"},
      });
}

TEST_F(BadInputTest, GetRoleRefusesMalformedKeys) {
  Run(Rpc::kGetRole,
      {
          {"missing key", "", kInvalid, "ROLE_KEY_INVALID"},
          {"oversized wire",
           absl::StrCat("role_key_wire: \"rk2.", kLong, kLong, "\""), kInvalid,
           "ROLE_KEY_WIRE_INVALID"},
          {"kind out of range",
           absl::StrCat("role_key { project_id: \"", kProject, "\" kind: -3 }"),
           kInvalid, "ROLE_KIND_UNSUPPORTED"},
          {"no such role", kCto, StatusCode::NOT_FOUND, "ROLE_NOT_FOUND"},
      });
}

TEST_F(BadInputTest, ListRolesRefusesMalformedFilters) {
  Run(Rpc::kListRoles,
      {
          {"project of the wrong kind",
           absl::StrCat("project_id: \"", kScope, "\""), kInvalid,
           "PROJECT_ID_INVALID"},
          {"scope of the wrong kind",
           absl::StrCat("scope_id: \"", kProject, "\""), kInvalid,
           "SCOPE_ID_INVALID"},
          {"state out of range", "states: 12", kInvalid,
           "ROLE_REACHABILITY_STATE_INVALID"},
          {"kind out of range", "kind: 5", kInvalid, "ROLE_KIND_UNSUPPORTED"},
          {"negative page size", "page_size: -5", kInvalid, "REQUEST_INVALID"},
          {"forged page token", "page_token: \"!!\"", kInvalid,
           "PAGE_TOKEN_INVALID"},
      });
}

TEST_F(BadInputTest, WatchRolesRefusesMalformedFilters) {
  Run(Rpc::kWatchRoles,
      {
          {"project of the wrong kind",
           absl::StrCat("project_id: \"", kScope, "\""), kInvalid,
           "PROJECT_ID_INVALID"},
          {"bad wire", "role_key_wire: \"rk2.\"", kInvalid,
           "ROLE_KEY_NON_CANONICAL"},
          {"kind out of range", "kind: 8", kInvalid, "ROLE_KIND_UNSUPPORTED"},
      });
}

TEST_F(BadInputTest, EnsureRoleRefusesMalformedRequests) {
  Run(Rpc::kEnsureRole,
      {
          {"missing key", "trigger: ENSURE_ROLE_TRIGGER_MANUAL cause_id: \"c\"",
           kInvalid, "ROLE_KEY_INVALID"},
          {"missing trigger", kCto + " cause_id: \"c\"", kInvalid,
           "ENSURE_ROLE_REQUEST_INVALID"},
          {"trigger out of range", kCto + " trigger: 99 cause_id: \"c\"",
           kInvalid, "ENSURE_ROLE_REQUEST_INVALID"},
          {"hub-only trigger",
           kCto + " trigger: ENSURE_ROLE_TRIGGER_HOLDER_OFFLINE cause_id: "
                  "\"c\"",
           kInvalid, "ENSURE_ROLE_REQUEST_INVALID"},
          {"missing cause", kCto + " trigger: ENSURE_ROLE_TRIGGER_MANUAL",
           kInvalid, "ENSURE_ROLE_REQUEST_INVALID"},
          {"oversized cause",
           absl::StrCat(kCto,
                        " trigger: ENSURE_ROLE_TRIGGER_MANUAL cause_id: \"",
                        kLong, "\""),
           kInvalid, "ENSURE_ROLE_REQUEST_INVALID"},
          {"malformed agent",
           kCto + " trigger: ENSURE_ROLE_TRIGGER_MANUAL cause_id: \"c\" "
                  "agent_id: \"x\"",
           kInvalid, "AGENT_ID_INVALID"},
          {"unknown agent",
           kCto + " trigger: ENSURE_ROLE_TRIGGER_MANUAL cause_id: \"c\" "
                  "agent_id: \"agent-zz\"",
           StatusCode::NOT_FOUND, "AGENT_NOT_FOUND"},
          {"agent of another project",
           "role_key { project_id: \"prj_BBBBBBBBBBBBBBBBBBBBBB\" kind: "
           "ROLE_KIND_CTO } trigger: ENSURE_ROLE_TRIGGER_MANUAL cause_id: "
           "\"c\" agent_id: \"agent-a\"",
           StatusCode::PERMISSION_DENIED, "PROJECT_SCOPE_MISMATCH"},
      });
}

TEST_F(BadInputTest, AckRoleActivationRefusesMalformedAcks) {
  const std::string ack = absl::StrCat(
      "ack { schema: \"tfx.role-activation-ack.v1\" activation_id: \"a1\" ",
      kCto,
      " epoch: 1 activation_seq: 1 holder_agent_id: \"agent-a\" reachable: "
      "true charter_ack { ",
      kCto, " epoch: 1 charter_version: \"v1\" } }");
  Run(Rpc::kAckRoleActivation,
      {
          {"missing ack", "agent_id: \"agent-a\"", kInvalid,
           "ACTIVATION_ACK_INVALID"},
          {"wrong schema",
           "agent_id: \"agent-a\" ack { schema: \"v0\" reachable: true }",
           kInvalid, "ACTIVATION_ACK_INVALID"},
          {"not reachable",
           absl::StrCat("agent_id: \"agent-a\" ack { schema: "
                        "\"tfx.role-activation-ack.v1\" ",
                        kCto, " charter_ack { ", kCto, " } }"),
           kInvalid, "ACTIVATION_ACK_INVALID"},
          {"missing agent", ack, kInvalid, "AGENT_ID_INVALID"},
          {"no such role", ack + " agent_id: \"agent-a\"",
           StatusCode::FAILED_PRECONDITION, "STALE_EPOCH"},
      });
}

TEST_F(BadInputTest, UpsertRoleCandidateRefusesMalformedCandidates) {
  Run(Rpc::kUpsertRoleCandidate,
      {
          {"missing key", "agent_id: \"agent-a\"", kInvalid,
           "ROLE_KEY_INVALID"},
          {"missing agent", kCto, kInvalid, "AGENT_ID_INVALID"},
          {"mask names no field",
           kCto + " agent_id: \"agent-a\" update_mask { paths: \"x\" }",
           kInvalid, "UPDATE_MASK_INVALID"},
          {"source out of range",
           kCto + " agent_id: \"agent-a\" candidate { source: 12 } "
                  "update_mask { paths: \"source\" }",
           kInvalid, "REQUEST_INVALID"},
          {"locator JSON not JSON",
           kCto + " agent_id: \"agent-a\" candidate { "
                  "transport_locators_json: \"[\" } update_mask { paths: "
                  "\"transport_locators_json\" }",
           kInvalid, "TRANSPORT_LOCATORS_JSON_INVALID"},
          {"negative failures",
           kCto + " agent_id: \"agent-a\" candidate { "
                  "consecutive_probe_failures: -1 } update_mask { paths: "
                  "\"consecutive_probe_failures\" }",
           kInvalid, "REQUEST_INVALID"},
      });
}

TEST_F(BadInputTest, ListRoleCandidatesRefusesMalformedRequests) {
  Run(Rpc::kListRoleCandidates,
      {
          {"bad wire", "role_key_wire: \"rk2\"", kInvalid,
           "ROLE_KEY_WIRE_PREFIX"},
          {"malformed agent filter", kCto + " agent_id: \"!\"", kInvalid,
           "AGENT_ID_INVALID"},
          {"negative page size", kCto + " page_size: -1", kInvalid,
           "REQUEST_INVALID"},
          {"forged page token", kCto + " page_token: \"zz\"", kInvalid,
           "PAGE_TOKEN_INVALID"},
      });
}

TEST_F(BadInputTest, ReportCandidateProbeRefusesMalformedReports) {
  Run(Rpc::kReportCandidateProbe,
      {
          {"missing key", "agent_id: \"agent-a\" code: PROBE_CODE_OK", kInvalid,
           "ROLE_KEY_INVALID"},
          {"missing agent", kCto + " code: PROBE_CODE_OK", kInvalid,
           "AGENT_ID_INVALID"},
          {"code unspecified", kCto + " agent_id: \"agent-a\"", kInvalid,
           "REQUEST_INVALID"},
          {"code out of range", kCto + " agent_id: \"agent-a\" code: 40",
           kInvalid, "REQUEST_INVALID"},
          {"no such candidate",
           kLead + " agent_id: \"agent-a\" code: PROBE_CODE_TIMEOUT",
           StatusCode::NOT_FOUND, "CANDIDATE_NOT_FOUND"},
      });
}

TEST_F(BadInputTest, CloseRoleScopeRefusesMalformedRequests) {
  Run(Rpc::kCloseRoleScope,
      {
          {"missing key", "reason: \"done\"", kInvalid, "ROLE_KEY_INVALID"},
          {"bad wire", "role_key_wire: \"rk2.x\"", kInvalid,
           "ROLE_KEY_NON_CANONICAL"},
          {"lead without scope",
           absl::StrCat("role_key { project_id: \"", kProject,
                        "\" kind: ROLE_KIND_LEAD }"),
           kInvalid, "SCOPE_REQUIRED"},
          {"kind out of range",
           absl::StrCat("role_key { project_id: \"", kProject,
                        "\" kind: 9 scope_id: \"", kScope, "\" }"),
           kInvalid, "ROLE_KIND_UNSUPPORTED"},
          {"a cto key", kCto, kInvalid, "ROLE_KIND_UNSUPPORTED"},
          {"key and wire disagree",
           kLead + " role_key_wire: \"rk2.eyJwcm9qZWN0X2lkIjoicHJqX0FBQUFBQUFB"
                   "QUFBQUFBQUFBQUFBQUEiLCJyb2xlX2tpbmQiOiJjdG8ifQ\"",
           kInvalid, "ROLE_KEY_MISMATCH"},
          {"oversized reason", absl::StrCat(kLead, " reason: \"", kLong, "\""),
           kInvalid, "REQUEST_INVALID"},
      });
  // Once closed, the scope refuses the writes that would reopen it.
  ExpectOk(Rpc::kCloseRoleScope, kLead);
  Run(Rpc::kReserveRole,
      {{"closed scope", kLead, StatusCode::FAILED_PRECONDITION,
        "ROLE_SCOPE_CLOSED"}});
  Run(Rpc::kUpsertRoleCandidate,
      {{"closed scope", kLead + " agent_id: \"agent-a\"",
        StatusCode::FAILED_PRECONDITION, "ROLE_SCOPE_CLOSED"}});
}

TEST_F(BadInputTest, ListClosedScopesRefusesMalformedFilters) {
  Run(Rpc::kListClosedScopes,
      {
          {"project of the wrong kind",
           absl::StrCat("project_id: \"", kScope, "\""), kInvalid,
           "PROJECT_ID_INVALID"},
          {"oversized project", absl::StrCat("project_id: \"", kLong, "\""),
           kInvalid, "PROJECT_ID_INVALID"},
          {"scope of the wrong kind",
           absl::StrCat("scope_id: \"", kProject, "\""), kInvalid,
           "SCOPE_ID_INVALID"},
          {"negative page size", "page_size: -5", kInvalid, "REQUEST_INVALID"},
          {"forged page token", "page_token: \"!!\"", kInvalid,
           "PAGE_TOKEN_INVALID"},
          {"token of another list", "page_token: \"cm9sZXN8MHxyazIuZm9v\"",
           kInvalid, "PAGE_TOKEN_INVALID"},
      });
  ExpectOk(Rpc::kListClosedScopes,
           absl::StrCat("project_id: \"", kProject, "\" scope_id: \"", kScope,
                        "\" page_size: 5000"));
}

TEST_F(BadInputTest, PublishRefusesMalformedMessages) {
  const std::string from = "from_agent_id: \"agent-a\" ";
  Run(Rpc::kPublish,
      {
          {"missing to", from, kInvalid, "MESSAGE_ADDRESS_INVALID"},
          {"missing sender", "to: \"agent-a\"", kInvalid, "AGENT_ID_INVALID"},
          {"address of the wrong kind", from + "to: \"a b\"", kInvalid,
           "MESSAGE_ADDRESS_INVALID"},
          {"empty topic address", from + "to: \"topic:\"", kInvalid,
           "TOPIC_INVALID"},
          {"bad role address", from + "to: \"topic:role:rk2.x\"", kInvalid,
           "ROLE_KEY_NON_CANONICAL"},
          {"priority out of range", from + "to: \"agent-a\" priority: 10",
           kInvalid, "PRIORITY_INVALID"},
          {"negative priority", from + "to: \"agent-a\" priority: -1", kInvalid,
           "PRIORITY_INVALID"},
          {"ttl out of range", from + "to: \"agent-a\" ttl { seconds: 90000 }",
           kInvalid, "TTL_INVALID"},
          {"ttl nanos out of range",
           from + "to: \"agent-a\" ttl { seconds: 5 nanos: 1000000000 }",
           kInvalid, "REQUEST_INVALID"},
          {"system type", from + "to: \"agent-a\" type: MESSAGE_TYPE_SYSTEM",
           kInvalid, "MESSAGE_TYPE_INVALID"},
          {"type out of range", from + "to: \"agent-a\" type: 50", kInvalid,
           "MESSAGE_TYPE_INVALID"},
          {"oversized correlation id",
           absl::StrCat(from, "to: \"agent-a\" correlation_id: \"", kLong,
                        "\""),
           kInvalid, "REQUEST_INVALID"},
          {"cto without project", from + "to: \"topic:cto\" project_id: \"p\"",
           kInvalid, "PROJECT_ID_INVALID"},
          {"oversized trace id",
           absl::StrCat(from, "to: \"agent-a\" trace_id: \"", kLong, "\""),
           kInvalid, "REQUEST_INVALID"},
      });
}

TEST_F(BadInputTest, AckRefusesMalformedAcknowledgements) {
  std::string many = "agent_id: \"agent-a\" ";
  for (int i = 0; i < 101; ++i)
    absl::StrAppend(&many, "message_ids: \"m", i, "\" ");
  Run(Rpc::kAck,
      {
          {"missing agent", "message_ids: \"m\"", kInvalid, "AGENT_ID_INVALID"},
          {"no ids", "agent_id: \"agent-a\"", kInvalid, "REQUEST_INVALID"},
          {"empty id", "agent_id: \"agent-a\" message_ids: \"\"", kInvalid,
           "MESSAGE_ID_INVALID"},
          {"oversized id",
           absl::StrCat("agent_id: \"agent-a\" message_ids: \"", kLong, "\""),
           kInvalid, "MESSAGE_ID_INVALID"},
          {"too many ids", many, StatusCode::RESOURCE_EXHAUSTED,
           "LIMIT_EXCEEDED"},
          {"stale generation",
           "agent_id: \"agent-a\" message_ids: \"m\" presence_generation: 99",
           StatusCode::FAILED_PRECONDITION, "STALE_PRESENCE_OWNER"},
      });
}

TEST_F(BadInputTest, ListPendingRefusesMalformedQueries) {
  Run(Rpc::kListPending,
      {
          {"missing agent", "", kInvalid, "AGENT_ID_INVALID"},
          {"bad topic", "agent_id: \"agent-a\" topic: \"a b\"", kInvalid,
           "TOPIC_INVALID"},
          {"negative page size", "agent_id: \"agent-a\" page_size: -1",
           kInvalid, "REQUEST_INVALID"},
          {"forged page token", "agent_id: \"agent-a\" page_token: \"x\"",
           kInvalid, "PAGE_TOKEN_INVALID"},
      });
}

TEST_F(BadInputTest, ListDeadLettersRefusesMalformedQueries) {
  Run(Rpc::kListDeadLetters,
      {
          {"negative page size", "page_size: -1", kInvalid, "REQUEST_INVALID"},
          {"forged page token", "page_token: \"x\"", kInvalid,
           "PAGE_TOKEN_INVALID"},
      });
}

TEST_F(BadInputTest, AskRefusesMalformedQuestions) {
  const std::string from = "from_agent_id: \"agent-a\" ";
  Run(Rpc::kAsk,
      {
          {"missing to", from, kInvalid, "MESSAGE_ADDRESS_INVALID"},
          {"missing sender", "to: \"agent-a\"", kInvalid, "AGENT_ID_INVALID"},
          {"priority out of range", from + "to: \"agent-a\" priority: 11",
           kInvalid, "PRIORITY_INVALID"},
          {"negative wait",
           from + "to: \"agent-a\" await_timeout { seconds: -1 }", kInvalid,
           "REQUEST_INVALID"},
      });
}

TEST_F(BadInputTest, ListTraceRefusesMalformedQueries) {
  Run(Rpc::kListTrace,
      {
          {"missing trace", "", kInvalid, "REQUEST_INVALID"},
          {"oversized trace", absl::StrCat("trace_id: \"", kLong, "\""),
           kInvalid, "REQUEST_INVALID"},
          {"negative page size", "trace_id: \"t\" page_size: -1", kInvalid,
           "REQUEST_INVALID"},
          {"forged page token", "trace_id: \"t\" page_token: \"x\"", kInvalid,
           "PAGE_TOKEN_INVALID"},
      });
}

}  // namespace
}  // namespace hub
