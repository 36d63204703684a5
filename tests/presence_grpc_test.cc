// PresenceService through gRPC against an in-process HubServer: every
// registration error code, the fencing scenarios, the presence stream and
// a restart.
#include <dirent.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "hub/cluster/membership_keeper.h"
#include "hub/server.h"
#include "hub/v1/presence.grpc.pb.h"
#include "tests/hub_test_util.h"

namespace hub {
namespace {

using testing::Reason;

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

class PresenceGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    db_path_ = TmpPath(absl::StrCat(info->name(), ".sqlite"));
    for (const char* ext : {"", "-wal", "-shm"}) {
      std::remove(absl::StrCat(db_path_, ext).c_str());
    }
    Start();
  }

  void Start(absl::Duration tick_interval = absl::Milliseconds(20)) {
    HubServerOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = db_path_;
    options.presence.detach_grace = absl::Milliseconds(300);
    options.tick_interval = tick_interval;
    auto server = HubServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    server_->presence()->SetGoneListener(
        [this](const std::string& id, int64_t gen, AgentGoneReason reason) {
          absl::MutexLock lock(&mu_);
          gone_.push_back(
              absl::StrCat(id, "@", gen, ":", AgentGoneReasonName(reason)));
        });
    channel_ = grpc::CreateChannel(server_->address(),
                                   grpc::InsecureChannelCredentials());
    stub_ = hub::v1::PresenceService::NewStub(channel_);
  }

  void Restart(absl::Duration tick_interval = absl::Milliseconds(20)) {
    stub_.reset();
    channel_.reset();
    server_.reset();
    Start(tick_interval);
  }

  hub::v1::RegisterAgentRequest Request(const std::string& agent_id,
                                        const std::string& cli = "claude") {
    hub::v1::RegisterAgentRequest r;
    r.set_agent_id(agent_id);
    r.set_cli(cli == "codex" ? hub::v1::AGENT_CLI_CODEX
                             : hub::v1::AGENT_CLI_CLAUDE);
    return r;
  }

  grpc::Status Register(const hub::v1::RegisterAgentRequest& request,
                        hub::v1::RegisterAgentResponse* response = nullptr) {
    grpc::ClientContext context;
    hub::v1::RegisterAgentResponse ignored;
    return stub_->RegisterAgent(&context, request,
                                response ? response : &ignored);
  }

