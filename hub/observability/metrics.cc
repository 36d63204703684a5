#include "hub/observability/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hub {
namespace {

// Family names and label names are compile-time constants of the hub: a bad
// one is a programming error, found by the first test that builds it.
void CheckOrDie(bool ok, absl::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "hub metrics: invalid %.*s\n",
               static_cast<int>(what.size()), what.data());
  std::abort();
}

std::vector<std::string> CheckedLabels(std::vector<std::string> names) {
  for (const std::string& n : names) {
    CheckOrDie(IsValidLabelName(n) && n != "le", absl::StrCat("label ", n));
  }
  return names;
}

}  // namespace

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrFormat("%.0f", value);
  }
  // The shortest form that reads back as the same double.
  for (int digits = 15; digits < 17; ++digits) {
    std::string s = absl::StrFormat("%.*g", digits, value);
    if (std::strtod(s.c_str(), nullptr) == value) return s;
  }
  return absl::StrFormat("%.17g", value);
}

bool IsValidMetricName(absl::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = absl::ascii_isalpha(c) || c == '_' || c == ':' ||
                    (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

bool IsValidLabelName(absl::string_view name) {
  if (name.empty() || absl::StartsWith(name, "__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok =
        absl::ascii_isalpha(c) || c == '_' || (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

MetricFamily::MetricFamily(std::string name, std::string help, std::string type,
                           std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(std::move(type)),
      label_names_(CheckedLabels(std::move(label_names))) {
  CheckOrDie(IsValidMetricName(name_), absl::StrCat("metric name ", name_));
}

void MetricFamily::Render(std::string* out) const {
  absl::StrAppend(out, "# HELP ", name_, " ", EscapeHelp(help_), "\n");
  absl::StrAppend(out, "# TYPE ", name_, " ", type_, "\n");
  RenderSamples(out);
}

void MetricFamily::AppendSample(std::string* out, absl::string_view suffix,
                                const LabelValues& labels,
                                absl::string_view extra_label,
                                absl::string_view extra_value,
                                double value) const {
  absl::StrAppend(out, name_, suffix);
  const bool any = !labels.empty() || !extra_label.empty();
  if (any) out->push_back('{');
  bool first = true;
  for (size_t i = 0; i < labels.size() && i < label_names_.size(); ++i) {
    absl::StrAppend(out, first ? "" : ",", label_names_[i], "=\"",
                    EscapeLabelValue(labels[i]), "\"");
    first = false;
  }
  if (!extra_label.empty()) {
    absl::StrAppend(out, first ? "" : ",", extra_label, "=\"",
                    EscapeLabelValue(extra_value), "\"");
  }
  if (any) out->push_back('}');
  absl::StrAppend(out, " ", FormatMetricValue(value), "\n");
}

// ---- counters

CounterFamily::CounterFamily(std::string name, std::string help,
                             std::vector<std::string> label_names)
    : MetricFamily(std::move(name), std::move(help), "counter",
                   std::move(label_names)) {}

void CounterFamily::Add(const LabelValues& labels, int64_t by) {
  if (by < 0 || labels.size() != label_names().size()) return;
  absl::MutexLock lock(&mu_);
  values_[labels] += by;
}

int64_t CounterFamily::Value(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void CounterFamily::RenderSamples(std::string* out) const {
  absl::MutexLock lock(&mu_);
  // A family without labels always has its one sample, even at 0.
  if (values_.empty() && label_names().empty()) {
    AppendSample(out, "", {}, "", "", 0);
  }
  for (const auto& [labels, value] : values_) {
    AppendSample(out, "", labels, "", "", static_cast<double>(value));
  }
}

// ---- gauges

GaugeFamily::GaugeFamily(std::string name, std::string help,
                         std::vector<std::string> label_names)
    : MetricFamily(std::move(name), std::move(help), "gauge",
                   std::move(label_names)) {}

void GaugeFamily::Add(const LabelValues& labels, double by) {
  if (labels.size() != label_names().size()) return;
  absl::MutexLock lock(&mu_);
  values_[labels] += by;
}

void GaugeFamily::Set(const LabelValues& labels, double value) {
  if (labels.size() != label_names().size()) return;
  absl::MutexLock lock(&mu_);
  values_[labels] = value;
}

double GaugeFamily::Value(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void GaugeFamily::RenderSamples(std::string* out) const {
  absl::MutexLock lock(&mu_);
  if (values_.empty() && label_names().empty()) {
    AppendSample(out, "", {}, "", "", 0);
  }
  for (const auto& [labels, value] : values_) {
    AppendSample(out, "", labels, "", "", value);
  }
}

// ---- histograms

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names,
                                 std::vector<double> upper_bounds)
    : MetricFamily(std::move(name), std::move(help), "histogram",
                   std::move(label_names)),
      upper_bounds_(std::move(upper_bounds)) {
  for (size_t i = 1; i < upper_bounds_.size(); ++i) {
    CheckOrDie(upper_bounds_[i - 1] < upper_bounds_[i],
               absl::StrCat("bucket order of ", this->name()));
  }
}

void HistogramFamily::Observe(const LabelValues& labels, double value) {
  if (labels.size() != label_names().size() || std::isnan(value)) return;
  size_t bucket = 0;
  while (bucket < upper_bounds_.size() && value > upper_bounds_[bucket]) {
    ++bucket;
  }
  absl::MutexLock lock(&mu_);
  Cell& cell = cells_[labels];
  if (cell.buckets.empty()) cell.buckets.assign(upper_bounds_.size(), 0);
  if (bucket < upper_bounds_.size()) ++cell.buckets[bucket];
  ++cell.count;
  cell.sum += value;
}

int64_t HistogramFamily::Count(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = cells_.find(labels);
  return it == cells_.end() ? 0 : it->second.count;
}

double HistogramFamily::Sum(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = cells_.find(labels);
  return it == cells_.end() ? 0 : it->second.sum;
}

void HistogramFamily::RenderSamples(std::string* out) const {
  absl::MutexLock lock(&mu_);
  auto render = [&](const LabelValues& labels, const Cell& cell) {
    int64_t cumulative = 0;
    for (size_t i = 0; i < upper_bounds_.size(); ++i) {
      cumulative += cell.buckets.empty() ? 0 : cell.buckets[i];
      AppendSample(out, "_bucket", labels, "le",
                   FormatMetricValue(upper_bounds_[i]),
                   static_cast<double>(cumulative));
    }
    AppendSample(out, "_bucket", labels, "le", "+Inf",
                 static_cast<double>(cell.count));
    AppendSample(out, "_sum", labels, "", "", cell.sum);
    AppendSample(out, "_count", labels, "", "",
                 static_cast<double>(cell.count));
  };
  if (cells_.empty() && label_names().empty()) render({}, Cell{});
  for (const auto& [labels, cell] : cells_) render(labels, cell);
}

// ---- callbacks

CallbackFamily::CallbackFamily(std::string name, std::string help,
                               std::string type,
                               std::vector<std::string> label_names,
                               std::function<std::vector<MetricSample>()> read)
    : MetricFamily(std::move(name), std::move(help), std::move(type),
                   std::move(label_names)),
      read_(std::move(read)) {}

void CallbackFamily::RenderSamples(std::string* out) const {
  for (const MetricSample& s : read_()) {
    if (s.labels.size() != label_names().size()) continue;
    AppendSample(out, "", s.labels, "", "", s.value);
  }
}

// ---- the registry

void MetricRegistry::Add(std::unique_ptr<MetricFamily> family) {
  absl::MutexLock lock(&mu_);
  for (const auto& f : families_) {
    CheckOrDie(f->name() != family->name(),
               absl::StrCat("duplicate metric ", family->name()));
  }
  families_.push_back(std::move(family));
}

CounterFamily* MetricRegistry::AddCounter(
    std::string name, std::string help, std::vector<std::string> label_names) {
  auto family = std::make_unique<CounterFamily>(
      std::move(name), std::move(help), std::move(label_names));
  CounterFamily* raw = family.get();
  Add(std::move(family));
  return raw;
}

GaugeFamily* MetricRegistry::AddGauge(std::string name, std::string help,
                                      std::vector<std::string> label_names) {
  auto family = std::make_unique<GaugeFamily>(std::move(name), std::move(help),
                                              std::move(label_names));
  GaugeFamily* raw = family.get();
  Add(std::move(family));
  return raw;
}

HistogramFamily* MetricRegistry::AddHistogram(
    std::string name, std::string help, std::vector<std::string> label_names,
    std::vector<double> upper_bounds) {
  auto family = std::make_unique<HistogramFamily>(
      std::move(name), std::move(help), std::move(label_names),
      std::move(upper_bounds));
  HistogramFamily* raw = family.get();
  Add(std::move(family));
  return raw;
}

void MetricRegistry::AddCallback(
    std::string name, std::string help, std::string type,
    std::vector<std::string> label_names,
    std::function<std::vector<MetricSample>()> read) {
  CheckOrDie(type == "counter" || type == "gauge",
             absl::StrCat("type ", type, " of ", name));
  Add(std::make_unique<CallbackFamily>(std::move(name), std::move(help),
                                       std::move(type), std::move(label_names),
                                       std::move(read)));
}

std::string MetricRegistry::Render() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& family : families_) family->Render(&out);
  return out;
}

}  // namespace hub
