#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "records/agent.h"
#include "records/hub.h"
#include "records/job.h"
#include "records/message.h"
#include "records/role.h"

namespace hub {
namespace {

// Every value of the table has a word of its own, and the word reads back
// as the value.
template <typename Enum, size_t N, typename NameOf, typename ParseOf>
void ExpectEachValueRoundTrips(const StoredWord<Enum> (&table)[N],
                               NameOf name_of, ParseOf parse) {
  std::set<std::string> words;
  std::set<int> values;
  for (const StoredWord<Enum>& entry : table) {
    std::string word(name_of(entry.value));
    EXPECT_EQ(word, entry.word);
    EXPECT_FALSE(word.empty());
    EXPECT_TRUE(words.insert(word).second) << "two values named " << word;
    EXPECT_TRUE(values.insert(static_cast<int>(entry.value)).second)
        << "two words for the value of " << word;
    EXPECT_EQ(parse(word), entry.value) << word;
  }
  EXPECT_EQ(parse(""), std::nullopt);
  EXPECT_EQ(parse("unknown"), std::nullopt);
}

TEST(StatesTest, EveryAgentStatusHasItsOwnWordThatReadsBack) {
  ExpectEachValueRoundTrips(kAgentStatusWords, AgentStatusName,
                            ParseAgentStatus);
  EXPECT_EQ(std::size(kAgentStatusWords), 3u);
  EXPECT_EQ(ParseAgentStatus("Online"), std::nullopt);
}

TEST(StatesTest, EveryRoleStateHasItsOwnWordThatReadsBack) {
  ExpectEachValueRoundTrips(kRoleStateWords, RoleStateName, ParseRoleState);
  EXPECT_EQ(std::size(kRoleStateWords), 5u);
  EXPECT_EQ(RoleStateName(RoleState::kElectedProbing), "elected-probing");
  EXPECT_EQ(ParseRoleState("elected_probing"), std::nullopt);
}

TEST(StatesTest, EveryMessageStatusHasItsOwnWordThatReadsBack) {
  ExpectEachValueRoundTrips(kMessageStatusWords, MessageStatusName,
                            ParseMessageStatus);
  EXPECT_EQ(std::size(kMessageStatusWords), 4u);
  EXPECT_EQ(MessageStatusName(MessageStatus::kDeadLetter), "dead_letter");
}

TEST(StatesTest, EveryHubStateHasItsOwnWordThatReadsBack) {
  ExpectEachValueRoundTrips(kHubStateWords, HubStateName, ParseHubState);
  EXPECT_EQ(std::size(kHubStateWords), 3u);
}

TEST(StatesTest, AStateStreamsAsItsWord) {
  std::ostringstream out;
  out << RoleState::kElectedProbing << " " << AgentStatus::kStale << " "
      << MessageStatus::kDeadLetter << " " << HubState::kLeft;
  EXPECT_EQ(out.str(), "elected-probing stale dead_letter left");
}

TEST(StatesTest, EveryJobStateHasItsOwnWordThatReadsBack) {
  ExpectEachValueRoundTrips(kJobStateWords, JobStateName, ParseJobState);
  EXPECT_EQ(std::size(kJobStateWords), 9u);
  EXPECT_EQ(JobStateName(JobState::kWaitingHuman), "waiting_human");
}

TEST(StatesTest, EveryJobStateIsStoredForTrifluxAsOneOfItsFiveWords) {
  const std::set<std::string> triflux = {"queued", "running", "succeeded",
                                         "failed", "timed_out"};
  for (const StoredWord<JobState>& entry : kJobStateWords) {
    std::string word(TrifluxJobStatus(entry.value));
    EXPECT_TRUE(triflux.count(word)) << entry.word << " -> " << word;
    // Each of triflux's words reads back as a state that it names.
    EXPECT_EQ(TrifluxJobStatus(*JobStateOfTrifluxStatus(word)), word);
  }
  EXPECT_EQ(JobStateOfTrifluxStatus("cancelled"), std::nullopt);
}

TEST(StatesTest, EveryJobWorkerKindAndDependencyPolicyReadsBack) {
  ExpectEachValueRoundTrips(kJobWorkerKindWords, JobWorkerKindName,
                            ParseJobWorkerKind);
  ExpectEachValueRoundTrips(kJobDependencyFailureWords,
                            JobDependencyFailureName,
                            ParseJobDependencyFailure);
}

}  // namespace
}  // namespace hub
