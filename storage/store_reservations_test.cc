// Path reservations on every engine: the conflict rules, fencing tokens,
// how reservations end (TTL, holder offline, re-registered or gone), renew,
// release, list, check, the limits, and racers for one exclusive path (on
// PostgreSQL from two stores, as two hubs would).
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/store.h"
#include "storage/store_test_fixture.h"

namespace hub::storage {
namespace {

using testing::StoreTest;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kTtl = 60'000;

class Reservations : public StoreTest {
 protected:
  void Register(Store& store, const std::string& agent, int64_t now = kNow) {
    AgentRegistration r;
    r.agent_id = agent;
    r.cli = "claude";
    r.now_ms = now;
    r.lease_ttl_ms = 30'000;
    ASSERT_TRUE(store.agents().RegisterAgent(r).ok());
  }
  void Register(const std::string& agent) { Register(store(), agent); }

  ReservationRequest Request(const std::string& agent,
                             std::vector<std::string> patterns,
                             bool exclusive = true,
                             const std::string& project = "prj_1") {
    ReservationRequest r;
    r.reservation_id = NewUuidV7();
    r.project_id = project;
    r.agent_id = agent;
    r.exclusive = exclusive;
    r.patterns = std::move(patterns);
    r.reason = "editing";
    r.now_ms = kNow;
    r.ttl_ms = kTtl;
    return r;
  }

  // Reserves and expects a grant.
  ReservationRecord Granted(const ReservationRequest& r) {
    absl::StatusOr<ReservationOutcome> out = store().reservations().Reserve(r);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    EXPECT_TRUE(out->granted.has_value())
        << "conflicts with " << out->conflicts.size() << " reservations";
    EXPECT_TRUE(out->conflicts.empty());
    return out->granted.value_or(ReservationRecord{});
  }
  // Reserves and expects a refusal; returns the conflicts.
  std::vector<ReservationConflict> Refused(const ReservationRequest& r) {
    absl::StatusOr<ReservationOutcome> out = store().reservations().Reserve(r);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    EXPECT_FALSE(out->granted.has_value());
    EXPECT_FALSE(out->conflicts.empty());
    return out->conflicts;
  }
  std::string Rows() { return Query("SELECT COUNT(*) FROM hub_reservations"); }
};

TEST_P(Reservations, AnExclusiveReservationConflictsWithAnyOverlappingOne) {
  Register("agent-a");
  Register("agent-b");
  const ReservationRecord a = Granted(Request("agent-a", {"src/net"}));
  EXPECT_EQ(a.agent_id, "agent-a");
  EXPECT_EQ(a.patterns, std::vector<std::string>({"src/net"}));
  EXPECT_EQ(a.expires_at_ms, kNow + kTtl);
  EXPECT_GT(a.token, 0);

  std::vector<ReservationConflict> c =
      Refused(Request("agent-b", {"docs", "src/**/*.cc"}));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].reservation_id, a.reservation_id);
  EXPECT_EQ(c[0].agent_id, "agent-a");
  EXPECT_EQ(c[0].held_pattern, "src/net");
  EXPECT_EQ(c[0].pattern, "src/**/*.cc");
  EXPECT_EQ(c[0].expires_at_ms, kNow + kTtl);
  EXPECT_EQ(c[0].token, a.token);
  // Refused whole: nothing of the request was written.
  EXPECT_EQ(Rows(), "1");
  // A shared request conflicts with the exclusive one too.
  Refused(Request("agent-b", {"src/net/tcp.cc"}, /*exclusive=*/false));
  // What does not overlap is granted.
  Granted(Request("agent-b", {"src/netx", "src/*.h", "docs"}));
}

TEST_P(Reservations, SharedReservationsCoexistButAnExclusiveOneConflicts) {
  Register("agent-a");
  Register("agent-b");
  Register("agent-c");
  Granted(Request("agent-a", {"src/a.cc"}, /*exclusive=*/false));
  Granted(Request("agent-b", {"src"}, /*exclusive=*/false));
  std::vector<ReservationConflict> c = Refused(Request("agent-c", {"src/*"}));
  EXPECT_EQ(c.size(), 2u);
}

TEST_P(Reservations, ASharedRequestReadsOnlyExclusiveRowsAndMeetsEachOfThem) {
  for (const char* agent : {"a", "b", "c", "d"}) Register(agent);
  // A `**` pattern overlaps every pattern (each covers what lies below
  // it): beside one of another agent, only shared ones can be held.
  const ReservationRecord locks =
      Granted(Request("a", {"**/*.lock"}, /*exclusive=*/false));
  const ReservationRecord src = Granted(Request("a", {"src"}));
  Granted(Request("c", {"docs"}, /*exclusive=*/false));
  EXPECT_EQ(Query("SELECT COUNT(*) FROM hub_reservation_patterns WHERE "
                  "exclusive = 0"),
            "2");  // each pattern row carries its reservation's mode
  ReservationCheck check;
  check.project_id = "prj_1";
  check.agent_id = "d";
  check.now_ms = kNow;
  check.literal = true;
  check.exclusive = false;  // what the commit hook asks
  check.patterns = {"src/a.cc", "x/y.lock", "docs/a.md"};
  absl::StatusOr<std::vector<ReservationConflict>> c =
      store().reservations().CheckReservations(check);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ((*c)[0].reservation_id, src.reservation_id);
  check.exclusive = true;  // every row counts again
  c = store().reservations().CheckReservations(check);
  ASSERT_TRUE(c.ok()) << c.status();
  std::set<std::string> met;
  for (const ReservationConflict& x : *c) met.insert(x.reservation_id);
  EXPECT_EQ(met.count(locks.reservation_id), 1u);
  EXPECT_EQ(met.size(), 3u);  // the `**`, src and docs
  // A shared `**` request reads the whole project's exclusive rows: it
  // overlaps every pattern, so it meets b's.
  std::vector<ReservationConflict> refused =
      Refused(Request("d", {"**/*.md"}, /*exclusive=*/false));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].reservation_id, src.reservation_id);
  Granted(Request("d", {"docs/x"}, /*exclusive=*/false));
  Refused(Request("d", {"docs/y"}));
}

