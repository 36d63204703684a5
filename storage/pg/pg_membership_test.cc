// Hubs sharing one PostgreSQL database: seats with leases on the database's
// clock, presence held by a seat, takeover of a dead hub's agents, and the
// fences that keep a dead (or zombie) hub's writes out.
#include "storage/pg/pg_membership.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/pg/pg_store.h"
#include "storage/pg/pg_test_database.h"

namespace hub::storage::pg {
namespace {

constexpr int64_t kLongTtl = 60'000;

class PgMembershipTest : public testing::PgDatabaseTest {
 protected:
  std::unique_ptr<PostgresStore> OpenHub(const std::string& hub_id) {
    PostgresStoreOptions options;
    options.conninfo = server_->ConnInfo(database_);
    options.hub_id = hub_id;
    absl::StatusOr<std::unique_ptr<PostgresStore>> store =
        PostgresStore::Open(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  static AgentRecord Register(PostgresStore& store, const std::string& id,
                              int64_t now_ms = 1'000) {
    AgentRegistration r;
    r.agent_id = id;
    r.cli = "claude";
    r.now_ms = now_ms;
    r.lease_ttl_ms = 30'000;
    absl::StatusOr<AgentRecord> record = store.agents().RegisterAgent(r);
    EXPECT_TRUE(record.ok()) << record.status();
    return record.ok() ? *record : AgentRecord();
  }

  static absl::StatusOr<HubSeat> Join(PostgresStore& store,
                                      const std::string& address) {
    absl::StatusOr<Membership::Joined> joined =
        store.membership()->Join(address, kLongTtl);
    if (!joined.ok()) return joined.status();
    return joined->seat;
  }

  // The stream hub columns of an agent, "hub/incarnation" or "none".
  std::string StreamHub(const std::string& agent_id) {
    std::unique_ptr<Connection> conn = Connect();
    absl::StatusOr<Result> r = conn->Query(
        "SELECT COALESCE(stream_hub_id || '/' || stream_hub_incarnation, "
        "'none') FROM agents WHERE agent_id = $1",
        {agent_id});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->rows() == 1 ? std::string(r->Text(0, 0)) : "?";
  }

  // Ends `hub`'s lease now, in the database's clock (a hub that stopped
  // renewing, without waiting for its TTL).
  void ExpireLease(const std::string& hub) {
    std::unique_ptr<Connection> conn = Connect();
    ASSERT_TRUE(conn->Query("UPDATE hub_hubs SET lease_expires_at = "
                            "clock_timestamp() - interval '1 millisecond' "
                            "WHERE hub_id = $1",
                            {hub})
                    .ok());
  }
};

TEST_F(PgMembershipTest, JoiningGivesEachHubAnIncarnationNoOneHadBefore) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  std::unique_ptr<PostgresStore> b = OpenHub("hub-b");
  absl::StatusOr<HubSeat> seat_a = Join(*a, "a:1");
  absl::StatusOr<HubSeat> seat_b = Join(*b, "b:1");
  ASSERT_TRUE(seat_a.ok()) << seat_a.status();
  ASSERT_TRUE(seat_b.ok()) << seat_b.status();
  EXPECT_NE(seat_a->incarnation, seat_b->incarnation);
  // Joining again (a hub that lost its seat) never reuses a number.
  absl::StatusOr<HubSeat> again = Join(*a, "a:1");
  ASSERT_TRUE(again.ok());
  EXPECT_GT(again->incarnation,
            std::max(seat_a->incarnation, seat_b->incarnation));
  absl::StatusOr<std::vector<HubMember>> hubs = a->membership()->ListHubs();
  ASSERT_TRUE(hubs.ok()) << hubs.status();
  ASSERT_EQ(hubs->size(), 2u);
  EXPECT_EQ((*hubs)[0].hub_id, "hub-a");
  EXPECT_EQ((*hubs)[0].state, HubState::kLive);
  EXPECT_EQ((*hubs)[0].address, "a:1");
  EXPECT_GT((*hubs)[0].lease_expires_ms, (*hubs)[0].now_ms);
  // The lease is the database's clock plus the TTL.
  EXPECT_NEAR((*hubs)[0].lease_expires_ms - (*hubs)[0].renewed_at_ms, kLongTtl,
              5);
}

TEST_F(PgMembershipTest, ARegistrationNamesTheHubThatHoldsThePresence) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  absl::StatusOr<HubSeat> seat = Join(*a, "a:1");
  ASSERT_TRUE(seat.ok());
  Register(*a, "agent-1");
  EXPECT_EQ(StreamHub("agent-1"), absl::StrCat("hub-a/", seat->incarnation));
}

TEST_F(PgMembershipTest, AHubWhoseLeaseRanOutWritesNothingForPresence) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  ASSERT_TRUE(Join(*a, "a:1").ok());
  const AgentRecord agent = Register(*a, "agent-1");
  ExpireLease("hub-a");

