// Agents on both stores: registration, generation-fenced presence writes,
// the sweep, lease checkpoints, owners; and, on PostgreSQL, two hubs writing
// the same agents at once.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/store.h"
#include "storage/store_test_fixture.h"

namespace hub::storage {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

AgentRegistration Reg(const std::string& id, int64_t now = kNow) {
  AgentRegistration r;
  r.agent_id = id;
  r.cli = "codex";
  r.now_ms = now;
  r.lease_ttl_ms = 30'000;
  return r;
}

class AgentStore : public testing::StoreTest {};
HUB_STORE_TEST_SUITE(AgentStore);

TEST_P(AgentStore, FirstRegistrationStartsAtGenerationOneOnline) {
  Store* store = &this->store();
  absl::StatusOr<AgentRecord> a = store->agents().RegisterAgent(Reg("agent-1"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->presence_generation, 1);
  EXPECT_EQ(a->status, AgentStatus::kOnline);
  EXPECT_EQ(a->last_seen_ms, kNow);
  EXPECT_EQ(a->lease_expires_ms, kNow + 30'000);
  EXPECT_EQ(a->transport_locators_json, "[]");
  EXPECT_FALSE(a->project_id.has_value());
}

TEST_P(AgentStore, ReRegistrationBumpsGenerationAndReplacesFields) {
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("agent-1")).ok());
  AgentRegistration again = Reg("agent-1", kNow + 5);
  again.cli = "claude";
  again.capabilities_json = R"(["role:cto:candidate"])";
  absl::StatusOr<AgentRecord> a = store->agents().RegisterAgent(again);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->presence_generation, 2);
  EXPECT_EQ(a->cli, "claude");
  EXPECT_EQ(a->capabilities_json, R"(["role:cto:candidate"])");
  EXPECT_EQ(store->agents().GetAgent("agent-1")->presence_generation, 2);
}

// A burst of asynchronous registrations queues up behind the writer, so
// they commit in groups (on PostgreSQL their upserts then go out together):
// each gets its own answer, and one agent's registrations take generations
// in the order they were made.
TEST_P(AgentStore, RegistrationsMadeAtOnceAnswerEachAndKeepTheirOrder) {
  Store* store = &this->store();
  constexpr int kAgents = 20;
  constexpr int kRounds = 3;
  std::vector<absl::StatusOr<AgentRecord>> answers(kAgents * kRounds,
                                                   absl::UnknownError(""));
  std::vector<absl::Notification> done(kAgents * kRounds);
  for (int round = 0; round < kRounds; ++round) {
    for (int a = 0; a < kAgents; ++a) {
      const int i = round * kAgents + a;
      AgentRegistration r = Reg(absl::StrCat("burst-", a), kNow + round);
      r.pid = 1000 + round;
      store->agents().RegisterAgentAsync(
          r, [&answers, &done, i](absl::StatusOr<AgentRecord> answer) {
            answers[i] = std::move(answer);
            done[i].Notify();
          });
    }
  }
  for (absl::Notification& d : done) d.WaitForNotification();
  for (int round = 0; round < kRounds; ++round) {
    for (int a = 0; a < kAgents; ++a) {
      const absl::StatusOr<AgentRecord>& answer = answers[round * kAgents + a];
      ASSERT_TRUE(answer.ok()) << answer.status();
      EXPECT_EQ(answer->agent_id, absl::StrCat("burst-", a));
      EXPECT_EQ(answer->presence_generation, round + 1);
      EXPECT_EQ(answer->pid, 1000 + round);
    }
  }
  for (int a = 0; a < kAgents; ++a) {
    absl::StatusOr<AgentRecord> stored =
        store->agents().GetAgent(absl::StrCat("burst-", a));
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(stored->presence_generation, kRounds);
    EXPECT_EQ(stored->pid, 1000 + kRounds - 1);
  }
}

TEST_P(AgentStore, OfflineAgentReRegisteringComesBackOnlineWithNewLease) {
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
  ASSERT_TRUE(store->agents()
                  .SetAgentStatusForGeneration("a1", 1, AgentStatus::kOffline)
                  .ok());
  absl::StatusOr<AgentRecord> a =
      store->agents().RegisterAgent(Reg("a1", kNow + 100));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->status, AgentStatus::kOnline);
  EXPECT_EQ(a->lease_expires_ms, kNow + 100 + 30'000);
}