TEST_P(Reservations, AnAgentNeverConflictsWithItself) {
  Register("agent-a");
  Granted(Request("agent-a", {"src"}));
  Granted(Request("agent-a", {"src/a.cc"}));
  Granted(Request("agent-a", {"**"}, /*exclusive=*/false));
}

TEST_P(Reservations, TokensStrictlyIncreasePerProject) {
  Register("agent-a");
  int64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    const ReservationRecord r =
        Granted(Request("agent-a", {absl::StrCat("f", i)}));
    EXPECT_GT(r.token, last);
    last = r.token;
  }
  // Releasing never lets a token be handed out again.
  ReservationRelease release;
  release.reservation_id = Granted(Request("agent-a", {"g"})).reservation_id;
  release.agent_id = "agent-a";
  release.now_ms = kNow;
  ASSERT_TRUE(store().reservations().ReleaseReservation(release).ok());
  EXPECT_GT(Granted(Request("agent-a", {"h"})).token, last + 1);
  // Another project counts on its own.
  EXPECT_EQ(Granted(Request("agent-a", {"f0"}, true, "prj_2")).token, 1);
}

TEST_P(Reservations, TheHolderMustBePresentAtItsGeneration) {
  absl::StatusOr<ReservationOutcome> unknown =
      store().reservations().Reserve(Request("nobody", {"a"}));
  EXPECT_EQ(ReasonOf(unknown.status()), "AGENT_NOT_FOUND");
  Register("agent-a");
  ReservationRequest stale = Request("agent-a", {"a"});
  stale.presence_generation = 7;
  EXPECT_EQ(ReasonOf(store().reservations().Reserve(stale).status()),
            "STALE_PRESENCE_OWNER");
  ReservationRequest current = Request("agent-a", {"a"});
  current.presence_generation = 1;
  EXPECT_EQ(Granted(current).presence_generation, 1);
  ASSERT_TRUE(
      store()
          .agents()
          .SetAgentStatusForGeneration("agent-a", 1, AgentStatus::kOffline)
          .ok());
  EXPECT_EQ(
      ReasonOf(
          store().reservations().Reserve(Request("agent-a", {"b"})).status()),
      "AGENT_OFFLINE");
  EXPECT_EQ(Rows(), "1");
}

TEST_P(Reservations,
       AReservationEndsWithItsTtlOrItsHolderAndThenNeverConflicts) {
  for (const char* agent : {"ttl", "offline", "again", "gone", "other"}) {
    Register(agent);
  }
  ReservationRequest shortlived = Request("ttl", {"a"});
  shortlived.ttl_ms = 10;
  Granted(shortlived);
  Granted(Request("offline", {"b"}));
  Granted(Request("again", {"c"}));
  Granted(Request("gone", {"d"}));
  ASSERT_TRUE(
      store()
          .agents()
          .SetAgentStatusForGeneration("offline", 1, AgentStatus::kOffline)
          .ok());
  Register("again");  // generation 2: the old session's reservation ended
  ASSERT_EQ(Exec("DELETE FROM agents WHERE agent_id = 'gone'"), "");

  // Before any sweep: none of them conflicts, none is listed.
  ReservationFilter all;
  all.project_id = "prj_1";
  all.now_ms = kNow + 10;
  absl::StatusOr<std::vector<ReservationRecord>> listed =
      store().reservations().ListReservations(all);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
  ReservationCheck check;
  check.project_id = "prj_1";
  check.patterns = {"**"};
  check.now_ms = kNow + 10;
  absl::StatusOr<std::vector<ReservationConflict>> conflicts =
      store().reservations().CheckReservations(check);
  ASSERT_TRUE(conflicts.ok()) << conflicts.status();
  EXPECT_TRUE(conflicts->empty());

  // The sweep deletes them, by reason.
  absl::StatusOr<std::pair<int64_t, int64_t>> swept =
      store().reservations().SweepReservations(kNow + 10);
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(swept->first, 1);   // expired
  EXPECT_EQ(swept->second, 3);  // holder gone
  EXPECT_EQ(Rows(), "0");
  EXPECT_EQ(Query("SELECT COUNT(*) FROM hub_reservation_patterns"), "0");
  EXPECT_EQ(Query("SELECT held FROM hub_reservation_tokens"), "0");
}

TEST_P(Reservations, AGrantDeletesTheEndedReservationsItOverlaps) {
  Register("agent-a");
  Register("agent-b");
  ReservationRequest shortlived = Request("agent-a", {"src"});
  shortlived.ttl_ms = 10;
  const ReservationRecord old = Granted(shortlived);
  ReservationRequest later = Request("agent-b", {"src/a.cc"});
  later.now_ms = kNow + 10;
  Granted(later);
  // The ended one is gone, so no renewal (with an older clock) revives it.
  EXPECT_EQ(Query(absl::StrCat("SELECT COUNT(*) FROM hub_reservations WHERE "
                               "reservation_id = '",
                               old.reservation_id, "'")),
            "0");
  ReservationRenewal renew{old.reservation_id, "agent-a", old.token, kNow + 5,
                           kTtl};
  EXPECT_EQ(ReasonOf(store().reservations().RenewReservation(renew).status()),
            "RESERVATION_NOT_FOUND");
}