  AgentRegistration r;
  r.agent_id = "agent-2";
  r.cli = "codex";
  r.now_ms = 2'000;
  absl::StatusOr<AgentRecord> refused = a->agents().RegisterAgent(r);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(refused.status()), "HUB_SEAT_LOST");
  absl::StatusOr<AgentRecord> absent = a->agents().GetAgent("agent-2");
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);

  // Refused as a whole, as the seat's: not row by row, which would read as
  // another holder of each agent.
  absl::StatusOr<std::vector<bool>> checkpoint = a->agents().CheckpointLeases(
      {{"agent-1", agent.presence_generation, 5'000, 90'000, 30'000}});
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(checkpoint.status()), "HUB_SEAT_LOST");
  EXPECT_EQ(a->agents().GetAgent("agent-1")->lease_expires_ms,
            agent.lease_expires_ms);

  absl::StatusOr<PresenceWrite> claim = a->agents().ClaimPresence(
      "agent-1", agent.presence_generation, 5'000, 30'000);
  EXPECT_EQ(ReasonOf(claim.status()), "HUB_SEAT_LOST");
  absl::StatusOr<bool> released = a->agents().ReleasePresence(
      {"agent-1", agent.presence_generation, 5'000, 90'000, 30'000});
  ASSERT_TRUE(released.ok());
  EXPECT_FALSE(*released);

  // Renewing cannot bring the seat back: the hub must join again.
  absl::StatusOr<RenewOutcome> renew = a->membership()->Renew(kLongTtl);
  ASSERT_TRUE(renew.ok()) << renew.status();
  EXPECT_EQ(*renew, RenewOutcome::kLost);
}

TEST_F(PgMembershipTest, ALiveHubTakesOverTheAgentsOfAHubWhoseLeaseRanOut) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  std::unique_ptr<PostgresStore> b = OpenHub("hub-b");
  ASSERT_TRUE(Join(*a, "a:1").ok());
  absl::StatusOr<HubSeat> seat_b = Join(*b, "b:1");
  ASSERT_TRUE(seat_b.ok());
  const AgentRecord one = Register(*a, "agent-1");
  Register(*a, "agent-2");
  Register(*b, "agent-3");

  // A is alive: nothing to take.
  absl::StatusOr<std::vector<TakenAgent>> none =
      b->membership()->TakeOverDeadHubs();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  ExpireLease("hub-a");
  absl::StatusOr<std::vector<TakenAgent>> taken =
      b->membership()->TakeOverDeadHubs();
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(taken->size(), 2u);
  EXPECT_EQ((*taken)[0].agent_id, "agent-1");
  EXPECT_EQ((*taken)[0].presence_generation, one.presence_generation);
  EXPECT_EQ((*taken)[0].from_hub_id, "hub-a");
  EXPECT_EQ((*taken)[1].agent_id, "agent-2");
  EXPECT_EQ(StreamHub("agent-1"), absl::StrCat("hub-b/", seat_b->incarnation));
  // Declared once: a second pass takes nothing.
  absl::StatusOr<std::vector<TakenAgent>> again =
      b->membership()->TakeOverDeadHubs();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  absl::StatusOr<std::vector<HubMember>> hubs = b->membership()->ListHubs();
  ASSERT_TRUE(hubs.ok());
  EXPECT_EQ((*hubs)[0].state, HubState::kDead);

  // The dead hub finds out when it renews, and joins again under a new
  // incarnation holding nothing: the agents stay with B.
  absl::StatusOr<RenewOutcome> renew = a->membership()->Renew(kLongTtl);
  ASSERT_TRUE(renew.ok());
  EXPECT_EQ(*renew, RenewOutcome::kLost);
  absl::StatusOr<Membership::Joined> rejoined =
      a->membership()->Join("a:1", kLongTtl);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  EXPECT_TRUE(rejoined->taken.empty());
  absl::StatusOr<std::vector<bool>> checkpoint = a->agents().CheckpointLeases(
      {{"agent-1", one.presence_generation, 5'000, 90'000, 30'000}});
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ(*checkpoint, std::vector<bool>{false});
  absl::StatusOr<std::vector<bool>> by_b = b->agents().CheckpointLeases(
      {{"agent-1", one.presence_generation, 5'000, 90'000, 30'000}});
  ASSERT_TRUE(by_b.ok());
  EXPECT_EQ(*by_b, std::vector<bool>{true});
}

TEST_F(PgMembershipTest, AHubThatJoinsAgainKeepsTheAgentsNoOneTookOver) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  absl::StatusOr<HubSeat> first = Join(*a, "a:1");
  ASSERT_TRUE(first.ok());
  const AgentRecord agent = Register(*a, "agent-1");
  Register(*a, "agent-2");
  ASSERT_TRUE(a->agents()
                  .SetAgentStatusForGeneration("agent-2", std::nullopt,
                                               AgentStatus::kOffline)
                  .ok());
  ExpireLease("hub-a");
  absl::StatusOr<Membership::Joined> again =
      a->membership()->Join("a:1", kLongTtl);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->taken.size(), 1u);  // not the offline one
  EXPECT_EQ(again->taken[0].agent_id, "agent-1");
  EXPECT_EQ(again->taken[0].presence_generation, agent.presence_generation);
  EXPECT_EQ(StreamHub("agent-1"),
            absl::StrCat("hub-a/", again->seat.incarnation));
  absl::StatusOr<std::vector<TakenAgent>> held = a->membership()->HeldAgents();
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ((*held)[0].agent_id, "agent-1");
}

TEST_F(PgMembershipTest, AnAgentLeftOnASeatThatIsNotLiveIsTakenOverAnyway) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  std::unique_ptr<PostgresStore> b = OpenHub("hub-b");
  absl::StatusOr<HubSeat> seat_a = Join(*a, "a:1");
  ASSERT_TRUE(seat_a.ok());
  absl::StatusOr<HubSeat> seat_b = Join(*b, "b:1");
  ASSERT_TRUE(seat_b.ok());
  const AgentRecord stray = Register(*a, "agent-stray");
  Register(*a, "agent-kept");
  // What a registration that passed its seat check and committed after its
  // hub joined again leaves: the row names an incarnation no seat has.
  std::unique_ptr<Connection> conn = Connect();
  ASSERT_TRUE(conn->Query("UPDATE agents SET stream_hub_incarnation = $1 "
                          "WHERE agent_id = 'agent-stray'",
                          {absl::StrCat(seat_a->incarnation - 1)})
                  .ok());
  absl::StatusOr<std::vector<TakenAgent>> taken =
      b->membership()->TakeOverDeadHubs();
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(taken->size(), 1u);
  EXPECT_EQ((*taken)[0].agent_id, "agent-stray");
  EXPECT_EQ((*taken)[0].presence_generation, stray.presence_generation);
  EXPECT_EQ((*taken)[0].from_hub_id, "hub-a");
  EXPECT_EQ(StreamHub("agent-stray"),
            absl::StrCat("hub-b/", seat_b->incarnation));
  // A's live seat keeps its own agent.
  EXPECT_EQ(StreamHub("agent-kept"),
            absl::StrCat("hub-a/", seat_a->incarnation));
}

TEST_F(PgMembershipTest, HubsRacingToTakeOverADeadHubTakeEachAgentOnce) {
  constexpr int kHubs = 4;
  std::unique_ptr<PostgresStore> dead = OpenHub("hub-dead");
  ASSERT_TRUE(Join(*dead, "d:1").ok());
  for (int i = 0; i < 20; ++i) Register(*dead, absl::StrCat("agent-", i));
  std::vector<std::unique_ptr<PostgresStore>> hubs;
  for (int i = 0; i < kHubs; ++i) {
    hubs.push_back(OpenHub(absl::StrCat("hub-", i)));
    ASSERT_TRUE(Join(*hubs.back(), "x:1").ok());
  }
  ExpireLease("hub-dead");
  std::vector<absl::StatusOr<std::vector<TakenAgent>>> results(kHubs);
  std::vector<std::thread> racers;
  for (int i = 0; i < kHubs; ++i) {
    racers.emplace_back(
        [&, i] { results[i] = hubs[i]->membership()->TakeOverDeadHubs(); });
  }
  for (std::thread& t : racers) t.join();
  int takers = 0;
  size_t taken = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->empty()) ++takers;
    taken += r->size();
  }
  EXPECT_EQ(takers, 1);
  EXPECT_EQ(taken, 20u);
}

TEST_F(PgMembershipTest, AnAttachThroughAnotherHubEndsTheFirstHubsHold) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  std::unique_ptr<PostgresStore> b = OpenHub("hub-b");
  ASSERT_TRUE(Join(*a, "a:1").ok());
  absl::StatusOr<HubSeat> seat_b = Join(*b, "b:1");
  ASSERT_TRUE(seat_b.ok());
  const AgentRecord agent = Register(*a, "agent-1");

  // A stale generation claims nothing.
  absl::StatusOr<PresenceWrite> stale = b->agents().ClaimPresence(
      "agent-1", agent.presence_generation + 1, 2'000, 30'000);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->outcome, PresenceOutcome::kStaleGeneration);
  absl::StatusOr<PresenceWrite> unknown =
      b->agents().ClaimPresence("nobody", 1, 2'000, 30'000);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->outcome, PresenceOutcome::kNotFound);

  absl::StatusOr<PresenceWrite> claim = b->agents().ClaimPresence(
      "agent-1", agent.presence_generation, 2'000, 30'000);
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->outcome, PresenceOutcome::kApplied);
  EXPECT_EQ(claim->agent->lease_expires_ms, 32'000);
  EXPECT_EQ(StreamHub("agent-1"), absl::StrCat("hub-b/", seat_b->incarnation));

  // A's grace ending is no longer a departure: B holds the agent.
  absl::StatusOr<bool> released = a->agents().ReleasePresence(
      {"agent-1", agent.presence_generation, 5'000, 90'000, 30'000});
  ASSERT_TRUE(released.ok());
  EXPECT_FALSE(*released);
  // B's release writes the lease it kept last.
  absl::StatusOr<bool> by_b = b->agents().ReleasePresence(
      {"agent-1", agent.presence_generation, 6'000, 96'000, 90'000});
  ASSERT_TRUE(by_b.ok());
  EXPECT_TRUE(*by_b);
  EXPECT_EQ(StreamHub("agent-1"), "none");
  absl::StatusOr<AgentRecord> after = b->agents().GetAgent("agent-1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->lease_expires_ms, 96'000);
  EXPECT_EQ(after->lease_ttl_ms, 90'000);
}

TEST_F(PgMembershipTest, AHubThatLeftHasItsAgentsTakenOverWithoutWaiting) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  std::unique_ptr<PostgresStore> b = OpenHub("hub-b");
  ASSERT_TRUE(Join(*a, "a:1").ok());
  ASSERT_TRUE(Join(*b, "b:1").ok());
  Register(*a, "agent-1");
  ASSERT_TRUE(a->membership()->Leave().ok());
  absl::StatusOr<std::vector<TakenAgent>> taken =
      b->membership()->TakeOverDeadHubs();
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(taken->size(), 1u);
  absl::StatusOr<std::vector<HubMember>> hubs = b->membership()->ListHubs();
  ASSERT_TRUE(hubs.ok());
  EXPECT_EQ((*hubs)[0].state, HubState::kLeft);
}

TEST_F(PgMembershipTest, AHubFindsTheMessagesNoPushReachedAndWhoHoldsWhom) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  std::unique_ptr<PostgresStore> b = OpenHub("hub-b");
  ASSERT_TRUE(Join(*a, "a:1").ok());
  ASSERT_TRUE(Join(*b, "b:1").ok());
  Register(*a, "agent-1");
  Register(*b, "agent-2");
  MessageRecord m;
  m.id = "0190a000-0000-7000-8000-000000000001";
  m.type = "event";
  m.from_agent = "agent-2";
  m.to_agent = "agent-1";
  m.topic = "t";
  m.ttl_ms = 60'000;
  m.created_at_ms = 1'000;
  m.expires_at_ms = 61'000;
  m.correlation_id = "c";
  m.trace_id = "t";
  // Published through B: B pushed to its own agent, not to A's.
  ASSERT_TRUE(b->messages()
                  .InsertMessageDelivering(m, {"agent-1", "agent-2"},
                                           {"agent-2"}, 1'000, 0)
                  .ok());
  absl::StatusOr<std::vector<std::string>> holders =
      b->membership()->HubsHolding({"agent-1", "agent-2", "nobody"});
  ASSERT_TRUE(holders.ok()) << holders.status();
  EXPECT_EQ(*holders, std::vector<std::string>{"hub-a"});

  absl::StatusOr<std::vector<UndeliveredMessage>> waiting =
      a->messages().ListUndelivered({"agent-1", "agent-2"}, 2'000, 100);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  ASSERT_EQ(waiting->size(), 1u);
  EXPECT_EQ((*waiting)[0].agent_id, "agent-1");
  EXPECT_EQ((*waiting)[0].message.id, m.id);
  // Pushed (marked delivered): no longer waiting. Expired: never waiting.
  ASSERT_TRUE(
      a->messages().MarkDeliveredIfUnacked(m.id, "agent-1", 2'000).ok());
  waiting = a->messages().ListUndelivered({"agent-1"}, 2'000, 100);
  ASSERT_TRUE(waiting.ok());
  EXPECT_TRUE(waiting->empty());
}

TEST_F(PgMembershipTest,
       OnlyAnotherHubsLiveSeatCountsAsHoldingAnAgentElsewhere) {
  std::unique_ptr<PostgresStore> a = OpenHub("hub-a");
  std::unique_ptr<PostgresStore> b = OpenHub("hub-b");
  ASSERT_TRUE(Join(*a, "a:1").ok());
  ASSERT_TRUE(Join(*b, "b:1").ok());
  Register(*a, "agent-1");
  Register(*b, "agent-2");
  absl::StatusOr<std::vector<Membership::Holding>> held =
      b->membership()->LiveHoldersElsewhere({"agent-1", "agent-2", "nobody"});
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ((*held)[0].agent_id, "agent-1");
  EXPECT_EQ((*held)[0].hub_id, "hub-a");
  // A seat whose lease ran out holds nobody any more, even before anyone
  // declared it dead.
  ExpireLease("hub-a");
  held = b->membership()->LiveHoldersElsewhere({"agent-1"});
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE(held->empty());
}

TEST_F(PgMembershipTest, AStoreThatNeverJoinedWritesPresenceUnfenced) {
  std::unique_ptr<PostgresStore> tool = OpenHub("");
  EXPECT_EQ(tool->membership(), nullptr);
  const AgentRecord agent = Register(*tool, "agent-1");
  EXPECT_EQ(StreamHub("agent-1"), "none");
  absl::StatusOr<std::vector<bool>> checkpoint =
      tool->agents().CheckpointLeases(
          {{"agent-1", agent.presence_generation, 5'000, 90'000, 30'000}});
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ(*checkpoint, std::vector<bool>{true});
}

}  // namespace
}  // namespace hub::storage::pg
