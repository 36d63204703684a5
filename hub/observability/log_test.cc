#include "hub/observability/log.h"

#include "gtest/gtest.h"

namespace hub::log {
namespace {

TEST(LogTest, EventsAreKeyValuePairsInTheGivenOrder) {
  EXPECT_EQ(FormatEvent("agent_registered",
                        {{"agent_id", "session:a"}, {"generation", 3}}),
            "event=agent_registered agent_id=session:a generation=3");
}

TEST(LogTest, ValuesWithSpacesQuotesOrControlCharactersAreQuoted) {
  EXPECT_EQ(FormatEvent("e", {{"m", "two words"},
                              {"q", "say \"hi\""},
                              {"eq", "a=b"},
                              {"nl", "a\nb"},
                              {"bell", "\x07"},
                              {"empty", ""}}),
            "event=e m=\"two words\" q=\"say \\\"hi\\\"\" eq=\"a=b\" "
            "nl=\"a\\nb\" bell=\"\\x07\" empty=\"\"");
}

TEST(LogTest, NumbersPrintInDecimal) {
  EXPECT_EQ(FormatEvent("e", {{"n", int64_t{-42}}, {"u", 7u}}),
            "event=e n=-42 u=7");
}

TEST(LogTest, LevelsParseByNameAndUnknownOnesAreRefused) {
  EXPECT_EQ(*ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(*ParseLevel("warn"), Level::kWarn);
  EXPECT_EQ(*ParseLevel("off"), Level::kOff);
  EXPECT_FALSE(ParseLevel("verbose").ok());
  EXPECT_FALSE(ParseLevel("INFO").ok());
}

TEST(LogTest, TheLevelDecidesWhatIsEnabled) {
  SetLevel(Level::kWarn);
  EXPECT_FALSE(Enabled(Level::kInfo));
  EXPECT_TRUE(Enabled(Level::kWarn));
  EXPECT_TRUE(Enabled(Level::kError));
  SetLevel(Level::kOff);
  EXPECT_FALSE(Enabled(Level::kError));
  SetLevel(Level::kInfo);
  EXPECT_TRUE(Enabled(Level::kInfo));
  EXPECT_FALSE(Enabled(Level::kDebug));
}

TEST(LogTest, TheObserverSeesEachWrittenLineWithItsFieldsAndNotDisabledOnes) {
  SetLevel(Level::kInfo);
  std::vector<std::string> seen;
  const int64_t id = AddObserver(
      [&seen](Level, absl::string_view event,
              const std::vector<std::pair<std::string, std::string>>& fields) {
        std::string line(event);
        for (const auto& [k, v] : fields)
          absl::StrAppend(&line, " ", k, "=", v);
        seen.push_back(line);
      });
  Info("role_failover", {{"role", "rk2.x"}, {"epoch", 4}});
  Debug("rpc_failed", {{"method", "m"}});
  RemoveObserver(id);
  Info("after", {});
  EXPECT_EQ(seen, std::vector<std::string>{"role_failover role=rk2.x epoch=4"});
}

}  // namespace
}  // namespace hub::log