TEST_P(Reservations, RenewIsFencedByHolderAndToken) {
  Register("agent-a");
  Register("agent-b");
  const ReservationRecord r = Granted(Request("agent-a", {"src"}));
  ReservationRenewal renew{r.reservation_id, "agent-a", r.token, kNow + 1000,
                           kTtl};
  absl::StatusOr<ReservationRecord> renewed =
      store().reservations().RenewReservation(renew);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->expires_at_ms, kNow + 1000 + kTtl);
  EXPECT_EQ(renewed->token, r.token);

  ReservationRenewal other = renew;
  other.agent_id = "agent-b";
  EXPECT_EQ(ReasonOf(store().reservations().RenewReservation(other).status()),
            "RESERVATION_NOT_HOLDER");
  ReservationRenewal stale = renew;
  stale.token = r.token + 1;
  EXPECT_EQ(ReasonOf(store().reservations().RenewReservation(stale).status()),
            "RESERVATION_STALE_TOKEN");
  ReservationRenewal late = renew;
  late.now_ms = kNow + 1000 + kTtl;
  EXPECT_EQ(ReasonOf(store().reservations().RenewReservation(late).status()),
            "RESERVATION_NOT_FOUND");
  ReservationRenewal missing = renew;
  missing.reservation_id = "no-such";
  EXPECT_EQ(store().reservations().RenewReservation(missing).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<std::optional<ReservationRecord>> got =
      store().reservations().GetReservation(r.reservation_id, kNow + 1000);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->expires_at_ms, kNow + 1000 + kTtl);
}

TEST_P(Reservations, ReleaseTakesSomePatternsOrAllAndForceIgnoresTheFence) {
  Register("agent-a");
  Register("agent-b");
  const ReservationRecord r = Granted(Request("agent-a", {"a", "b", "c"}));
  ReservationRelease some;
  some.reservation_id = r.reservation_id;
  some.agent_id = "agent-a";
  some.token = r.token;
  some.patterns = {"b", "not-held"};
  some.now_ms = kNow;
  absl::StatusOr<std::optional<ReservationRecord>> left =
      store().reservations().ReleaseReservation(some);
  ASSERT_TRUE(left.ok()) << left.status();
  ASSERT_TRUE(left->has_value());
  EXPECT_EQ((*left)->patterns, std::vector<std::string>({"a", "c"}));
  Granted(Request("agent-b", {"b"}));  // released: free for another agent

  ReservationRelease by_other = some;
  by_other.agent_id = "agent-b";
  by_other.patterns.clear();
  EXPECT_EQ(
      ReasonOf(store().reservations().ReleaseReservation(by_other).status()),
      "RESERVATION_NOT_HOLDER");
  ReservationRelease force;
  force.reservation_id = r.reservation_id;
  force.now_ms = kNow;
  absl::StatusOr<std::optional<ReservationRecord>> gone =
      store().reservations().ReleaseReservation(force);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_FALSE(gone->has_value());
  EXPECT_EQ(ReasonOf(store().reservations().ReleaseReservation(force).status()),
            "RESERVATION_NOT_FOUND");
  Granted(Request("agent-b", {"a", "c"}));
  EXPECT_EQ(Query("SELECT held FROM hub_reservation_tokens"), "2");
}

TEST_P(Reservations, AGoneHoldersReservationsAreReleasedByAgentAndGeneration) {
  Register("agent-a");
  Granted(Request("agent-a", {"a"}));
  Granted(Request("agent-a", {"b"}, true, "prj_2"));
  absl::StatusOr<int64_t> none =
      store().reservations().ReleaseAgentReservations("agent-a", 2, kNow);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
  absl::StatusOr<int64_t> n =
      store().reservations().ReleaseAgentReservations("agent-a", 1, kNow);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(Rows(), "0");
}

TEST_P(Reservations, ListFiltersByProjectAgentAndPathInIdOrder) {
  Register("agent-a");
  Register("agent-b");
  const ReservationRecord a1 = Granted(Request("agent-a", {"src/net"}));
  const ReservationRecord a2 = Granted(Request("agent-a", {"docs/*.md"}));
  const ReservationRecord b1 =
      Granted(Request("agent-b", {"src/*.h"}, /*exclusive=*/false));
  Granted(Request("agent-b", {"src"}, true, "prj_2"));

  ReservationFilter f;
  f.project_id = "prj_1";
  f.now_ms = kNow;
  auto ids = [&](const ReservationFilter& filter) {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<ReservationRecord>> l =
        store().reservations().ListReservations(filter);
    EXPECT_TRUE(l.ok()) << l.status();
    if (l.ok()) {
      for (const ReservationRecord& r : *l) out.push_back(r.reservation_id);
    }
    return out;
  };
  EXPECT_EQ(ids(f),
            std::vector<std::string>(
                {a1.reservation_id, a2.reservation_id, b1.reservation_id}));
  ReservationFilter by_agent = f;
  by_agent.agent_id = "agent-a";
  EXPECT_EQ(ids(by_agent),
            std::vector<std::string>({a1.reservation_id, a2.reservation_id}));
  ReservationFilter by_path = f;
  by_path.overlapping = "src/net/tcp.cc";
  EXPECT_EQ(ids(by_path), std::vector<std::string>({a1.reservation_id}));
  by_path.overlapping = "src";
  EXPECT_EQ(ids(by_path),
            std::vector<std::string>({a1.reservation_id, b1.reservation_id}));
  ReservationFilter page = f;
  page.limit = 2;
  EXPECT_EQ(ids(page),
            std::vector<std::string>({a1.reservation_id, a2.reservation_id}));
  page.after_reservation_id = a2.reservation_id;
  EXPECT_EQ(ids(page), std::vector<std::string>({b1.reservation_id}));
  // A set of projects (a token's scope) in place of one.
  ReservationFilter scoped;
  scoped.now_ms = kNow;
  scoped.projects = std::vector<std::string>{"prj_2"};
  ASSERT_EQ(ids(scoped).size(), 1u);
  scoped.projects = std::vector<std::string>{"prj_1", "prj_3"};
  EXPECT_EQ(ids(scoped), ids(f));
  scoped.projects = std::vector<std::string>{};
  EXPECT_TRUE(ids(scoped).empty());
}

