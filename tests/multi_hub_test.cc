// Several real hubd processes over one real PostgreSQL database the test
// starts (docs/design/multi-hub.md), through the public API: a hub that is
// killed has its agents taken over by another, which fails the role its
// agent held over to a candidate attached to it; a hub paused past its
// lease comes back without its agents and hands nothing out; an agent that
// moves to another hub within its detach grace keeps its role; a role is
// elected through any hub, whichever hub its candidate is attached to; a
// reservation watcher on one hub sees the reservations made through every
// hub, each change once, in commit order.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hub/v1/hub.grpc.pb.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/reservation.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "storage/pg/pg_conn.h"
#include "storage/pg/pg_test_database.h"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"
#include "tests/hubd_process.h"

namespace hub {
namespace {

using testing::AttachedAgent;
using testing::HubdProcess;

// Short enough for a test, long enough for a busy machine: a hub stops
// acting 400 ms before its 2 s lease could end.
const std::vector<std::string> kHubFlags = {
    "--hub_lease=2s", "--hub_renew_interval=400ms", "--detach_grace=1s"};

struct Hub {
  std::unique_ptr<HubdProcess> process;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence;
  std::unique_ptr<hub::v1::RoleService::Stub> roles;
  std::unique_ptr<hub::v1::HubService::Stub> status;
  std::unique_ptr<hub::v1::MessageService::Stub> messages;
  std::unique_ptr<hub::v1::ReservationService::Stub> reservations;
};

// One PostgreSQL server per suite and a fresh database per test
// (PgDatabaseTest), which the test's hubds share.
class MultiHubTest : public storage::pg::testing::PgDatabaseTest {
 protected:
  void SetUp() override {
    PgDatabaseTest::SetUp();
    url_ = absl::StrCat("postgresql://hub@/", database_,
                        "?host=", server_->directory());
  }

  Hub StartHub(const std::vector<std::string>& flags = kHubFlags) {
    Hub hub;
    hub.process = std::make_unique<HubdProcess>(url_, flags);
    absl::Status started = hub.process->Start();
    EXPECT_TRUE(started.ok()) << started;
    auto channel = grpc::CreateChannel(hub.process->address(),
                                       grpc::InsecureChannelCredentials());
    hub.presence = hub::v1::PresenceService::NewStub(channel);
    hub.roles = hub::v1::RoleService::NewStub(channel);
    hub.status = hub::v1::HubService::NewStub(channel);
    hub.messages = hub::v1::MessageService::NewStub(channel);
    hub.reservations = hub::v1::ReservationService::NewStub(channel);
    return hub;
  }

  // Registers `id` through `hub` and attaches its stream there.
  static AttachedAgent Agent(Hub& hub, const std::string& id) {
    return testing::AttachOk(hub.presence.get(), id,
                             testing::RegisterAgentOk(hub.presence.get(), id));
  }

  // `first` (priority 10) and `second` (priority 1) become cto
  // candidates, written through `hub`.
  static void Candidates(Hub& hub, const std::string& first,
                         const std::string& second) {
    testing::UpsertCandidateOk(hub.roles.get(), testing::CtoRoleKey(), first,
                               /*priority=*/10);
    testing::UpsertCandidateOk(hub.roles.get(), testing::CtoRoleKey(), second,
                               /*priority=*/1);
  }

  static hub::v1::Role GetRole(Hub& hub) {
    grpc::ClientContext context;
    hub::v1::GetRoleRequest request;
    *request.mutable_role_key() = testing::CtoRoleKey();
    hub::v1::GetRoleResponse response;
    grpc::Status s = hub.roles->GetRole(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.role();
  }

  // Makes `holder` (through `hub`) the active cto: candidates, an ensure,
  // the probe answered, the activation acknowledged.
  static hub::v1::RoleActivation MakeHolder(Hub& hub, AttachedAgent& holder,
                                            const std::string& holder_id) {
    testing::EnsureRoleOk(hub.roles.get(), testing::CtoRoleKey());
    const hub::v1::RoleActivation activation = testing::NextActivation(holder);
    EXPECT_EQ(activation.holder_agent_id(), holder_id);
    EXPECT_TRUE(holder.stream->Write(testing::ActivationAckFrame(activation)));
    hub::v1::AttachResponse answer;
    EXPECT_TRUE(testing::ReadSkippingRoleChanges(holder.stream.get(), &answer));
    EXPECT_TRUE(answer.has_activation_ack_result());
    return activation;
  }

  // `holder` acknowledges `activation`; read through `hub`, the role is
  // then active under it at the activation's epoch.
  static void AckAndExpectActive(Hub& hub, AttachedAgent& holder,
                                 const hub::v1::RoleActivation& activation) {
    ASSERT_TRUE(holder.stream->Write(testing::ActivationAckFrame(activation)));
    hub::v1::AttachResponse answer;
    ASSERT_TRUE(testing::ReadSkippingRoleChanges(holder.stream.get(), &answer));
    EXPECT_TRUE(answer.has_activation_ack_result()) << answer.DebugString();
    const hub::v1::Role role = GetRole(hub);
    EXPECT_EQ(role.state(), hub::v1::ROLE_STATE_ACTIVE);
    EXPECT_EQ(role.holder_agent_id(), activation.holder_agent_id());
    EXPECT_EQ(role.epoch(), activation.epoch());
  }

  // One value of the database, read with a connection of the test's own.
  std::string Sql(const std::string& query) {
    std::unique_ptr<storage::pg::Connection> conn = Connect();
    if (conn == nullptr) return "";
    absl::StatusOr<storage::pg::Result> r = conn->Exec(query);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || r->rows() == 0) return "";
    return std::string(r->Text(0, 0));
  }

