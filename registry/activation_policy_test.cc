#include "registry/activation_policy.h"

#include "gtest/gtest.h"

namespace hub {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

TEST(BackoffMillisTest, MatchesTrifluxExamples) {
  ActivatorConfig config;
  EXPECT_EQ(BackoffMillis(1, 0.0, config), 800);
  EXPECT_EQ(BackoffMillis(1, 1.0, config), 1200);
  EXPECT_EQ(BackoffMillis(2, 0.0, config), 1600);
  EXPECT_EQ(BackoffMillis(2, 1.0, config), 2400);
  EXPECT_EQ(BackoffMillis(10, 0.5, config), 30'000);
  // Jitter applies after the cap, so a capped delay can reach 36 s.
  EXPECT_EQ(BackoffMillis(10, 1.0, config), 36'000);
}

TEST(BackoffMillisTest, NeverOverflowsForHugeFailureCounts) {
  EXPECT_EQ(BackoffMillis(1'000'000, 0.5, ActivatorConfig()), 30'000);
}

TEST(ExclusionMillisTest, QuarantinesFromTheThirdFailure) {
  ActivatorConfig config;
  EXPECT_EQ(ExclusionMillis(1, 0.5, config), 1000);
  EXPECT_EQ(ExclusionMillis(2, 0.5, config), 2000);
  EXPECT_EQ(ExclusionMillis(3, 0.5, config), 120'000);
  EXPECT_EQ(ExclusionMillis(7, 0.0, config), 120'000);
}

TransportLocator Usable() {
  TransportLocator l;
  l.schema_version = std::string(kTransportLocatorSchemaV1);
  l.transport_id = "trn_1";
  l.kind = std::string(kKindTmux);
  l.host_id = "hst_local";
  l.capabilities = {"probe", "wake", "activate"};
  l.expires_at_ms = kNow + 1000;
  l.locator = TmuxLocator{"s", "m"};
  return l;
}

TEST(LocatorUsableTest, NeedsSchemaLifetimeCapabilitiesKindAndHost) {
  const std::set<std::string> tmux_only = {"tmux"};
  const std::optional<std::string> host = "hst_local";
  EXPECT_TRUE(LocatorUsable(Usable(), kNow, host, tmux_only));
  TransportLocator l = Usable();
  l.expires_at_ms = kNow;
  EXPECT_FALSE(LocatorUsable(l, kNow, host, tmux_only));
  l = Usable();
  l.capabilities = {"probe", "wake"};
  EXPECT_FALSE(LocatorUsable(l, kNow, host, tmux_only));
  EXPECT_FALSE(LocatorUsable(Usable(), kNow, host, {"claude-uds"}));
  EXPECT_FALSE(
      LocatorUsable(Usable(), kNow, std::string("hst_other"), tmux_only));
  EXPECT_TRUE(LocatorUsable(Usable(), kNow, std::nullopt, tmux_only));
  l = Usable();
  l.schema_version = "tfx.transport-locator.v0";
  EXPECT_FALSE(LocatorUsable(l, kNow, host, tmux_only));
}

CandidateFacts Eligible(const std::string& id) {
  CandidateFacts c;
  c.agent_id = id;
  c.agent_exists = true;
  c.agent_live = true;
  c.agent_project_id = "prj_P";
  c.agent_capabilities = {"role:cto:candidate"};
  c.stream_attached = true;
  return c;
}

TEST(EligibilityTest, EveryRuleCanPassOverACandidate) {
  const std::set<std::string> none;
  EXPECT_EQ(IneligibilityReason(Eligible("a"), kNow, "prj_P", "cto", none), "");
  EXPECT_EQ(IneligibilityReason(Eligible("a"), kNow, "prj_P", "cto", {"a"}),
            "already_tried");
  CandidateFacts c = Eligible("a");
  c.excluded_until_ms = kNow + 1;
  EXPECT_EQ(IneligibilityReason(c, kNow, "prj_P", "cto", none), "excluded");
  c.excluded_until_ms = kNow;  // an exclusion ending now no longer applies
  EXPECT_EQ(IneligibilityReason(c, kNow, "prj_P", "cto", none), "");
  c = Eligible("a");
  c.agent_exists = false;
  EXPECT_EQ(IneligibilityReason(c, kNow, "prj_P", "cto", none),
            "agent_unknown");
  c = Eligible("a");
  c.agent_live = false;
  EXPECT_EQ(IneligibilityReason(c, kNow, "prj_P", "cto", none),
            "agent_not_live");
  EXPECT_EQ(IneligibilityReason(Eligible("a"), kNow, "prj_Q", "cto", none),
            "project_mismatch");
  EXPECT_EQ(IneligibilityReason(Eligible("a"), kNow, "prj_P", "lead", none),
            "capability_missing");
  c = Eligible("a");
  c.stream_attached = false;
  EXPECT_EQ(IneligibilityReason(c, kNow, "prj_P", "cto", none), "unreachable");
  c.usable_locators.push_back(Usable());
  EXPECT_EQ(IneligibilityReason(c, kNow, "prj_P", "cto", none), "");
  // Held by another hub sharing the database: reached through that hub.
  c = Eligible("a");
  c.stream_attached = false;
  c.holder_hub = "hub-b";
  EXPECT_EQ(IneligibilityReason(c, kNow, "prj_P", "cto", none), "");
  c = Eligible("a");
  c.agent_project_id.reset();  // an agent without a project may serve any
  EXPECT_EQ(IneligibilityReason(c, kNow, "prj_P", "cto", none), "");
}

TEST(EligibilityTest, TheFirstEligibleInStoreOrderWins) {
  std::vector<CandidateFacts> candidates = {Eligible("a"), Eligible("b"),
                                            Eligible("c")};
  candidates[0].agent_live = false;
  EXPECT_EQ(FirstEligible(candidates, kNow, "prj_P", "cto", {}), 1u);
  EXPECT_EQ(FirstEligible(candidates, kNow, "prj_P", "cto", {"b"}), 2u);
  EXPECT_EQ(FirstEligible(candidates, kNow, "prj_P", "cto", {"b", "c"}),
            std::nullopt);
}

}  // namespace
}  // namespace hub