TEST_P(Reservations, CheckIsADryRunThatExemptsTheAsker) {
  Register("agent-a");
  Register("agent-b");
  const ReservationRecord a = Granted(Request("agent-a", {"src"}));
  Granted(Request("agent-b", {"docs"}, /*exclusive=*/false));
  ReservationCheck check;
  check.project_id = "prj_1";
  check.agent_id = "agent-b";
  check.exclusive = false;
  check.patterns = {"src/a.cc", "docs/x.md"};
  check.now_ms = kNow;
  absl::StatusOr<std::vector<ReservationConflict>> c =
      store().reservations().CheckReservations(check);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ((*c)[0].reservation_id, a.reservation_id);
  EXPECT_EQ((*c)[0].pattern, "src/a.cc");
  check.agent_id = "agent-a";
  c = store().reservations().CheckReservations(check);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->empty());  // own exclusive; shared beside shared
  EXPECT_EQ(Rows(), "2");
  EXPECT_EQ(Query("SELECT last_token FROM hub_reservation_tokens"), "2");
}

TEST_P(Reservations, ACheckOfLiteralPathsTakesGlobCharactersLiterally) {
  Register("agent-a");
  const ReservationRecord a = Granted(Request("agent-a", {"src/a.cc"}));
  Granted(Request("agent-a", {"lib/**/gen"}));
  ReservationCheck check;
  check.project_id = "prj_1";
  check.exclusive = false;
  check.now_ms = kNow;
  check.patterns = {"src/*"};
  absl::StatusOr<std::vector<ReservationConflict>> c =
      store().reservations().CheckReservations(check);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->size(), 1u);  // the pattern src/* covers src/a.cc
  check.literal = true;      // the file named "*" in src does not
  c = store().reservations().CheckReservations(check);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->empty());
  // Many paths at once: each found through its own prefixes.
  check.patterns.clear();
  for (int i = 0; i < 300; ++i) {
    check.patterns.push_back(absl::StrCat("docs/", i, ".md"));
  }
  check.patterns.push_back("src/a.cc/x");
  check.patterns.push_back("lib/x/y/gen/z.c");
  c = store().reservations().CheckReservations(check);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[0].reservation_id, a.reservation_id);
  EXPECT_EQ((*c)[0].pattern, "src/a.cc/x");
  EXPECT_EQ((*c)[1].held_pattern, "lib/**/gen");
}

TEST_P(Reservations, LimitsPerAgentAndPerProjectRefuseWithNothingWritten) {
  Register("agent-a");
  Register("agent-b");
  ReservationRequest r = Request("agent-a", {"a"});
  r.max_per_agent = 2;
  Granted(r);
  r.reservation_id = NewUuidV7();
  r.patterns = {"b"};
  Granted(r);
  r.reservation_id = NewUuidV7();
  r.patterns = {"c"};
  absl::Status over = store().reservations().Reserve(r).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(over), "LIMIT_EXCEEDED");
  EXPECT_EQ(MetadataOf(over)["limit"], "max_reservations_per_agent");

  // The project holds 2; with a limit of 3 one more fits, then none; an
  // ended reservation stops counting at once.
  ReservationRequest b = Request("agent-b", {"d"});
  b.max_per_project = 3;
  b.ttl_ms = 10;
  Granted(b);
  b.reservation_id = NewUuidV7();
  b.patterns = {"e"};
  absl::Status full = store().reservations().Reserve(b).status();
  EXPECT_EQ(MetadataOf(full)["limit"], "max_reservations_per_project");
  EXPECT_EQ(Rows(), "3");
  b.now_ms = kNow + 10;  // "d" expired
  Granted(b);
  EXPECT_EQ(Rows(), "3");
}

