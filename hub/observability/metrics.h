// MetricRegistry: counters, gauges and histograms with labels, rendered in
// the Prometheus text exposition format (version 0.0.4).
//
// Responsible for the values, their label sets and the exposition (HELP and
// TYPE lines, label value escaping, histogram buckets with le="+Inf", _sum
// and _count). Not responsible for serving HTTP (metrics_http.h) or for what
// is measured (hub_metrics.h). Families are added before use and live as
// long as the registry; updates and Render() are thread-safe.
#ifndef HUB_HUB_OBSERVABILITY_METRICS_H_
#define HUB_HUB_OBSERVABILITY_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace hub {

// Label values, in the order of the family's label names.
using LabelValues = std::vector<std::string>;

// One sample a callback family reports at scrape time.
struct MetricSample {
  LabelValues labels;
  double value = 0;
};

class MetricFamily {
 public:
  MetricFamily(std::string name, std::string help, std::string type,
               std::vector<std::string> label_names);
  virtual ~MetricFamily() = default;
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;

  const std::string& name() const { return name_; }
  // Appends the family's HELP, TYPE and sample lines to `out`.
  void Render(std::string* out) const;

 protected:
  // Appends the sample lines only.
  virtual void RenderSamples(std::string* out) const = 0;
  // `name{labels[,extra_label="extra_value"]} value\n`.
  void AppendSample(std::string* out, absl::string_view suffix,
                    const LabelValues& labels, absl::string_view extra_label,
                    absl::string_view extra_value, double value) const;
  const std::vector<std::string>& label_names() const { return label_names_; }

 private:
  const std::string name_;
  const std::string help_;
  const std::string type_;
  const std::vector<std::string> label_names_;
};

// A monotonically increasing count per label set (type counter; by
// convention its name ends in _total).
class CounterFamily final : public MetricFamily {
 public:
  CounterFamily(std::string name, std::string help,
                std::vector<std::string> label_names);
  // REQUIRES: labels.size() == the number of label names; by >= 0.
  void Add(const LabelValues& labels, int64_t by = 1);
  int64_t Value(const LabelValues& labels) const;

 private:
  void RenderSamples(std::string* out) const override;
  mutable absl::Mutex mu_;
  std::map<LabelValues, int64_t> values_ ABSL_GUARDED_BY(mu_);
};

// A value that goes up and down per label set (type gauge).
class GaugeFamily final : public MetricFamily {
 public:
  GaugeFamily(std::string name, std::string help,
              std::vector<std::string> label_names);
  void Add(const LabelValues& labels, double by);
  void Set(const LabelValues& labels, double value);
  double Value(const LabelValues& labels) const;

 private:
  void RenderSamples(std::string* out) const override;
  mutable absl::Mutex mu_;
  std::map<LabelValues, double> values_ ABSL_GUARDED_BY(mu_);
};

// Observations counted into cumulative buckets (type histogram).
class HistogramFamily final : public MetricFamily {
 public:
  // `upper_bounds` ascending; the +Inf bucket is implicit.
  HistogramFamily(std::string name, std::string help,
                  std::vector<std::string> label_names,
                  std::vector<double> upper_bounds);
  void Observe(const LabelValues& labels, double value);
  // Observations so far for `labels` (0 when none).
  int64_t Count(const LabelValues& labels) const;
  double Sum(const LabelValues& labels) const;

 private:
  struct Cell {
    std::vector<int64_t> buckets;  // per bound, not cumulative
    int64_t count = 0;
    double sum = 0;
  };
  void RenderSamples(std::string* out) const override;
  const std::vector<double> upper_bounds_;
  mutable absl::Mutex mu_;
  std::map<LabelValues, Cell> cells_ ABSL_GUARDED_BY(mu_);
};

// A counter or gauge whose samples are read at scrape time from elsewhere
// (the presence registry's counts, the store's commit totals).
class CallbackFamily final : public MetricFamily {
 public:
  CallbackFamily(std::string name, std::string help, std::string type,
                 std::vector<std::string> label_names,
                 std::function<std::vector<MetricSample>()> read);

 private:
  void RenderSamples(std::string* out) const override;
  const std::function<std::vector<MetricSample>()> read_;
};

class MetricRegistry {
 public:
  MetricRegistry() = default;
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  // Each adds a family (names must be unique and valid Prometheus names)
  // and returns it; the registry owns it.
  CounterFamily* AddCounter(std::string name, std::string help,
                            std::vector<std::string> label_names = {});
  GaugeFamily* AddGauge(std::string name, std::string help,
                        std::vector<std::string> label_names = {});
  HistogramFamily* AddHistogram(std::string name, std::string help,
                                std::vector<std::string> label_names,
                                std::vector<double> upper_bounds);
  // `type` is "counter" or "gauge".
  void AddCallback(std::string name, std::string help, std::string type,
                   std::vector<std::string> label_names,
                   std::function<std::vector<MetricSample>()> read);

  // Every family, in the order added, in the text exposition format.
  std::string Render() const;

 private:
  void Add(std::unique_ptr<MetricFamily> family);
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
};

// The exposition format's escaping: label values escape backslash, double
// quote and newline; HELP text escapes backslash and newline.
std::string EscapeLabelValue(absl::string_view value);
std::string EscapeHelp(absl::string_view help);
// A sample value: integers without a fraction, +Inf, -Inf, NaN.
std::string FormatMetricValue(double value);
bool IsValidMetricName(absl::string_view name);
bool IsValidLabelName(absl::string_view name);

// The Content-Type of Render()'s output.
inline constexpr char kMetricsContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace hub

#endif  // HUB_HUB_OBSERVABILITY_METRICS_H_
