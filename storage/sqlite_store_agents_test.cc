// Agents: registration, generation-fenced presence writes, the sweep.
#include <unistd.h>

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite_store.h"
#include "storage/test_util.h"

namespace hub::storage {
namespace {

using testing::FreshDbPath;
using testing::OpenOrDie;
using testing::RawDb;

constexpr int64_t kNow = 1'700'000'000'000;

AgentRegistration Reg(const std::string& id, int64_t now = kNow) {
  AgentRegistration r;
  r.agent_id = id;
  r.cli = "codex";
  r.now_ms = now;
  r.lease_ttl_ms = 30'000;
  return r;
}

TEST(AgentStore, FirstRegistrationStartsAtGenerationOneOnline) {
  auto store = OpenOrDie(FreshDbPath());
  absl::StatusOr<AgentRecord> a = store->RegisterAgent(Reg("agent-1"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->presence_generation, 1);
  EXPECT_EQ(a->status, "online");
  EXPECT_EQ(a->last_seen_ms, kNow);
  EXPECT_EQ(a->lease_expires_ms, kNow + 30'000);
  EXPECT_EQ(a->transport_locators_json, "[]");
  EXPECT_FALSE(a->project_id.has_value());
}

TEST(AgentStore, ReRegistrationBumpsGenerationAndReplacesFields) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("agent-1")).ok());
  AgentRegistration again = Reg("agent-1", kNow + 5);
  again.cli = "claude";
  again.capabilities_json = R"(["role:cto:candidate"])";
  absl::StatusOr<AgentRecord> a = store->RegisterAgent(again);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->presence_generation, 2);
  EXPECT_EQ(a->cli, "claude");
  EXPECT_EQ(a->capabilities_json, R"(["role:cto:candidate"])");
  EXPECT_EQ(store->GetAgent("agent-1")->presence_generation, 2);
}

TEST(AgentStore, OfflineAgentReRegisteringComesBackOnlineWithNewLease) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
  ASSERT_TRUE(store->SetAgentStatusForGeneration("a1", 1, "offline").ok());
  absl::StatusOr<AgentRecord> a = store->RegisterAgent(Reg("a1", kNow + 100));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->status, "online");
  EXPECT_EQ(a->lease_expires_ms, kNow + 100 + 30'000);
}

TEST(AgentStore, IdentityIsPatchedInTheSameWriteKeptWhenAbsentAndClearable) {
  auto store = OpenOrDie(FreshDbPath());
  AgentRegistration r = Reg("a1");
  r.project_id = "prj_AAAAAAAAAAAAAAAAAAAAAA";
  r.session_id = "sess-1";
  r.host_id = "hst_BBBBBBBBBBBBBBBBBBBBBB";
  r.transport_locators_json = R"([{"kind":"tmux"}])";
  ASSERT_TRUE(store->RegisterAgent(r).ok());

  absl::StatusOr<AgentRecord> kept = store->RegisterAgent(Reg("a1"));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->project_id, "prj_AAAAAAAAAAAAAAAAAAAAAA");
  EXPECT_EQ(kept->session_id, "sess-1");
  EXPECT_EQ(kept->transport_locators_json, R"([{"kind":"tmux"}])");

  AgentRegistration clear = Reg("a1");
  clear.session_id = Patch<std::string>::Clear();
  clear.transport_locators_json = Patch<std::string>::Clear();
  absl::StatusOr<AgentRecord> cleared = store->RegisterAgent(clear);
  ASSERT_TRUE(cleared.ok());
  EXPECT_FALSE(cleared->session_id.has_value());
  EXPECT_EQ(cleared->project_id, "prj_AAAAAAAAAAAAAAAAAAAAAA");
  EXPECT_EQ(cleared->transport_locators_json, "[]");
  EXPECT_EQ(cleared->presence_generation, 3);
}

TEST(AgentStore, LeaseRefreshWithCurrentGenerationApplies) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
  absl::StatusOr<PresenceWrite> w =
      store->RefreshLeaseForGeneration("a1", 1, kNow + 1000, 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->outcome, PresenceOutcome::kApplied);
  EXPECT_EQ(w->agent->lease_expires_ms, kNow + 61'000);
  EXPECT_EQ(w->agent->last_seen_ms, kNow + 1000);
}