TEST_P(AgentStore, IdentityIsPatchedInTheSameWriteKeptWhenAbsentAndClearable) {
  Store* store = &this->store();
  AgentRegistration r = Reg("a1");
  r.project_id = "prj_AAAAAAAAAAAAAAAAAAAAAA";
  r.session_id = "sess-1";
  r.host_id = "hst_BBBBBBBBBBBBBBBBBBBBBB";
  r.transport_locators_json = R"([{"kind":"tmux"}])";
  ASSERT_TRUE(store->agents().RegisterAgent(r).ok());

  absl::StatusOr<AgentRecord> kept = store->agents().RegisterAgent(Reg("a1"));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->project_id, "prj_AAAAAAAAAAAAAAAAAAAAAA");
  EXPECT_EQ(kept->session_id, "sess-1");
  EXPECT_EQ(kept->transport_locators_json, R"([{"kind":"tmux"}])");

  AgentRegistration clear = Reg("a1");
  clear.session_id = Patch<std::string>::Clear();
  clear.transport_locators_json = Patch<std::string>::Clear();
  absl::StatusOr<AgentRecord> cleared = store->agents().RegisterAgent(clear);
  ASSERT_TRUE(cleared.ok());
  EXPECT_FALSE(cleared->session_id.has_value());
  EXPECT_EQ(cleared->project_id, "prj_AAAAAAAAAAAAAAAAAAAAAA");
  EXPECT_EQ(cleared->transport_locators_json, "[]");
  EXPECT_EQ(cleared->presence_generation, 3);
}

