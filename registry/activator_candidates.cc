// Activator: candidate events. A role that waits for a holder is ensured
// again when one of its candidates arrives (registers or attaches) or its
// candidate rows change, so a role backlog never waits for an ensure that
// nobody sends (issue #16 §1).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "registry/activator.h"

namespace hub {

bool Activator::WaitsForHolder(const RoleRecord& row) const {
  if (row.state != RoleState::kElectable || row.holder_agent_id.has_value()) {
    return false;
  }
  // Asked for: the last ensure found nobody (a publish's, an operator's, a
  // restart's), its holder stepped down, or messages wait for whoever takes
  // it.
  if (row.blocked_reason == "no_candidate" || row.last_reason == "released") {
    return true;
  }
  return options_.has_backlog && options_.has_backlog(row.role_key_wire);
}

void Activator::ReconsiderRole(const std::string& wire,
                               const std::string& cause_id) {
  {
    // An ensure in flight may have read the candidates before this event:
    // it is looked at again when it lands (Land). One that landed already
    // wrote its outcome, which the read below sees.
    absl::MutexLock lock(&mu_);
    if (flying_.count(wire) > 0) {
      recheck_.emplace(wire, cause_id);
      return;
    }
  }
  RoleKeyRef ref;
  ref.wire = wire;
  absl::StatusOr<RoleRecord> row = roles_->Get(ref);
  if (!row.ok() || !WaitsForHolder(*row)) return;
  EnsureRequest again;
  again.role = ref;
  again.trigger = "candidate_changed";
  again.cause_id = cause_id;
  (void)Ensure(again);
}

void Activator::OnCandidateChanged(const std::string& wire,
                                   const std::string& agent_id) {
  ReconsiderRole(wire, absl::StrCat("candidate:", agent_id, ":", wire));
}

void Activator::OnCandidateArrived(const std::string& agent_id) {
  CandidateListInput list;
  list.agent_id = agent_id;
  list.page_size = 1000;
  std::vector<std::string> wires;
  while (true) {
    absl::StatusOr<CandidatePage> page = roles_->ListCandidates(list);
    if (!page.ok()) return;
    for (const CandidateRecord& c : page->candidates) {
      wires.push_back(c.role_key_wire);
    }
    if (page->next_page_token.empty()) break;
    list.page_token = page->next_page_token;
  }
  for (const std::string& wire : wires) {
    ReconsiderRole(wire, absl::StrCat("arrived:", agent_id, ":", wire));
  }
}

}  // namespace hub
