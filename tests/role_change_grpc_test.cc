// Role changes on the presence stream (PresenceEvent.role_change) against an
// in-process HubServer: the holder after a change, the holder before it and
// the role's candidates are told; nobody else is, and nothing is replayed on
// attach. Also how a WatchRoles call ended by its deadline ends.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"

namespace hub::testing {
namespace {

using hub::v1::AttachResponse;
using hub::v1::RoleChange;

hub::v1::RoleKey LeadRoleKey() {
  hub::v1::RoleKey key = CtoRoleKey();
  key.set_kind(hub::v1::ROLE_KIND_LEAD);
  key.set_scope_id("scp_CCCCCCCCCCCCCCCCCCCCCC");
  return key;
}

// Reads one agent's stream. Every event must carry the next sequence number
// (1, 2, 3, ... with no gap); role probes are answered ready; role changes
// are kept in arrival order.
class StreamReader {
 public:
  explicit StreamReader(AttachedAgent* agent) : agent_(agent) {}

  // Reads until `done` holds for a frame (returned); fails the test if the
  // stream ends first.
  AttachResponse ReadUntil(
      const std::function<bool(const AttachResponse&)>& done) {
    AttachResponse frame;
    while (agent_->stream->Read(&frame)) {
      if (frame.has_event()) {
        EXPECT_EQ(frame.event().sequence(), last_sequence_ + 1)
            << frame.DebugString();
        last_sequence_ = frame.event().sequence();
        if (frame.event().has_role_change()) {
          changes_.push_back(frame.event().role_change());
        }
        if (frame.event().has_role_probe()) {
          agent_->stream->Write(ReadyReply(frame.event().role_probe()));
        }
      }
      if (done(frame)) return frame;
    }
    ADD_FAILURE() << "the stream ended before the awaited frame";
    return {};
  }

  // The next role change matching `match`: one already read while waiting
  // for another frame (the change that a frame's answer caused may come
  // before that answer), else the next to arrive.
  RoleChange NextChange(const std::function<bool(const RoleChange&)>& match) {
    for (; matched_ < changes_.size(); ++matched_) {
      if (match(changes_[matched_])) return changes_[matched_++];
    }
    RoleChange next =
        ReadUntil([&](const AttachResponse& f) {
          return f.event().has_role_change() && match(f.event().role_change());
        })
            .event()
            .role_change();
    matched_ = changes_.size();
    return next;
  }

  hub::v1::RoleActivation NextActivation() {
    return ReadUntil([](const AttachResponse& f) {
             return f.event().has_role_activation();
           })
        .event()
        .role_activation();
  }

  const std::vector<RoleChange>& changes() const { return changes_; }

 private:
  AttachedAgent* const agent_;
  int64_t last_sequence_ = 0;
  std::vector<RoleChange> changes_;
  size_t matched_ = 0;  // changes_ before it were looked at by NextChange
};

class RoleChangeGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override { StartHub(TestHubOptions(FreshTestDbPath())); }

  // Replaces the running hub: the old one goes first, since one database
  // has one hub at a time (the new one's start is refused otherwise).
  void StartHub(const HubServerOptions& options) {
    presence_.reset();
    roles_.reset();
    server_.reset();
    server_ = StartTestHub(options);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    roles_ = hub::v1::RoleService::NewStub(channel);
  }

  // A registered agent of the project, attached; a stream that hangs fails
  // the test after 60 s instead of blocking it.
  AttachedAgent Attached(const std::string& id) {
    return AttachOk(presence_.get(), id, RegisterAgentOk(presence_.get(), id),
                    absl::Seconds(60));
  }

  // Attached() and a candidate of the project's cto role.
  AttachedAgent Candidate(const std::string& id, int64_t priority = 0) {
    AttachedAgent agent = Attached(id);
    UpsertCandidateOk(roles_.get(), CtoRoleKey(), id, priority);
    return agent;
  }

