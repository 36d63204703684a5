#include "registry/presence.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub {
namespace {

using storage::testing::FreshDbPath;
using storage::testing::OpenOrDie;
using storage::testing::RawDb;

constexpr char kInstance[] = "01900000-0000-7000-8000-000000000001";
constexpr char kFingerprint[] = "sqlite:test";

class FakeStream : public PresenceStream {
 public:
  void Fence(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    fences_.push_back(status);
  }
  bool DeliverActivation(const ActivationEnvelope& envelope) override {
    absl::MutexLock lock(&mu_);
    activations_.push_back(envelope);
    return true;
  }
  std::vector<absl::Status> fences() {
    absl::MutexLock lock(&mu_);
    return fences_;
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::Status> fences_;
  std::vector<ActivationEnvelope> activations_;
};

struct Gone {
  std::string agent_id;
  int64_t generation;
  AgentGoneReason reason;
};

class PresenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = FreshDbPath();
    store_ = OpenOrDie(path_);
    Reopen();
  }

  // A new registry over the same store, as after a hub restart.
  void Reopen() {
    registry_ = std::make_unique<PresenceRegistry>(
        &store_->agents(), store_->membership(), &clock_, PresenceConfig(),
        kInstance, kFingerprint);
    registry_->SetGoneListener(
        [this](const std::string& id, int64_t gen, AgentGoneReason reason) {
          absl::MutexLock lock(&gone_mu_);
          gone_.push_back({id, gen, reason});
        });
    ASSERT_TRUE(registry_->Recover().ok());
  }

  AgentView Register(const std::string& id,
                     absl::Duration ttl = absl::Seconds(30)) {
    RegisterInput in;
    in.agent_id = id;
    in.cli = "claude";
    in.ttl = ttl;
    absl::StatusOr<AgentView> view = registry_->Register(in);
    EXPECT_TRUE(view.ok()) << view.status();
    return view.ok() ? *view : AgentView();
  }

  absl::StatusOr<AgentView> Heartbeat(const std::string& id,
                                      std::optional<int64_t> generation) {
    HeartbeatInput in;
    in.agent_id = id;
    in.generation = generation;
    return registry_->Heartbeat(in);
  }

  // Advances the clock in one-second ticks, as hubd's ticker would.
  void RunFor(absl::Duration d) {
    for (absl::Duration t; t < d; t += absl::Seconds(1)) {
      clock_.Advance(absl::Seconds(1));
      registry_->Tick();
    }
  }

  AgentStatus StoredStatus(const std::string& id) {
    return store_->agents().GetAgent(id)->status;
  }

  std::vector<Gone> gone() {
    absl::MutexLock lock(&gone_mu_);
    return gone_;
  }

  // Writes `count` agents straight to the store in a few group commits
  // (agent-0000 ...; project of agent i: prj_a, prj_b or none by i % 3; cli
  // codex for even i), then restarts the registry over them.
  void Populate(int count) {
    absl::BlockingCounter written(count);
    for (int i = 0; i < count; ++i) {
      storage::AgentRegistration r;
      r.agent_id = absl::StrFormat("agent-%04d", i);
      r.cli = i % 2 == 0 ? "codex" : "claude";
      r.now_ms = UnixMillis(clock_.Now());
      if (i % 3 == 0) r.project_id = std::string("prj_a");
      if (i % 3 == 1) r.project_id = std::string("prj_b");
      store_->agents().RegisterAgentAsync(
          r, [&written](absl::StatusOr<AgentRecord> row) {
            EXPECT_TRUE(row.ok()) << row.status();
            written.DecrementCount();
          });
    }
    written.Wait();
    Reopen();
  }