  std::string url_;
};

TEST_F(MultiHubTest, AKilledHubsRoleHolderFailsOverToACandidateOnAnotherHub) {
  Hub a = StartHub();
  Hub b = StartHub();
  AttachedAgent holder = Agent(a, "agent-on-a");
  AttachedAgent standby = Agent(b, "agent-on-b");
  Candidates(a, "agent-on-a", "agent-on-b");
  const hub::v1::RoleActivation first = MakeHolder(a, holder, "agent-on-a");
  // Both hubs see the same role.
  EXPECT_EQ(GetRole(b).holder_agent_id(), "agent-on-a");

  const auto killed = std::chrono::steady_clock::now();
  a.process->Kill();
  // B finds A's lease over, takes over its agents, runs their detach grace,
  // and fails the role over to the candidate attached to it.
  const hub::v1::RoleActivation second = testing::NextActivation(standby);
  const auto took = std::chrono::steady_clock::now() - killed;
  EXPECT_EQ(second.holder_agent_id(), "agent-on-b");
  EXPECT_GT(second.epoch(), first.epoch());
  AckAndExpectActive(b, standby, second);
  EXPECT_EQ(Sql("SELECT state FROM hub_hubs WHERE hub_id = '" +
                a.process->instance_id() + "'"),
            "dead");
  std::printf(
      "failover after SIGKILL of the holder's hub: %lld ms "
      "(lease 2 s + detach grace 1 s + renewal period)\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}

TEST_F(MultiHubTest, AHubPausedPastItsLeaseComesBackHoldingNothing) {
  Hub a = StartHub();
  Hub b = StartHub();
  const int64_t holder_generation =
      testing::RegisterAgentOk(a.presence.get(), "agent-on-a");
  AttachedAgent holder =
      testing::AttachOk(a.presence.get(), "agent-on-a", holder_generation);
  AttachedAgent standby = Agent(b, "agent-on-b");
  Candidates(a, "agent-on-a", "agent-on-b");
  const hub::v1::RoleActivation first = MakeHolder(a, holder, "agent-on-a");
  const std::string seat_before =
      Sql("SELECT incarnation FROM hub_hubs WHERE hub_id = '" +
          a.process->instance_id() + "'");

  // A hangs (its connections stay open) past its lease; B takes over.
  a.process->Pause();
  const hub::v1::RoleActivation second = testing::NextActivation(standby);
  EXPECT_EQ(second.holder_agent_id(), "agent-on-b");
  EXPECT_GT(second.epoch(), first.epoch());
  ASSERT_TRUE(standby.stream->Write(testing::ActivationAckFrame(second)));

  // A runs again: before anything else it finds its lease over, ends the
  // stream it held (HUB_SEAT_LOST) and joins again under a new incarnation
  // that holds nothing of what B took.
  a.process->Resume();
  hub::v1::AttachResponse frame;
  std::optional<hub::v1::FencingNotice> notice;
  while (holder.stream->Read(&frame)) {
    // Nothing authoritative reaches the old holder from the paused hub.
    EXPECT_FALSE(frame.event().has_role_activation());
    EXPECT_FALSE(frame.event().has_role_probe());
    EXPECT_FALSE(notice.has_value()) << "a frame after the fencing notice";
    if (frame.event().has_fencing()) notice = frame.event().fencing();
  }
  grpc::Status ended = holder.stream->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE)
      << ended.error_message();
  EXPECT_EQ(testing::Reason(ended), "HUB_SEAT_LOST");
  // The stream was told why, last, before it ended.
  ASSERT_TRUE(notice.has_value());
  EXPECT_EQ(notice->reason(), hub::v1::ERROR_REASON_HUB_SEAT_LOST);
  EXPECT_EQ(notice->hub_instance_id(), a.process->instance_id());
  // The role stays with B's agent, at B's epoch.
  const hub::v1::Role role = GetRole(b);
  EXPECT_EQ(role.holder_agent_id(), "agent-on-b");
  EXPECT_EQ(role.epoch(), second.epoch());
  // A serves again once rejoined; its agent comes back by attaching.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::string seat_after;
  while (absl::Now() < deadline) {
    seat_after = Sql("SELECT incarnation FROM hub_hubs WHERE hub_id = '" +
                     a.process->instance_id() + "' AND state = 'live'");
    if (!seat_after.empty() && seat_after != seat_before) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_GT(std::stoll(seat_after), std::stoll(seat_before));
  // B took the agent over, ran its grace and let it go: no hub holds it.
  EXPECT_EQ(Sql("SELECT COALESCE(stream_hub_id, 'none') FROM agents WHERE "
                "agent_id = 'agent-on-a'"),
            "none");
  AttachedAgent again =
      testing::AttachOk(a.presence.get(), "agent-on-a", holder_generation);
  EXPECT_EQ(Sql("SELECT stream_hub_id FROM agents WHERE agent_id = "
                "'agent-on-a'"),
            a.process->instance_id());
}

// A heartbeat of an agent the hub holds is answered from memory (leases are
// checkpointed, docs/design/presence.md): with the database out of reach it
// is answered OK while the hub's seat is live by its own clock, which is
// what lets the hub act at all (no other hub can take the agent before the
// seat's lease ends in the database's clock), and STORE_UNAVAILABLE once
// that deadline passed, like every call that needs the database meanwhile.
TEST_F(MultiHubTest, AHeartbeatIsAnsweredFromMemoryOnlyUntilTheSeatDeadline) {
  // A long lease, so that "before the deadline" does not depend on how
  // fast a busy machine stops the server: the hub acts until 8 s after its
  // last renewal.
  constexpr absl::Duration kLease = absl::Seconds(10);
  Hub a = StartHub(
      {"--hub_lease=10s", "--hub_renew_interval=400ms", "--detach_grace=1s"});
  const int64_t generation =
      testing::RegisterAgentOk(a.presence.get(), "agent-1");
  auto heartbeat = [&]() {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    hub::v1::HeartbeatRequest request;
    request.set_agent_id("agent-1");
    request.set_presence_generation(generation);
    hub::v1::HeartbeatResponse response;
    return a.presence->Heartbeat(&context, request, &response);
  };
  ASSERT_TRUE(heartbeat().ok());

  ASSERT_TRUE(server_->Stop("fast").ok());
  const absl::Time stopped = absl::Now();
  // Whatever happens below, the next tests get their server back.
  struct Restart {
    storage::pg::testing::PgTestServer* server;
    bool done = false;
    ~Restart() {
      if (!done) (void)server->Start();
    }
  } restart{server_};

  // A call that needs the database says so at once.
  {
    grpc::ClientContext context;
    hub::v1::RegisterAgentRequest request;
    request.set_agent_id("agent-2");
    request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
    hub::v1::RegisterAgentResponse response;
    grpc::Status s = a.presence->RegisterAgent(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(testing::Reason(s), "STORE_UNAVAILABLE");
  }
  // The held agent's heartbeat is answered from memory: the seat is live.
  grpc::Status during = heartbeat();
  EXPECT_TRUE(during.ok()) << during.error_message();
  // Until the seat's deadline, at most the lease after the stop; then
  // STORE_UNAVAILABLE. No heartbeat sent after that is answered OK.
  grpc::Status refused;
  while (absl::Now() < stopped + absl::Seconds(60)) {
    const absl::Time sent = absl::Now();
    refused = heartbeat();
    if (!refused.ok()) break;
    EXPECT_LT(sent, stopped + kLease) << "answered OK past the seat deadline";
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.error_message();
  EXPECT_EQ(testing::Reason(refused), "STORE_UNAVAILABLE");

  // Back once the database is: the hub joins again and the heartbeat claims
  // the agent for it.
  ASSERT_TRUE(server_->Start().ok());
  restart.done = true;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  grpc::Status after = heartbeat();
  while (!after.ok() && absl::Now() < deadline) {
    EXPECT_EQ(after.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(testing::Reason(after),
                ::testing::AnyOf("STORE_UNAVAILABLE", "HUB_SEAT_LOST"));
    absl::SleepFor(absl::Milliseconds(50));
    after = heartbeat();
  }
  EXPECT_TRUE(after.ok()) << after.error_message();
}

TEST_F(MultiHubTest, AnAgentThatMovesToAnotherHubWithinItsGraceKeepsItsRole) {
  Hub a = StartHub();
  Hub b = StartHub();
  const int64_t generation =
      testing::RegisterAgentOk(a.presence.get(), "agent-mover");
  AttachedAgent holder =
      testing::AttachOk(a.presence.get(), "agent-mover", generation);
  AttachedAgent other = Agent(b, "agent-other");
  Candidates(a, "agent-mover", "agent-other");
  const hub::v1::RoleActivation first = MakeHolder(a, holder, "agent-mover");

  // The agent's connection to A ends; it attaches to B at once, at the
  // same generation, and the detach grace A started runs out.
  holder.context->TryCancel();
  AttachedAgent moved =
      testing::AttachOk(b.presence.get(), "agent-mover", generation);
  EXPECT_EQ(Sql("SELECT stream_hub_id FROM agents WHERE agent_id = "
                "'agent-mover'"),
            b.process->instance_id());
  // Past A's grace (1 s) and then some: A's release finds B holding the
  // agent, so it is not gone and the role is not failed over.
  const absl::Time until = absl::Now() + absl::Seconds(3);
  while (absl::Now() < until) {
    const hub::v1::Role role = GetRole(a);
    ASSERT_EQ(role.holder_agent_id(), "agent-mover");
    ASSERT_EQ(role.epoch(), first.epoch());
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(GetRole(b).state(), hub::v1::ROLE_STATE_ACTIVE);
}

TEST_F(MultiHubTest, AMessagePublishedThroughOneHubIsPushedByTheOtherHub) {
  Hub a = StartHub();
  Hub b = StartHub();
  AttachedAgent sender = Agent(a, "agent-sender");
  AttachedAgent recipient = Agent(b, "agent-recipient");
  // Published through A, which holds no stream of the recipient: B, hinted
  // after A's commit, pushes it. Several, so that a hint coalesced with
  // another and the poll both have work.
  constexpr int kMessages = 20;
  std::vector<int64_t> took_us;
  for (int i = 0; i < kMessages; ++i) {
    grpc::ClientContext context;
    hub::v1::PublishRequest request;
    request.set_from_agent_id("agent-sender");
    request.set_to("agent-recipient");
    request.set_topic(absl::StrCat("n", i));
    hub::v1::PublishResponse response;
    const auto sent = std::chrono::steady_clock::now();
    grpc::Status s = a.messages->Publish(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    hub::v1::AttachResponse frame;
    bool got = false;
    while (recipient.stream->Read(&frame)) {
      if (frame.event().has_message()) {
        got = true;
        break;
      }
    }
    ASSERT_TRUE(got) << "the recipient's stream ended";
    took_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - sent)
                          .count());
    const hub::v1::MessageDelivery& delivery = frame.event().message();
    EXPECT_EQ(delivery.message().message_id(), response.message_id());
    EXPECT_EQ(delivery.message().topic(), absl::StrCat("n", i));
  }
  std::sort(took_us.begin(), took_us.end());
  std::printf(
      "publish on hub A -> pushed on hub B: p50 %.1f ms, max %.1f ms "
      "over %d messages\n",
      took_us[took_us.size() / 2] / 1000.0, took_us.back() / 1000.0, kMessages);
}

TEST_F(MultiHubTest,
       AnEnsureThroughOneHubActivatesTheCandidateAttachedToAnother) {
  Hub a = StartHub();
  Hub b = StartHub();
  AttachedAgent candidate = Agent(a, "agent-on-a");
  testing::UpsertCandidateOk(b.roles.get(), testing::CtoRoleKey(),
                             "agent-on-a");
  // B reserves the role for A's agent and hands the flight to A, which
  // probes it and pushes the activation on the stream it holds.
  const auto asked = std::chrono::steady_clock::now();
  const hub::v1::EnsureRoleReceipt receipt =
      testing::EnsureRoleOk(b.roles.get(), testing::CtoRoleKey());
  EXPECT_EQ(receipt.disposition(), hub::v1::ENSURE_ROLE_DISPOSITION_STARTED);
  EXPECT_EQ(receipt.holder_agent_id(), "agent-on-a");
  const hub::v1::RoleActivation activation = testing::NextActivation(candidate);
  const auto took = std::chrono::steady_clock::now() - asked;
  EXPECT_EQ(activation.holder_agent_id(), "agent-on-a");
  EXPECT_EQ(activation.epoch(), receipt.epoch());
  AckAndExpectActive(b, candidate, activation);
  std::printf(
      "EnsureRole on hub B -> activation on hub A's stream: %lld ms\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}

// The hub an agent registered through held its presence until the agent
// attached elsewhere; having no write to make for it since, it is never
// told. Its elections must still reach the candidate through the hub whose
// stream holds it, and count no failure against it.
TEST_F(
    MultiHubTest,
    AnEnsureThroughTheHubACandidateRegisteredWithReachesItOnTheHubItAttachedTo) {
  Hub a = StartHub();
  Hub b = StartHub();
  const int64_t generation =
      testing::RegisterAgentOk(a.presence.get(), "agent-moved");
  // A deadline, so that a probe failed on A (the stream never gets an
  // activation) ends the test instead of hanging it.
  AttachedAgent candidate = testing::AttachOk(b.presence.get(), "agent-moved",
                                              generation, absl::Seconds(60));
  EXPECT_EQ(Sql("SELECT stream_hub_id FROM agents WHERE agent_id = "
                "'agent-moved'"),
            b.process->instance_id());
  testing::UpsertCandidateOk(a.roles.get(), testing::CtoRoleKey(),
                             "agent-moved");
  const auto asked = std::chrono::steady_clock::now();
  const hub::v1::EnsureRoleReceipt receipt =
      testing::EnsureRoleOk(a.roles.get(), testing::CtoRoleKey());
  EXPECT_EQ(receipt.disposition(), hub::v1::ENSURE_ROLE_DISPOSITION_STARTED);
  EXPECT_EQ(receipt.holder_agent_id(), "agent-moved");
  const hub::v1::RoleActivation activation = testing::NextActivation(candidate);
  const auto took = std::chrono::steady_clock::now() - asked;
  EXPECT_EQ(activation.holder_agent_id(), "agent-moved");
  EXPECT_EQ(activation.epoch(), receipt.epoch());
  AckAndExpectActive(a, candidate, activation);
  EXPECT_EQ(Sql("SELECT consecutive_probe_failures FROM role_candidates "
                "WHERE agent_id = 'agent-moved'"),
            "0");
  std::printf(
      "EnsureRole on hub A -> activation of A's registrant on hub B's "
      "stream: %lld ms\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}

// The hub an agent registered through is not told when the agent attaches
// to another hub; the lease its registration granted runs out there while
// the other hub's stream keeps the agent present. The role the agent holds
// stays with it.
TEST_F(
    MultiHubTest,
    AHolderAttachedToAnotherHubKeepsItsRolePastTheLeaseItsRegistrationGranted) {
  Hub a = StartHub();
  Hub b = StartHub();
  int64_t generation = 0;
  {
    grpc::ClientContext context;
    hub::v1::RegisterAgentRequest request;
    request.set_agent_id("agent-moved");
    request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
    request.set_project_id(testing::kStreamProject);
    request.add_capabilities("role:cto:candidate");
    request.mutable_heartbeat_ttl()->set_seconds(10);  // the least allowed
    hub::v1::RegisterAgentResponse registered;
    grpc::Status s = a.presence->RegisterAgent(&context, request, &registered);
    ASSERT_TRUE(s.ok()) << s.error_message();
    generation = registered.presence_generation();
  }
  const absl::Time registered_at = absl::Now();
  AttachedAgent holder = testing::AttachOk(b.presence.get(), "agent-moved",
                                           generation, absl::Seconds(90));
  testing::UpsertCandidateOk(b.roles.get(), testing::CtoRoleKey(),
                             "agent-moved");
  const hub::v1::RoleActivation activation =
      MakeHolder(b, holder, "agent-moved");
  // Past the registration's lease and A's next sweep, read through A.
  while (absl::Now() < registered_at + absl::Seconds(14)) {
    const hub::v1::Role role = GetRole(a);
    ASSERT_EQ(role.state(), hub::v1::ROLE_STATE_ACTIVE) << role.DebugString();
    ASSERT_EQ(role.holder_agent_id(), "agent-moved");
    ASSERT_EQ(role.epoch(), activation.epoch());
    absl::SleepFor(absl::Milliseconds(200));
  }
}

TEST_F(MultiHubTest, TwoHubsEnsuringTheSameRoleAtOnceMakeOneActivation) {
  Hub a = StartHub();
  Hub b = StartHub();
  AttachedAgent on_a = Agent(a, "agent-on-a");
  AttachedAgent on_b = Agent(b, "agent-on-b");
  // Equal priorities: whichever hub reserves first picks by the store's
  // order; the other one's ensure joins that flight.
  testing::UpsertCandidateOk(a.roles.get(), testing::CtoRoleKey(),
                             "agent-on-a");
  testing::UpsertCandidateOk(a.roles.get(), testing::CtoRoleKey(),
                             "agent-on-b");
  hub::v1::EnsureRoleReceipt receipts[2];
  std::thread through_a([&] {
    receipts[0] = testing::EnsureRoleOk(a.roles.get(), testing::CtoRoleKey());
  });
  std::thread through_b([&] {
    receipts[1] = testing::EnsureRoleOk(b.roles.get(), testing::CtoRoleKey());
  });
  through_a.join();
  through_b.join();
  for (const hub::v1::EnsureRoleReceipt& r : receipts) {
    EXPECT_TRUE(r.accepted()) << r.DebugString();
    EXPECT_TRUE(r.disposition() == hub::v1::ENSURE_ROLE_DISPOSITION_STARTED ||
                r.disposition() == hub::v1::ENSURE_ROLE_DISPOSITION_JOINED)
        << r.DebugString();
  }
  // One reservation: the role's row names one holder at one epoch, and
  // that holder's stream gets its activation.
  const hub::v1::Role reserved = GetRole(a);
  ASSERT_EQ(reserved.state(), hub::v1::ROLE_STATE_ELECTED_PROBING)
      << reserved.DebugString();
  AttachedAgent& holder =
      reserved.holder_agent_id() == "agent-on-a" ? on_a : on_b;
  AttachedAgent& other =
      reserved.holder_agent_id() == "agent-on-a" ? on_b : on_a;
  const hub::v1::RoleActivation activation = testing::NextActivation(holder);
  EXPECT_EQ(activation.holder_agent_id(), reserved.holder_agent_id());
  EXPECT_EQ(activation.epoch(), reserved.epoch());
  AckAndExpectActive(b, holder, activation);
  // The other candidate was never probed nor activated: everything its
  // stream carried until the role was active was a role change.
  other.context->TryCancel();
  hub::v1::AttachResponse frame;
  while (other.stream->Read(&frame)) {
    EXPECT_FALSE(frame.event().has_role_probe()) << frame.DebugString();
    EXPECT_FALSE(frame.event().has_role_activation()) << frame.DebugString();
  }
}

TEST_F(MultiHubTest,
       APublishThroughOneHubToARoleWithoutHolderElectsACandidateOfAnother) {
  Hub a = StartHub();
  Hub b = StartHub();
  AttachedAgent candidate = Agent(a, "agent-on-a");
  testing::UpsertCandidateOk(a.roles.get(), testing::CtoRoleKey(),
                             "agent-on-a");
  // Published through B to the cto, which has no holder: B's own ensure
  // (publish_no_holder) reserves A's agent and hands the flight to A.
  grpc::ClientContext context;
  hub::v1::PublishRequest request;
  request.set_from_agent_id("agent-sender");
  request.set_to("topic:cto");
  request.set_project_id(testing::kStreamProject);
  hub::v1::PublishResponse published;
  grpc::Status s = b.messages->Publish(&context, request, &published);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const hub::v1::RoleActivation activation = testing::NextActivation(candidate);
  EXPECT_EQ(activation.holder_agent_id(), "agent-on-a");
  ASSERT_TRUE(candidate.stream->Write(testing::ActivationAckFrame(activation)));
  // The ACK hands the backlog over, and A pushes it on the holder's stream.
  bool acked = false;
  bool delivered = false;
  hub::v1::AttachResponse frame;
  while ((!acked || !delivered) && candidate.stream->Read(&frame)) {
    if (frame.has_activation_ack_result()) {
      acked = true;
      EXPECT_EQ(frame.activation_ack_result().backlog_delivered_count(), 1);
    }
    if (frame.event().has_message()) {
      delivered = true;
      EXPECT_EQ(frame.event().message().message().message_id(),
                published.message_id());
    }
  }
  EXPECT_TRUE(acked);
  EXPECT_TRUE(delivered);
  EXPECT_EQ(GetRole(b).holder_agent_id(), "agent-on-a");
}

// Writers reserve and release through both hubs at once while a watcher on
// each hub follows the project: both streams carry the same changes, in
// the same increasing seq order, and end with exactly the live
// reservations.
constexpr char kReservationProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

TEST_F(MultiHubTest,
       AReservationWatcherOnEachHubSeesEveryHubsChangesOnceInCommitOrder) {
  const std::string kProject = kReservationProject;
  Hub a = StartHub();
  Hub b = StartHub();
  Hub* hubs[] = {&a, &b};
  constexpr int kWriters = 4;
  constexpr int kRounds = 30;
  for (int i = 0; i < kWriters; ++i) {
    testing::RegisterAgentOk(hubs[i % 2]->presence.get(),
                             absl::StrCat("w-", i));
  }
  testing::RegisterAgentOk(b.presence.get(), "marker");

  struct Watcher {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<hub::v1::WatchReservationsResponse>>
        reader;
    std::vector<std::string> log;  // "seq kind id" per change
    std::map<std::string, int64_t> live;
  };
  auto watch = [&](Hub& hub) {
    auto w = std::make_unique<Watcher>();
    w->context.set_deadline(
        absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    hub::v1::WatchReservationsRequest request;
    request.set_project_id(kProject);
    w->reader = hub.reservations->WatchReservations(&w->context, request);
    hub::v1::WatchReservationsResponse item;
    EXPECT_TRUE(w->reader->Read(&item));
    EXPECT_TRUE(item.has_snapshot_end()) << item.DebugString();
    return w;
  };
  std::unique_ptr<Watcher> on_a = watch(a);
  std::unique_ptr<Watcher> on_b = watch(b);

  auto reserve = [&kProject](Hub& hub, const std::string& agent,
                             const std::string& pattern) {
    hub::v1::ReserveRequest r;
    r.set_project_id(kProject);
    r.set_agent_id(agent);
    r.add_patterns(pattern);
    r.mutable_ttl()->set_seconds(600);
    grpc::ClientContext context;
    hub::v1::ReserveResponse response;
    grpc::Status s = hub.reservations->Reserve(&context, r, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.reservation();
  };
  std::vector<std::thread> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&, i] {
      Hub& hub = *hubs[i % 2];
      const std::string agent = absl::StrCat("w-", i);
      for (int k = 0; k < kRounds; ++k) {
        hub::v1::Reservation r =
            reserve(hub, agent, absl::StrCat("d", i, "/f", k));
        if (k % 3 == 2) continue;  // keep one in three
        hub::v1::ReleaseReservationRequest release;
        release.set_reservation_id(r.reservation_id());
        release.set_agent_id(agent);
        hub::v1::ReleaseReservationResponse released;
        grpc::ClientContext context;
        EXPECT_TRUE(
            hub.reservations->ReleaseReservation(&context, release, &released)
                .ok());
      }
    });
  }
  for (std::thread& t : writers) t.join();
  const hub::v1::Reservation marker = reserve(b, "marker", "zz-marker");

  auto follow = [&](Watcher& w) {
    int64_t last = 0;
    hub::v1::WatchReservationsResponse item;
    while (w.reader->Read(&item)) {
      const hub::v1::ReservationChange& c = item.change();
      EXPECT_GT(c.seq(), last);
      last = c.seq();
      const std::string& id = c.reservation().reservation_id();
      w.log.push_back(absl::StrCat(c.seq(), " ", c.kind(), " ", id));
      if (c.kind() == hub::v1::RESERVATION_CHANGE_KIND_GRANTED) {
        EXPECT_EQ(w.live.count(id), 0u) << "granted twice " << id;
        w.live[id] = c.reservation().token();
      } else {
        EXPECT_EQ(c.kind(), hub::v1::RESERVATION_CHANGE_KIND_RELEASED);
        EXPECT_EQ(w.live.erase(id), 1u) << "released unknown " << id;
      }
      if (id == marker.reservation_id()) return;
    }
    ADD_FAILURE() << "watch ended: " << w.reader->Finish().error_message();
  };
  std::thread follow_a([&] { follow(*on_a); });
  follow(*on_b);
  follow_a.join();

  const size_t changes = kWriters * (kRounds + 2 * kRounds / 3) + 1;
  EXPECT_EQ(on_a->log.size(), changes);
  EXPECT_EQ(on_a->log, on_b->log);
  EXPECT_EQ(on_a->live.size(), static_cast<size_t>(kWriters * kRounds / 3 + 1));
  EXPECT_EQ(on_a->live, on_b->live);
}

// Waiting reserves through two hubs over one PostgreSQL: the first waiter
// (through hub B) gets the path before the second (through hub A) when the
// holder (through hub B) releases it, and the second, on hub A, is woken
// by hub B's release of the first's reservation.
TEST_F(MultiHubTest, WaitersThroughTwoHubsGetAPathFirstComeFirstServed) {
  const std::string kProject = kReservationProject;
  Hub a = StartHub();
  Hub b = StartHub();
  for (const char* agent : {"holder", "first", "second"}) {
    testing::RegisterAgentOk(b.presence.get(), agent);
  }
  auto request = [&kProject](const std::string& agent) {
    hub::v1::ReserveRequest r;
    r.set_project_id(kProject);
    r.set_agent_id(agent);
    r.add_patterns("src");
    r.mutable_ttl()->set_seconds(600);
    return r;
  };
  auto release = [](Hub& hub, const hub::v1::Reservation& r) {
    hub::v1::ReleaseReservationRequest release;
    release.set_reservation_id(r.reservation_id());
    release.set_agent_id(r.agent_id());
    hub::v1::ReleaseReservationResponse released;
    grpc::ClientContext context;
    return hub.reservations->ReleaseReservation(&context, release, &released);
  };
  hub::v1::Reservation held;
  {
    grpc::ClientContext context;
    hub::v1::ReserveResponse response;
    ASSERT_TRUE(
        b.reservations->Reserve(&context, request("holder"), &response).ok());
    held = response.reservation();
  }
  // A watcher on hub A sees both waiters queue, in order.
  grpc::ClientContext watch_context;
  watch_context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  hub::v1::WatchReservationsRequest watch;
  watch.set_project_id(kProject);
  auto reader = a.reservations->WatchReservations(&watch_context, watch);
  hub::v1::WatchReservationsResponse item;
  do {
    ASSERT_TRUE(reader->Read(&item));
  } while (!item.has_snapshot_end());
  EXPECT_EQ(item.snapshot_end().reservation_count(), 1);
  auto next_waiting = [&](const std::string& agent) {
    while (reader->Read(&item)) {
      if (item.change().kind() == hub::v1::RESERVATION_CHANGE_KIND_WAITING &&
          item.change().reservation().agent_id() == agent) {
        return true;
      }
    }
    return false;
  };
  struct Waiting {
    std::thread thread;
    grpc::Status status;
    hub::v1::Reservation reservation;
  };
  auto wait = [&](Hub& hub, const std::string& agent, Waiting* out) {
    out->thread = std::thread([&hub, out, r = request(agent)]() mutable {
      r.mutable_wait()->set_seconds(90);
      grpc::ClientContext context;
      context.set_deadline(
          absl::ToChronoTime(absl::Now() + absl::Seconds(100)));
      hub::v1::ReserveResponse response;
      out->status = hub.reservations->Reserve(&context, r, &response);
      out->reservation = response.reservation();
    });
  };
  Waiting first, second;
  wait(b, "first", &first);
  ASSERT_TRUE(next_waiting("first"));
  wait(a, "second", &second);
  ASSERT_TRUE(next_waiting("second"));

  ASSERT_TRUE(release(b, held).ok());
  first.thread.join();
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(first.reservation.agent_id(), "first");
  ASSERT_TRUE(release(b, first.reservation).ok());
  second.thread.join();
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.reservation.agent_id(), "second");
  EXPECT_GT(second.reservation.token(), first.reservation.token());
  watch_context.TryCancel();
}

TEST_F(MultiHubTest,
       AWatchCutOnOneHubResumesOnTheOtherWithExactlyWhatItMissed) {
  const std::string kProject = kReservationProject;
  Hub a = StartHub();
  Hub b = StartHub();
  testing::RegisterAgentOk(a.presence.get(), "agent-a");
  auto reserve = [&kProject](Hub& hub, const std::string& pattern) {
    hub::v1::ReserveRequest r;
    r.set_project_id(kProject);
    r.set_agent_id("agent-a");
    r.add_patterns(pattern);
    grpc::ClientContext context;
    hub::v1::ReserveResponse response;
    EXPECT_TRUE(hub.reservations->Reserve(&context, r, &response).ok());
    return response.reservation();
  };
  hub::v1::WatchReservationsRequest watch;
  watch.set_project_id(kProject);
  int64_t seen = 0;
  {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    auto on_a = a.reservations->WatchReservations(&context, watch);
    hub::v1::WatchReservationsResponse item;
    do {
      ASSERT_TRUE(on_a->Read(&item));
    } while (!item.has_snapshot_end());
    reserve(a, "one");
    ASSERT_TRUE(on_a->Read(&item));
    seen = item.change().seq();
    context.TryCancel();
  }
  // Missed while disconnected, written through both hubs.
  std::vector<std::string> missed = {reserve(a, "two").reservation_id(),
                                     reserve(b, "three").reservation_id()};
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  watch.set_after_seq(seen);
  auto on_b = b.reservations->WatchReservations(&context, watch);
  hub::v1::WatchReservationsResponse item;
  ASSERT_TRUE(on_b->Read(&item));
  ASSERT_TRUE(item.has_resume()) << item.DebugString();
  EXPECT_TRUE(item.resume().resumed());
  std::vector<std::string> got;
  int64_t seq = seen;
  while (got.size() < missed.size() && on_b->Read(&item)) {
    EXPECT_EQ(item.change().seq(), seq + 1);
    seq = item.change().seq();
    got.push_back(item.change().reservation().reservation_id());
  }
  EXPECT_EQ(got, missed);
  context.TryCancel();
}

TEST_F(MultiHubTest, AHubStartedWhileAnotherHubsReserveWaitsListsTheWaiter) {
  const std::string kProject = kReservationProject;
  Hub a = StartHub();
  for (const char* agent : {"holder", "waiter"}) {
    testing::RegisterAgentOk(a.presence.get(), agent);
  }
  hub::v1::ReserveRequest request;
  request.set_project_id(kProject);
  request.add_patterns("src");
  request.mutable_ttl()->set_seconds(600);
  hub::v1::Reservation held;
  {
    request.set_agent_id("holder");
    grpc::ClientContext context;
    hub::v1::ReserveResponse response;
    ASSERT_TRUE(a.reservations->Reserve(&context, request, &response).ok());
    held = response.reservation();
  }
  grpc::ClientContext watch_a_context;
  watch_a_context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  hub::v1::WatchReservationsRequest watch;
  watch.set_project_id(kProject);
  auto on_a = a.reservations->WatchReservations(&watch_a_context, watch);
  hub::v1::WatchReservationsResponse item;
  do {
    ASSERT_TRUE(on_a->Read(&item));
  } while (!item.has_snapshot_end());

  grpc::Status waited;
  hub::v1::Reservation granted;
  std::thread waiting([&a, &waited, &granted, r = request]() mutable {
    r.set_agent_id("waiter");
    r.mutable_wait()->set_seconds(90);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(100)));
    hub::v1::ReserveResponse response;
    waited = a.reservations->Reserve(&context, r, &response);
    granted = response.reservation();
  });
  hub::v1::Reservation waiter;
  while (on_a->Read(&item)) {
    if (item.change().kind() == hub::v1::RESERVATION_CHANGE_KIND_WAITING) {
      waiter = item.change().reservation();
      break;
    }
  }
  ASSERT_EQ(waiter.agent_id(), "waiter");

  // Hub B starts after the waiter queued: it never saw the change, and its
  // snapshot still holds the waiter, after the reservation.
  Hub b = StartHub();
  grpc::ClientContext watch_b_context;
  watch_b_context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  auto on_b = b.reservations->WatchReservations(&watch_b_context, watch);
  std::vector<hub::v1::ReservationChange> snapshot;
  for (;;) {
    ASSERT_TRUE(on_b->Read(&item));
    if (item.has_snapshot_end()) break;
    snapshot.push_back(item.change());
  }
  EXPECT_EQ(item.snapshot_end().reservation_count(), 1);
  EXPECT_EQ(item.snapshot_end().waiter_count(), 1);
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_EQ(snapshot[0].kind(), hub::v1::RESERVATION_CHANGE_KIND_SNAPSHOT);
  EXPECT_EQ(snapshot[0].reservation().reservation_id(), held.reservation_id());
  EXPECT_EQ(snapshot[1].kind(), hub::v1::RESERVATION_CHANGE_KIND_WAITING);
  EXPECT_EQ(snapshot[1].seq(), 0);
  EXPECT_EQ(snapshot[1].reservation().reservation_id(),
            waiter.reservation_id());
  EXPECT_EQ(snapshot[1].reservation().agent_id(), "waiter");
  EXPECT_EQ(snapshot[1].reservation().token(), 0);
  EXPECT_EQ(snapshot[1].reservation().mode(),
            hub::v1::RESERVATION_MODE_EXCLUSIVE);
  ASSERT_EQ(snapshot[1].reservation().patterns_size(), 1);
  EXPECT_EQ(snapshot[1].reservation().patterns(0), "src");
  EXPECT_EQ(snapshot[1].reservation().expires_at().seconds(),
            waiter.expires_at().seconds());
  // And what it waits behind.
  ASSERT_EQ(snapshot[1].reservation().waits_for_size(), 1);
  EXPECT_EQ(snapshot[1].reservation().waits_for(0), held.reservation_id());

  // Released through hub B: the waiter gets the path, and a new watcher's
  // snapshot holds no waiter.
  {
    hub::v1::ReleaseReservationRequest release;
    release.set_reservation_id(held.reservation_id());
    release.set_agent_id("holder");
    hub::v1::ReleaseReservationResponse released;
    grpc::ClientContext context;
    ASSERT_TRUE(
        b.reservations->ReleaseReservation(&context, release, &released).ok());
  }
  waiting.join();
  ASSERT_TRUE(waited.ok()) << waited.error_message();
  EXPECT_EQ(granted.agent_id(), "waiter");
  grpc::ClientContext again_context;
  again_context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto again = b.reservations->WatchReservations(&again_context, watch);
  do {
    ASSERT_TRUE(again->Read(&item));
    EXPECT_NE(item.change().kind(), hub::v1::RESERVATION_CHANGE_KIND_WAITING);
  } while (!item.has_snapshot_end());
  EXPECT_EQ(item.snapshot_end().waiter_count(), 0);
  EXPECT_EQ(item.snapshot_end().reservation_count(), 1);
  watch_a_context.TryCancel();
  watch_b_context.TryCancel();
  again_context.TryCancel();
}

}  // namespace
}  // namespace hub
