#include "registry/reservations.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub {
namespace {

using storage::testing::FreshDbPath;
using storage::testing::OpenOrDie;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

class ReservationBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenOrDie(FreshDbPath());
    book_ = std::make_unique<ReservationBook>(&store_->reservations(), &clock_,
                                              limits_);
    Register("agent-a");
    Register("agent-b");
  }
  void Register(const std::string& agent) {
    storage::AgentRegistration r;
    r.agent_id = agent;
    r.cli = "claude";
    r.now_ms = absl::ToUnixMillis(clock_.Now());
    ASSERT_TRUE(store_->agents().RegisterAgent(r).ok());
  }
  PathReserveInput In(const std::string& agent,
                      std::vector<std::string> patterns,
                      bool exclusive = true) {
    PathReserveInput in;
    in.project_id = kProject;
    in.agent_id = agent;
    in.patterns = std::move(patterns);
    in.exclusive = exclusive;
    in.reason = "refactor";
    return in;
  }
  std::string ReasonOfReserve(const PathReserveInput& in) {
    return ReasonOf(book_->Reserve(in).status());
  }

  FakeClock clock_;
  ReservationLimits limits_;
  std::unique_ptr<storage::SqliteStore> store_;
  std::unique_ptr<ReservationBook> book_;
};

TEST_F(ReservationBookTest,
       AGrantHasNormalizedDistinctPatternsAndTheDefaultTtl) {
  absl::StatusOr<storage::ReservationRecord> r =
      book_->Reserve(In("agent-a", {"src/", "./src", "docs/**", "a/**/**/b"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->patterns, std::vector<std::string>({"src", "docs", "a/**/b"}));
  EXPECT_EQ(r->expires_at_ms - r->created_at_ms,
            absl::ToInt64Milliseconds(kDefaultReservationTtl));
  EXPECT_EQ(r->reason, "refactor");
  EXPECT_EQ(book_->counters().granted, 1);
}

TEST_F(ReservationBookTest, BadRequestsHaveTheirOwnReasonsAndWriteNothing) {
  PathReserveInput in = In("agent-a", {"src"});
  in.project_id = "prj_1";
  EXPECT_EQ(ReasonOfReserve(in), "PROJECT_ID_INVALID");
  EXPECT_EQ(ReasonOfReserve(In("a", {"src"})), "AGENT_ID_INVALID");
  EXPECT_EQ(ReasonOfReserve(In("agent-a", {})),
            "RESERVATION_TOO_MANY_PATTERNS");
  std::vector<std::string> too_many;
  for (int i = 0; i < 65; ++i) too_many.push_back(absl::StrCat("p", i));
  EXPECT_EQ(ReasonOfReserve(In("agent-a", too_many)),
            "RESERVATION_TOO_MANY_PATTERNS");
  EXPECT_EQ(ReasonOfReserve(In("agent-a", {"ok", "/etc"})),
            "RESERVATION_PATH_ABSOLUTE");
  EXPECT_EQ(ReasonOfReserve(In("agent-a", {"a/../b"})),
            "RESERVATION_PATH_PARENT");
  EXPECT_EQ(ReasonOfReserve(In("agent-a", {""})), "RESERVATION_PATH_EMPTY");
  EXPECT_EQ(ReasonOfReserve(In("agent-a", {"a**"})),
            "RESERVATION_PATH_INVALID");
  in = In("agent-a", {"src"});
  in.ttl = absl::Milliseconds(999);
  EXPECT_EQ(ReasonOfReserve(in), "RESERVATION_TTL_INVALID");
  in.ttl = absl::Hours(24) + absl::Seconds(1);
  EXPECT_EQ(ReasonOfReserve(in), "RESERVATION_TTL_INVALID");
  in.ttl = std::nullopt;
  in.reason = std::string(513, 'r');
  EXPECT_EQ(ReasonOfReserve(in), "RESERVATION_REASON_INVALID");
  EXPECT_EQ(ReasonOfReserve(In("nobody-here", {"src"})), "AGENT_NOT_FOUND");
  ReservationListQuery list;
  list.project_id = kProject;
  absl::StatusOr<ReservationPage> page = book_->List(list);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->reservations.empty());
}

TEST_F(ReservationBookTest, AConflictIsFailedPreconditionNamingTheHolder) {
  ASSERT_TRUE(book_->Reserve(In("agent-a", {"src/net"})).ok());
  absl::Status s = book_->Reserve(In("agent-b", {"src/**/*.cc"})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(s), "RESERVATION_CONFLICT");
  std::map<std::string, std::string> m = MetadataOf(s);
  EXPECT_EQ(m["holder_agent_id"], "agent-a");
  EXPECT_EQ(m["held_pattern"], "src/net");
  EXPECT_EQ(m["pattern"], "src/**/*.cc");
  EXPECT_EQ(m["conflicts"], "1");
  EXPECT_FALSE(m["expires_at_ms"].empty());
  EXPECT_EQ(book_->counters().conflicts, 1);
}

TEST_F(ReservationBookTest, ListPagesByIdWithTokensAndRefusesForeignTokens) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<storage::ReservationRecord> r =
        book_->Reserve(In("agent-a", {absl::StrCat("f", i)}));
    ASSERT_TRUE(r.ok()) << r.status();
    ids.push_back(r->reservation_id);
  }
  ReservationListQuery q;
  q.project_id = kProject;
  q.page_size = 2;
  std::vector<std::string> seen;
  for (int pages = 0; pages < 5; ++pages) {
    absl::StatusOr<ReservationPage> page = book_->List(q);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& r : page->reservations) seen.push_back(r.reservation_id);
    if (page->next_page_token.empty()) break;
    q.page_token = page->next_page_token;
  }
  EXPECT_EQ(seen, ids);
  q.page_token = "not a token!";
  EXPECT_EQ(ReasonOf(book_->List(q).status()), "PAGE_TOKEN_INVALID");
  ReservationListQuery no_project;
  no_project.path = "src";
  EXPECT_EQ(ReasonOf(book_->List(no_project).status()), "REQUEST_INVALID");
}