  int64_t RegisterOk(const std::string& agent_id) {
    hub::v1::RegisterAgentResponse response;
    grpc::Status s = Register(Request(agent_id), &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.presence_generation();
  }

  grpc::Status Heartbeat(const std::string& agent_id,
                         std::optional<int64_t> gen) {
    grpc::ClientContext context;
    hub::v1::HeartbeatRequest request;
    request.set_agent_id(agent_id);
    if (gen.has_value()) request.set_presence_generation(*gen);
    hub::v1::HeartbeatResponse response;
    return stub_->Heartbeat(&context, request, &response);
  }

  grpc::Status GetAgent(const std::string& agent_id, hub::v1::Agent* agent) {
    grpc::ClientContext context;
    hub::v1::GetAgentRequest request;
    request.set_agent_id(agent_id);
    hub::v1::GetAgentResponse response;
    grpc::Status s = stub_->GetAgent(&context, request, &response);
    if (agent != nullptr) *agent = response.agent();
    return s;
  }

  std::vector<std::string> gone() {
    absl::MutexLock lock(&mu_);
    return gone_;
  }

  std::string db_path_;
  // Declared before server_ so that they outlive it: the server's ticker
  // may call the gone listener, which writes gone_, until it has stopped.
  absl::Mutex mu_;
  std::vector<std::string> gone_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<HubServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<hub::v1::PresenceService::Stub> stub_;
};

// A locator that passes every rule; cases below break one rule each.
hub::v1::TransportLocator TmuxLocator() {
  hub::v1::TransportLocator l;
  l.set_schema_version("tfx.transport-locator.v1");
  l.set_transport_id("trn_tmux1");
  l.set_kind(hub::v1::TRANSPORT_KIND_TMUX);
  l.set_host_id("hst_host1");
  l.add_capabilities(hub::v1::TRANSPORT_CAPABILITY_PROBE);
  l.add_capabilities(hub::v1::TRANSPORT_CAPABILITY_WAKE);
  l.set_priority(100);
  l.mutable_expires_at()->set_seconds((NowMs() + 20'000) / 1000);
  l.mutable_tmux()->set_session_name("work");
  l.mutable_tmux()->set_mux_server_id("mux_1");
  return l;
}

hub::v1::TransportLocator UdsLocator() {
  hub::v1::TransportLocator l = TmuxLocator();
  l.set_transport_id("trn_uds1");
  l.set_kind(hub::v1::TRANSPORT_KIND_CLAUDE_UDS);
  l.mutable_claude_uds()->set_session_id("sess1");
  l.mutable_claude_uds()->set_bridge_id("local-hub");
  return l;
}

std::string LocatorJson(const std::string& patch) {
  return absl::StrCat(
      R"([{"schema_version":"tfx.transport-locator.v1","transport_id":"trn_1",)",
      R"("kind":"tmux","host_id":"hst_h","capabilities":["probe"],"priority":)",
      patch.empty() ? "1" : patch, R"(,"expires_at_ms":)", NowMs() + 20'000,
      R"(,"locator":{"session_name":"s","mux_server_id":"m"}}])");
}

TEST_F(PresenceGrpcTest,
       EveryIdentityAndLocatorErrorIsInvalidArgumentWithItsReason) {
  struct Case {
    std::string reason;
    std::function<void(hub::v1::RegisterAgentRequest&)> mutate;
  };
  std::vector<Case> cases = {
      {"PROJECT_ID_INVALID", [](auto& r) { r.set_project_id("prj_nope"); }},
      {"SESSION_ID_INVALID",
       [](auto& r) { r.set_session_id(std::string(257, 's')); }},
      {"HOST_ID_INVALID", [](auto& r) { r.set_host_id("host"); }},
      {"TRANSPORT_LOCATORS_JSON_INVALID",
       [](auto& r) { r.set_transport_locators_json("[{"); }},
      {"TRANSPORT_LOCATORS_INVALID",
       [](auto& r) { r.set_transport_locators_json("{}"); }},
      {"HEARTBEAT_TTL_INVALID",
       [](auto& r) { r.mutable_heartbeat_ttl()->set_seconds(3); }},
      {"TRANSPORT_LOCATOR_INVALID",
       [](auto& r) {
         *r.add_transport_locators() = TmuxLocator();
         r.mutable_transport_locators(0)->clear_tmux();
       }},
      {"TRANSPORT_LOCATOR_SCHEMA_UNSUPPORTED",
       [](auto& r) {
         auto l = TmuxLocator();
         l.set_schema_version("v0");
         *r.add_transport_locators() = l;
       }},
      {"TRANSPORT_ID_INVALID",
       [](auto& r) {
         auto l = TmuxLocator();
         l.set_transport_id("a b");
         *r.add_transport_locators() = l;
       }},
      {"TRANSPORT_KIND_UNSUPPORTED",
       [](auto& r) {
         auto l = TmuxLocator();
         l.set_kind(hub::v1::TRANSPORT_KIND_UNSPECIFIED);
         *r.add_transport_locators() = l;
       }},
      {"CODEX_TRANSPORT_UNSUPPORTED",
       [](auto& r) {
         r.set_cli(hub::v1::AGENT_CLI_CODEX);
         *r.add_transport_locators() = UdsLocator();
       }},
      {"TRANSPORT_CAPABILITIES_INVALID",
       [](auto& r) {
         auto l = TmuxLocator();
         l.add_capabilities(hub::v1::TRANSPORT_CAPABILITY_PROBE);
         *r.add_transport_locators() = l;
       }},
      {"TRANSPORT_PRIORITY_INVALID",
       [](auto& r) { r.set_transport_locators_json(LocatorJson("1.5")); }},
      {"TRANSPORT_EXPIRY_INVALID",
       [](auto& r) {
         auto l = TmuxLocator();
         l.mutable_expires_at()->set_seconds(NowMs() / 1000 + 3600);
         *r.add_transport_locators() = l;
       }},
      {"CLAUDE_UDS_SESSION_REQUIRED",
       [](auto& r) {
         auto l = UdsLocator();
         l.mutable_claude_uds()->clear_session_id();
         *r.add_transport_locators() = l;
       }},
      {"CLAUDE_UDS_SESSION_INVALID",
       [](auto& r) {
         auto l = UdsLocator();
         l.mutable_claude_uds()->set_session_id("a b");
         *r.add_transport_locators() = l;
       }},
      {"CLAUDE_UDS_SHORT_INVALID",
       [](auto& r) {
         auto l = UdsLocator();
         l.mutable_claude_uds()->set_short_(std::string(129, 's'));
         *r.add_transport_locators() = l;
       }},
      {"CLAUDE_UDS_BRIDGE_INVALID",
       [](auto& r) {
         auto l = UdsLocator();
         l.mutable_claude_uds()->set_bridge_id("");
         *r.add_transport_locators() = l;
       }},
      {"TMUX_SESSION_INVALID",
       [](auto& r) {
         auto l = TmuxLocator();
         l.mutable_tmux()->set_session_name("");
         *r.add_transport_locators() = l;
       }},
      {"TMUX_SERVER_INVALID",
       [](auto& r) {
         auto l = TmuxLocator();
         l.mutable_tmux()->set_mux_server_id("m x");
         *r.add_transport_locators() = l;
       }},
      {"AGENT_ID_INVALID", [](auto& r) { r.set_agent_id("x"); }},
      {"AGENT_CLI_INVALID",
       [](auto& r) { r.set_cli(hub::v1::AGENT_CLI_UNSPECIFIED); }},
  };
  for (const Case& c : cases) {
    hub::v1::RegisterAgentRequest request = Request("agent-bad");
    c.mutate(request);
    grpc::Status s = Register(request);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.reason;
    EXPECT_EQ(Reason(s), c.reason) << s.error_message();
  }
  // Nothing was written by any of them.
  EXPECT_EQ(Reason(GetAgent("agent-bad", nullptr)), "AGENT_NOT_FOUND");
}

TEST_F(PresenceGrpcTest, RegistrationStoresTheNormalizedIdentity) {
  hub::v1::RegisterAgentRequest request = Request("session:codex1", "codex");
  request.set_project_id("prj_AAAAAAAAAAAAAAAAAAAAAA");
  request.set_session_id("  s-1 ");
  request.set_host_id("hst_host1");
  *request.add_transport_locators() = TmuxLocator();
  request.add_topics("builds");
  request.add_capabilities("role:cto:candidate");
  hub::v1::RegisterAgentResponse response;
  ASSERT_TRUE(Register(request, &response).ok());
  EXPECT_EQ(response.presence_generation(), 1);
  EXPECT_EQ(response.hub_instance_id(), server_->identity().hub_instance_id);
  EXPECT_EQ(response.store_fingerprint(),
            server_->identity().store_fingerprint);
  hub::v1::Agent agent;
  ASSERT_TRUE(GetAgent("session:codex1", &agent).ok());
  EXPECT_EQ(agent.project_id(), "prj_AAAAAAAAAAAAAAAAAAAAAA");
  EXPECT_EQ(agent.session_id(), "s-1");
  EXPECT_EQ(agent.host_id(), "hst_host1");
  ASSERT_EQ(agent.transport_locators_size(), 1);
  EXPECT_EQ(agent.transport_locators(0).tmux().session_name(), "work");
  EXPECT_NE(agent.transport_locators_json().find("\"trn_tmux1\""),
            std::string::npos);
  EXPECT_TRUE(agent.live());
  EXPECT_EQ(agent.status(), hub::v1::AGENT_STATUS_ONLINE);
}

TEST_F(PresenceGrpcTest, ALateHeartbeatOrDeregisterFromTheOldOwnerIsRejected) {
  EXPECT_EQ(RegisterOk("agent-a"), 1);
  EXPECT_EQ(RegisterOk("agent-a"), 2);
  grpc::Status hb = Heartbeat("agent-a", 1);
  EXPECT_EQ(hb.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(hb), "STALE_PRESENCE_OWNER");
  grpc::ClientContext context;
  hub::v1::DeregisterRequest dereg;
  dereg.set_agent_id("agent-a");
  dereg.set_presence_generation(1);
  hub::v1::DeregisterResponse dereg_response;
  grpc::Status d = stub_->Deregister(&context, dereg, &dereg_response);
  EXPECT_EQ(Reason(d), "STALE_PRESENCE_OWNER");
  hub::v1::Agent agent;
  ASSERT_TRUE(GetAgent("agent-a", &agent).ok());
  EXPECT_EQ(agent.status(), hub::v1::AGENT_STATUS_ONLINE);
  EXPECT_EQ(agent.presence_generation(), 2);
  EXPECT_TRUE(Heartbeat("agent-a", 2).ok());
  EXPECT_TRUE(Heartbeat("agent-a", std::nullopt).ok());  // legacy
}

TEST_F(PresenceGrpcTest, ListAgentsFiltersByStatusAndPages) {
  for (const char* id : {"agent-1", "agent-2", "agent-3"}) RegisterOk(id);
  grpc::ClientContext context;
  hub::v1::ListAgentsRequest request;
  request.set_page_size(2);
  request.add_statuses(hub::v1::AGENT_STATUS_ONLINE);
  hub::v1::ListAgentsResponse response;
  ASSERT_TRUE(stub_->ListAgents(&context, request, &response).ok());
  ASSERT_EQ(response.agents_size(), 2);
  EXPECT_EQ(response.agents(0).agent_id(), "agent-1");
  EXPECT_FALSE(response.next_page_token().empty());
  grpc::ClientContext bad_context;
  request.set_page_token("forged");
  EXPECT_EQ(Reason(stub_->ListAgents(&bad_context, request, &response)),
            "PAGE_TOKEN_INVALID");
}

// A presence stream held by the test.
class Stream {
 public:
  explicit Stream(hub::v1::PresenceService::Stub* stub)
      : rw_(stub->Attach(&context_)) {}
  bool Hello(const std::string& agent_id, int64_t generation) {
    AttachRequest request;
    request.set_frame_id(1);
    request.mutable_hello()->set_agent_id(agent_id);
    request.mutable_hello()->set_presence_generation(generation);
    return rw_->Write(request);
  }
  bool Heartbeat(int64_t frame_id) {
    AttachRequest request;
    request.set_frame_id(frame_id);
    request.mutable_heartbeat();
    return rw_->Write(request);
  }
  bool Write(const AttachRequest& request) { return rw_->Write(request); }
  void WritesDone() { rw_->WritesDone(); }
  bool Read(AttachResponse* response) { return rw_->Read(response); }
  grpc::Status Close() {
    rw_->WritesDone();
    AttachResponse ignored;
    while (rw_->Read(&ignored)) {
    }
    return rw_->Finish();
  }
  grpc::Status Finish() { return rw_->Finish(); }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<AttachRequest, AttachResponse>> rw_;
};

TEST_F(PresenceGrpcTest, AStreamAttachesAndAnswersHeartbeatsWithLeaseAcks) {
  const int64_t gen = RegisterOk("agent-a");
  Stream stream(stub_.get());
  ASSERT_TRUE(stream.Hello("agent-a", gen));
  AttachResponse response;
  ASSERT_TRUE(stream.Read(&response));
  ASSERT_TRUE(response.has_attached());
  EXPECT_EQ(response.frame_id(), 1);
  EXPECT_EQ(response.attached().presence_generation(), gen);
  EXPECT_TRUE(response.attached().agent().stream_attached());
  ASSERT_TRUE(stream.Heartbeat(7));
  ASSERT_TRUE(stream.Read(&response));
  ASSERT_TRUE(response.has_lease_ack());
  EXPECT_EQ(response.frame_id(), 7);
  EXPECT_GT(
      absl::FromUnixSeconds(response.lease_ack().lease_expires_at().seconds()),
      absl::Now());
  EXPECT_TRUE(stream.Close().ok());
}

TEST_F(PresenceGrpcTest, FramesReadBeforeAHalfCloseAreAnsweredBeforeTheEnd) {
  const int64_t gen = RegisterOk("agent-a");
  for (int round = 0; round < 20; ++round) {
    Stream stream(stub_.get());
    ASSERT_TRUE(stream.Hello("agent-a", gen));
    AttachResponse response;
    ASSERT_TRUE(stream.Read(&response));
    ASSERT_TRUE(response.has_attached());
    // An ack frame is answered after a write (here its refusal), which
    // the half-close right behind it must not cut off.
    AttachRequest ack;
    ack.set_frame_id(9);
    ack.mutable_message_ack();
    ASSERT_TRUE(stream.Write(ack));
    stream.WritesDone();
    bool answered = false;
    while (stream.Read(&response)) {
      if (response.frame_id() == 9 && response.has_frame_error()) {
        answered = true;
      }
    }
    EXPECT_TRUE(answered) << "round " << round;
    EXPECT_TRUE(stream.Finish().ok());
  }
}

TEST_F(PresenceGrpcTest,
       AReRegistrationEndsTheOldStreamWithStalePresenceOwner) {
  const int64_t gen = RegisterOk("agent-a");
  Stream stream(stub_.get());
  ASSERT_TRUE(stream.Hello("agent-a", gen));
  AttachResponse response;
  ASSERT_TRUE(stream.Read(&response));
  RegisterOk("agent-a");
  ASSERT_TRUE(stream.Read(&response));
  ASSERT_TRUE(response.event().has_fencing());
  EXPECT_EQ(response.event().fencing().reason(),
            hub::v1::ERROR_REASON_STALE_PRESENCE_OWNER);
  EXPECT_EQ(response.event().fencing().current_presence_generation(), gen + 1);
  EXPECT_FALSE(stream.Read(&response));
  grpc::Status end = stream.Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Reason(end), "STALE_PRESENCE_OWNER");
}

// A hub that shares its database and loses its seat drops every stream it
// holds (MembershipKeeper::Lose); each is told why before it ends.
TEST_F(PresenceGrpcTest, AStreamEndedBecauseItsHubLostItsSeatIsToldWhyFirst) {
  const int64_t gen = RegisterOk("agent-a");
  Stream stream(stub_.get());
  ASSERT_TRUE(stream.Hello("agent-a", gen));
  AttachResponse response;
  ASSERT_TRUE(stream.Read(&response));
  ASSERT_TRUE(response.has_attached());
  server_->presence()->DropHolds(SeatLostStatus("lease_not_renewed_in_time"));
  ASSERT_TRUE(stream.Read(&response));
  ASSERT_TRUE(response.event().has_fencing()) << response.DebugString();
  EXPECT_EQ(response.event().fencing().reason(),
            hub::v1::ERROR_REASON_HUB_SEAT_LOST);
  EXPECT_EQ(response.event().fencing().hub_instance_id(),
            server_->identity().hub_instance_id);
  EXPECT_FALSE(stream.Read(&response));
  grpc::Status end = stream.Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Reason(end), "HUB_SEAT_LOST");
}

TEST_F(PresenceGrpcTest, AStreamEndedByTheHubShuttingDownIsToldWhyFirst) {
  const int64_t gen = RegisterOk("agent-a");
  Stream stream(stub_.get());
  ASSERT_TRUE(stream.Hello("agent-a", gen));
  AttachResponse response;
  ASSERT_TRUE(stream.Read(&response));
  ASSERT_TRUE(response.has_attached());
  std::thread shutdown([this] { server_->Shutdown(); });
  ASSERT_TRUE(stream.Read(&response));
  ASSERT_TRUE(response.event().has_fencing()) << response.DebugString();
  EXPECT_EQ(response.event().fencing().reason(),
            hub::v1::ERROR_REASON_HUB_SHUTTING_DOWN);
  EXPECT_FALSE(stream.Read(&response));
  grpc::Status end = stream.Finish();
  shutdown.join();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Reason(end), "HUB_SHUTTING_DOWN");
}

