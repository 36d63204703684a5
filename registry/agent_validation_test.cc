#include "registry/agent_validation.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "status/status.h"

namespace hub {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

RegisterInput Valid() {
  RegisterInput in;
  in.agent_id = "session:abc";
  in.cli = "codex";
  return in;
}

std::string ReasonFor(const RegisterInput& in) {
  return ReasonOf(BuildRegistration(in, PresenceConfig(), kNow).status());
}

TEST(BuildRegistrationTest, AValidMinimalRequestUsesTheDefaults) {
  absl::StatusOr<storage::AgentRegistration> r =
      BuildRegistration(Valid(), PresenceConfig(), kNow);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->lease_ttl_ms, 30'000);
  EXPECT_EQ(r->capabilities_json, "[]");
  EXPECT_EQ(r->topics_json, "[]");
  EXPECT_EQ(r->metadata_json, "{}");
  EXPECT_TRUE(r->project_id.keep());
  EXPECT_TRUE(r->transport_locators_json.keep());
}

TEST(BuildRegistrationTest, EveryFieldRuleHasItsReason) {
  struct Case {
    const char* name;
    void (*mutate)(RegisterInput&);
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"short id", [](RegisterInput& in) { in.agent_id = "ab"; },
       "AGENT_ID_INVALID"},
      {"long id", [](RegisterInput& in) { in.agent_id = std::string(65, 'a'); },
       "AGENT_ID_INVALID"},
      {"bad char", [](RegisterInput& in) { in.agent_id = "a b c"; },
       "AGENT_ID_INVALID"},
      {"address as id", [](RegisterInput& in) { in.agent_id = "topic:x"; },
       "AGENT_ID_INVALID"},
      {"cli", [](RegisterInput& in) { in.cli = "vim"; }, "AGENT_CLI_INVALID"},
      {"no cli", [](RegisterInput& in) { in.cli = ""; }, "AGENT_CLI_INVALID"},
      {"pid zero", [](RegisterInput& in) { in.pid = 0; }, "REQUEST_INVALID"},
      {"ttl short", [](RegisterInput& in) { in.ttl = absl::Seconds(9); },
       "HEARTBEAT_TTL_INVALID"},
      {"ttl long",
       [](RegisterInput& in) { in.ttl = absl::Hours(2) + absl::Seconds(1); },
       "HEARTBEAT_TTL_INVALID"},
      {"empty capability", [](RegisterInput& in) { in.capabilities = {""}; },
       "REQUEST_INVALID"},
      {"control char capability",
       [](RegisterInput& in) { in.capabilities = {"a\nb"}; },
       "REQUEST_INVALID"},
      {"too many capabilities",
       [](RegisterInput& in) { in.capabilities.assign(65, "cap"); },
       "LIMIT_EXCEEDED"},
      {"role topic", [](RegisterInput& in) { in.topics = {"role:x"}; },
       "TOPIC_INVALID"},
      {"topic charset", [](RegisterInput& in) { in.topics = {"a b"}; },
       "TOPIC_INVALID"},
      {"too many topics", [](RegisterInput& in) { in.topics.assign(65, "t"); },
       "LIMIT_EXCEEDED"},
      {"metadata size",
       [](RegisterInput& in) {
         in.metadata_json = std::string(64 * 1024 + 1, ' ');
       },
       "LIMIT_EXCEEDED"},
      {"project", [](RegisterInput& in) { in.project_id = "prj_short"; },
       "PROJECT_ID_INVALID"},
      {"session", [](RegisterInput& in) { in.session_id = "   "; },
       "SESSION_ID_INVALID"},
      {"host", [](RegisterInput& in) { in.host_id = "host-1"; },
       "HOST_ID_INVALID"},
      {"locator json",
       [](RegisterInput& in) { in.transport_locators_json = "[{"; },
       "TRANSPORT_LOCATORS_JSON_INVALID"},
      {"locators not array",
       [](RegisterInput& in) { in.transport_locators_json = "{}"; },
       "TRANSPORT_LOCATORS_INVALID"},
  };
  for (const Case& c : cases) {
    RegisterInput in = Valid();
    c.mutate(in);
    EXPECT_EQ(ReasonFor(in), c.reason) << c.name;
  }
}

TEST(BuildRegistrationTest, LimitFailuresAreResourceExhaustedAndNameTheLimit) {
  RegisterInput in = Valid();
  in.topics.assign(65, "t");
  absl::Status s = BuildRegistration(in, PresenceConfig(), kNow).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(MetadataOf(s)["limit"], "max_topics_per_agent");
  EXPECT_EQ(MetadataOf(s)["limit_value"], "64");
}

TEST(BuildRegistrationTest, DuplicatesAreDroppedInOrder) {
  RegisterInput in = Valid();
  in.capabilities = {"b", "a", "b"};
  in.topics = {"x", "x", "y"};
  absl::StatusOr<storage::AgentRegistration> r =
      BuildRegistration(in, PresenceConfig(), kNow);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->capabilities_json, R"(["b","a"])");
  EXPECT_EQ(r->topics_json, R"(["x","y"])");
}

TEST(BuildRegistrationTest, AnEmptyIdentityFieldClearsItAndAnAbsentOneKeepsIt) {
  RegisterInput in = Valid();
  in.project_id = "";
  in.session_id = " s1 ";
  absl::StatusOr<storage::AgentRegistration> r =
      BuildRegistration(in, PresenceConfig(), kNow);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->project_id.clear());
  ASSERT_TRUE(r->session_id.set());
  EXPECT_EQ(r->session_id.value(), "s1");
  EXPECT_TRUE(r->host_id.keep());
}