TEST_F(ReservationBookTest, AGoneAgentsReservationsEndAndTheSweepCountsExpiry) {
  ASSERT_TRUE(book_->Reserve(In("agent-a", {"a"})).ok());
  PathReserveInput brief = In("agent-b", {"b"});
  brief.ttl = absl::Seconds(1);
  ASSERT_TRUE(book_->Reserve(brief).ok());
  book_->OnAgentGone("agent-a", 1);
  EXPECT_EQ(book_->counters().holder_gone, 1);
  ASSERT_TRUE(book_->Reserve(In("agent-b", {"a"})).ok());
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(book_->Sweep(absl::Seconds(5)), 1);  // "b" expired
  EXPECT_EQ(book_->Sweep(absl::Seconds(5)), 0);  // not again this soon
  EXPECT_EQ(book_->counters().expired, 1);
}

TEST_F(ReservationBookTest, TheObserverHearsEveryCountedChange) {
  std::map<ReservationEvent, int64_t> heard;
  book_->SetObserver(
      [&heard](ReservationEvent e, int64_t n) { heard[e] += n; });
  absl::StatusOr<storage::ReservationRecord> a =
      book_->Reserve(In("agent-a", {"src"}));
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(book_->Reserve(In("agent-b", {"src/x"})).ok());
  ASSERT_TRUE(book_->Release(a->reservation_id, "agent-a", a->token, {}).ok());
  ASSERT_TRUE(book_->Reserve(In("agent-b", {"src/x"})).ok());
  book_->OnAgentGone("agent-b", 1);
  EXPECT_EQ(heard[ReservationEvent::kGranted], 2);
  EXPECT_EQ(heard[ReservationEvent::kConflict], 1);
  EXPECT_EQ(heard[ReservationEvent::kReleased], 1);
  EXPECT_EQ(heard[ReservationEvent::kHolderGone], 1);
}

TEST_F(ReservationBookTest, ForceReleaseReturnsTheReservationAsItWas) {
  absl::StatusOr<storage::ReservationRecord> r =
      book_->Reserve(In("agent-a", {"src"}));
  ASSERT_TRUE(r.ok());
  absl::StatusOr<storage::ReservationRecord> forced =
      book_->ForceRelease(r->reservation_id);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(forced->token, r->token);
  EXPECT_EQ(ReasonOf(book_->ForceRelease(r->reservation_id).status()),
            "RESERVATION_NOT_FOUND");
  EXPECT_EQ(ReasonOf(book_->ForceRelease("").status()),
            "RESERVATION_ID_INVALID");
}

}  // namespace
}  // namespace hub
