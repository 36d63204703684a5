// The activator's pure decisions (TRIFLUX-HUB §5.6, §5.8): its settings,
// backoff with jitter, candidate exclusion, locator usability and candidate
// eligibility. No I/O, no clock: callers pass `now` and the random draw, so
// every decision is reproducible in a test.
#ifndef HUB_REGISTRY_ACTIVATION_POLICY_H_
#define HUB_REGISTRY_ACTIVATION_POLICY_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "registry/transport_locator.h"

namespace hub {

struct ActivatorConfig {
  absl::Duration probe_timeout = absl::Seconds(10);  // also bounds a wake
  absl::Duration activation_ack_timeout = absl::Seconds(45);
  absl::Duration standup_timeout = absl::Seconds(60);
  int max_probe_failures = 3;
  absl::Duration backoff_base = absl::Seconds(1);
  double backoff_factor = 2.0;
  absl::Duration backoff_max = absl::Seconds(30);
  double backoff_jitter_ratio = 0.2;
  absl::Duration candidate_quarantine = absl::Minutes(2);
  std::string cto_charter_version = "tfx.cto-charter.v1";
  std::string lead_charter_version = "tfx.lead-charter.v1";
};

// The delay before retry number `failures` (>= 1):
// min(base * factor^(failures-1), max) * (1 + (2u - 1) * jitter), rounded
// to milliseconds, with u in [0, 1] the random draw. failure 1: 800..1200 ms.
int64_t BackoffMillis(int failures, double u, const ActivatorConfig& config);

// How long a candidate stays excluded after its `failures`-th consecutive
// failure: the quarantine from max_probe_failures on, else the backoff.
int64_t ExclusionMillis(int failures, double u, const ActivatorConfig& config);

// §3.3: whether the activator may use `locator` at `now_ms`: schema v1, not
// expired, capabilities include probe, wake and activate, its kind is in
// `enabled_kinds`, and it is on this host (`local_host_id`, when known).
bool LocatorUsable(const TransportLocator& locator, int64_t now_ms,
                   const std::optional<std::string>& local_host_id,
                   const std::set<std::string>& enabled_kinds);

// What the activator knows about one candidate when choosing.
struct CandidateFacts {
  std::string agent_id;
  std::optional<int64_t> excluded_until_ms;
  bool agent_exists = false;
  bool agent_live = false;  // status online and lease > now
  std::optional<std::string> agent_project_id;
  std::vector<std::string> agent_capabilities;
  bool stream_attached = false;  // reachable over its presence stream
  // Hubs sharing a database: the other hub whose live seat holds the
  // agent's presence; reachable through it (that hub runs the probe and the
  // activation on the stream or locators it has).
  std::optional<std::string> holder_hub;
  std::vector<TransportLocator> usable_locators;  // already filtered
};

// Why a candidate was passed over ("" when eligible), for logs and tests.
std::string IneligibilityReason(const CandidateFacts& c, int64_t now_ms,
                                absl::string_view role_project_id,
                                absl::string_view role_kind,
                                const std::set<std::string>& tried);

// The first eligible candidate in the given (store) order, or nullopt.
std::optional<size_t> FirstEligible(
    const std::vector<CandidateFacts>& candidates, int64_t now_ms,
    absl::string_view role_project_id, absl::string_view role_kind,
    const std::set<std::string>& tried);

}  // namespace hub

#endif  // HUB_REGISTRY_ACTIVATION_POLICY_H_