  // Every agent id List returns for `filter`, page by page; each page but
  // the last must be full.
  std::vector<std::string> ListAll(const AgentFilter& filter, int page_size) {
    std::vector<std::string> ids;
    std::string token;
    for (int pages = 0; pages < 10'000; ++pages) {
      absl::StatusOr<AgentPage> page =
          registry_->List(filter, page_size, token);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      for (const AgentView& v : page->agents) ids.push_back(v.record.agent_id);
      if (page->next_page_token.empty()) break;
      EXPECT_EQ(static_cast<int>(page->agents.size()), page_size)
          << "a short middle page";
      token = page->next_page_token;
    }
    return ids;
  }

  FakeClock clock_;
  std::string path_;
  std::unique_ptr<storage::SqliteStore> store_;
  std::unique_ptr<PresenceRegistry> registry_;
  absl::Mutex gone_mu_;
  std::vector<Gone> gone_;
};

TEST_F(PresenceTest, RegistrationIsDurableOnlineAtGenerationOne) {
  AgentView view = Register("agent-a");
  EXPECT_EQ(view.record.presence_generation, 1);
  EXPECT_EQ(view.record.status, AgentStatus::kOnline);
  AgentRecord row = *store_->agents().GetAgent("agent-a");
  EXPECT_EQ(row.presence_generation, 1);
  EXPECT_EQ(row.status, AgentStatus::kOnline);
  EXPECT_EQ(row.lease_expires_ms, UnixMillis(clock_.Now()) + 30'000);
}

TEST_F(PresenceTest, ReRegistrationBumpsTheGenerationAndFencesTheOldStream) {
  Register("agent-a");
  auto stream = std::make_shared<FakeStream>();
  ASSERT_TRUE(registry_->Attach("agent-a", 1, {}, stream).ok());
  EXPECT_EQ(Register("agent-a").record.presence_generation, 2);
  ASSERT_EQ(stream->fences().size(), 1u);
  EXPECT_EQ(ReasonOf(stream->fences()[0]), "STALE_PRESENCE_OWNER");
  ASSERT_EQ(gone().size(), 1u);
  EXPECT_EQ(gone()[0].reason, AgentGoneReason::kSuperseded);
  EXPECT_EQ(gone()[0].generation, 1);
}

TEST_F(PresenceTest,
       HeartbeatRenewsTheLeaseInMemoryAndTheCheckpointPersistsIt) {
  Register("agent-a");
  const int64_t registered_lease =
      store_->agents().GetAgent("agent-a")->lease_expires_ms;
  clock_.Advance(absl::Seconds(20));
  absl::StatusOr<AgentView> hb = Heartbeat("agent-a", 1);
  ASSERT_TRUE(hb.ok()) << hb.status();
  const int64_t renewed = UnixMillis(clock_.Now()) + 30'000;
  EXPECT_EQ(hb->record.lease_expires_ms, renewed);
  // No disk write on the hot path...
  EXPECT_EQ(store_->agents().GetAgent("agent-a")->lease_expires_ms,
            registered_lease);
  // ...the next checkpoint writes it.
  registry_->Tick();
  EXPECT_EQ(store_->agents().GetAgent("agent-a")->lease_expires_ms, renewed);
}

TEST_F(PresenceTest, HeartbeatOfASupersededGenerationIsStalePresenceOwner) {
  Register("agent-a");
  Register("agent-a");
  absl::StatusOr<AgentView> hb = Heartbeat("agent-a", 1);
  EXPECT_EQ(hb.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(hb.status()), "STALE_PRESENCE_OWNER");
  EXPECT_EQ(MetadataOf(hb.status())["presence_generation"], "2");
  EXPECT_TRUE(Heartbeat("agent-a", 2).ok());
}

TEST_F(PresenceTest, HeartbeatWithoutGenerationIsAcceptedAsLegacy) {
  Register("agent-a");
  EXPECT_TRUE(Heartbeat("agent-a", std::nullopt).ok());
}

TEST_F(PresenceTest, HeartbeatOfAnUnknownAgentIsNotFoundAndNamesIt) {
  absl::StatusOr<AgentView> hb = Heartbeat("nobody", std::nullopt);
  EXPECT_EQ(hb.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReasonOf(hb.status()), "AGENT_NOT_FOUND");
  EXPECT_EQ(MetadataOf(hb.status())["agent_id"], "nobody");
  absl::StatusOr<AgentView> got = registry_->Get("nobody");
  EXPECT_EQ(ReasonOf(got.status()), "AGENT_NOT_FOUND");
  EXPECT_EQ(MetadataOf(got.status())["agent_id"], "nobody");
}

TEST_F(PresenceTest, SweepMarksAnExpiredAgentStaleThenOfflineFiveMinutesLater) {
  Register("agent-a", absl::Seconds(10));
  RunFor(absl::Seconds(9));
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kOnline);
  RunFor(absl::Seconds(2));
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kStale);
  EXPECT_EQ(registry_->Counts().stale, 1);
  RunFor(absl::Minutes(5) - absl::Seconds(2));
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kStale);
  RunFor(absl::Seconds(3));
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kOffline);
  ASSERT_EQ(gone().size(), 1u);
  EXPECT_EQ(gone()[0].reason, AgentGoneReason::kOffline);
}

