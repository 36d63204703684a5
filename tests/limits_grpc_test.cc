// Every limit of docs/design/limits.md through gRPC against an in-process
// HubServer: exceeding one is RESOURCE_EXHAUSTED with LIMIT_EXCEEDED or
// RATE_LIMITED and the limit named, and what was accepted before stays.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/hub.grpc.pb.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "tests/hub_test_util.h"

namespace hub {
namespace {

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;
using testing::ErrorInfoOf;
using testing::Reason;

class LimitsGrpcTest : public ::testing::Test {
 protected:
  // Starts a hub whose options `edit` adjusts.
  void Start(const std::function<void(HubServerOptions&)>& edit) {
    HubServerOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = testing::FreshTestDbPath();
    options.presence.detach_grace = absl::Milliseconds(200);
    options.tick_interval = absl::Milliseconds(20);
    edit(options);
    auto server = HubServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(server_->address(),
                                   grpc::InsecureChannelCredentials());
    hub_ = hub::v1::HubService::NewStub(channel_);
    presence_ = hub::v1::PresenceService::NewStub(channel_);
    roles_ = hub::v1::RoleService::NewStub(channel_);
    messages_ = hub::v1::MessageService::NewStub(channel_);
  }

  grpc::Status GetStatus() {
    grpc::ClientContext context;
    hub::v1::GetStatusRequest request;
    hub::v1::GetStatusResponse response;
    return hub_->GetStatus(&context, request, &response);
  }

  // A Struct {"a": <text>}.
  static google::protobuf::Struct Text(const std::string& text) {
    google::protobuf::Struct s;
    (*s.mutable_fields())["a"].set_string_value(text);
    return s;
  }

  grpc::Status Register(const std::string& agent_id,
                        const std::string& metadata_text = "",
                        int64_t* generation = nullptr) {
    grpc::ClientContext context;
    hub::v1::RegisterAgentRequest request;
    request.set_agent_id(agent_id);
    request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
    if (!metadata_text.empty())
      *request.mutable_metadata() = Text(metadata_text);
    hub::v1::RegisterAgentResponse response;
    grpc::Status s = presence_->RegisterAgent(&context, request, &response);
    if (generation != nullptr) *generation = response.presence_generation();
    return s;
  }

  grpc::Status Publish(const std::string& to, const std::string& payload_text,
                       std::string* id = nullptr) {
    grpc::ClientContext context;
    hub::v1::PublishRequest request;
    request.set_from_agent_id("sender-1");
    request.set_to(to);
    *request.mutable_payload() = Text(payload_text);
    hub::v1::PublishResponse response;
    grpc::Status s = messages_->Publish(&context, request, &response);
    if (id != nullptr) *id = response.message_id();
    return s;
  }

  static void ExpectLimit(const grpc::Status& s, const std::string& reason,
                          const std::string& limit, const std::string& value) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << s.error_message();
    EXPECT_EQ(Reason(s), reason) << s.error_message();
    const google::rpc::ErrorInfo info = ErrorInfoOf(s);
    EXPECT_EQ(info.metadata().count("limit") ? info.metadata().at("limit") : "",
              limit);
    EXPECT_EQ(info.metadata().count("limit_value")
                  ? info.metadata().at("limit_value")
                  : "",
              value);
  }

