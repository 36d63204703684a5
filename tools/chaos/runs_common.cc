#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tools/chaos/runs.h"

namespace hub::chaos {

std::vector<std::string> ChaosProjects(int roles) {
  const char* kProjects = "ABCDEFGH";
  std::vector<std::string> projects;
  for (int i = 0; i < std::clamp(roles, 1, 8); ++i) {
    projects.push_back(absl::StrCat("prj_", std::string(22, kProjects[i])));
  }
  return projects;
}

std::string MedianMax(std::vector<int64_t> ms) {
  std::sort(ms.begin(), ms.end());
  const int64_t median = ms.empty() ? 0 : ms[ms.size() / 2];
  const int64_t worst = ms.empty() ? 0 : ms.back();
  return absl::StrCat("median=", median, " ms max=", worst, " ms");
}

std::string LedgerLine(const Ledger& ledger) {
  return absl::StrCat(
      "chaos: ledger: registrations=", ledger.acked_registrations(),
      " reservations=", ledger.acked_reservations(),
      " acts=", ledger.acked_acts(),
      " activations=", ledger.acked_activations(),
      " publishes=", ledger.acked_publishes(), " acks=", ledger.acked_acks());
}

absl::Duration Between(uint64_t random, absl::Duration min,
                       absl::Duration max) {
  const int64_t lo = absl::ToInt64Milliseconds(min);
  const int64_t span =
      std::max<int64_t>(1, absl::ToInt64Milliseconds(max) - lo);
  return absl::Milliseconds(lo + static_cast<int64_t>(random % span));
}

}  // namespace hub::chaos