TEST_F(PresenceTest, HeartbeatBringsAStaleAgentBackOnlineDurably) {
  Register("agent-a", absl::Seconds(10));
  RunFor(absl::Seconds(12));
  ASSERT_EQ(StoredStatus("agent-a"), AgentStatus::kStale);
  ASSERT_TRUE(Heartbeat("agent-a", 1).ok());
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kOnline);
  RunFor(absl::Seconds(5));
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kOnline);
}

TEST_F(PresenceTest, AnOfflineAgentMustRegisterAgain) {
  Register("agent-a", absl::Seconds(10));
  RunFor(absl::Seconds(12) + absl::Minutes(5));
  ASSERT_EQ(StoredStatus("agent-a"), AgentStatus::kOffline);
  absl::StatusOr<AgentView> hb = Heartbeat("agent-a", 1);
  EXPECT_EQ(ReasonOf(hb.status()), "AGENT_OFFLINE");
  EXPECT_EQ(Register("agent-a").record.presence_generation, 2);
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kOnline);
}

TEST_F(PresenceTest,
       DeregisterByTheOldOwnerIsRejectedAndTheNewOwnerStaysOnline) {
  Register("agent-a");
  Register("agent-a");  // B takes over the id
  absl::StatusOr<DeregisterOutcome> out =
      registry_->Deregister("agent-a", 1, {});
  EXPECT_EQ(ReasonOf(out.status()), "STALE_PRESENCE_OWNER");
  AgentRecord row = *store_->agents().GetAgent("agent-a");
  EXPECT_EQ(row.status, AgentStatus::kOnline);
  EXPECT_EQ(row.presence_generation, 2);
}

TEST_F(PresenceTest, DeregisterGoesOfflineAtOnceAndIsIdempotent) {
  Register("agent-a");
  auto stream = std::make_shared<FakeStream>();
  ASSERT_TRUE(registry_->Attach("agent-a", 1, {}, stream).ok());
  absl::StatusOr<DeregisterOutcome> first =
      registry_->Deregister("agent-a", 1, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->changed);
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kOffline);
  ASSERT_EQ(stream->fences().size(), 1u);
  EXPECT_EQ(ReasonOf(stream->fences()[0]), "AGENT_DEREGISTERED");
  absl::StatusOr<DeregisterOutcome> second =
      registry_->Deregister("agent-a", 1, {});
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->changed);
  ASSERT_EQ(gone().size(), 1u);
  EXPECT_EQ(gone()[0].reason, AgentGoneReason::kDeregistered);
}

