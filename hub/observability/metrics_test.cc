#include "hub/observability/metrics.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hub {
namespace {

using ::testing::HasSubstr;

TEST(MetricRegistryTest, CounterRendersHelpTypeAndOneLinePerLabelSet) {
  MetricRegistry registry;
  CounterFamily* c =
      registry.AddCounter("hub_things_total", "Things seen.", {"kind"});
  c->Add({"a"});
  c->Add({"a"}, 2);
  c->Add({"b"});
  EXPECT_EQ(registry.Render(),
            "# HELP hub_things_total Things seen.\n"
            "# TYPE hub_things_total counter\n"
            "hub_things_total{kind=\"a\"} 3\n"
            "hub_things_total{kind=\"b\"} 1\n");
  EXPECT_EQ(c->Value({"a"}), 3);
  EXPECT_EQ(c->Value({"c"}), 0);
}

TEST(MetricRegistryTest, UnlabelledFamiliesShowZeroBeforeTheFirstUpdate) {
  MetricRegistry registry;
  registry.AddCounter("hub_a_total", "A.");
  registry.AddGauge("hub_b", "B.");
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("\nhub_a_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\nhub_b 0\n"));
}

TEST(MetricRegistryTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  MetricRegistry registry;
  CounterFamily* c = registry.AddCounter("hub_x_total", "X.", {"v"});
  c->Add({"a\\b\"c\nd"});
  EXPECT_THAT(registry.Render(),
              HasSubstr("hub_x_total{v=\"a\\\\b\\\"c\\nd\"} 1\n"));
}

TEST(MetricRegistryTest, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(EscapeHelp("a\\b\n\"c\""), "a\\\\b\\n\"c\"");
}

TEST(MetricRegistryTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  MetricRegistry registry;
  HistogramFamily* h =
      registry.AddHistogram("hub_lat_seconds", "Latency.", {"m"}, {0.25, 1});
  h->Observe({"x"}, 0.125);
  h->Observe({"x"}, 0.25);  // le is inclusive
  h->Observe({"x"}, 0.5);
  h->Observe({"x"}, 7);
  EXPECT_EQ(registry.Render(),
            "# HELP hub_lat_seconds Latency.\n"
            "# TYPE hub_lat_seconds histogram\n"
            "hub_lat_seconds_bucket{m=\"x\",le=\"0.25\"} 2\n"
            "hub_lat_seconds_bucket{m=\"x\",le=\"1\"} 3\n"
            "hub_lat_seconds_bucket{m=\"x\",le=\"+Inf\"} 4\n"
            "hub_lat_seconds_sum{m=\"x\"} 7.875\n"
            "hub_lat_seconds_count{m=\"x\"} 4\n");
  EXPECT_EQ(h->Count({"x"}), 4);
}

TEST(MetricRegistryTest, GaugesGoUpAndDown) {
  MetricRegistry registry;
  GaugeFamily* g = registry.AddGauge("hub_open", "Open.", {"m"});
  g->Add({"s"}, 2);
  g->Add({"s"}, -1);
  EXPECT_EQ(g->Value({"s"}), 1);
  EXPECT_THAT(registry.Render(), HasSubstr("hub_open{m=\"s\"} 1\n"));
}

TEST(MetricRegistryTest, CallbackFamiliesAreReadAtScrapeTime) {
  MetricRegistry registry;
  int calls = 0;
  registry.AddCallback("hub_agents", "Agents.", "gauge", {"status"}, [&] {
    ++calls;
    return std::vector<MetricSample>{{{"online"}, 2}, {{"offline"}, 0}};
  });
  EXPECT_EQ(calls, 0);
  const std::string text = registry.Render();
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(text, HasSubstr("# TYPE hub_agents gauge\n"
                              "hub_agents{status=\"online\"} 2\n"
                              "hub_agents{status=\"offline\"} 0\n"));
}

TEST(MetricRegistryTest, ValuesFormatIntegersPlainlyAndSpecialValuesByName) {
  EXPECT_EQ(FormatMetricValue(3), "3");
  EXPECT_EQ(FormatMetricValue(-2), "-2");
  EXPECT_EQ(FormatMetricValue(0.25), "0.25");
  EXPECT_EQ(FormatMetricValue(0.005), "0.005");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()),
            "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
}

TEST(MetricRegistryTest, NamesFollowThePrometheusGrammar) {
  EXPECT_TRUE(IsValidMetricName("hub_rpc:rate_total"));
  EXPECT_FALSE(IsValidMetricName("9lives"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_TRUE(IsValidLabelName("method"));
  EXPECT_FALSE(IsValidLabelName("__reserved"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
}

TEST(MetricRegistryDeathTest, DuplicateFamilyNamesAbort) {
  MetricRegistry registry;
  registry.AddCounter("hub_dup_total", "D.");
  EXPECT_DEATH(registry.AddCounter("hub_dup_total", "D."), "duplicate");
}

TEST(MetricRegistryTest, LabelCountMismatchIsIgnoredNotRendered) {
  MetricRegistry registry;
  CounterFamily* c = registry.AddCounter("hub_y_total", "Y.", {"a", "b"});
  c->Add({"only-one"});
  EXPECT_EQ(registry.Render(),
            "# HELP hub_y_total Y.\n# TYPE hub_y_total counter\n");
}

}  // namespace
}  // namespace hub