TEST(AgentStore, LeaseRefreshFromSupersededOwnerChangesNothing) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());  // generation 2
  absl::StatusOr<PresenceWrite> w =
      store->RefreshLeaseForGeneration("a1", 1, kNow + 9000, 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->outcome, PresenceOutcome::kStaleGeneration);
  EXPECT_EQ(w->agent->presence_generation, 2);
  EXPECT_EQ(store->GetAgent("a1")->lease_expires_ms, kNow + 30'000);
  EXPECT_EQ(ReasonOf(ToStatus(w->outcome, "a1")), "STALE_PRESENCE_OWNER");
}

TEST(AgentStore, LeaseRefreshWithoutGenerationIsTheLegacyUnguardedCall) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
  absl::StatusOr<PresenceWrite> w =
      store->RefreshLeaseForGeneration("a1", std::nullopt, kNow + 9000, 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->outcome, PresenceOutcome::kApplied);
}

TEST(AgentStore, LeaseRefreshOfUnknownAgentIsNotFound) {
  auto store = OpenOrDie(FreshDbPath());
  absl::StatusOr<PresenceWrite> w =
      store->RefreshLeaseForGeneration("ghost", 1, kNow, 1000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->outcome, PresenceOutcome::kNotFound);
  EXPECT_FALSE(w->agent.has_value());
}

TEST(AgentStore, StatusChangeIsFencedByGeneration) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
  EXPECT_EQ(store->SetAgentStatusForGeneration("a1", 1, "offline")->outcome,
            PresenceOutcome::kStaleGeneration);
  EXPECT_EQ(store->GetAgent("a1")->status, "online");
  EXPECT_EQ(store->SetAgentStatusForGeneration("a1", 2, "offline")->outcome,
            PresenceOutcome::kApplied);
  EXPECT_EQ(store->GetAgent("a1")->status, "offline");
}

TEST(AgentStore, InvalidStatusIsAConstraintErrorAndChangesNothing) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
  absl::StatusOr<PresenceWrite> w =
      store->SetAgentStatusForGeneration("a1", 1, "sleeping");
  EXPECT_EQ(ReasonOf(w.status()), "STORE_CONSTRAINT");
  EXPECT_EQ(store->GetAgent("a1")->status, "online");
}

