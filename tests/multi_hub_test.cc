// Several real hubd processes over one real PostgreSQL database the test
// starts (docs/design/multi-hub.md), through the public API: a hub that is
// killed has its agents taken over by another, which fails the role its
// agent held over to a candidate attached to it; a hub paused past its
// lease comes back without its agents and hands nothing out; an agent that
// moves to another hub within its detach grace keeps its role.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hub/v1/hub.grpc.pb.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
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

  Hub StartHub() {
    Hub hub;
    hub.process = std::make_unique<HubdProcess>(url_, kHubFlags);
    absl::Status started = hub.process->Start();
    EXPECT_TRUE(started.ok()) << started;
    auto channel = grpc::CreateChannel(hub.process->address(),
                                       grpc::InsecureChannelCredentials());
    hub.presence = hub::v1::PresenceService::NewStub(channel);
    hub.roles = hub::v1::RoleService::NewStub(channel);
    hub.status = hub::v1::HubService::NewStub(channel);
    hub.messages = hub::v1::MessageService::NewStub(channel);
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
  ASSERT_TRUE(standby.stream->Write(testing::ActivationAckFrame(second)));
  hub::v1::AttachResponse answer;
  ASSERT_TRUE(testing::ReadSkippingRoleChanges(standby.stream.get(), &answer));
  EXPECT_TRUE(answer.has_activation_ack_result());
  const hub::v1::Role role = GetRole(b);
  EXPECT_EQ(role.state(), hub::v1::ROLE_STATE_ACTIVE);
  EXPECT_EQ(role.holder_agent_id(), "agent-on-b");
  EXPECT_EQ(role.epoch(), second.epoch());
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
  while (holder.stream->Read(&frame)) {
    // Nothing authoritative reaches the old holder from the paused hub.
    EXPECT_FALSE(frame.event().has_role_activation());
    EXPECT_FALSE(frame.event().has_role_probe());
  }
  grpc::Status ended = holder.stream->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE)
      << ended.error_message();
  EXPECT_EQ(testing::Reason(ended), "HUB_SEAT_LOST");
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

}  // namespace
}  // namespace hub