TEST_F(PresenceGrpcTest, AHelloWithAStaleGenerationIsEvicted) {
  RegisterOk("agent-a");
  RegisterOk("agent-a");
  Stream stream(stub_.get());
  ASSERT_TRUE(stream.Hello("agent-a", 1));
  AttachResponse response;
  ASSERT_TRUE(stream.Read(&response));
  EXPECT_TRUE(response.event().has_fencing());
  EXPECT_FALSE(stream.Read(&response));
  EXPECT_EQ(Reason(stream.Finish()), "STALE_PRESENCE_OWNER");
}

TEST_F(PresenceGrpcTest, AFirstFrameThatIsNotHelloIsInvalidArgument) {
  Stream stream(stub_.get());
  ASSERT_TRUE(stream.Heartbeat(1));
  AttachResponse response;
  EXPECT_FALSE(stream.Read(&response));
  grpc::Status end = stream.Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Reason(end), "REQUEST_INVALID");
}

TEST_F(PresenceGrpcTest,
       AfterTheStreamEndsTheGraceRunsOutAndTheAgentCountsAsGone) {
  const int64_t gen = RegisterOk("agent-a");
  {
    Stream stream(stub_.get());
    ASSERT_TRUE(stream.Hello("agent-a", gen));
    AttachResponse response;
    ASSERT_TRUE(stream.Read(&response));
    EXPECT_TRUE(stream.Close().ok());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (gone().empty() && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(20));
  ASSERT_EQ(gone().size(), 1u);
  EXPECT_EQ(gone()[0], "agent-a@1:stream_grace_expired");
  hub::v1::Agent agent;
  ASSERT_TRUE(GetAgent("agent-a", &agent).ok());
  EXPECT_EQ(agent.status(),
            hub::v1::AGENT_STATUS_ONLINE);  // the lease still runs
}

TEST_F(PresenceGrpcTest, TheGraceEndsOnTimeNotOnTheTickAfterIt) {
  // A slow ticker: the grace (300 ms) must still end when it ends.
  Restart(absl::Seconds(10));
  const int64_t gen = RegisterOk("agent-a");
  absl::Time closed;
  {
    Stream stream(stub_.get());
    ASSERT_TRUE(stream.Hello("agent-a", gen));
    AttachResponse response;
    ASSERT_TRUE(stream.Read(&response));
    EXPECT_TRUE(stream.Close().ok());
    closed = absl::Now();
  }
  while (gone().empty() && absl::Now() < closed + absl::Seconds(20))
    absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(gone().size(), 1u);
  EXPECT_EQ(gone()[0], "agent-a@1:stream_grace_expired");
  EXPECT_LT(absl::Now() - closed, absl::Seconds(5))
      << "the agent counted as gone only at a regular tick";
}

TEST_F(PresenceGrpcTest, AgentsSurviveARestartAndOldHubIdentitiesAreRejected) {
  hub::v1::RegisterAgentResponse registered;
  ASSERT_TRUE(Register(Request("agent-a"), &registered).ok());
  Restart();
  hub::v1::Agent agent;
  ASSERT_TRUE(GetAgent("agent-a", &agent).ok());
  EXPECT_EQ(agent.presence_generation(), 1);
  EXPECT_EQ(agent.status(), hub::v1::AGENT_STATUS_ONLINE);
  EXPECT_NE(server_->identity().hub_instance_id, registered.hub_instance_id());
  EXPECT_EQ(server_->identity().store_fingerprint,
            registered.store_fingerprint());
  grpc::ClientContext context;
  hub::v1::HeartbeatRequest request;
  request.set_agent_id("agent-a");
  request.set_presence_generation(1);
  request.set_hub_instance_id(registered.hub_instance_id());
  hub::v1::HeartbeatResponse response;
  grpc::Status s = stub_->Heartbeat(&context, request, &response);
  EXPECT_EQ(Reason(s), "STALE_HUB_INSTANCE");
  EXPECT_TRUE(Heartbeat("agent-a", 1).ok());
}

int OpenFds() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir) != nullptr) ++n;
    closedir(dir);
  }
  return n;
}

