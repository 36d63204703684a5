// The projects a caller may read and address (docs/design/auth.md, "Reads
// are scoped to the token's projects"): every project, or only a list. Rows
// without a project belong to no list.
#ifndef HUB_REGISTRY_PROJECT_SCOPE_H_
#define HUB_REGISTRY_PROJECT_SCOPE_H_

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace hub {

struct ProjectScope {
  bool all = true;                    // the default: no restriction
  std::vector<std::string> projects;  // when !all

  bool Allows(absl::string_view project_id) const {
    if (all) return true;
    return !project_id.empty() && std::find(projects.begin(), projects.end(),
                                            project_id) != projects.end();
  }
  bool Allows(const std::string& project_id) const {
    return Allows(absl::string_view(project_id));
  }
  bool Allows(const std::optional<std::string>& project_id) const {
    return all || (project_id.has_value() && Allows(*project_id));
  }
  // The scope as a store filter (storage::AgentPageQuery::projects and the
  // like): unset for every project, else the projects Allows() admits.
  std::optional<std::vector<std::string>> StoreProjects() const {
    if (all) return std::nullopt;
    std::vector<std::string> out;
    for (const std::string& p : projects) {
      if (!p.empty()) out.push_back(p);
    }
    return out;
  }
};

}  // namespace hub

#endif  // HUB_REGISTRY_PROJECT_SCOPE_H_