// Exactly one of 64 racers wins an exclusive path each round; on
// PostgreSQL the racers use two stores, as two hubs over one database.
TEST_P(Reservations,
       SixtyFourRacersForOverlappingExclusivePathsOneWinsEachRound) {
  constexpr int kRacers = 64;
  constexpr int kRounds = 5;
  std::vector<std::unique_ptr<Store>> others;
  std::vector<Store*> stores = {&store()};
  if (postgres()) {
    others.push_back(Open());
    ASSERT_NE(others.back(), nullptr);
    stores.push_back(others.back().get());
  }
  for (int i = 0; i < kRacers; ++i) Register(absl::StrCat("racer-", i));
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<int> winners{0}, refused{0}, errors{0};
    std::vector<std::string> won(kRacers);
    std::vector<std::thread> threads;
    for (int i = 0; i < kRacers; ++i) {
      threads.emplace_back([&, i] {
        // Different spellings of overlapping claims.
        static const char* kPatterns[] = {"src", "src/a.cc", "src/*.cc",
                                          "**/a.cc"};
        ReservationRequest r =
            Request(absl::StrCat("racer-", i), {kPatterns[i % 4]});
        absl::StatusOr<ReservationOutcome> out =
            stores[i % stores.size()]->reservations().Reserve(r);
        if (!out.ok()) {
          errors++;
        } else if (out->granted.has_value()) {
          winners++;
          won[i] = out->granted->reservation_id;
        } else {
          refused++;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    ASSERT_EQ(errors.load(), 0) << "round " << round;
    ASSERT_EQ(winners.load(), 1) << "round " << round;
    ASSERT_EQ(refused.load(), kRacers - 1);
    ASSERT_EQ(Rows(), "1");
    for (int i = 0; i < kRacers; ++i) {
      if (won[i].empty()) continue;
      ReservationRelease release;
      release.reservation_id = won[i];
      release.agent_id = absl::StrCat("racer-", i);
      release.now_ms = kNow;
      ASSERT_TRUE(store().reservations().ReleaseReservation(release).ok());
    }
  }
  EXPECT_EQ(Query("SELECT last_token FROM hub_reservation_tokens"),
            absl::StrCat(kRounds));
}

// The change log: what happened to a reservation, in commit order.
std::vector<ReservationChange> ChangesAfter(Store& store, int64_t after) {
  absl::StatusOr<ReservationChangePage> page =
      store.reservations().ReadReservationChanges(after, 1000);
  EXPECT_TRUE(page.ok()) << page.status();
  if (!page.ok()) return {};
  if (!page->changes.empty()) {
    EXPECT_EQ(page->head, page->changes.back().seq);
  }
  return page->changes;
}

std::string Kinds(const std::vector<ReservationChange>& changes) {
  std::string out;
  for (const ReservationChange& c : changes) {
    absl::StrAppend(&out, out.empty() ? "" : " ",
                    ReservationChangeWord(c.kind));
  }
  return out;
}

TEST_P(Reservations, EveryWriteLogsItsChangeInOrderWithTheReservation) {
  Register("agent-a");
  Register("agent-b");
  const int64_t start =
      store().reservations().ReadReservationChanges(0, 1).value().head;
  const ReservationRecord a = Granted(Request("agent-a", {"src", "docs"}));
  ReservationRenewal renew{a.reservation_id, "agent-a", a.token, kNow + 1,
                           2 * kTtl};
  ASSERT_TRUE(store().reservations().RenewReservation(renew).ok());
  ReservationRelease some;
  some.reservation_id = a.reservation_id;
  some.agent_id = "agent-a";
  some.patterns = {"docs"};
  some.now_ms = kNow + 2;
  ASSERT_TRUE(store().reservations().ReleaseReservation(some).ok());
  ReservationRelease all = some;
  all.patterns.clear();
  ASSERT_TRUE(store().reservations().ReleaseReservation(all).ok());
  const ReservationRecord b = Granted(Request("agent-b", {"lib"}));
  ReservationRelease forced;
  forced.reservation_id = b.reservation_id;
  forced.now_ms = kNow + 3;
  ASSERT_TRUE(store().reservations().ReleaseReservation(forced).ok());
  Granted(Request("agent-b", {"tools"}));
  ASSERT_TRUE(store()
                  .reservations()
                  .ReleaseAgentReservations("agent-b", 1, kNow + 4)
                  .ok());

  std::vector<ReservationChange> changes = ChangesAfter(store(), start);
  EXPECT_EQ(Kinds(changes),
            "granted renewed narrowed released granted forced granted "
            "holder_gone");
  for (size_t i = 1; i < changes.size(); ++i) {
    EXPECT_GT(changes[i].seq, changes[i - 1].seq);
  }
  ASSERT_EQ(changes.size(), 8u);
  EXPECT_EQ(changes[0].reservation.reservation_id, a.reservation_id);
  EXPECT_EQ(changes[0].reservation.patterns,
            std::vector<std::string>({"src", "docs"}));
  EXPECT_EQ(changes[0].reservation.token, a.token);
  EXPECT_TRUE(changes[0].reservation.exclusive);
  EXPECT_EQ(changes[0].reservation.reason, "editing");
  EXPECT_EQ(changes[0].written_at_ms, kNow);
  EXPECT_EQ(changes[1].reservation.expires_at_ms, kNow + 1 + 2 * kTtl);
  EXPECT_EQ(changes[2].reservation.patterns, std::vector<std::string>({"src"}));
  EXPECT_EQ(changes[3].reservation.reservation_id, a.reservation_id);
  EXPECT_EQ(changes[5].reservation.reservation_id, b.reservation_id);
  EXPECT_EQ(changes[7].reservation.agent_id, "agent-b");
  // Paging by seq reads the same changes.
  std::vector<ReservationChange> rest = ChangesAfter(store(), changes[3].seq);
  EXPECT_EQ(Kinds(rest), "granted forced granted holder_gone");
}

TEST_P(Reservations, EndedReservationsAreLoggedAsExpiredOrHolderGone) {
  for (const char* agent : {"ttl", "offline", "other"}) Register(agent);
  const int64_t start =
      store().reservations().ReadReservationChanges(0, 1).value().head;
  ReservationRequest shortlived = Request("ttl", {"a"});
  shortlived.ttl_ms = 10;
  Granted(shortlived);
  Granted(Request("offline", {"b"}));
  ReservationRequest doomed = Request("ttl", {"c"});
  doomed.ttl_ms = 10;
  Granted(doomed);
  ASSERT_TRUE(
      store()
          .agents()
          .SetAgentStatusForGeneration("offline", 1, AgentStatus::kOffline)
          .ok());
  // A grant deletes (and logs) the ended reservation it overlaps; the sweep
  // the others.
  ReservationRequest later = Request("other", {"c/x"});
  later.now_ms = kNow + 10;
  Granted(later);
  ASSERT_TRUE(store().reservations().SweepReservations(kNow + 10).ok());
  std::vector<ReservationChange> changes = ChangesAfter(store(), start);
  ASSERT_EQ(changes.size(), 7u) << Kinds(changes);
  EXPECT_EQ(Kinds(changes).substr(0, 39),
            "granted granted granted expired granted");
  EXPECT_EQ(changes[3].kind, ReservationChangeKind::kExpired);
  EXPECT_EQ(changes[3].reservation.patterns, std::vector<std::string>({"c"}));
  EXPECT_EQ(changes[4].kind, ReservationChangeKind::kGranted);
  std::vector<std::string> ended;
  for (size_t i = 5; i < changes.size(); ++i) {
    ended.push_back(absl::StrCat(ReservationChangeWord(changes[i].kind), ":",
                                 changes[i].reservation.agent_id));
  }
  std::sort(ended.begin(), ended.end());
  EXPECT_EQ(ended,
            std::vector<std::string>({"expired:ttl", "holder_gone:offline"}));
}

TEST_P(Reservations, ARefusedReserveLogsNothing) {
  Register("agent-a");
  Register("agent-b");
  Granted(Request("agent-a", {"src"}));
  const int64_t head =
      store().reservations().ReadReservationChanges(0, 1).value().head;
  Refused(Request("agent-b", {"src/a.cc"}));
  ReservationRequest over = Request("agent-b", {"lib"});
  over.max_per_project = 1;
  EXPECT_EQ(ReasonOf(store().reservations().Reserve(over).status()),
            "LIMIT_EXCEEDED");
  EXPECT_TRUE(ChangesAfter(store(), head).empty());
  EXPECT_EQ(store().reservations().ReadReservationChanges(0, 1).value().head,
            head);
}

TEST_P(Reservations, ASnapshotHoldsTheLiveReservationsAndTheLogsHead) {
  Register("agent-a");
  Register("agent-b");
  const ReservationRecord a = Granted(Request("agent-a", {"src"}));
  Granted(Request("agent-b", {"lib"}));
  Granted(Request("agent-a", {"x"}, true, "prj_2"));
  ReservationFilter f;
  f.project_id = "prj_1";
  f.now_ms = kNow;
  absl::StatusOr<ReservationSnapshot> snap =
      store().reservations().SnapshotReservations(f);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->reservations.size(), 2u);
  EXPECT_EQ(snap->head,
            store().reservations().ReadReservationChanges(0, 1).value().head);
  f.agent_id = "agent-a";
  snap = store().reservations().SnapshotReservations(f);
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->reservations.size(), 1u);
  EXPECT_EQ(snap->reservations[0].reservation_id, a.reservation_id);
  EXPECT_EQ(snap->reservations[0].patterns, std::vector<std::string>({"src"}));
}

TEST_P(Reservations, PruningDropsOnlyOldChangesAndTheHeadStays) {
  Register("agent-a");
  ReservationRequest early = Request("agent-a", {"a"});
  Granted(early);
  ReservationRequest late = Request("agent-a", {"b"});
  late.now_ms = kNow + 1000;
  Granted(late);
  const int64_t head =
      store().reservations().ReadReservationChanges(0, 1).value().head;
  absl::StatusOr<int64_t> pruned =
      store().reservations().PruneReservationChanges(kNow + 500, 100);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 1);
  std::vector<ReservationChange> left = ChangesAfter(store(), 0);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].reservation.patterns, std::vector<std::string>({"b"}));
  EXPECT_EQ(store()
                .reservations()
                .PruneReservationChanges(kNow + 2000, 100)
                .value_or(-1),
            1);
  EXPECT_EQ(store().reservations().ReadReservationChanges(0, 1).value().head,
            head);
  EXPECT_EQ(
      ReasonOf(store().reservations().ReadReservationChanges(0, 0).status()),
      "REQUEST_INVALID");
}