TEST_F(PresenceTest, AnAttachedStreamKeepsTheAgentPresentWithoutHeartbeats) {
  Register("agent-a", absl::Seconds(10));
  auto stream = std::make_shared<FakeStream>();
  ASSERT_TRUE(registry_->Attach("agent-a", 1, {}, stream).ok());
  RunFor(absl::Minutes(10));
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kOnline);
  EXPECT_GT(store_->agents().GetAgent("agent-a")->lease_expires_ms,
            UnixMillis(clock_.Now()));
  EXPECT_TRUE(gone().empty());
  EXPECT_EQ(registry_->Counts().open_streams, 1);
}

TEST_F(PresenceTest, StreamEndStartsTheGraceThenTheAgentCountsAsGone) {
  Register("agent-a");
  auto stream = std::make_shared<FakeStream>();
  absl::StatusOr<uint64_t> id = registry_->Attach("agent-a", 1, {}, stream);
  ASSERT_TRUE(id.ok());
  registry_->Detach("agent-a", *id);
  clock_.Advance(absl::Milliseconds(1900));
  registry_->Tick();
  EXPECT_TRUE(gone().empty());
  clock_.Advance(absl::Milliseconds(100));
  registry_->Tick();
  ASSERT_EQ(gone().size(), 1u);
  EXPECT_EQ(gone()[0].reason, AgentGoneReason::kStreamGrace);
  // The lease still governs status: the agent is online until it expires.
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kOnline);
}

TEST_F(PresenceTest,
       AgentChangedIsPublishedForEachPresenceChangeButNotRenewals) {
  std::vector<std::string> changed;
  FleetEvents events;
  events.Subscribe([&changed](const FleetEvent& event) {
    if (const auto* agent = std::get_if<AgentChanged>(&event)) {
      changed.push_back(agent->agent_id);
    }
  });
  registry_->SetEvents(&events);
  Register("agent-a");
  EXPECT_EQ(changed, std::vector<std::string>{"agent-a"});
  auto stream = std::make_shared<FakeStream>();
  absl::StatusOr<uint64_t> id = registry_->Attach("agent-a", 1, {}, stream);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(changed.size(), 2u);
  ASSERT_TRUE(Heartbeat("agent-a", 1).ok());  // a renewal: nothing to show
  EXPECT_EQ(changed.size(), 2u);
  registry_->Detach("agent-a", *id);
  EXPECT_EQ(changed.size(), 3u);
  RunFor(absl::Seconds(3));  // the grace ends
  EXPECT_EQ(changed.size(), 4u);
  RunFor(absl::Seconds(30));  // online -> stale
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kStale);
  EXPECT_EQ(changed.size(), 5u);
  ASSERT_TRUE(registry_->Deregister("agent-a", 1, {}).ok());
  EXPECT_EQ(changed.size(), 6u);
  for (const std::string& c : changed) EXPECT_EQ(c, "agent-a");
}

TEST_F(PresenceTest, TheTimeToTheNextGraceEndFollowsTheEarliestRunningGrace) {
  EXPECT_EQ(registry_->TimeToNextGraceEnd(), std::nullopt);
  Register("agent-a");
  Register("agent-b");
  absl::StatusOr<uint64_t> a =
      registry_->Attach("agent-a", 1, {}, std::make_shared<FakeStream>());
  absl::StatusOr<uint64_t> b =
      registry_->Attach("agent-b", 1, {}, std::make_shared<FakeStream>());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(registry_->TimeToNextGraceEnd(), std::nullopt);
  registry_->Detach("agent-a", *a);
  clock_.Advance(absl::Milliseconds(500));
  registry_->Detach("agent-b", *b);
  EXPECT_EQ(registry_->TimeToNextGraceEnd(), absl::Milliseconds(1500));
  clock_.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(registry_->TimeToNextGraceEnd(), absl::ZeroDuration());
  registry_->Tick();  // agent-a is gone; agent-b's grace runs on
  ASSERT_EQ(gone().size(), 1u);
  EXPECT_EQ(registry_->TimeToNextGraceEnd(), absl::Milliseconds(500));
  // A re-attach ends agent-b's grace; the next Tick forgets it.
  ASSERT_TRUE(
      registry_->Attach("agent-b", 1, {}, std::make_shared<FakeStream>()).ok());
  registry_->Tick();
  EXPECT_EQ(registry_->TimeToNextGraceEnd(), std::nullopt);
}

