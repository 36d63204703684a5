#include "hub/console/console_hints.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace hub::console {
namespace {

using nlohmann::json;

std::vector<std::string> Ids(const std::string& prefix, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat(prefix, i));
  return out;
}

TEST(ConsoleHintsPayloads, OneBatchNamesItsHubAgentsMessagesRolesAndJobs) {
  const std::vector<std::string> payloads = ConsoleHints::Payloads(
      "hub-a", {"agent-1", "agent-\"2"}, {"m1"}, {"rk2.x"}, {"job-1"}, {});
  ASSERT_EQ(payloads.size(), 1u);
  const json j = json::parse(payloads[0]);
  EXPECT_EQ(j["h"], "hub-a");
  EXPECT_EQ(j["a"], json({"agent-1", "agent-\"2"}));
  EXPECT_EQ(j["m"], json({"m1"}));
  EXPECT_EQ(j["r"], json({"rk2.x"}));
  EXPECT_EQ(j["j"], json({"job-1"}));
}

TEST(ConsoleHintsPayloads, ABigBatchIsSplitUnderThePayloadLimitLosingNoId) {
  ConsoleHintsOptions limits;
  limits.max_payload = 500;
  limits.max_notifications = 100;
  const std::vector<std::string> agents = Ids("agent-", 120);
  const std::vector<std::string> payloads =
      ConsoleHints::Payloads("hub-a", agents, {}, {}, {}, limits);
  ASSERT_GT(payloads.size(), 1u);
  std::vector<std::string> seen;
  for (const std::string& p : payloads) {
    EXPECT_LE(p.size(), limits.max_payload) << p;
    const json j = json::parse(p);
    EXPECT_EQ(j["h"], "hub-a");
    for (const json& id : j["a"]) seen.push_back(id.get<std::string>());
  }
  EXPECT_EQ(seen, agents);
}

TEST(ConsoleHintsPayloads, OnlyTheNewestMessagesAreNamed) {
  ConsoleHintsOptions limits;
  limits.max_messages = 3;
  const std::vector<std::string> payloads =
      ConsoleHints::Payloads("hub-a", {}, Ids("m", 10), {}, {}, limits);
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(json::parse(payloads[0])["m"], json({"m7", "m8", "m9"}));
}

TEST(ConsoleHintsPayloads, ABatchTooBigForItsNotificationsIsOneReset) {
  ConsoleHintsOptions limits;
  limits.max_payload = 200;
  limits.max_notifications = 2;
  const std::vector<std::string> payloads =
      ConsoleHints::Payloads("hub-a", Ids("agent-", 100), {}, {}, {}, limits);
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(json::parse(payloads[0]), json({{"h", "hub-a"}, {"reset", true}}));
}

}  // namespace
}  // namespace hub::console