TEST(BuildRegistrationTest, LocatorsAreNormalizedAndTheirHostIsResolved) {
  RegisterInput in = Valid();
  in.transport_locators_json = absl::StrCat(
      R"([{"schema_version":"tfx.transport-locator.v1","transport_id":"trn_1",)",
      R"("kind":"tmux","host_id":"hst_abc","capabilities":["probe","wake"],)",
      R"("priority":100,"expires_at_ms":)", kNow + 20'000,
      R"(,"locator":{"session_name":"s","mux_server_id":"mux_1"}}])");
  absl::StatusOr<storage::AgentRegistration> r =
      BuildRegistration(in, PresenceConfig(), kNow);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->host_id.set());
  EXPECT_EQ(r->host_id.value(), "hst_abc");
  ASSERT_TRUE(r->transport_locators_json.set());
  EXPECT_NE(r->transport_locators_json.value().find("\"trn_1\""),
            std::string::npos);
}

std::string TmuxLocatorJson(int i) {
  return absl::StrCat(
      R"({"schema_version":"tfx.transport-locator.v1","transport_id":"trn_)", i,
      R"(","kind":"tmux","host_id":"hst_abc","capabilities":["probe"],)",
      R"("priority":1,"expires_at_ms":)", kNow + 20'000,
      R"(,"locator":{"session_name":"s","mux_server_id":"mux_1"}})");
}

TEST(BuildRegistrationTest, ConfiguredLimitsAreEnforcedAtTheirExactValue) {
  PresenceConfig config;
  config.max_capabilities_per_agent = 2;
  config.max_topics_per_agent = 3;
  config.max_locators_per_agent = 2;
  config.max_metadata_bytes = 10;
  struct Case {
    const char* limit;
    std::function<void(RegisterInput&, int)> fill;  // fill with n items
    int value;
  };
  const std::vector<Case> cases = {
      {"max_capabilities_per_agent",
       [](RegisterInput& in, int n) { in.capabilities.assign(n, "c"); }, 2},
      {"max_topics_per_agent",
       [](RegisterInput& in, int n) { in.topics.assign(n, "t"); }, 3},
      {"max_metadata_bytes",
       [](RegisterInput& in, int n) {
         in.metadata_json =
             absl::StrCat("{\"a\":\"", std::string(n - 8, 'x'), "\"}");
       },
       10},
      {"max_locators_per_agent",
       [](RegisterInput& in, int n) {
         std::vector<std::string> all;
         for (int i = 0; i < n; ++i) all.push_back(TmuxLocatorJson(i));
         in.transport_locators_json =
             absl::StrCat("[", absl::StrJoin(all, ","), "]");
       },
       2},
      {"max_locators_per_agent",
       [](RegisterInput& in, int n) {
         in.transport_locator_objects.emplace();
         for (int i = 0; i < n; ++i) {
           in.transport_locator_objects->push_back(TmuxLocatorJson(i));
         }
       },
       2},
  };
  for (const Case& c : cases) {
    RegisterInput at = Valid();
    c.fill(at, c.value);
    EXPECT_TRUE(BuildRegistration(at, config, kNow).ok()) << c.limit;
    RegisterInput over = Valid();
    c.fill(over, c.value + 1);
    absl::Status s = BuildRegistration(over, config, kNow).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << c.limit;
    EXPECT_EQ(ReasonOf(s), "LIMIT_EXCEEDED") << c.limit;
    EXPECT_EQ(MetadataOf(s)["limit"], c.limit);
    EXPECT_EQ(MetadataOf(s)["limit_value"], absl::StrCat(c.value)) << c.limit;
  }
}

TEST(AgentPageTokenTest, RoundTripsAndRejectsForgeries) {
  absl::StatusOr<std::string> back =
      DecodeAgentPageToken(EncodeAgentPageToken("agent-b"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "agent-b");
  EXPECT_EQ(*DecodeAgentPageToken(""), "");
  EXPECT_EQ(ReasonOf(DecodeAgentPageToken("bm9wZQ").status()),
            "PAGE_TOKEN_INVALID");
}

TEST(TopicsJsonContainsTest, MatchesWholeNamesOnly) {
  EXPECT_TRUE(TopicsJsonContains(R"(["a","bc"])", "bc"));
  EXPECT_FALSE(TopicsJsonContains(R"(["a","bc"])", "b"));
  EXPECT_FALSE(TopicsJsonContains("not json", "a"));
}

TEST(ValidateAgentIdTest, AQuotedMultiByteIdIsNeverSplitInTwo) {
  std::string id = "a";
  std::string topic = "t";
  for (int i = 0; i < 100; ++i) {
    absl::StrAppend(&id, "\xC3\xA9");  // U+00E9
    absl::StrAppend(&topic, "\xC3\xA9");
  }
  for (const absl::Status& s : {ValidateAgentId(id), ValidateTopic(topic)}) {
    ASSERT_FALSE(s.ok());
    // ErrorText changes nothing in a message that is already valid UTF-8.
    EXPECT_EQ(ErrorText(s.message(), s.message().size()), s.message());
    EXPECT_TRUE(absl::StrContains(s.message(), "\xE2\x80\xA6\""))
        << "the quoted value ends with an ellipsis: " << s.message();
  }
}

}  // namespace
}  // namespace hub
