#include "registry/activation_policy.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace hub {

int64_t BackoffMillis(int failures, double u, const ActivatorConfig& config) {
  const double base = absl::ToDoubleMilliseconds(config.backoff_base);
  const double cap = absl::ToDoubleMilliseconds(config.backoff_max);
  const int exponent = std::max(0, failures - 1);
  // Capped before it can overflow: factor^exponent only grows.
  double delay = base;
  for (int i = 0; i < exponent && delay < cap; ++i)
    delay *= config.backoff_factor;
  delay = std::min(delay, cap);
  u = std::clamp(u, 0.0, 1.0);
  return std::llround(delay *
                      (1.0 + (2.0 * u - 1.0) * config.backoff_jitter_ratio));
}

int64_t ExclusionMillis(int failures, double u, const ActivatorConfig& config) {
  if (failures >= config.max_probe_failures) {
    return absl::ToInt64Milliseconds(config.candidate_quarantine);
  }
  return BackoffMillis(failures, u, config);
}

bool LocatorUsable(const TransportLocator& locator, int64_t now_ms,
                   const std::optional<std::string>& local_host_id,
                   const std::set<std::string>& enabled_kinds) {
  if (locator.schema_version != kTransportLocatorSchemaV1) return false;
  if (locator.expires_at_ms <= now_ms) return false;
  if (enabled_kinds.count(locator.kind) == 0) return false;
  if (local_host_id.has_value() && locator.host_id != *local_host_id)
    return false;
  for (absl::string_view needed : {"probe", "wake", "activate"}) {
    if (std::find(locator.capabilities.begin(), locator.capabilities.end(),
                  needed) == locator.capabilities.end()) {
      return false;
    }
  }
  return true;
}

std::string IneligibilityReason(const CandidateFacts& c, int64_t now_ms,
                                absl::string_view role_project_id,
                                absl::string_view role_kind,
                                const std::set<std::string>& tried) {
  if (tried.count(c.agent_id) > 0) return "already_tried";
  if (c.excluded_until_ms.has_value() && *c.excluded_until_ms > now_ms) {
    return "excluded";
  }
  if (!c.agent_exists) return "agent_unknown";
  if (!c.agent_live) return "agent_not_live";
  if (c.agent_project_id.has_value() &&
      *c.agent_project_id != role_project_id) {
    return "project_mismatch";
  }
  const std::string capability = absl::StrCat("role:", role_kind, ":candidate");
  if (std::find(c.agent_capabilities.begin(), c.agent_capabilities.end(),
                capability) == c.agent_capabilities.end()) {
    return "capability_missing";
  }
  if (!c.stream_attached && !c.holder_hub.has_value() &&
      c.usable_locators.empty()) {
    return "unreachable";
  }
  return "";
}

std::optional<size_t> FirstEligible(
    const std::vector<CandidateFacts>& candidates, int64_t now_ms,
    absl::string_view role_project_id, absl::string_view role_kind,
    const std::set<std::string>& tried) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (IneligibilityReason(candidates[i], now_ms, role_project_id, role_kind,
                            tried)
            .empty()) {
      return i;
    }
  }
  return std::nullopt;
}

}  // namespace hub