TEST_P(Reservations, RacingWritersThroughTwoStoresLogEachChangeOnceInOrder) {
  constexpr int kRacers = 16;
  std::vector<std::unique_ptr<Store>> others;
  std::vector<Store*> stores = {&store()};
  if (postgres()) {
    others.push_back(Open());
    ASSERT_NE(others.back(), nullptr);
    stores.push_back(others.back().get());
  }
  for (int i = 0; i < kRacers; ++i) Register(absl::StrCat("w-", i));
  const int64_t start =
      store().reservations().ReadReservationChanges(0, 1).value().head;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int i = 0; i < kRacers; ++i) {
    threads.emplace_back([&, i] {
      Store& s = *stores[i % stores.size()];
      const std::string agent = absl::StrCat("w-", i);
      for (int k = 0; k < 5; ++k) {
        ReservationRequest r =
            Request(agent, {absl::StrCat("d", i, "/", k)}, true, "prj_1");
        absl::StatusOr<ReservationOutcome> out = s.reservations().Reserve(r);
        if (!out.ok() || !out->granted.has_value()) {
          ADD_FAILURE() << out.status();
          errors++;
          continue;
        }
        ReservationRelease rel;
        rel.reservation_id = out->granted->reservation_id;
        rel.agent_id = agent;
        rel.now_ms = kNow;
        absl::Status released =
            s.reservations().ReleaseReservation(rel).status();
        if (!released.ok()) {
          ADD_FAILURE() << released;
          errors++;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(errors.load(), 0);
  std::vector<ReservationChange> changes = ChangesAfter(store(), start);
  ASSERT_EQ(changes.size(), 2u * 5 * kRacers);
  std::map<std::string, std::string> seen;  // reservation -> kinds
  for (size_t i = 0; i < changes.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(changes[i].seq, changes[i - 1].seq);
    }
    std::string& kinds = seen[changes[i].reservation.reservation_id];
    absl::StrAppend(&kinds, kinds.empty() ? "" : " ",
                    ReservationChangeWord(changes[i].kind));
  }
  ASSERT_EQ(seen.size(), 5u * kRacers);
  for (const auto& [id, kinds] : seen) EXPECT_EQ(kinds, "granted released");
}

// Waiters: the first waiter for a path gets it first.
ReservationWaiter Waiter(const std::string& agent,
                         std::vector<std::string> patterns,
                         int64_t deadline_ms = kNow + kTtl) {
  ReservationWaiter w;
  w.waiter_id = NewUuidV7();
  w.project_id = "prj_1";
  w.agent_id = agent;
  w.presence_generation = 1;
  w.exclusive = true;
  w.created_at_ms = kNow;
  w.deadline_ms = deadline_ms;
  w.patterns = std::move(patterns);
  return w;
}

TEST_P(Reservations, AQueuedWaiterConflictsWithLaterReservesButNotEarlierOnes) {
  for (const char* agent : {"holder", "first", "second", "other"}) {
    Register(agent);
  }
  const ReservationRecord held = Granted(Request("holder", {"src"}));
  const int64_t head =
      store().reservations().ReadReservationChanges(0, 1).value().head;
  absl::StatusOr<ReservationWaiter> first =
      store().reservations().EnqueueReservationWaiter(
          Waiter("first", {"src/a.cc"}));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<ReservationWaiter> second =
      store().reservations().EnqueueReservationWaiter(
          Waiter("second", {"src"}));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->seq, first->seq + 1);
  EXPECT_EQ(Kinds(ChangesAfter(store(), head)), "waiting waiting");

  ReservationRelease release;
  release.reservation_id = held.reservation_id;
  release.agent_id = "holder";
  release.now_ms = kNow;
  ASSERT_TRUE(store().reservations().ReleaseReservation(release).ok());
  // The path is free, but a reserve that does not wait is behind both
  // waiters, and the second waiter behind the first.
  std::vector<ReservationConflict> c = Refused(Request("other", {"src/a.cc"}));
  ASSERT_FALSE(c.empty());
  EXPECT_TRUE(c[0].waiting);
  EXPECT_EQ(c[0].token, 0);
  ReservationRequest as_second = Request("second", {"src"});
  as_second.waiter_id = second->waiter_id;
  c = Refused(as_second);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].reservation_id, first->waiter_id);
  EXPECT_EQ(c[0].agent_id, "first");
  // Unrelated paths are not held up.
  Granted(Request("other", {"docs"}));

  ReservationRequest as_first = Request("first", {"src/a.cc"});
  as_first.waiter_id = first->waiter_id;
  const ReservationRecord granted = Granted(as_first);
  EXPECT_EQ(
      Query(absl::StrCat("SELECT COUNT(*) FROM hub_reservation_waiters WHERE "
                         "waiter_id = '",
                         first->waiter_id, "'")),
      "0");  // out of the queue
  // The second now waits for the first's reservation, not its waiter.
  c = Refused(as_second);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].reservation_id, granted.reservation_id);
  EXPECT_FALSE(c[0].waiting);
}