TEST_F(PresenceTest, ReattachingWithinTheGraceKeepsTheAgentPresent) {
  Register("agent-a");
  auto first = std::make_shared<FakeStream>();
  absl::StatusOr<uint64_t> id = registry_->Attach("agent-a", 1, {}, first);
  registry_->Detach("agent-a", *id);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(
      registry_->Attach("agent-a", 1, {}, std::make_shared<FakeStream>()).ok());
  RunFor(absl::Seconds(5));
  EXPECT_TRUE(gone().empty());
}

TEST_F(PresenceTest, ANewAttachReplacesTheOldStream) {
  Register("agent-a");
  auto first = std::make_shared<FakeStream>();
  absl::StatusOr<uint64_t> first_id =
      registry_->Attach("agent-a", 1, {}, first);
  absl::StatusOr<uint64_t> second_id =
      registry_->Attach("agent-a", 1, {}, std::make_shared<FakeStream>());
  ASSERT_TRUE(second_id.ok());
  ASSERT_EQ(first->fences().size(), 1u);
  EXPECT_EQ(ReasonOf(first->fences()[0]), "PRESENCE_STREAM_REPLACED");
  EXPECT_EQ(ReasonOf(registry_->CheckStream("agent-a", 1, *first_id)),
            "PRESENCE_STREAM_REPLACED");
  // The replaced stream's end does not start a grace.
  registry_->Detach("agent-a", *first_id);
  RunFor(absl::Seconds(5));
  EXPECT_TRUE(gone().empty());
}

// The registry takes a stream away before its fence reaches the reactor,
// which may read one more frame meanwhile: that frame hears why the stream
// ends, not that a newer one replaced it (a client told
// PRESENCE_STREAM_REPLACED gives its identity up for good).
TEST_F(PresenceTest, AFrameOnAStreamTheHubIsEndingHearsWhyItEnds) {
  Register("agent-a");
  absl::StatusOr<uint64_t> id =
      registry_->Attach("agent-a", 1, {}, std::make_shared<FakeStream>());
  ASSERT_TRUE(id.ok());
  registry_->DropHolds(
      UnavailableError("HUB_SEAT_LOST", "lease_not_renewed_in_time"));
  EXPECT_EQ(ReasonOf(registry_->CheckStream("agent-a", 1, *id)),
            "HUB_SEAT_LOST");

  absl::StatusOr<uint64_t> again =
      registry_->Attach("agent-a", 1, {}, std::make_shared<FakeStream>());
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(registry_->Deregister("agent-a", 1, {}).ok());
  EXPECT_EQ(ReasonOf(registry_->CheckStream("agent-a", 1, *again)),
            "AGENT_DEREGISTERED");
}

TEST_F(PresenceTest, AFrameOnAStreamEndedByShutdownHearsTheShutdown) {
  Register("agent-a");
  absl::StatusOr<uint64_t> id =
      registry_->Attach("agent-a", 1, {}, std::make_shared<FakeStream>());
  ASSERT_TRUE(id.ok());
  registry_->Shutdown();
  EXPECT_EQ(ReasonOf(registry_->CheckStream("agent-a", 1, *id)),
            "HUB_SHUTTING_DOWN");
}

TEST_F(PresenceTest, AttachWithAStaleGenerationIsRejected) {
  Register("agent-a");
  Register("agent-a");
  absl::StatusOr<uint64_t> id =
      registry_->Attach("agent-a", 1, {}, std::make_shared<FakeStream>());
  EXPECT_EQ(ReasonOf(id.status()), "STALE_PRESENCE_OWNER");
}

