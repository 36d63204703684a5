// HubClient against the real hubd: typed calls, deadlines, and failures that
// expose hub's reason code.
#include "clients/cpp/hub_client.h"

#include "gtest/gtest.h"
#include "tests/hubd_process.h"

namespace hub::client {
namespace {

class HubClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hubd_ = new testing::HubdProcess(testing::TempDbPath("hub_client_test"));
    ASSERT_TRUE(hubd_->Start().ok());
  }
  static void TearDownTestSuite() {
    delete hubd_;
    hubd_ = nullptr;
  }
  HubClient& client() {
    if (client_ == nullptr) {
      HubClientOptions options;
      options.address = hubd_->address();
      client_ = std::make_unique<HubClient>(options);
    }
    return *client_;
  }

  static testing::HubdProcess* hubd_;
  std::unique_ptr<HubClient> client_;
};

testing::HubdProcess* HubClientTest::hubd_ = nullptr;

TEST_F(HubClientTest, GetStatusReportsTheRunningHub) {
  absl::StatusOr<hub::v1::GetStatusResponse> status = client().GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->hub_instance_id(), hubd_->instance_id());
  EXPECT_EQ(status->store_type(), "sqlite");
  EXPECT_FALSE(status->version().empty());
}

TEST_F(HubClientTest, AFailureExposesTheServersReasonCode) {
  hub::v1::DecodeRoleKeyRequest request;
  request.set_wire("rk1.nope");
  absl::StatusOr<hub::v1::DecodeRoleKeyResponse> decoded =
      client().DecodeRoleKey(request);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(decoded.status()), "ROLE_KEY_WIRE_PREFIX");
}

TEST_F(HubClientTest, AStaleGenerationIsFencedWithTheCurrentOneInMetadata) {
  hub::v1::RegisterAgentRequest registration;
  registration.set_agent_id("client-agent");
  registration.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  absl::StatusOr<hub::v1::RegisterAgentResponse> first =
      client().RegisterAgent(registration);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<hub::v1::RegisterAgentResponse> second =
      client().RegisterAgent(registration);
  ASSERT_TRUE(second.ok()) << second.status();
  hub::v1::HeartbeatRequest heartbeat;
  heartbeat.set_agent_id("client-agent");
  heartbeat.set_presence_generation(first->presence_generation());
  absl::StatusOr<hub::v1::HeartbeatResponse> beat =
      client().Heartbeat(heartbeat);
  ASSERT_FALSE(beat.ok());
  EXPECT_EQ(beat.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(beat.status()), "STALE_PRESENCE_OWNER");
  EXPECT_EQ(ErrorMetadata(beat.status(), "presence_generation"),
            std::to_string(second->presence_generation()));
}

TEST_F(HubClientTest, AnUnreachableHubFailsWithinTheDeadline) {
  HubClientOptions options;
  options.address = "127.0.0.1:1";  // nothing listens on port 1
  options.default_deadline = absl::Milliseconds(300);
  HubClient unreachable(options);
  CallOptions wait;
  wait.wait_for_ready = true;
  const absl::Time start = absl::Now();
  absl::StatusOr<hub::v1::GetStatusResponse> status =
      unreachable.GetStatus({}, wait);
  EXPECT_EQ(status.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(unreachable.GetStatus().status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(HubClientTest, EveryServiceIsReachableThroughTheClient) {
  hub::v1::EncodeRoleKeyRequest encode;
  encode.mutable_role_key()->set_project_id("prj_AAAAAAAAAAAAAAAAAAAAAA");
  encode.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
  absl::StatusOr<hub::v1::EncodeRoleKeyResponse> encoded =
      client().EncodeRoleKey(encode);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  hub::v1::ListRolesRequest roles;
  EXPECT_TRUE(client().ListRoles(roles).ok());
  hub::v1::CloseRoleScopeRequest close;
  close.mutable_role_key()->set_project_id("prj_AAAAAAAAAAAAAAAAAAAAAA");
  close.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_LEAD);
  close.mutable_role_key()->set_scope_id("scp_CCCCCCCCCCCCCCCCCCCCCC");
  ASSERT_TRUE(client().CloseRoleScope(close).ok());
  absl::StatusOr<hub::v1::ListClosedScopesResponse> closed =
      client().ListClosedScopes({});
  ASSERT_TRUE(closed.ok()) << closed.status();
  ASSERT_EQ(closed->closed_scopes_size(), 1);
  EXPECT_EQ(closed->closed_scopes(0).role_key().scope_id(),
            "scp_CCCCCCCCCCCCCCCCCCCCCC");
  hub::v1::ListAgentsRequest agents;
  EXPECT_TRUE(client().ListAgents(agents).ok());
  hub::v1::RegisterAgentRequest recipient;
  recipient.set_agent_id("client-recipient");
  recipient.set_cli(hub::v1::AGENT_CLI_CODEX);
  ASSERT_TRUE(client().RegisterAgent(recipient).ok());
  hub::v1::PublishRequest publish;
  publish.set_from_agent_id("client-sender");
  publish.set_to("client-recipient");
  absl::StatusOr<hub::v1::PublishResponse> published =
      client().Publish(publish);
  ASSERT_TRUE(published.ok()) << published.status();
  hub::v1::ListPendingRequest pending;
  pending.set_agent_id("client-recipient");
  pending.set_peek(true);
  absl::StatusOr<hub::v1::ListPendingResponse> listed =
      client().ListPending(pending);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->deliveries_size(), 1);
  EXPECT_EQ(listed->deliveries(0).message().message_id(),
            published->message_id());
}

}  // namespace
}  // namespace hub::client