TEST_P(Reservations, ASnapshotHoldsTheQueuedWaitersThatStillCount) {
  for (const char* agent : {"holder", "first", "second", "gone"}) {
    Register(agent);
  }
  Granted(Request("holder", {"src"}));
  ReservationWaiter first = Waiter("first", {"src/a.cc"});
  ASSERT_TRUE(store().reservations().EnqueueReservationWaiter(first).ok());
  ReservationWaiter elsewhere = Waiter("second", {"lib"});
  elsewhere.project_id = "prj_2";
  ASSERT_TRUE(store().reservations().EnqueueReservationWaiter(elsewhere).ok());
  ReservationWaiter second = Waiter("second", {"src"});
  second.exclusive = false;
  ASSERT_TRUE(store().reservations().EnqueueReservationWaiter(second).ok());
  // Past its deadline, or its agent offline: it no longer counts.
  ASSERT_TRUE(store()
                  .reservations()
                  .EnqueueReservationWaiter(Waiter("first", {"x"}, kNow))
                  .ok());
  ASSERT_TRUE(store()
                  .reservations()
                  .EnqueueReservationWaiter(Waiter("gone", {"y"}))
                  .ok());
  ASSERT_TRUE(store()
                  .agents()
                  .SetAgentStatusForGeneration("gone", 1, AgentStatus::kOffline)
                  .ok());

  ReservationFilter f;
  f.project_id = "prj_1";
  f.now_ms = kNow;
  absl::StatusOr<ReservationSnapshot> snap =
      store().reservations().SnapshotReservations(f);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->reservations.size(), 1u);
  ASSERT_EQ(snap->waiters.size(), 2u);  // in queue order
  EXPECT_EQ(snap->waiters[0].waiter_id, first.waiter_id);
  EXPECT_EQ(snap->waiters[0].patterns, first.patterns);
  EXPECT_EQ(snap->waiters[0].deadline_ms, first.deadline_ms);
  EXPECT_EQ(snap->waiters[1].waiter_id, second.waiter_id);
  EXPECT_FALSE(snap->waiters[1].exclusive);
  EXPECT_LT(snap->waiters[0].seq, snap->waiters[1].seq);
  EXPECT_EQ(snap->head,
            store().reservations().ReadReservationChanges(0, 1).value().head);

  f.agent_id = "second";
  snap = store().reservations().SnapshotReservations(f);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_TRUE(snap->reservations.empty());
  ASSERT_EQ(snap->waiters.size(), 1u);
  EXPECT_EQ(snap->waiters[0].waiter_id, second.waiter_id);

  ReservationFilter every;  // every project's, by project
  every.now_ms = kNow;
  snap = store().reservations().SnapshotReservations(every);
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->waiters.size(), 3u);
  EXPECT_EQ(snap->waiters[2].waiter_id, elsewhere.waiter_id);

  // A waiter that leaves the queue leaves the snapshot.
  ASSERT_TRUE(store()
                  .reservations()
                  .RemoveReservationWaiter(first.waiter_id, kNow)
                  .value());
  snap = store().reservations().SnapshotReservations(every);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->waiters.size(), 2u);
}

TEST_P(Reservations, AWaiterNamesWhatItWaitsBehindAndEachRetryKeepsItCurrent) {
  for (const char* agent : {"holder", "first", "second"}) Register(agent);
  const ReservationRecord held = Granted(Request("holder", {"src"}));
  ReservationWaiter first = Waiter("first", {"src/a.cc"});
  first.waits_for = {held.reservation_id};
  ASSERT_TRUE(store().reservations().EnqueueReservationWaiter(first).ok());
  ReservationWaiter second = Waiter("second", {"src"});
  second.waits_for = {"an-id-that-is-gone"};
  ASSERT_TRUE(store().reservations().EnqueueReservationWaiter(second).ok());
  ReservationFilter f;
  f.project_id = "prj_1";
  f.now_ms = kNow;
  auto queued = [&]() {
    std::map<std::string, std::vector<std::string>> by_waiter;
    const ReservationSnapshot snap =
        store().reservations().SnapshotReservations(f).value();
    for (const ReservationWaiter& w : snap.waiters) {
      by_waiter[w.agent_id] = w.waits_for;
    }
    return by_waiter;
  };
  EXPECT_EQ(queued()["first"], first.waits_for);
  // The log's `waiting` change carries it too.
  std::vector<ReservationChange> logged = ChangesAfter(store(), 0);
  ASSERT_FALSE(logged.empty());
  EXPECT_EQ(logged.back().kind, ReservationChangeKind::kWaiting);
  EXPECT_EQ(logged.back().reservation.waits_for, second.waits_for);

  // A retry behind other blockers than its row names updates the row and
  // logs a `waiting` change naming them: the reservation and the first
  // waiter, ahead of it.
  int64_t head =
      store().reservations().ReadReservationChanges(0, 1).value().head;
  ReservationRequest as_second = Request("second", {"src"});
  as_second.waiter_id = second.waiter_id;
  absl::StatusOr<ReservationOutcome> out =
      store().reservations().Reserve(as_second);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_FALSE(out->granted.has_value());
  EXPECT_TRUE(out->waiter_updated);
  std::vector<std::string> expected = {held.reservation_id, first.waiter_id};
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> named = WaitsFor(out->conflicts);
  std::vector<std::string> sorted = named;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, expected);
  EXPECT_EQ(queued()["second"], named);
  logged = ChangesAfter(store(), head);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_EQ(logged[0].kind, ReservationChangeKind::kWaiting);
  EXPECT_EQ(logged[0].reservation.reservation_id, second.waiter_id);
  EXPECT_EQ(logged[0].reservation.waits_for, named);
  EXPECT_EQ(logged[0].reservation.expires_at_ms, second.deadline_ms);
  // Behind the same blockers again: nothing written.
  head = store().reservations().ReadReservationChanges(0, 1).value().head;
  out = store().reservations().Reserve(as_second);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->waiter_updated);
  EXPECT_TRUE(ChangesAfter(store(), head).empty());

  // The holder releases, the first waiter gets the path: the second now
  // waits behind the first's reservation alone.
  ReservationRelease release;
  release.reservation_id = held.reservation_id;
  release.agent_id = "holder";
  release.now_ms = kNow;
  ASSERT_TRUE(store().reservations().ReleaseReservation(release).ok());
  ReservationRequest as_first = Request("first", {"src/a.cc"});
  as_first.waiter_id = first.waiter_id;
  const ReservationRecord got = Granted(as_first);
  out = store().reservations().Reserve(as_second);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->waiter_updated);
  EXPECT_EQ(queued()["second"], std::vector<std::string>{got.reservation_id});
  EXPECT_EQ(ChangesAfter(store(), head).back().reservation.waits_for,
            std::vector<std::string>{got.reservation_id});
}