TEST_F(PresenceTest, ARestartExtendsLeasesSoNoPresentAgentIsDeclaredDead) {
  Register("agent-a", absl::Seconds(10));
  Register("agent-b", absl::Seconds(40));
  clock_.Advance(absl::Seconds(9));
  // The hub is down for a minute: longer than either lease.
  clock_.Advance(absl::Minutes(1));
  Reopen();
  // Each lease is extended by the agent's own TTL from the restart.
  RunFor(absl::Seconds(9));
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kOnline);
  EXPECT_EQ(StoredStatus("agent-b"), AgentStatus::kOnline);
  // An agent that does not come back expires one TTL after the restart.
  RunFor(absl::Seconds(3));
  EXPECT_EQ(StoredStatus("agent-a"), AgentStatus::kStale);
  EXPECT_EQ(StoredStatus("agent-b"), AgentStatus::kOnline);
  RunFor(absl::Seconds(30));
  EXPECT_EQ(StoredStatus("agent-b"), AgentStatus::kStale);
}

TEST_F(PresenceTest, AHubIdentityFromAnotherInstanceOrStoreIsRejected) {
  Register("agent-a");
  HeartbeatInput in;
  in.agent_id = "agent-a";
  in.fence.hub_instance_id = "another-instance";
  EXPECT_EQ(ReasonOf(registry_->Heartbeat(in).status()), "STALE_HUB_INSTANCE");
  in.fence.hub_instance_id = kInstance;
  in.fence.store_fingerprint = "sqlite:another";
  absl::Status s = registry_->Heartbeat(in).status();
  EXPECT_EQ(ReasonOf(s), "STORE_FINGERPRINT_MISMATCH");
  EXPECT_EQ(MetadataOf(s)["store_fingerprint"], kFingerprint);
  in.fence.store_fingerprint = kFingerprint;
  EXPECT_TRUE(registry_->Heartbeat(in).ok());
}

// TRIFLUX-HUB §9.7 scenario 2: after A's lease expired, every ordering of
// {register B, heartbeat A, deregister A, sweep}. A's writes succeed only
// while B has not registered (and a heartbeat also needs A not to have left);
// the row always ends online with B's generation.
TEST_F(PresenceTest, EveryOrderingOfALateOwnerAndANewOwnerEndsWithTheNewOwner) {
  std::vector<int> ops = {0, 1, 2, 3};
  int orderings = 0;
  do {
    registry_.reset();
    store_.reset();
    SetUp();
    gone_.clear();
    Register("agent-a", absl::Seconds(10));
    clock_.Advance(absl::Seconds(11));
    bool b_registered = false, a_left = false;
    for (int op : ops) {
      switch (op) {
        case 0:
          Register("agent-a");
          b_registered = true;
          break;
        case 1: {
          absl::StatusOr<AgentView> hb = Heartbeat("agent-a", 1);
          EXPECT_EQ(hb.ok(), !b_registered && !a_left) << hb.status();
          break;
        }
        case 2: {
          absl::StatusOr<DeregisterOutcome> d =
              registry_->Deregister("agent-a", 1, {});
          EXPECT_EQ(d.ok(), !b_registered) << d.status();
          if (d.ok()) a_left = true;
          break;
        }
        case 3:
          clock_.Advance(absl::Seconds(1));
          registry_->Tick();
          break;
      }
    }
    AgentRecord row = *store_->agents().GetAgent("agent-a");
    EXPECT_EQ(row.status, AgentStatus::kOnline);
    EXPECT_EQ(row.presence_generation, 2);
    ++orderings;
  } while (std::next_permutation(ops.begin(), ops.end()));
  EXPECT_EQ(orderings, 24);
}

