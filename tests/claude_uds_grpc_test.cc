// The claude-uds adapter through gRPC against an in-process HubServer: a
// candidate reachable only through a claude-uds locator is probed and woken
// by the configured external command (a fake `tfx-live` written by the test)
// and ACKs over the unary RPC; without a command that adapter kind reports
// adapter_unavailable and the next candidate, on its presence stream, takes
// the role.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"

namespace hub {
namespace {

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

hub::v1::RoleKey Cto() {
  hub::v1::RoleKey key;
  key.set_project_id(kProject);
  key.set_kind(hub::v1::ROLE_KIND_CTO);
  return key;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ClaudeUdsGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    std::string pattern = base + "/udsgrpc.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }

  // A fake tfx-live: records each call's argv (NUL-separated) in
  // <verb>.argv and answers like tfx-live does. The file is written beside
  // and renamed into place, so a reader never sees it half written.
  std::string WriteFakeTfxLive() {
    const std::string path = dir_ + "/tfx-live";
    std::ofstream script(path);
    script << "#!/bin/sh\n"
           << "printf '%s\\0' \"$@\" > '" << dir_ << "/'\"$1\".argv.$$\n"
           << "mv '" << dir_ << "/'\"$1\".argv.$$ '" << dir_
           << "/'\"$1\".argv\n"
           << "case \"$1\" in\n"
           << "  probe) echo '{\"schema_version\":\"tfx-live.transport-probe."
              "v1\",\"ok\":true,\"reachable\":true,\"wakeable\":true,"
              "\"reason_code\":\"ok\"}' ;;\n"
           << "  ask) echo '{\"ok\":true}' ;;\n"
           << "  *) exit 2 ;;\n"
           << "esac\n";
    script.close();
    EXPECT_EQ(chmod(path.c_str(), 0755), 0);
    return path;
  }

  void Start(const std::string& command) {
    HubServerOptions options =
        testing::TestHubOptions(testing::FreshTestDbPath());
    if (!command.empty()) options.claude_uds.command = {command};
    server_ = testing::StartTestHub(options);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    roles_ = hub::v1::RoleService::NewStub(channel);
  }

  // Registers `id` as a cto candidate of the project with `priority`; with
  // `uds_session` it carries one claude-uds locator for that session.
  int64_t Candidate(const std::string& id, int64_t priority,
                    const std::string& uds_session = "") {
    grpc::ClientContext context;
    hub::v1::RegisterAgentRequest request;
    request.set_agent_id(id);
    request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
    request.set_project_id(kProject);
    request.add_capabilities("role:cto:candidate");
    if (!uds_session.empty()) {
      nlohmann::json locator = {
          {"schema_version", "tfx.transport-locator.v1"},
          {"transport_id", absl::StrCat("trn_", id)},
          {"kind", "claude-uds"},
          {"host_id", "hst_test"},
          {"capabilities", {"probe", "wake", "activate", "interrupt"}},
          {"priority", 100},
          {"expires_at_ms", absl::ToUnixMillis(absl::Now()) + 25'000},
          {"locator",
           {{"session_id", uds_session}, {"bridge_id", "local-hub"}}},
      };
      request.set_transport_locators_json(
          nlohmann::json::array({locator}).dump());
    }
    hub::v1::RegisterAgentResponse registered;
    grpc::Status s = presence_->RegisterAgent(&context, request, &registered);
    EXPECT_TRUE(s.ok()) << s.error_message();
    testing::UpsertCandidateOk(roles_.get(), Cto(), id, priority);
    return registered.presence_generation();
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

  hub::v1::RoleCandidate GetCandidate(const std::string& id) {
    grpc::ClientContext context;
    hub::v1::ListRoleCandidatesRequest request;
    *request.mutable_role_key() = Cto();
    hub::v1::ListRoleCandidatesResponse response;
    EXPECT_TRUE(roles_->ListRoleCandidates(&context, request, &response).ok());
    for (const auto& c : response.candidates()) {
      if (c.agent_id() == id) return c;
    }
    ADD_FAILURE() << "no candidate " << id;
    return {};
  }

  // The argv (without argv[0]) of the fake command's last `verb` call,
  // waiting up to 20 s for it; empty if it never came.
  std::vector<std::string> AwaitCall(const std::string& verb) {
    const std::string path = absl::StrCat(dir_, "/", verb, ".argv");
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    struct stat st;
    while (stat(path.c_str(), &st) != 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    std::string text = ReadAll(path);
    if (text.empty()) return {};
    if (text.back() == '\0') text.pop_back();
    return absl::StrSplit(text, '\0');
  }

  std::string dir_;
  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
};

TEST_F(ClaudeUdsGrpcTest,
       ACandidateReachableOnlyOverClaudeUdsIsWokenByTheConfiguredCommand) {
  Start(WriteFakeTfxLive());
  const int64_t generation = Candidate("agent-uds", 10, "sess-uds-1");
  hub::v1::EnsureRoleReceipt receipt = Ensure();
  ASSERT_EQ(receipt.disposition(), hub::v1::ENSURE_ROLE_DISPOSITION_STARTED);
  EXPECT_EQ(receipt.holder_agent_id(), "agent-uds");

  EXPECT_EQ(
      AwaitCall("probe"),
      (std::vector<std::string>{"probe", "--session-id", "sess-uds-1",
                                "--bridge", "local-hub", "--timeout", "10"}));
  const std::vector<std::string> ask = AwaitCall("ask");
  ASSERT_EQ(ask.size(), 13u) << absl::StrJoin(ask, " ");
  EXPECT_EQ(std::vector<std::string>(ask.begin(), ask.begin() + 9),
            (std::vector<std::string>{"ask", "--cli", "claude", "--transport",
                                      "uds", "--session-id", "sess-uds-1",
                                      "--bridge", "local-hub"}));
  EXPECT_EQ(ask[9], "--prompt");
  // The prompt is the activation envelope; the session ACKs what it says.
  const nlohmann::json activation = nlohmann::json::parse(ask[10]);
  EXPECT_EQ(activation["schema"], "tfx.role-activation.v1");
  EXPECT_EQ(activation["holder_agent_id"], "agent-uds");
  EXPECT_EQ(activation["epoch"].get<int64_t>(), receipt.epoch());

  grpc::ClientContext context;
  hub::v1::AckRoleActivationRequest request;
  hub::v1::RoleActivationAck* ack = request.mutable_ack();
  ack->set_schema("tfx.role-activation-ack.v1");
  ack->set_activation_id(activation["activation_id"].get<std::string>());
  ack->set_role_key_wire(activation["role_key_wire"].get<std::string>());
  ack->set_epoch(activation["epoch"].get<int64_t>());
  ack->set_activation_seq(activation["activation_seq"].get<int64_t>());
  ack->set_holder_agent_id("agent-uds");
  ack->set_reachable(true);
  ack->mutable_charter_ack()->set_role_key_wire(ack->role_key_wire());
  ack->mutable_charter_ack()->set_epoch(ack->epoch());
  ack->mutable_charter_ack()->set_charter_version(
      activation["charter_version"].get<std::string>());
  request.set_agent_id("agent-uds");
  request.set_presence_generation(generation);
  hub::v1::AckRoleActivationResponse response;
  grpc::Status s = roles_->AckRoleActivation(&context, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const hub::v1::Role role = GetRole();
  EXPECT_EQ(role.state(), hub::v1::ROLE_STATE_ACTIVE);
  EXPECT_EQ(role.holder_agent_id(), "agent-uds");
  // The wake's success is recorded once the command returned, which may be
  // after the session's ACK.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (GetCandidate("agent-uds").last_probe_code() != "ok" &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(GetCandidate("agent-uds").last_probe_code(), "ok");
}

TEST_F(ClaudeUdsGrpcTest,
       WithoutACommandClaudeUdsIsUnavailableAndTheStreamCandidateTakesOver) {
  Start("");
  Candidate("agent-uds", 10, "sess-uds-1");
  const int64_t generation = Candidate("agent-stream", 5);
  testing::AttachedAgent stream =
      testing::AttachOk(presence_.get(), "agent-stream", generation);

  // The uds-only candidate comes first and is reserved, but cannot be
  // reached: its adapter kind is disabled, not the candidate.
  EXPECT_EQ(Ensure().holder_agent_id(), "agent-uds");
  const hub::v1::RoleActivation activation = testing::NextActivation(stream);
  EXPECT_EQ(activation.holder_agent_id(), "agent-stream");
  const hub::v1::RoleCandidate uds = GetCandidate("agent-uds");
  EXPECT_EQ(uds.last_probe_code(), "adapter_unavailable");
  EXPECT_EQ(uds.consecutive_probe_failures(), 0);
  EXPECT_FALSE(uds.has_excluded_until());
  stream.context->TryCancel();
}

}  // namespace
}  // namespace hub