TEST_P(AgentStore, LeaseRefreshWithCurrentGenerationApplies) {
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
  absl::StatusOr<PresenceWrite> w =
      store->agents().RefreshLeaseForGeneration("a1", 1, kNow + 1000, 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->outcome, PresenceOutcome::kApplied);
  EXPECT_EQ(w->agent->lease_expires_ms, kNow + 61'000);
  EXPECT_EQ(w->agent->last_seen_ms, kNow + 1000);
}

TEST_P(AgentStore, LeaseRefreshFromSupersededOwnerChangesNothing) {
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());  // generation 2
  absl::StatusOr<PresenceWrite> w =
      store->agents().RefreshLeaseForGeneration("a1", 1, kNow + 9000, 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->outcome, PresenceOutcome::kStaleGeneration);
  EXPECT_EQ(w->agent->presence_generation, 2);
  EXPECT_EQ(store->agents().GetAgent("a1")->lease_expires_ms, kNow + 30'000);
  EXPECT_EQ(ReasonOf(ToStatus(w->outcome, "a1")), "STALE_PRESENCE_OWNER");
}

TEST_P(AgentStore, LeaseRefreshWithoutGenerationIsTheLegacyUnguardedCall) {
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
  absl::StatusOr<PresenceWrite> w = store->agents().RefreshLeaseForGeneration(
      "a1", std::nullopt, kNow + 9000, 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->outcome, PresenceOutcome::kApplied);
}

TEST_P(AgentStore, LeaseRefreshOfUnknownAgentIsNotFound) {
  Store* store = &this->store();
  absl::StatusOr<PresenceWrite> w =
      store->agents().RefreshLeaseForGeneration("ghost", 1, kNow, 1000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->outcome, PresenceOutcome::kNotFound);
  EXPECT_FALSE(w->agent.has_value());
}

TEST_P(AgentStore, StatusChangeIsFencedByGeneration) {
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
  EXPECT_EQ(store->agents()
                .SetAgentStatusForGeneration("a1", 1, AgentStatus::kOffline)
                ->outcome,
            PresenceOutcome::kStaleGeneration);
  EXPECT_EQ(store->agents().GetAgent("a1")->status, AgentStatus::kOnline);
  EXPECT_EQ(store->agents()
                .SetAgentStatusForGeneration("a1", 2, AgentStatus::kOffline)
                ->outcome,
            PresenceOutcome::kApplied);
  EXPECT_EQ(store->agents().GetAgent("a1")->status, AgentStatus::kOffline);
}

TEST_P(AgentStore, SweepMovesOneStepPerRowPerPass) {
  Store* store = &this->store();
  ASSERT_TRUE(
      store->agents().RegisterAgent(Reg("a1")).ok());  // lease kNow + 30s
  // Long past both thresholds: first pass only online -> stale.
  int64_t later = kNow + 30'000 + 400'000;
  auto first = store->agents().SweepAgentPresence(later, 300'000);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].to_status, AgentStatus::kStale);
  auto second = store->agents().SweepAgentPresence(later, 300'000);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].to_status, AgentStatus::kOffline);
  EXPECT_TRUE(store->agents().SweepAgentPresence(later, 300'000)->empty());
  EXPECT_EQ(store->agents().GetAgent("a1")->status, AgentStatus::kOffline);
}

TEST_P(AgentStore, SweepLeavesLiveLeasesAndTheExactExpiryInstantAlone) {
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
  // lease < now is the rule: at now == lease the agent stays online.
  EXPECT_TRUE(
      store->agents().SweepAgentPresence(kNow + 30'000, 300'000)->empty());
  EXPECT_EQ(store->agents().SweepAgentPresence(kNow + 30'001, 300'000)->size(),
            1u);
}

TEST_P(AgentStore,
       MigratedGenerationZeroAgentHeartbeatsLegacyThenReRegistersToOne) {
  Close();  // opened and migrated, then written behind its back
  this->store();
  Close();
  ASSERT_EQ(Exec("INSERT INTO agents (agent_id, cli, last_seen_ms, "
                 "lease_expires_ms, status) VALUES "
                 "('old', 'claude', 1, 999999999999999, 'online')"),
            "");
  Store* store = &this->store();
  EXPECT_EQ(store->agents().GetAgent("old")->presence_generation, 0);
  EXPECT_EQ(store->agents()
                .RefreshLeaseForGeneration("old", std::nullopt, kNow, 1000)
                ->outcome,
            PresenceOutcome::kApplied);
  EXPECT_EQ(store->agents().RegisterAgent(Reg("old"))->presence_generation, 1);
}

TEST_P(AgentStore, LeaseCheckpointWritesOnlyCurrentOwnersThatAreNotOffline) {
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("live")).ok());
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("moved")).ok());
  ASSERT_TRUE(
      store->agents().RegisterAgent(Reg("moved")).ok());  // generation 2
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("gone")).ok());
  ASSERT_TRUE(store->agents()
                  .SetAgentStatusForGeneration("gone", 1, AgentStatus::kOffline)
                  .ok());
  std::vector<LeaseCheckpoint> batch = {
      {"live", 1, kNow + 10, kNow + 90'000},
      {"moved", 1, kNow + 10, kNow + 90'000},
      {"gone", 1, kNow + 10, kNow + 90'000},
      {"ghost", 1, kNow + 10, kNow + 90'000},
  };
  absl::StatusOr<std::vector<bool>> written =
      store->agents().CheckpointLeases(batch);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(store->agents().GetAgent("live")->lease_expires_ms, kNow + 90'000);
  EXPECT_EQ(store->agents().GetAgent("moved")->lease_expires_ms, kNow + 30'000);
  EXPECT_EQ(store->agents().GetAgent("gone")->status, AgentStatus::kOffline);
  EXPECT_TRUE(store->agents().CheckpointLeases({})->empty());
}

TEST_P(AgentStore, TheLeaseTtlIsStoredByRegistrationHeartbeatAndCheckpoint) {
  Store* store = &this->store();
  ASSERT_EQ(store->agents().RegisterAgent(Reg("a1"))->lease_ttl_ms, 30'000);
  absl::StatusOr<PresenceWrite> refreshed =
      store->agents().RefreshLeaseForGeneration("a1", 1, kNow + 10, 45'000);
  ASSERT_TRUE(refreshed.ok());
  EXPECT_EQ(refreshed->agent->lease_ttl_ms, 45'000);
  ASSERT_TRUE(
      store->agents()
          .CheckpointLeases({{"a1", 1, kNow + 20, kNow + 80'020, 80'000}})
          .ok());
  EXPECT_EQ(store->agents().GetAgent("a1")->lease_ttl_ms, 80'000);
}

TEST_P(AgentStore, GetAgentOfUnknownIdIsNotFound) {
  Store* store = &this->store();
  EXPECT_EQ(ReasonOf(store->agents().GetAgent("nobody").status()),
            "AGENT_NOT_FOUND");
}

// A database restart (or an idle timeout, or an administrator) closes the
// reader pool's idle connections behind the store's back; the next reads
// still answer, on new connections.
TEST_P(AgentStore, ReadsAnswerAfterTheServerClosedIdleConnections) {
  if (!postgres()) GTEST_SKIP() << "PostgreSQL's reader pool";
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a")).ok());
  ASSERT_TRUE(
      store->agents().GetAgent("a").ok());  // leaves a reader in the pool
  EXPECT_EQ(Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 "WHERE datname = current_database() "
                 "AND pid <> pg_backend_pid()"),
            "");
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<AgentRecord> agent = store->agents().GetAgent("a");
    ASSERT_TRUE(agent.ok()) << i << ": " << agent.status();
    EXPECT_EQ(agent->presence_generation, 1);
  }
}

TEST_P(AgentStore, FirstClaimantOwnsTheAgentAcrossReopens) {
  {
    Store* store = &this->store();
    EXPECT_EQ(*store->agents().ClaimAgentOwner("agent-1", "alice", kNow),
              "alice");
    EXPECT_EQ(*store->agents().ClaimAgentOwner("agent-1", "bob", kNow + 1),
              "alice");
    EXPECT_EQ(*store->agents().ClaimAgentOwner("agent-2", "bob", kNow + 2),
              "bob");
  }
  Reopen();
  Store* store = &this->store();
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> owners =
      store->agents().ListAgentOwners();
  ASSERT_TRUE(owners.ok()) << owners.status();
  ASSERT_EQ(owners->size(), 2u);
  EXPECT_EQ((*owners)[0],
            std::make_pair(std::string("agent-1"), std::string("alice")));
  EXPECT_EQ((*owners)[1],
            std::make_pair(std::string("agent-2"), std::string("bob")));
}

TEST_P(AgentStore, RepeatedCheckpointsOfOneOwnerApplyInOrderTheLastWins) {
  Store* store = &this->store();
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());
  ASSERT_TRUE(store->agents().RegisterAgent(Reg("a1")).ok());  // generation 2
  absl::StatusOr<std::vector<bool>> written = store->agents().CheckpointLeases({
      {"a1", 2, kNow + 10, kNow + 50'000, 49'990},
      {"a1", 1, kNow + 20, kNow + 60'000, 59'980},
      {"a1", 2, kNow + 30, kNow + 70'000, 69'970},
  });
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(store->agents().GetAgent("a1")->lease_expires_ms, kNow + 70'000);
  EXPECT_EQ(store->agents().GetAgent("a1")->last_seen_ms, kNow + 30);
}

TEST_P(AgentStore, PagesFilterByTopicAndSkipMalformedTopicLists) {
  Store* store = &this->store();
  AgentRegistration a = Reg("a");
  a.topics_json = R"(["build","deploy"])";
  AgentRegistration b = Reg("b");
  b.topics_json = R"(["deploy"])";
  AgentRegistration c = Reg("c");
  c.topics_json = "not json";
  AgentRegistration d = Reg("d");
  d.topics_json = R"({"deploy":1})";
  for (const AgentRegistration& r : {a, b, c, d}) {
    ASSERT_TRUE(store->agents().RegisterAgent(r).ok());
  }
  AgentPageQuery q;
  q.topic = "deploy";
  q.limit = 10;
  absl::StatusOr<std::vector<AgentRecord>> page =
      store->agents().ListAgentsPage(q);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].agent_id, "a");
  EXPECT_EQ((*page)[1].agent_id, "b");
}

TEST_P(AgentStore, PagesOrderIdsByteByByteWhateverTheDatabaseCollation) {
  Store* store = &this->store();
  for (const char* id : {"b", "B", "_x", "a", "A"}) {
    ASSERT_TRUE(store->agents().RegisterAgent(Reg(id)).ok());
  }
  AgentPageQuery q;
  q.limit = 2;
  std::vector<std::string> seen;
  while (true) {
    absl::StatusOr<std::vector<AgentRecord>> page =
        store->agents().ListAgentsPage(q);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const AgentRecord& r : *page) seen.push_back(r.agent_id);
    if (static_cast<int64_t>(page->size()) < q.limit) break;
    q.after_agent_id = page->back().agent_id;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"A", "B", "_x", "a", "b"}));
}

// ---- two hubs over one PostgreSQL database ----------------------------------

TEST_P(AgentStore, TwoHubsRegisteringOneAgentAtOnceGetDistinctGenerations) {
  if (!postgres()) GTEST_SKIP() << "one SQLite file has one hub";
  std::unique_ptr<Store> hub_a = Open();
  std::unique_ptr<Store> hub_b = Open();
  ASSERT_NE(hub_a, nullptr);
  ASSERT_NE(hub_b, nullptr);
  constexpr int kPerThread = 25;
  std::vector<std::vector<int64_t>> generations(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    Store* hub = t % 2 == 0 ? hub_a.get() : hub_b.get();
    threads.emplace_back([hub, t, &generations] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<AgentRecord> a =
            hub->agents().RegisterAgent(Reg("shared"));
        ASSERT_TRUE(a.ok()) << a.status();
        generations[t].push_back(a->presence_generation);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  absl::flat_hash_set<int64_t> distinct;
  for (const std::vector<int64_t>& g : generations) {
    distinct.insert(g.begin(), g.end());
  }
  EXPECT_EQ(distinct.size(), 4u * kPerThread);
  EXPECT_EQ(hub_a->agents().GetAgent("shared")->presence_generation,
            4 * kPerThread);
}

TEST_P(AgentStore, TwoHubsSweepingAtOnceReportEachTransitionOnce) {
  if (!postgres()) GTEST_SKIP() << "one SQLite file has one hub";
  std::unique_ptr<Store> hub_a = Open();
  std::unique_ptr<Store> hub_b = Open();
  constexpr int kAgents = 200;
  for (int i = 0; i < kAgents; ++i) {
    ASSERT_TRUE(
        hub_a->agents().RegisterAgent(Reg(absl::StrCat("agent-", i))).ok());
  }
  constexpr int64_t kLater = kNow + 30'001;
  std::atomic<int> reported{0};
  std::vector<std::thread> threads;
  for (Store* hub : {hub_a.get(), hub_b.get(), hub_a.get(), hub_b.get()}) {
    threads.emplace_back([hub, &reported] {
      absl::StatusOr<std::vector<PresenceTransition>> swept =
          hub->agents().SweepAgentPresence(kLater, 300'000);
      ASSERT_TRUE(swept.ok()) << swept.status();
      reported += static_cast<int>(swept->size());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(reported.load(), kAgents);
  absl::StatusOr<std::vector<AgentRecord>> agents =
      hub_b->agents().ListAgents();
  ASSERT_TRUE(agents.ok()) << agents.status();
  for (const AgentRecord& a : *agents) {
    EXPECT_EQ(a.status, AgentStatus::kStale) << a.agent_id;
  }
}

TEST_P(AgentStore, TwoHubsClaimingOneAgentAgreeOnOneOwner) {
  if (!postgres()) GTEST_SKIP() << "one SQLite file has one hub";
  std::unique_ptr<Store> hub_a = Open();
  std::unique_ptr<Store> hub_b = Open();
  for (int round = 0; round < 20; ++round) {
    const std::string id = absl::StrCat("claimed-", round);
    std::string owner_a, owner_b;
    std::thread a(
        [&] { owner_a = *hub_a->agents().ClaimAgentOwner(id, "alice", kNow); });
    std::thread b(
        [&] { owner_b = *hub_b->agents().ClaimAgentOwner(id, "bob", kNow); });
    a.join();
    b.join();
    EXPECT_EQ(owner_a, owner_b) << id;
  }
}

}  // namespace
}  // namespace hub::storage