TEST_F(PresenceTest, ListAgentsFiltersAndPagesInAgentIdOrder) {
  for (const char* id : {"agent-c", "agent-a", "agent-b", "agent-d"})
    Register(id);
  ASSERT_TRUE(registry_->Deregister("agent-d", std::nullopt, {}).ok());
  AgentFilter online;
  online.statuses = {AgentStatus::kOnline};
  absl::StatusOr<AgentPage> page = registry_->List(online, 2, "");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->agents.size(), 2u);
  EXPECT_EQ(page->agents[0].record.agent_id, "agent-a");
  EXPECT_EQ(page->agents[1].record.agent_id, "agent-b");
  ASSERT_FALSE(page->next_page_token.empty());
  absl::StatusOr<AgentPage> next =
      registry_->List(online, 2, page->next_page_token);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->agents.size(), 1u);
  EXPECT_EQ(next->agents[0].record.agent_id, "agent-c");
  EXPECT_TRUE(next->next_page_token.empty());
  EXPECT_EQ(ReasonOf(registry_->List(online, 2, "garbage!").status()),
            "PAGE_TOKEN_INVALID");
}

TEST_F(PresenceTest,
       PagingHundredsOfAgentsByScopeCliAndLiveStatusShowsEachOnceInOrder) {
  Populate(300);
  // Every fourth agent goes offline: the status is the live one in memory.
  for (int i = 0; i < 300; i += 4) {
    ASSERT_TRUE(
        registry_
            ->Deregister(absl::StrFormat("agent-%04d", i), std::nullopt, {})
            .ok());
  }
  for (AgentStatus status : {AgentStatus::kOnline, AgentStatus::kOffline}) {
    AgentFilter filter;
    filter.statuses = {status};
    filter.clis = {"codex"};
    filter.scope.all = false;
    filter.scope.projects = {"prj_a", "prj_b"};
    std::vector<std::string> expected;
    for (int i = 0; i < 300; ++i) {
      const bool offline = i % 4 == 0;
      if (i % 2 == 0 && i % 3 != 2 &&
          offline == (status == AgentStatus::kOffline)) {
        expected.push_back(absl::StrFormat("agent-%04d", i));
      }
    }
    ASSERT_GT(expected.size(), 40u);
    for (int page_size : {1, 7, 20, 1000}) {
      EXPECT_EQ(ListAll(filter, page_size), expected)
          << status << ", page size " << page_size;
    }
  }
  AgentFilter none;
  none.scope.all = false;  // a token with no projects sees nothing
  EXPECT_TRUE(ListAll(none, 10).empty());
}

TEST_F(PresenceTest, APageOfTenAmongTwoThousandAgentsReadsAboutTenRows) {
  Populate(2000);
  AgentFilter all;
  int64_t before = store_->rows_read();
  absl::StatusOr<AgentPage> page = registry_->List(all, 10, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->agents.size(), 10u);
  // The page and the one row that proves a next page.
  EXPECT_EQ(store_->rows_read() - before, 11);

  before = store_->rows_read();
  absl::StatusOr<AgentPage> next =
      registry_->List(all, 10, page->next_page_token);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->agents.front().record.agent_id, "agent-0010");
  EXPECT_EQ(store_->rows_read() - before, 11);

  // Filters in SQL cost nothing extra; with one only memory decides (the
  // live status) the page reads in chunks of 64: one here, since every
  // agent is online.
  AgentFilter scoped;
  scoped.clis = {"codex"};
  scoped.scope.all = false;
  scoped.scope.projects = {"prj_b"};
  scoped.statuses = {AgentStatus::kOnline};
  before = store_->rows_read();
  absl::StatusOr<AgentPage> filtered =
      registry_->List(scoped, 10, next->next_page_token);
  ASSERT_TRUE(filtered.ok());
  ASSERT_EQ(filtered->agents.size(), 10u);
  // After agent-0019, the first even id with i % 3 == 1.
  EXPECT_EQ(filtered->agents.front().record.agent_id, "agent-0022");
  EXPECT_LE(store_->rows_read() - before, 64);
  EXPECT_FALSE(filtered->next_page_token.empty());
}

}  // namespace
}  // namespace hub