TEST_P(Reservations, AWaiterThatLeavesOrIsPastItsDeadlineHoldsNothingUp) {
  Register("waiter");
  Register("other");
  absl::StatusOr<ReservationWaiter> w =
      store().reservations().EnqueueReservationWaiter(
          Waiter("waiter", {"src"}, kNow + 100));
  ASSERT_TRUE(w.ok()) << w.status();
  Refused(Request("other", {"src"}));
  ReservationRequest later = Request("other", {"src"});
  later.now_ms = kNow + 100;  // its deadline passed (its hub died)
  Granted(later);
  ASSERT_TRUE(store().reservations().SweepReservations(kNow + 100).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM hub_reservation_waiters"), "0");

  absl::StatusOr<ReservationWaiter> again =
      store().reservations().EnqueueReservationWaiter(
          Waiter("waiter", {"lib"}));
  ASSERT_TRUE(again.ok()) << again.status();
  const int64_t head =
      store().reservations().ReadReservationChanges(0, 1).value().head;
  EXPECT_TRUE(store()
                  .reservations()
                  .RemoveReservationWaiter(again->waiter_id, kNow)
                  .value());
  EXPECT_FALSE(store()
                   .reservations()
                   .RemoveReservationWaiter(again->waiter_id, kNow)
                   .value());
  EXPECT_EQ(Kinds(ChangesAfter(store(), head)), "wait_ended");
  Granted(Request("other", {"lib"}));
}

TEST_P(Reservations, AListedReservationNamesTheWaitersOfOtherAgentsItHoldsUp) {
  for (const char* agent : {"holder", "first", "second", "reader", "other"}) {
    Register(agent);
  }
  const ReservationRecord src = Granted(Request("holder", {"src"}));
  const ReservationRecord docs =
      Granted(Request("holder", {"docs"}, /*exclusive=*/false));
  ASSERT_TRUE(store()
                  .reservations()
                  .EnqueueReservationWaiter(Waiter("first", {"src/a.cc"}))
                  .ok());
  ASSERT_TRUE(store()
                  .reservations()
                  .EnqueueReservationWaiter(Waiter("second", {"**"}))
                  .ok());
  ASSERT_TRUE(store()
                  .reservations()
                  .EnqueueReservationWaiter(Waiter("first", {"src/b.cc"}))
                  .ok());
  // A shared waiter does not wait for a shared reservation; the holder's
  // own waiter and one for unrelated paths wait for nothing here.
  ReservationWaiter reader = Waiter("reader", {"docs/x.md"});
  reader.exclusive = false;
  ASSERT_TRUE(store().reservations().EnqueueReservationWaiter(reader).ok());
  ASSERT_TRUE(store()
                  .reservations()
                  .EnqueueReservationWaiter(Waiter("holder", {"src"}))
                  .ok());
  ASSERT_TRUE(store()
                  .reservations()
                  .EnqueueReservationWaiter(Waiter("other", {"lib"}))
                  .ok());

  ReservationFilter filter;
  filter.project_id = "prj_1";
  filter.agent_id = "holder";
  filter.now_ms = kNow;
  absl::StatusOr<std::vector<ReservationRecord>> listed =
      store().reservations().ListReservations(filter);
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::map<std::string, ReservationRecord> by_id;
  for (const ReservationRecord& r : *listed) by_id[r.reservation_id] = r;
  ASSERT_EQ(by_id.size(), 2u);
  EXPECT_EQ(by_id[src.reservation_id].waiter_count, 3);
  EXPECT_EQ(by_id[src.reservation_id].waiting_agent_ids,
            (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(by_id[docs.reservation_id].waiter_count, 1);
  EXPECT_EQ(by_id[docs.reservation_id].waiting_agent_ids,
            (std::vector<std::string>{"second"}));

  // Past their deadline, waiters hold nothing up and are not listed.
  filter.now_ms = kNow + kTtl;
  ReservationRenewal renewal;
  renewal.reservation_id = src.reservation_id;
  renewal.agent_id = "holder";
  renewal.token = src.token;
  renewal.now_ms = kNow + kTtl - 1;
  renewal.ttl_ms = kTtl;
  ASSERT_TRUE(store().reservations().RenewReservation(renewal).ok());
  listed = store().reservations().ListReservations(filter);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].waiter_count, 0);
  EXPECT_TRUE((*listed)[0].waiting_agent_ids.empty());
}

HUB_STORE_TEST_SUITE(Reservations);

}  // namespace
}  // namespace hub::storage
