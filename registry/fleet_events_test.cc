#include "registry/fleet_events.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hub {
namespace {

TEST(FleetEventsTest, SubscribersHearEachEventInTheOrderTheySubscribed) {
  FleetEvents events;
  std::vector<std::string> heard;
  events.Subscribe([&heard](const FleetEvent& event) {
    if (const auto* agent = std::get_if<AgentChanged>(&event)) {
      heard.push_back("first:" + agent->agent_id);
    }
  });
  events.Subscribe([&heard](const FleetEvent& event) {
    if (const auto* unpushed = std::get_if<MessagesUnpushed>(&event)) {
      heard.push_back("second:" + unpushed->agent_ids.front());
    } else if (const auto* agent = std::get_if<AgentChanged>(&event)) {
      heard.push_back("second:" + agent->agent_id);
    }
  });
  events.Publish(AgentChanged{"agent-a"});
  events.Publish(MessagesUnpushed{{"agent-b"}});
  EXPECT_EQ(heard, (std::vector<std::string>{"first:agent-a", "second:agent-a",
                                             "second:agent-b"}));
}

TEST(FleetEventsTest, ASubscriberHearsOnlyWhatIsPublishedAfterItSubscribed) {
  FleetEvents events;
  events.Publish(AgentChanged{"before"});
  std::vector<std::string> heard;
  events.Subscribe([&heard](const FleetEvent& event) {
    heard.push_back(std::get<AgentChanged>(event).agent_id);
  });
  events.Publish(AgentChanged{"after"});
  EXPECT_EQ(heard, std::vector<std::string>{"after"});
}

TEST(FleetEventsTest, PublishingToNoStreamIsNothing) {
  PublishTo(nullptr, AgentChanged{"agent-a"});  // must not crash
  FleetEvents events;
  int heard = 0;
  events.Subscribe([&heard](const FleetEvent&) { ++heard; });
  PublishTo(&events, AgentChanged{"agent-a"});
  EXPECT_EQ(heard, 1);
}

}  // namespace
}  // namespace hub