TEST_F(PresenceGrpcTest, AThousandStreamsOpenAndCloseWithoutLeaks) {
  constexpr int kStreams = 1000;
  const int fds_before = OpenFds();
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    const std::string id = absl::StrCat("agent-", i);
    const int64_t gen = RegisterOk(id);
    streams.push_back(std::make_unique<Stream>(stub_.get()));
    ASSERT_TRUE(streams.back()->Hello(id, gen));
  }
  for (auto& stream : streams) {
    AttachResponse response;
    ASSERT_TRUE(stream->Read(&response));
    ASSERT_TRUE(response.has_attached());
  }
  EXPECT_EQ(server_->presence()->Counts().open_streams, kStreams);
  for (auto& stream : streams) EXPECT_TRUE(stream->Close().ok());
  streams.clear();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server_->presence()->Counts().open_streams > 0 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(server_->presence()->Counts().open_streams, 0);
  // One channel carries every stream: no descriptor per stream may remain.
  // Some may be new for good reasons: the store opens read connections on
  // demand (three descriptors each with the WAL, more of them on a loaded
  // machine), gRPC its wake-up fds. A leak per stream would be ~1000.
  EXPECT_LT(OpenFds(), fds_before + kStreams / 10);
}

}  // namespace
}  // namespace hub