  std::unique_ptr<HubServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<hub::v1::HubService::Stub> hub_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
  std::unique_ptr<hub::v1::MessageService::Stub> messages_;
};

TEST_F(LimitsGrpcTest, APrincipalPastItsBurstIsRateLimitedWithARetryHint) {
  // One token per 100 s: the burst is all this test can spend.
  Start([](HubServerOptions& o) {
    o.limits.requests_per_second = 0.01;
    o.limits.request_burst = 3;
  });
  ASSERT_TRUE(Register("agent-a").ok());
  EXPECT_TRUE(GetStatus().ok());
  EXPECT_TRUE(GetStatus().ok());
  grpc::Status limited = GetStatus();
  ExpectLimit(limited, "RATE_LIMITED", "requests_per_second", "0.01");
  const auto metadata = ErrorInfoOf(limited).metadata();
  ASSERT_TRUE(metadata.count("retry_after_ms"));
  EXPECT_GT(std::stoll(metadata.at("retry_after_ms")), 0);
  // The registration accepted before the limit is intact.
  EXPECT_TRUE(server_->presence()->Get("agent-a").ok());
}

TEST_F(LimitsGrpcTest, StreamsPerPrincipalAreCappedAndFreedWhenAStreamEnds) {
  Start([](HubServerOptions& o) { o.limits.max_streams_per_principal = 2; });
  auto open_watch = [this](grpc::ClientContext* context) {
    hub::v1::WatchRolesRequest request;
    auto reader = roles_->WatchRoles(context, request);
    return reader;
  };
  grpc::ClientContext c1, c2;
  auto w1 = open_watch(&c1);
  auto w2 = open_watch(&c2);
  hub::v1::WatchRolesResponse response;
  ASSERT_TRUE(w1->Read(&response));  // snapshot_end: the stream is open
  ASSERT_TRUE(w2->Read(&response));
  EXPECT_EQ(server_->call_gate()->OpenStreams("ipv4:127.0.0.1"), 2);

  // A third stream of either kind is refused.
  grpc::ClientContext c3;
  auto w3 = open_watch(&c3);
  EXPECT_FALSE(w3->Read(&response));
  ExpectLimit(w3->Finish(), "LIMIT_EXCEEDED", "max_streams_per_principal", "2");
  grpc::ClientContext c4;
  auto attach = presence_->Attach(&c4);
  AttachResponse attach_response;
  EXPECT_FALSE(attach->Read(&attach_response));
  ExpectLimit(attach->Finish(), "LIMIT_EXCEEDED", "max_streams_per_principal",
              "2");

  // The open streams still work; ending one frees its slot.
  c1.TryCancel();
  while (w1->Read(&response)) {
  }
  w1->Finish();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server_->call_gate()->OpenStreams("ipv4:127.0.0.1") > 1 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  grpc::ClientContext c5;
  auto w5 = open_watch(&c5);
  EXPECT_TRUE(w5->Read(&response));
  c2.TryCancel();
  c5.TryCancel();
  while (w2->Read(&response)) {
  }
  while (w5->Read(&response)) {
  }
  w2->Finish();
  w5->Finish();
}

TEST_F(LimitsGrpcTest, AnOversizedRequestIsRefusedWithTheLimitOrByGrpc) {
  Start([](HubServerOptions& o) { o.limits.max_request_bytes = 2048; });
  // Just over the hub's limit: its own reason.
  const std::string over(2100, 'x');
  ExpectLimit(Register("agent-a", over), "LIMIT_EXCEEDED", "max_request_bytes",
              "2048");
  // Past twice the limit, gRPC refuses it unparsed: still RESOURCE_EXHAUSTED.
  const std::string far(5000, 'x');
  EXPECT_EQ(Register("agent-a", far).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Nothing was registered; a small request still works.
  EXPECT_FALSE(server_->presence()->Get("agent-a").ok());
  EXPECT_TRUE(Register("agent-a", "small").ok());
}

TEST_F(LimitsGrpcTest, RegistrationAndMessageLimitsComeFromTheOptions) {
  Start([](HubServerOptions& o) {
    o.presence.max_metadata_bytes = 16;
    o.messaging.max_payload_bytes = 32;
    o.messaging.max_pending_per_inbox = 2;
  });
  ExpectLimit(Register("agent-a", std::string(40, 'x')), "LIMIT_EXCEEDED",
              "max_metadata_bytes", "16");
  ASSERT_TRUE(Register("agent-b").ok());
  ExpectLimit(Publish("agent-b", std::string(40, 'x')), "LIMIT_EXCEEDED",
              "max_payload_bytes", "32");
  std::string first, second;
  ASSERT_TRUE(Publish("agent-b", "1", &first).ok());
  ASSERT_TRUE(Publish("agent-b", "2", &second).ok());
  ExpectLimit(Publish("agent-b", "3"), "LIMIT_EXCEEDED",
              "max_pending_per_inbox", "2");
  // Both accepted messages are still pending, unchanged.
  grpc::ClientContext context;
  hub::v1::ListPendingRequest request;
  request.set_agent_id("agent-b");
  hub::v1::ListPendingResponse response;
  ASSERT_TRUE(messages_->ListPending(&context, request, &response).ok());
  ASSERT_EQ(response.deliveries_size(), 2);
  std::vector<std::string> ids;
  for (const auto& d : response.deliveries())
    ids.push_back(d.message().message_id());
  EXPECT_NE(std::find(ids.begin(), ids.end(), first), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), second), ids.end());
}

TEST_F(LimitsGrpcTest, ASilentPresenceStreamEndsAfterTheIdleTimeout) {
  Start([](HubServerOptions& o) {
    o.limits.idle_stream_timeout = absl::Milliseconds(300);
  });
  int64_t generation = 0;
  ASSERT_TRUE(Register("agent-a", "", &generation).ok());
  // Before the stream opens, so the idle clock (started when the hub admits
  // the stream) cannot have started earlier, however late the client reads.
  const absl::Time start = absl::Now();
  grpc::ClientContext context;
  auto stream = presence_->Attach(&context);
  AttachRequest hello;
  hello.mutable_hello()->set_agent_id("agent-a");
  hello.mutable_hello()->set_presence_generation(generation);
  ASSERT_TRUE(stream->Write(hello));
  AttachResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_TRUE(response.has_attached());
  while (stream->Read(&response)) {
  }
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  ExpectLimit(stream->Finish(), "LIMIT_EXCEEDED", "idle_stream_timeout_ms",
              "300");
  // The agent itself is untouched: its lease runs on.
  EXPECT_TRUE(server_->presence()->Get("agent-a").ok());
}

TEST_F(LimitsGrpcTest, AClientThatPingsTooOftenLosesItsConnection) {
  Start([](HubServerOptions& o) {
    o.min_client_ping_interval = absl::Seconds(10);
    o.max_ping_strikes = 1;
  });
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  auto channel = grpc::CreateCustomChannel(
      server_->address(), grpc::InsecureChannelCredentials(), args);
  auto roles = hub::v1::RoleService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  hub::v1::WatchRolesRequest request;
  auto watch = roles->WatchRoles(&context, request);
  hub::v1::WatchRolesResponse response;
  ASSERT_TRUE(watch->Read(&response));  // open and quiet from now on
  while (watch->Read(&response)) {
  }
  // GOAWAY (too_many_pings) ends the quiet watch with UNAVAILABLE long
  // before its deadline.
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace hub
