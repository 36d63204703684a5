#include "registry/transport_locator.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "status/status.h"

namespace hub {
namespace {

using nlohmann::json;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kTtl = 30'000;
constexpr char kHost[] = "hst_abcDEF012_-xyz";
constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

json Tmux(const std::string& transport_id = "trn_tmux", int64_t priority = 50) {
  return json{{"schema_version", "tfx.transport-locator.v1"},
              {"transport_id", transport_id},
              {"kind", "tmux"},
              {"host_id", kHost},
              {"capabilities", {"probe", "wake", "activate", "interrupt"}},
              {"priority", priority},
              {"expires_at_ms", kNow + 29'000},
              {"locator",
               {{"session_name", "tfx-codex-1"}, {"mux_server_id", "mux_1"}}}};
}

json ClaudeUds(const std::string& transport_id = "trn_uds",
               int64_t priority = 100) {
  json locator = Tmux(transport_id, priority);
  locator["kind"] = "claude-uds";
  locator["locator"] = {{"session_id", "0f3c-session"},
                        {"bridge_id", "local-hub"}};
  return locator;
}

LocatorContext Context(std::string cli = "claude") {
  return LocatorContext{std::move(cli), std::nullopt, kNow, kTtl};
}

struct Case {
  std::string name;
  std::function<void(json&)> mutate;  // applied to a one-element array
  const char* reason;
  std::string cli = "claude";
};

// One row per rule of §3.2; each starts from a valid locator and breaks one
// thing, so the table also shows every code is reachable.
std::vector<Case> LocatorCases() {
  const json big = int64_t{1} << 53;
  return {
      {"element is not an object", [](json& a) { a[0] = 5; },
       "TRANSPORT_LOCATOR_INVALID"},
      {"element is null", [](json& a) { a[0] = nullptr; },
       "TRANSPORT_LOCATOR_INVALID"},
      {"top-level field missing", [](json& a) { a[0].erase("priority"); },
       "TRANSPORT_LOCATOR_INVALID"},
      {"top-level extra cwd", [](json& a) { a[0]["cwd"] = "/home/u"; },
       "TRANSPORT_LOCATOR_INVALID"},
      {"tmux locator extra cwd", [](json& a) { a[0]["locator"]["cwd"] = "/"; },
       "TRANSPORT_LOCATOR_INVALID"},
      {"tmux locator missing server",
       [](json& a) { a[0]["locator"].erase("mux_server_id"); },
       "TRANSPORT_LOCATOR_INVALID"},
      {"locator is a string", [](json& a) { a[0]["locator"] = "tfx-codex-1"; },
       "TRANSPORT_LOCATOR_INVALID"},
      {"uds locator socket path",
       [](json& a) {
         a[0] = ClaudeUds();
         a[0]["locator"]["socket_path"] = "/tmp/s.sock";
       },
       "TRANSPORT_LOCATOR_INVALID"},
      {"uds locator missing bridge",
       [](json& a) {
         a[0] = ClaudeUds();
         a[0]["locator"].erase("bridge_id");
       },
       "TRANSPORT_LOCATOR_INVALID"},
      {"schema v2",
       [](json& a) { a[0]["schema_version"] = "tfx.transport-locator.v2"; },
       "TRANSPORT_LOCATOR_SCHEMA_UNSUPPORTED"},
      {"schema padded",
       [](json& a) { a[0]["schema_version"] = " tfx.transport-locator.v1"; },
       "TRANSPORT_LOCATOR_SCHEMA_UNSUPPORTED"},
      {"schema not a string", [](json& a) { a[0]["schema_version"] = 1; },
       "TRANSPORT_LOCATOR_SCHEMA_UNSUPPORTED"},
      {"transport id empty", [](json& a) { a[0]["transport_id"] = "  "; },
       "TRANSPORT_ID_INVALID"},
      {"transport id slash", [](json& a) { a[0]["transport_id"] = "a/b"; },
       "TRANSPORT_ID_INVALID"},
      {"transport id inner space",
       [](json& a) { a[0]["transport_id"] = "a b"; }, "TRANSPORT_ID_INVALID"},
      {"transport id 129 chars",
       [](json& a) { a[0]["transport_id"] = std::string(129, 'a'); },
       "TRANSPORT_ID_INVALID"},
      {"transport id number", [](json& a) { a[0]["transport_id"] = 7; },
       "TRANSPORT_ID_INVALID"},
      {"transport id twice", [](json& a) { a.push_back(Tmux("trn_tmux", 1)); },
       "TRANSPORT_ID_INVALID"},
      {"kind pipe", [](json& a) { a[0]["kind"] = "pipe"; },
       "TRANSPORT_KIND_UNSUPPORTED"},
      {"kind upper case", [](json& a) { a[0]["kind"] = "TMUX"; },
       "TRANSPORT_KIND_UNSUPPORTED"},
      {"kind null", [](json& a) { a[0]["kind"] = nullptr; },
       "TRANSPORT_KIND_UNSUPPORTED"},
      {"codex with claude-uds", [](json& a) { a[0] = ClaudeUds(); },
       "CODEX_TRANSPORT_UNSUPPORTED", "codex"},
      {"host without prefix", [](json& a) { a[0]["host_id"] = "laptop"; },
       "HOST_ID_INVALID"},
      {"host prefix only", [](json& a) { a[0]["host_id"] = "hst_"; },
       "HOST_ID_INVALID"},
      {"host with dot", [](json& a) { a[0]["host_id"] = "hst_a.b"; },
       "HOST_ID_INVALID"},
      {"host 129 bytes",
       [](json& a) { a[0]["host_id"] = "hst_" + std::string(125, 'h'); },
       "HOST_ID_INVALID"},
      {"hosts differ",
       [](json& a) {
         a.push_back(Tmux("trn_2", 10));
         a[1]["host_id"] = "hst_other";
       },
       "HOST_ID_INVALID"},
      {"capabilities not array",
       [](json& a) { a[0]["capabilities"] = "probe"; },
       "TRANSPORT_CAPABILITIES_INVALID"},
      {"capability unknown",
       [](json& a) {
         a[0]["capabilities"] = {"probe", "fly"};
       },
       "TRANSPORT_CAPABILITIES_INVALID"},
      {"capability duplicate after trim",
       [](json& a) {
         a[0]["capabilities"] = {"probe", " probe "};
       },
       "TRANSPORT_CAPABILITIES_INVALID"},
      {"capability not a string",
       [](json& a) {
         a[0]["capabilities"] = {"probe", 1};
       },
       "TRANSPORT_CAPABILITIES_INVALID"},
      {"priority fraction", [](json& a) { a[0]["priority"] = 1.5; },
       "TRANSPORT_PRIORITY_INVALID"},
      {"priority string", [](json& a) { a[0]["priority"] = "100"; },
       "TRANSPORT_PRIORITY_INVALID"},
      {"priority bool", [](json& a) { a[0]["priority"] = true; },
       "TRANSPORT_PRIORITY_INVALID"},
      {"priority 2^53", [big](json& a) { a[0]["priority"] = big; },
       "TRANSPORT_PRIORITY_INVALID"},
      {"priority -2^53",
       [](json& a) { a[0]["priority"] = -(int64_t{1} << 53); },
       "TRANSPORT_PRIORITY_INVALID"},
      {"priority huge unsigned",
       [](json& a) {
         a[0]["priority"] = uint64_t{18'000'000'000'000'000'000u};
       },
       "TRANSPORT_PRIORITY_INVALID"},
      {"expiry now", [](json& a) { a[0]["expires_at_ms"] = kNow; },
       "TRANSPORT_EXPIRY_INVALID"},
      {"expiry past", [](json& a) { a[0]["expires_at_ms"] = kNow - 1; },
       "TRANSPORT_EXPIRY_INVALID"},
      {"expiry outlives lease",
       [](json& a) { a[0]["expires_at_ms"] = kNow + kTtl + 1; },
       "TRANSPORT_EXPIRY_INVALID"},
      {"expiry fraction", [](json& a) { a[0]["expires_at_ms"] = kNow + 0.5; },
       "TRANSPORT_EXPIRY_INVALID"},
      {"expiry string", [](json& a) { a[0]["expires_at_ms"] = "soon"; },
       "TRANSPORT_EXPIRY_INVALID"},
      {"uds without session or short",
       [](json& a) {
         a[0] = ClaudeUds();
         a[0]["locator"].erase("session_id");
       },
       "CLAUDE_UDS_SESSION_REQUIRED"},
      {"uds session with space",
       [](json& a) {
         a[0] = ClaudeUds();
         a[0]["locator"]["session_id"] = "a b";
       },
       "CLAUDE_UDS_SESSION_INVALID"},
      {"uds session null",
       [](json& a) {
         a[0] = ClaudeUds();
         a[0]["locator"]["session_id"] = nullptr;
         a[0]["locator"]["short"] = "s1";
       },
       "CLAUDE_UDS_SESSION_INVALID"},
      {"uds short with slash",
       [](json& a) {
         a[0] = ClaudeUds();
         a[0]["locator"]["short"] = "a/b";
       },
       "CLAUDE_UDS_SHORT_INVALID"},
      {"uds bridge empty",
       [](json& a) {
         a[0] = ClaudeUds();
         a[0]["locator"]["bridge_id"] = "";
       },
       "CLAUDE_UDS_BRIDGE_INVALID"},
      {"tmux session with space",
       [](json& a) { a[0]["locator"]["session_name"] = "my session"; },
       "TMUX_SESSION_INVALID"},
      {"tmux server 129 chars",
       [](json& a) {
         a[0]["locator"]["mux_server_id"] = std::string(129, 'm');
       },
       "TMUX_SERVER_INVALID"},
  };
}

TEST(TransportLocatorTest, EveryRuleRejectsWithItsOwnReasonCode) {
  for (const Case& c : LocatorCases()) {
    json locators = json::array({Tmux()});
    c.mutate(locators);
    absl::StatusOr<std::vector<TransportLocator>> result =
        NormalizeTransportLocators(locators, Context(c.cli));
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name;
    EXPECT_EQ(ReasonOf(result.status()), c.reason) << c.name;
  }
}

TEST(TransportLocatorTest, EarlierRulesWinWhenALocatorBreaksSeveral) {
  json locator = ClaudeUds();
  locator["host_id"] = "bad";
  locator["priority"] = "bad";
  locator["locator"] = "bad";
  EXPECT_EQ(ReasonOf(NormalizeTransportLocators(json::array({locator}),
                                                Context("codex"))
                         .status()),
            "CODEX_TRANSPORT_UNSUPPORTED");
  locator["kind"] = "pipe";
  locator["schema_version"] = "v0";
  EXPECT_EQ(ReasonOf(NormalizeTransportLocators(json::array({locator}),
                                                Context("codex"))
                         .status()),
            "TRANSPORT_LOCATOR_SCHEMA_UNSUPPORTED");
  locator["cwd"] = "/";  // shape is checked before any value
  EXPECT_EQ(ReasonOf(NormalizeTransportLocators(json::array({locator}),
                                                Context("codex"))
                         .status()),
            "TRANSPORT_LOCATOR_INVALID");
  // The first bad element wins, and the message names it.
  json bad_second = json::array({Tmux("a"), Tmux("b"), Tmux("c")});
  bad_second[1]["kind"] = "pipe";
  bad_second[2]["schema_version"] = "v0";
  absl::Status status =
      NormalizeTransportLocators(bad_second, Context()).status();
  EXPECT_EQ(ReasonOf(status), "TRANSPORT_KIND_UNSUPPORTED");
  EXPECT_NE(status.message().find("transport_locators[1]"), std::string::npos);
}

TEST(TransportLocatorTest, ListMustBeAnArrayOfParsableJson) {
  EXPECT_EQ(
      ReasonOf(NormalizeTransportLocators(json::object(), Context()).status()),
      "TRANSPORT_LOCATORS_INVALID");
  EXPECT_EQ(
      ReasonOf(NormalizeTransportLocators(json("[]"), Context()).status()),
      "TRANSPORT_LOCATORS_INVALID");
  EXPECT_EQ(ReasonOf(ParseTransportLocatorsJson("{}", Context()).status()),
            "TRANSPORT_LOCATORS_INVALID");
  for (const char* text : {"", "[", "[1,]", "nope", "[] []"}) {
    absl::Status status = ParseTransportLocatorsJson(text, Context()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(ReasonOf(status), "TRANSPORT_LOCATORS_JSON_INVALID") << text;
  }
}

TEST(TransportLocatorTest, HeartbeatTtlMustBePositiveOnlyWhenLocatorsExist) {
  LocatorContext context = Context();
  for (int64_t ttl : {int64_t{0}, int64_t{-1}}) {
    context.heartbeat_ttl_ms = ttl;
    EXPECT_EQ(
        ReasonOf(NormalizeTransportLocators(json::array({Tmux()}), context)
                     .status()),
        "HEARTBEAT_TTL_INVALID");
    EXPECT_TRUE(NormalizeTransportLocators(json::array(), context).ok());
  }
}

TEST(TransportLocatorTest, ExpiryMayReachButNotPassTheEndOfTheLease) {
  json locators = json::array({Tmux()});
  locators[0]["expires_at_ms"] = kNow + kTtl;
  EXPECT_TRUE(NormalizeTransportLocators(locators, Context()).ok());
  locators[0]["expires_at_ms"] = kNow + 1;
  EXPECT_TRUE(NormalizeTransportLocators(locators, Context()).ok());
  // A huge lease cannot overflow the bound into a rejection.
  LocatorContext long_lease = Context();
  long_lease.heartbeat_ttl_ms = INT64_MAX;
  locators[0]["expires_at_ms"] = kMaxSafeInteger;
  EXPECT_TRUE(NormalizeTransportLocators(locators, long_lease).ok());
}

TEST(TransportLocatorTest, IntegersFollowJavaScriptSafeIntegerRules) {
  const std::vector<std::pair<json, int64_t>> accepted = {
      {json(kMaxSafeInteger), kMaxSafeInteger},
      {json(-kMaxSafeInteger), -kMaxSafeInteger},
      {json(0), 0},
      {json(-5), -5},
      {json::parse("100.0"), 100},  // the same Number as 100 in JavaScript
      {json::parse("1e2"), 100},
  };
  json locators = json::array({Tmux()});
  for (const auto& [priority, expected] : accepted) {
    locators[0]["priority"] = priority;
    absl::StatusOr<std::vector<TransportLocator>> result =
        NormalizeTransportLocators(locators, Context());
    ASSERT_TRUE(result.ok()) << priority << " " << result.status();
    EXPECT_EQ((*result)[0].priority, expected);
  }
}

TEST(TransportLocatorTest, LocatorsSortByPriorityDescThenTransportIdBytes) {
  json locators = json::array({Tmux("b", 50), Tmux("z", 100), Tmux("a", 100),
                               Tmux("B", 100), Tmux("c", -1)});
  absl::StatusOr<std::vector<TransportLocator>> result =
      NormalizeTransportLocators(locators, Context());
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<std::string> order;
  for (const TransportLocator& locator : *result) {
    order.push_back(locator.transport_id);
  }
  // Byte order puts upper case first ('B' < 'a'), unlike localeCompare.
  EXPECT_EQ(order, (std::vector<std::string>{"B", "a", "z", "b", "c"}));
}

TEST(TransportLocatorTest, OutputIsRebuiltFromTrimmedValidatedFields) {
  json locator = ClaudeUds(" trn_uds ");
  locator["capabilities"] = {" wake", "probe "};
  locator["locator"] = {{"short", " s1 "}, {"bridge_id", "\tlocal-hub"}};
  absl::StatusOr<std::vector<TransportLocator>> result =
      NormalizeTransportLocators(json::array({locator}), Context());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(TransportLocatorsToJson(*result),
            R"([{"schema_version":"tfx.transport-locator.v1",)"
            R"("transport_id":"trn_uds","kind":"claude-uds",)"
            R"("host_id":"hst_abcDEF012_-xyz","capabilities":["wake","probe"],)"
            R"("priority":100,"expires_at_ms":1700000029000,)"
            R"("locator":{"short":"s1","bridge_id":"local-hub"}}])");
}

TEST(TransportLocatorTest, StoredFormParsesBackToTheSameLocators) {
  json locators = json::array({Tmux("trn_tmux", 50), ClaudeUds("trn_uds")});
  locators[1]["locator"]["short"] = "s1";
  locators[1]["capabilities"] = json::array();
  absl::StatusOr<std::vector<TransportLocator>> first =
      NormalizeTransportLocators(locators, Context());
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string stored = TransportLocatorsToJson(*first);
  absl::StatusOr<std::vector<TransportLocator>> second =
      ParseTransportLocatorsJson(stored, Context());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(TransportLocatorsToJson(*second), stored);
  EXPECT_EQ((*second)[0].kind, "claude-uds");
  EXPECT_EQ(std::get<ClaudeUdsLocator>((*second)[0].locator).short_id, "s1");
  EXPECT_TRUE((*second)[0].capabilities.empty());
  EXPECT_EQ(TransportLocatorsToJson({}), "[]");
}

TEST(TransportLocatorTest, FieldOrderOfOneLocatorFollowsTheSchema) {
  absl::StatusOr<std::vector<TransportLocator>> result =
      NormalizeTransportLocators(json::array({Tmux()}), Context());
  ASSERT_TRUE(result.ok());
  const nlohmann::ordered_json object = TransportLocatorToJson((*result)[0]);
  std::vector<std::string> keys;
  for (const auto& item : object.items()) {
    keys.push_back(item.key());
  }
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "schema_version", "transport_id", "kind", "host_id",
                      "capabilities", "priority", "expires_at_ms", "locator"}));
}

TEST(TransportLocatorTest, LogicalRefAndHostIdPredicatesMatchTheSchema) {
  EXPECT_TRUE(IsLogicalRef("trn_A.b:c-d"));
  EXPECT_TRUE(IsLogicalRef("  x  "));
  EXPECT_TRUE(IsLogicalRef(std::string(128, 'a')));
  EXPECT_FALSE(IsLogicalRef(std::string(129, 'a')));
  EXPECT_FALSE(IsLogicalRef(""));
  EXPECT_FALSE(IsLogicalRef("/tmp/sock"));
  EXPECT_FALSE(IsLogicalRef("caf\xc3\xa9"));
  EXPECT_TRUE(IsHostId("hst_" + std::string(124, 'h')));
  EXPECT_FALSE(IsHostId("hst_" + std::string(125, 'h')));
  EXPECT_FALSE(IsHostId(" hst_a"));
  EXPECT_FALSE(IsHostId("HST_a"));
}

IdentityInput CodexIdentity() {
  IdentityInput input;
  input.project_id = kProject;
  input.session_id = "  019a-codex-session  ";
  input.host_id = kHost;
  input.transport_locators_json = json::array({Tmux()}).dump();
  input.cli = "codex";
  input.heartbeat_ttl_ms = kTtl;
  input.now_ms = kNow;
  return input;
}

TEST(RegistrationIdentityTest, CodexRegistrationKeepsAllIdentityValues) {
  // triflux 9.4 scenario 1.
  absl::StatusOr<RegistrationIdentity> identity =
      NormalizeRegistrationIdentity(CodexIdentity());
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_TRUE(identity->supplied);
  EXPECT_EQ(identity->project_id, kProject);
  EXPECT_EQ(identity->session_id, "019a-codex-session");
  EXPECT_EQ(identity->host_id, kHost);
  ASSERT_TRUE(identity->locators.has_value());
  ASSERT_EQ(identity->locators->size(), 1u);
  const std::string stored = TransportLocatorsToJson(*identity->locators);
  EXPECT_EQ(json::parse(stored), json::array({Tmux()}));
}

TEST(RegistrationIdentityTest, LegacyRegistrationSuppliesNoIdentity) {
  // triflux 9.4 scenario 2: nothing given, nothing to write.
  IdentityInput input;
  input.cli = "claude";
  input.now_ms = kNow;
  absl::StatusOr<RegistrationIdentity> identity =
      NormalizeRegistrationIdentity(input);
  ASSERT_TRUE(identity.ok());
  EXPECT_FALSE(identity->supplied);
  EXPECT_FALSE(identity->project_id || identity->session_id ||
               identity->host_id || identity->locators);
}

TEST(RegistrationIdentityTest, BadLocatorsFailTheWholeRegistration) {
  // triflux 9.4 scenario 3.
  IdentityInput with_cwd = CodexIdentity();
  json locators = json::array({Tmux()});
  locators[0]["locator"]["cwd"] = "/home/dev/project";
  with_cwd.transport_locators_json = locators.dump();
  EXPECT_EQ(ReasonOf(NormalizeRegistrationIdentity(with_cwd).status()),
            "TRANSPORT_LOCATOR_INVALID");
  IdentityInput codex_uds = CodexIdentity();
  codex_uds.transport_locators_json = json::array({ClaudeUds()}).dump();
  EXPECT_EQ(ReasonOf(NormalizeRegistrationIdentity(codex_uds).status()),
            "CODEX_TRANSPORT_UNSUPPORTED");
}

TEST(RegistrationIdentityTest, IdentityFieldsFailWithTheirOwnCodesInOrder) {
  std::vector<std::pair<std::function<void(IdentityInput&)>, const char*>>
      cases = {
          {[](IdentityInput& i) { i.project_id = "prj_short"; },
           "PROJECT_ID_INVALID"},
          {[](IdentityInput& i) { i.project_id = ""; }, "PROJECT_ID_INVALID"},
          {[](IdentityInput& i) {
             i.project_id = "bad";  // project is checked first
             i.session_id = "";
           },
           "PROJECT_ID_INVALID"},
          {[](IdentityInput& i) { i.session_id = " \t "; },
           "SESSION_ID_INVALID"},
          {[](IdentityInput& i) { i.session_id = std::string(257, 's'); },
           "SESSION_ID_INVALID"},
          {[](IdentityInput& i) {
             i.session_id = " " + std::string(256, 's');  // before trim
           },
           "SESSION_ID_INVALID"},
          {[](IdentityInput& i) {
             std::string emoji;  // 129 astral chars = 258 UTF-16 units
             for (int n = 0; n < 129; ++n) emoji += "\xf0\x9f\x98\x80";
             i.session_id = emoji;
           },
           "SESSION_ID_INVALID"},
          {[](IdentityInput& i) { i.host_id = ""; }, "HOST_ID_INVALID"},
          {[](IdentityInput& i) { i.host_id = "hst_has space"; },
           "HOST_ID_INVALID"},
          {[](IdentityInput& i) { i.host_id = "hst_other"; },
           "HOST_ID_INVALID"},  // the locator's host differs
          {[](IdentityInput& i) { i.transport_locators = json::array(); },
           "TRANSPORT_LOCATORS_INVALID"},  // both forms given
          {[](IdentityInput& i) { i.transport_locators_json = "[{"; },
           "TRANSPORT_LOCATORS_JSON_INVALID"},
          {[](IdentityInput& i) {
             i.transport_locators_json.reset();
             i.transport_locators = json("not json");
           },
           "TRANSPORT_LOCATORS_JSON_INVALID"},
          {[](IdentityInput& i) {
             i.transport_locators_json.reset();
             i.transport_locators = json{{"kind", "tmux"}};
           },
           "TRANSPORT_LOCATORS_INVALID"},
          {[](IdentityInput& i) { i.heartbeat_ttl_ms = 0; },
           "HEARTBEAT_TTL_INVALID"},
      };
  for (size_t n = 0; n < cases.size(); ++n) {
    IdentityInput input = CodexIdentity();
    cases[n].first(input);
    absl::Status status = NormalizeRegistrationIdentity(input).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_EQ(ReasonOf(status), cases[n].second) << n;
  }
}

TEST(RegistrationIdentityTest, SessionIdLimitCountsUtf16UnitsLikeJavaScript) {
  IdentityInput input = CodexIdentity();
  std::string accented;  // 256 two-byte chars: 512 bytes but 256 units
  for (int n = 0; n < 256; ++n) accented += "\xc3\xa9";
  input.session_id = accented;
  EXPECT_TRUE(NormalizeRegistrationIdentity(input).ok());
  input.session_id = std::string(256, 's');
  EXPECT_TRUE(NormalizeRegistrationIdentity(input).ok());
}

TEST(RegistrationIdentityTest, HostIsResolvedFromTheFirstLocatorWhenNotGiven) {
  IdentityInput input = CodexIdentity();
  input.host_id.reset();
  input.cli = "claude";
  json locators = json::array({Tmux("trn_tmux", 50), ClaudeUds("trn_uds")});
  input.transport_locators = locators;
  input.transport_locators_json.reset();
  absl::StatusOr<RegistrationIdentity> identity =
      NormalizeRegistrationIdentity(input);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(identity->host_id, kHost);
  EXPECT_EQ((*identity->locators)[0].transport_id, "trn_uds");
}

TEST(RegistrationIdentityTest, EmptyLocatorListIsSuppliedAndStoredAsEmpty) {
  IdentityInput input;
  input.cli = "claude";
  input.now_ms = kNow;
  input.heartbeat_ttl_ms = 0;  // irrelevant without locators
  input.transport_locators_json = "[]";
  absl::StatusOr<RegistrationIdentity> identity =
      NormalizeRegistrationIdentity(input);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_TRUE(identity->supplied);
  EXPECT_FALSE(identity->host_id.has_value());
  ASSERT_TRUE(identity->locators.has_value());
  EXPECT_EQ(TransportLocatorsToJson(*identity->locators), "[]");
}

}  // namespace
}  // namespace hub