TEST(AgentStore, SweepMovesOneStepPerRowPerPass) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());  // lease kNow + 30s
  // Long past both thresholds: first pass only online -> stale.
  int64_t later = kNow + 30'000 + 400'000;
  auto first = store->SweepAgentPresence(later, 300'000);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].to_status, "stale");
  auto second = store->SweepAgentPresence(later, 300'000);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].to_status, "offline");
  EXPECT_TRUE(store->SweepAgentPresence(later, 300'000)->empty());
  EXPECT_EQ(store->GetAgent("a1")->status, "offline");
}

TEST(AgentStore, SweepLeavesLiveLeasesAndTheExactExpiryInstantAlone) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
  // lease < now is the rule: at now == lease the agent stays online.
  EXPECT_TRUE(store->SweepAgentPresence(kNow + 30'000, 300'000)->empty());
  EXPECT_EQ(store->SweepAgentPresence(kNow + 30'001, 300'000)->size(), 1u);
}

TEST(AgentStore,
     MigratedGenerationZeroAgentHeartbeatsLegacyThenReRegistersToOne) {
  std::string path = FreshDbPath();
  { auto store = OpenOrDie(path); }
  {
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("INSERT INTO agents (agent_id, cli, last_seen_ms, "
                       "lease_expires_ms, status) VALUES "
                       "('old', 'claude', 1, 999999999999999, 'online')"),
              "");
  }
  auto store = OpenOrDie(path);
  EXPECT_EQ(store->GetAgent("old")->presence_generation, 0);
  EXPECT_EQ(store->RefreshLeaseForGeneration("old", std::nullopt, kNow, 1000)
                ->outcome,
            PresenceOutcome::kApplied);
  EXPECT_EQ(store->RegisterAgent(Reg("old"))->presence_generation, 1);
}

TEST(AgentStore, LeaseCheckpointWritesOnlyCurrentOwnersThatAreNotOffline) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_TRUE(store->RegisterAgent(Reg("live")).ok());
  ASSERT_TRUE(store->RegisterAgent(Reg("moved")).ok());
  ASSERT_TRUE(store->RegisterAgent(Reg("moved")).ok());  // generation 2
  ASSERT_TRUE(store->RegisterAgent(Reg("gone")).ok());
  ASSERT_TRUE(store->SetAgentStatusForGeneration("gone", 1, "offline").ok());
  std::vector<LeaseCheckpoint> batch = {
      {"live", 1, kNow + 10, kNow + 90'000},
      {"moved", 1, kNow + 10, kNow + 90'000},
      {"gone", 1, kNow + 10, kNow + 90'000},
      {"ghost", 1, kNow + 10, kNow + 90'000},
  };
  absl::StatusOr<std::vector<bool>> written = store->CheckpointLeases(batch);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(store->GetAgent("live")->lease_expires_ms, kNow + 90'000);
  EXPECT_EQ(store->GetAgent("moved")->lease_expires_ms, kNow + 30'000);
  EXPECT_EQ(store->GetAgent("gone")->status, "offline");
  EXPECT_TRUE(store->CheckpointLeases({})->empty());
}

TEST(AgentStore, TheLeaseTtlIsStoredByRegistrationHeartbeatAndCheckpoint) {
  auto store = OpenOrDie(FreshDbPath());
  ASSERT_EQ(store->RegisterAgent(Reg("a1"))->lease_ttl_ms, 30'000);
  absl::StatusOr<PresenceWrite> refreshed =
      store->RefreshLeaseForGeneration("a1", 1, kNow + 10, 45'000);
  ASSERT_TRUE(refreshed.ok());
  EXPECT_EQ(refreshed->agent->lease_ttl_ms, 45'000);
  ASSERT_TRUE(
      store->CheckpointLeases({{"a1", 1, kNow + 20, kNow + 80'020, 80'000}})
          .ok());
  EXPECT_EQ(store->GetAgent("a1")->lease_ttl_ms, 80'000);
}

TEST(AgentStore, ClosingTheStoreCheckpointsAndRemovesTheWal) {
  const std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store->RegisterAgent(Reg("a1")).ok());
    ASSERT_TRUE(store->GetAgent("a1").ok());  // opens a reader connection
  }
  EXPECT_NE(access((path + "-wal").c_str(), F_OK), 0);
  auto reopened = OpenOrDie(path);
  EXPECT_EQ(reopened->GetAgent("a1")->presence_generation, 1);
}

TEST(AgentStore, GetAgentOfUnknownIdIsNotFound) {
  auto store = OpenOrDie(FreshDbPath());
  EXPECT_EQ(ReasonOf(store->GetAgent("nobody").status()), "AGENT_NOT_FOUND");
}

TEST(AgentOwners, FirstClaimantOwnsTheAgentAcrossReopens) {
  const std::string path = FreshDbPath();
  {
    auto store = OpenOrDie(path);
    EXPECT_EQ(*store->ClaimAgentOwner("agent-1", "alice", kNow), "alice");
    EXPECT_EQ(*store->ClaimAgentOwner("agent-1", "bob", kNow + 1), "alice");
    EXPECT_EQ(*store->ClaimAgentOwner("agent-2", "bob", kNow + 2), "bob");
  }
  auto store = OpenOrDie(path);
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> owners =
      store->ListAgentOwners();
  ASSERT_TRUE(owners.ok()) << owners.status();
  ASSERT_EQ(owners->size(), 2u);
  EXPECT_EQ((*owners)[0],
            std::make_pair(std::string("agent-1"), std::string("alice")));
  EXPECT_EQ((*owners)[1],
            std::make_pair(std::string("agent-2"), std::string("bob")));
}

}  // namespace
}  // namespace hub::storage
