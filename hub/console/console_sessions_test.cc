#include "hub/console/console_sessions.h"

#include <fstream>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/test_util.h"

namespace hub::console {
namespace {

constexpr char kViewer[] = "console-viewer-token-01";
constexpr char kOps[] = "console-ops-token-00002";

class ConsoleSessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = storage::testing::OpenOrDie(storage::testing::FreshDbPath());
    path_ = storage::testing::FreshDbPath("tokens");
    WriteTokens(true);
    AuthOptions options;
    options.token_file = path_;
    options.poll_interval = absl::ZeroDuration();
    absl::StatusOr<std::unique_ptr<Authority>> authority =
        Authority::Create(options, &store_->agents());
    ASSERT_TRUE(authority.ok()) << authority.status();
    authority_ = std::move(*authority);
  }

  void WriteTokens(bool with_viewer) {
    std::ofstream out(path_, std::ios::trunc);
    out << R"({"tokens": [)";
    if (with_viewer) {
      out << R"({"token": ")" << kViewer
          << R"(", "principal": "viewer", "kind": "agent", "projects":
          ["prj_AAAAAAAAAAAAAAAAAAAAAA"]},)";
    }
    out << R"({"token": ")" << kOps
        << R"(", "principal": "ops", "kind": "operator", "projects": ["*"]}]})";
  }

  FakeClock clock_;
  std::unique_ptr<storage::Store> store_;
  std::string path_;
  std::unique_ptr<Authority> authority_;
};

TEST_F(ConsoleSessionsTest, ALoginOpensASessionForTheTokensPrincipal) {
  ConsoleSessions sessions(authority_.get(), &clock_);
  EXPECT_TRUE(sessions.tokens_required());
  absl::StatusOr<ConsoleSession> s = sessions.Login(kViewer);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->principal.name, "viewer");
  EXPECT_EQ(s->id.size(), 64u);
  EXPECT_EQ(s->csrf.size(), 64u);
  EXPECT_NE(s->id, s->csrf);
  EXPECT_EQ(s->id.find(kViewer), std::string::npos);
  std::optional<ConsoleSession> found = sessions.Find(s->id);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->csrf, s->csrf);
  EXPECT_EQ(found->principal.name, "viewer");
  EXPECT_NE(sessions.Login(kViewer)->id, s->id) << "each login is its own";
}

TEST_F(ConsoleSessionsTest, AnUnknownTokenOpensNothing) {
  ConsoleSessions sessions(authority_.get(), &clock_);
  absl::StatusOr<ConsoleSession> s = sessions.Login("not-a-token-of-this-hub");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_FALSE(sessions.Find("").has_value());
  EXPECT_FALSE(sessions.Find("0123").has_value());
}

TEST_F(ConsoleSessionsTest, LogoutExpiryAndARemovedTokenEachEndTheSession) {
  ConsoleSessions sessions(authority_.get(), &clock_, absl::Hours(1));
  const std::string viewer = sessions.Login(kViewer)->id;
  const std::string ops = sessions.Login(kOps)->id;
  const std::string other = sessions.Login(kOps)->id;
  sessions.Logout(other);
  EXPECT_FALSE(sessions.Find(other).has_value());

  WriteTokens(false);
  ASSERT_TRUE(authority_->Reload().ok());
  EXPECT_FALSE(sessions.Find(viewer).has_value());
  EXPECT_TRUE(sessions.Find(ops).has_value());

  clock_.Advance(absl::Hours(1));
  EXPECT_FALSE(sessions.Find(ops).has_value());
}

TEST_F(ConsoleSessionsTest, PastTheCapTheOldestSessionGoes) {
  ConsoleSessions sessions(authority_.get(), &clock_, absl::Hours(1), 2);
  const std::string first = sessions.Login(kOps)->id;
  clock_.Advance(absl::Seconds(1));
  const std::string second = sessions.Login(kOps)->id;
  clock_.Advance(absl::Seconds(1));
  const std::string third = sessions.Login(kOps)->id;
  EXPECT_FALSE(sessions.Find(first).has_value());
  EXPECT_TRUE(sessions.Find(second).has_value());
  EXPECT_TRUE(sessions.Find(third).has_value());
}

TEST(ConsoleSessionsNoTokens, WithoutATokenFileEveryLoginIsTheAnonymousAdmin) {
  auto store = storage::testing::OpenOrDie(storage::testing::FreshDbPath());
  absl::StatusOr<std::unique_ptr<Authority>> authority =
      Authority::Create(AuthOptions{}, &store->agents());
  ASSERT_TRUE(authority.ok());
  FakeClock clock;
  ConsoleSessions sessions(authority->get(), &clock);
  EXPECT_FALSE(sessions.tokens_required());
  absl::StatusOr<ConsoleSession> s = sessions.Login("");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->principal.anonymous);
  EXPECT_EQ(s->principal.kind, PrincipalKind::kAdmin);
}

}  // namespace
}  // namespace hub::console