  // An operator's reservation of `role` for `holder` (unguarded: it fences
  // whatever epoch is current).
  hub::v1::Role Reserve(const hub::v1::RoleKey& role,
                        const std::string& holder) {
    grpc::ClientContext context;
    hub::v1::ReserveRoleRequest request;
    *request.mutable_role_key() = role;
    request.mutable_patch()->set_holder_agent_id(holder);
    hub::v1::ReserveRoleResponse response;
    grpc::Status s = roles_->ReserveRole(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.role();
  }

  // Takes the activation pushed to `reader`'s agent and ACKs it on the
  // stream; the activation.
  hub::v1::RoleActivation Activate(AttachedAgent& agent, StreamReader& reader) {
    const hub::v1::RoleActivation activation = reader.NextActivation();
    EXPECT_TRUE(agent.stream->Write(ActivationAckFrame(activation)));
    const AttachResponse answer = reader.ReadUntil(
        [](const AttachResponse& f) { return f.frame_id() == 42; });
    EXPECT_TRUE(answer.has_activation_ack_result()) << answer.DebugString();
    return activation;
  }

  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
};

TEST_F(RoleChangeGrpcTest,
       AnAttachedHolderIsToldWhenItIsActivatedAndWhenAnOperatorFencesItsEpoch) {
  AttachedAgent a = Candidate("agent-a");
  StreamReader reader(&a);
  const hub::v1::EnsureRoleReceipt receipt =
      EnsureRoleOk(roles_.get(), CtoRoleKey());
  ASSERT_EQ(receipt.holder_agent_id(), "agent-a");
  const hub::v1::RoleActivation activation = Activate(a, reader);

  const RoleChange active = reader.NextChange([](const RoleChange& c) {
    return c.role().state() == hub::v1::ROLE_STATE_ACTIVE;
  });
  EXPECT_EQ(active.kind(), hub::v1::ROLE_CHANGE_KIND_UPDATED);
  EXPECT_EQ(active.role().holder_agent_id(), "agent-a");
  EXPECT_EQ(active.role().epoch(), activation.epoch());
  EXPECT_EQ(active.role().charter_acked_epoch(), activation.epoch());
  EXPECT_EQ(active.role().role_key_wire(), activation.role_key_wire());
  EXPECT_NE(active.previous_state(), hub::v1::ROLE_STATE_UNSPECIFIED);
  EXPECT_NE(active.previous_state(), hub::v1::ROLE_STATE_ACTIVE);
  // Before it: the reservation that made agent-a the holder of this epoch.
  // Not necessarily the first change agent-a saw: on a busy machine the
  // row's creation (none -> electable) can reach it too, since it may be a
  // candidate by the time that change fans out.
  const std::vector<RoleChange>& seen = reader.changes();
  ASSERT_FALSE(seen.empty());
  const auto reserved =
      std::find_if(seen.begin(), seen.end() - 1, [&](const RoleChange& c) {
        return c.role().state() == hub::v1::ROLE_STATE_ELECTED_PROBING &&
               c.role().holder_agent_id() == "agent-a" &&
               c.role().epoch() == activation.epoch();
      });
  EXPECT_NE(reserved, seen.end() - 1)
      << "no reservation of agent-a's epoch before it became active";

  // An operator hands the role to someone else: agent-a held it until this
  // change and learns that its epoch is over.
  const hub::v1::Role fenced = Reserve(CtoRoleKey(), "agent-z");
  const RoleChange lost = reader.NextChange([&](const RoleChange& c) {
    return c.role().version() == fenced.version();
  });
  EXPECT_GT(lost.role().epoch(), activation.epoch());
  EXPECT_EQ(lost.role().holder_agent_id(), "agent-z");
  EXPECT_EQ(lost.previous_state(), hub::v1::ROLE_STATE_ACTIVE);
  for (size_t i = 1; i < reader.changes().size(); ++i) {
    EXPECT_GT(reader.changes()[i].role().version(),
              reader.changes()[i - 1].role().version());
  }
}

TEST_F(
    RoleChangeGrpcTest,
    AHolderThatMissesItsAckDeadlineIsToldThatTheRoleMovedToTheNextCandidate) {
  HubServerOptions options = TestHubOptions(FreshTestDbPath());
  // agent-slow's miss takes this long; agent-b, which does ACK, must do so
  // within it, so it is generous for a busy machine.
  options.activator.config.activation_ack_timeout = absl::Seconds(2);
  StartHub(options);
  AttachedAgent slow = Candidate("agent-slow", /*priority=*/10);
  AttachedAgent b = Candidate("agent-b", /*priority=*/5);
  StreamReader slow_reader(&slow);
  StreamReader b_reader(&b);
  ASSERT_EQ(EnsureRoleOk(roles_.get(), CtoRoleKey()).holder_agent_id(),
            "agent-slow");
  // agent-slow takes the activation but never ACKs it.
  const hub::v1::RoleActivation missed = slow_reader.NextActivation();

  const hub::v1::RoleActivation taken = Activate(b, b_reader);
  EXPECT_EQ(taken.holder_agent_id(), "agent-b");
  EXPECT_GT(taken.epoch(), missed.epoch());
  const RoleChange moved = slow_reader.NextChange([](const RoleChange& c) {
    return c.role().holder_agent_id() == "agent-b";
  });
  EXPECT_GT(moved.role().epoch(), missed.epoch());
}

TEST_F(RoleChangeGrpcTest, AFencedHolderThatIsNoCandidateIsToldItsEpochIsOver) {
  AttachedAgent a = Attached("agent-a");
  StreamReader reader(&a);
  const hub::v1::Role held = Reserve(CtoRoleKey(), "agent-a");
  const RoleChange given = reader.NextChange([&](const RoleChange& c) {
    return c.role().version() == held.version();
  });
  EXPECT_EQ(given.role().holder_agent_id(), "agent-a");

  const hub::v1::Role fenced = Reserve(CtoRoleKey(), "agent-z");
  const RoleChange lost = reader.NextChange([&](const RoleChange& c) {
    return c.role().version() == fenced.version();
  });
  EXPECT_EQ(lost.role().holder_agent_id(), "agent-z");
  EXPECT_EQ(lost.role().epoch(), held.epoch() + 1);
}

TEST_F(RoleChangeGrpcTest,
       TheHolderOfALeadWhoseScopeIsClosedIsToldItIsRemoved) {
  AttachedAgent a = Attached("agent-a");
  StreamReader reader(&a);
  const hub::v1::Role held = Reserve(LeadRoleKey(), "agent-a");
  reader.NextChange([&](const RoleChange& c) {
    return c.role().version() == held.version();
  });

  grpc::ClientContext context;
  hub::v1::CloseRoleScopeRequest close;
  *close.mutable_role_key() = LeadRoleKey();
  hub::v1::CloseRoleScopeResponse closed;
  grpc::Status s = roles_->CloseRoleScope(&context, close, &closed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const RoleChange removed = reader.NextChange([](const RoleChange& c) {
    return c.kind() == hub::v1::ROLE_CHANGE_KIND_REMOVED;
  });
  EXPECT_EQ(removed.role().role_key_wire(), held.role_key_wire());
  EXPECT_EQ(removed.role().holder_agent_id(), "agent-a");
  EXPECT_EQ(removed.previous_state(), held.state());
}

TEST_F(RoleChangeGrpcTest, ACandidateIsToldWhoHoldsItsRole) {
  AttachedAgent a = Candidate("agent-a", /*priority=*/10);
  AttachedAgent b = Candidate("agent-b", /*priority=*/5);
  StreamReader a_reader(&a);
  StreamReader b_reader(&b);
  ASSERT_EQ(EnsureRoleOk(roles_.get(), CtoRoleKey()).holder_agent_id(),
            "agent-a");
  const hub::v1::RoleActivation activation = Activate(a, a_reader);

  const RoleChange active = b_reader.NextChange([](const RoleChange& c) {
    return c.role().state() == hub::v1::ROLE_STATE_ACTIVE;
  });
  EXPECT_EQ(active.role().holder_agent_id(), "agent-a");
  EXPECT_EQ(active.role().epoch(), activation.epoch());
}

TEST_F(RoleChangeGrpcTest,
       AnAttachedAgentThatNeitherHoldsNorIsACandidateOfTheRoleIsNotTold) {
  AttachedAgent a = Candidate("agent-a");
  AttachedAgent other = Attached("agent-other");
  StreamReader a_reader(&a);
  StreamReader other_reader(&other);
  EnsureRoleOk(roles_.get(), CtoRoleKey());
  Activate(a, a_reader);
  const hub::v1::Role fenced = Reserve(CtoRoleKey(), "agent-z");
  a_reader.NextChange([&](const RoleChange& c) {
    return c.role().version() == fenced.version();
  });

  // Changes reach streams in publication order: once agent-other hears of
  // a role it holds, every earlier change has been handed out.
  const hub::v1::Role marker = Reserve(LeadRoleKey(), "agent-other");
  const RoleChange first =
      other_reader.NextChange([](const RoleChange&) { return true; });
  EXPECT_EQ(first.role().role_key_wire(), marker.role_key_wire());
  EXPECT_EQ(first.kind(), hub::v1::ROLE_CHANGE_KIND_CREATED);
  EXPECT_EQ(first.previous_state(), hub::v1::ROLE_STATE_UNSPECIFIED);
}

TEST_F(RoleChangeGrpcTest, RolesAnAgentHeldBeforeItAttachedAreNotReplayed) {
  AttachedAgent observer = Candidate("agent-observer");
  StreamReader observer_reader(&observer);
  const int64_t generation = RegisterAgentOk(presence_.get(), "agent-a");
  const hub::v1::Role held = Reserve(CtoRoleKey(), "agent-a");
  // The candidate hears of it only after the holder was offered it (no
  // stream then).
  observer_reader.NextChange([&](const RoleChange& c) {
    return c.role().version() == held.version();
  });

  AttachedAgent a =
      AttachOk(presence_.get(), "agent-a", generation, absl::Seconds(60));
  StreamReader reader(&a);
  const hub::v1::Role marker = Reserve(LeadRoleKey(), "agent-a");
  const RoleChange first =
      reader.NextChange([](const RoleChange&) { return true; });
  EXPECT_EQ(first.role().role_key_wire(), marker.role_key_wire());

  // The next change of the role it holds does reach it.
  const hub::v1::Role fenced = Reserve(CtoRoleKey(), "agent-a");
  const RoleChange next = reader.NextChange([&](const RoleChange& c) {
    return c.role().role_key_wire() == held.role_key_wire();
  });
  EXPECT_EQ(next.role().epoch(), fenced.epoch());
  EXPECT_EQ(next.role().epoch(), held.epoch() + 1);
}

// WatchRoles ended by the caller's deadline: the caller sees
// DEADLINE_EXCEEDED, and so does the hub's own account of the call.
TEST_F(RoleChangeGrpcTest, AWatchEndedByItsDeadlineEndsDeadlineExceeded) {
  grpc::ClientContext context;
  // Long enough for the snapshot to arrive first on a busy machine.
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(3)));
  hub::v1::WatchRolesRequest request;
  request.set_project_id(kStreamProject);
  auto reader = roles_->WatchRoles(&context, request);
  hub::v1::WatchRolesResponse item;
  ASSERT_TRUE(reader->Read(&item));
  EXPECT_TRUE(item.has_snapshot_end());
  while (reader->Read(&item)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  const std::string deadline_line =
      "hub_rpc_handled_total{method=\"hub.v1.RoleService/WatchRoles\","
      "code=\"DEADLINE_EXCEEDED\"} 1";
  std::string metrics;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (true) {
    metrics = server_->metrics()->registry().Render();
    if (absl::StrContains(metrics, deadline_line) || absl::Now() > give_up) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(absl::StrContains(metrics, deadline_line)) << metrics;
  EXPECT_FALSE(absl::StrContains(
      metrics,
      "hub_rpc_handled_total{method=\"hub.v1.RoleService/WatchRoles\","
      "code=\"CANCELLED\"}"));
}

}  // namespace
}  // namespace hub::testing
