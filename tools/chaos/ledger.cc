#include "tools/chaos/ledger.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hub::chaos {
namespace {

// What a check compares per role: the acknowledged writes summed up.
struct AckedRole {
  int64_t max_epoch = 0;
  int64_t max_version = 0;
  std::map<int64_t, std::string> holders;  // epoch -> holder
};

}  // namespace

const char* Ledger::KindName(WriteKind kind) {
  switch (kind) {
    case WriteKind::kAct:
      return "act";
    case WriteKind::kActivation:
      return "activation";
    case WriteKind::kReservation:
      break;
  }
  return "reservation";
}

void Ledger::Registered(const std::string& agent_id, int64_t generation) {
  absl::MutexLock lock(&mu_);
  int64_t& g = generations_[agent_id];
  if (generation > g) g = generation;
  ++registrations_;
}

void Ledger::Reserved(const std::string& wire, int64_t epoch,
                      const std::string& holder, int64_t version) {
  absl::MutexLock lock(&mu_);
  ++reservations_;
  RoleWritten(wire, version, RoleWrite{epoch, holder, WriteKind::kReservation});
}

void Ledger::Acted(const std::string& wire, int64_t epoch,
                   const std::string& holder, int64_t version) {
  absl::MutexLock lock(&mu_);
  ++acts_;
  RoleWritten(wire, version, RoleWrite{epoch, holder, WriteKind::kAct});
}

void Ledger::Activated(const std::string& wire, int64_t epoch,
                       const std::string& holder, int64_t version) {
  absl::MutexLock lock(&mu_);
  ++activations_;
  RoleWritten(wire, version, RoleWrite{epoch, holder, WriteKind::kActivation});
}

// Writes arrive from many threads in any order, so each is compared with
// its neighbours by version: the history of a role, ordered by version, must
// have epochs that never go back and one holder per epoch. Checking both
// neighbours of every insertion checks every adjacent pair once.
void Ledger::RoleWritten(const std::string& wire, int64_t version,
                         RoleWrite write) {
  std::map<int64_t, RoleWrite>& history = role_writes_[wire];
  auto [it, inserted] = history.emplace(version, write);
  if (!inserted) {
    violations_.push_back(absl::StrCat(
        "two writes of ", wire, " acknowledged at version ", version, ": ",
        KindName(it->second.kind), " of ", it->second.holder, " at epoch ",
        it->second.epoch, " and ", KindName(write.kind), " of ", write.holder,
        " at epoch ", write.epoch));
    return;
  }
  // A violation between two neighbours, or "" (a plain function of the
  // rows, so the lock stays visible to the thread-safety analysis).
  auto compare = [&wire](std::map<int64_t, RoleWrite>::iterator before,
                         std::map<int64_t, RoleWrite>::iterator after) {
    const RoleWrite& a = before->second;
    const RoleWrite& b = after->second;
    if (b.epoch < a.epoch) {
      return absl::StrCat(
          "role ", wire,
          " epoch went back between acknowledged writes: ", KindName(b.kind),
          " of ", b.holder, " at epoch ", b.epoch, " (version ", after->first,
          ") after ", KindName(a.kind), " of ", a.holder, " at epoch ", a.epoch,
          " (version ", before->first, ")");
    }
    if (b.epoch == a.epoch && b.holder != a.holder) {
      return absl::StrCat("two holders of ", wire, " at epoch ", a.epoch, ": ",
                          KindName(a.kind), " of ", a.holder, " (version ",
                          before->first, ") and ", KindName(b.kind), " of ",
                          b.holder, " (version ", after->first, ")");
    }
    return std::string();
  };
  std::vector<std::string> found;
  if (it != history.begin()) found.push_back(compare(std::prev(it), it));
  if (std::next(it) != history.end())
    found.push_back(compare(it, std::next(it)));
  for (std::string& violation : found) {
    if (!violation.empty()) violations_.push_back(std::move(violation));
  }
}

void Ledger::Published(const std::string& message_id,
                       const std::string& recipient) {
  absl::MutexLock lock(&mu_);
  messages_[message_id] = recipient;
}

void Ledger::Delivered(const std::string& message_id,
                       const std::string& agent_id) {
  absl::MutexLock lock(&mu_);
  delivered_.emplace(message_id, agent_id);
}

void Ledger::Acked(const std::string& message_id, const std::string& agent_id) {
  absl::MutexLock lock(&mu_);
  acks_.emplace(message_id, agent_id);
  delivered_.emplace(message_id, agent_id);
}

int64_t Ledger::acked_registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}
int64_t Ledger::acked_reservations() const {
  absl::MutexLock lock(&mu_);
  return reservations_;
}
int64_t Ledger::acked_acts() const {
  absl::MutexLock lock(&mu_);
  return acts_;
}
int64_t Ledger::acked_activations() const {
  absl::MutexLock lock(&mu_);
  return activations_;
}
int64_t Ledger::acked_publishes() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(messages_.size());
}
int64_t Ledger::acked_acks() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(acks_.size());
}

int64_t Ledger::Undelivered(const std::string& agent_id) const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [id, recipient] : messages_) {
    if (recipient == agent_id && !delivered_.count({id, recipient})) ++n;
  }
  return n;
}

void Ledger::CheckDelivered(std::vector<std::string>* violations) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, recipient] : messages_) {
    if (!delivered_.count({id, recipient})) {
      violations->push_back(absl::StrCat("acknowledged publish ", id, " to ",
                                         recipient, " never delivered"));
    }
  }
}

CheckCounts Ledger::Check(
    absl::FunctionRef<absl::StatusOr<StoreSnapshot>()> read,
    std::vector<std::string>* violations) {
  // What was acknowledged before the read: committed before it started.
  std::map<std::string, int64_t> generations;
  std::map<std::string, std::string> messages;
  std::set<std::pair<std::string, std::string>> acks;
  std::map<std::string, AckedRole> roles;
  CheckCounts counts;
  {
    absl::MutexLock lock(&mu_);
    generations = generations_;
    messages = messages_;
    acks = acks_;
    for (const auto& [wire, history] : role_writes_) {
      AckedRole& role = roles[wire];
      for (const auto& [version, write] : history) {
        role.max_epoch = std::max(role.max_epoch, write.epoch);
        role.max_version = std::max(role.max_version, version);
        role.holders.emplace(write.epoch, write.holder);
        ++counts.role_writes;
      }
    }
  }
  absl::StatusOr<StoreSnapshot> snapshot = read();
  if (!snapshot.ok()) {
    violations->push_back(
        absl::StrCat("cannot read the store: ", snapshot.status().ToString()));
    return counts;
  }

  for (const auto& [id, generation] : generations) {
    auto row = snapshot->generations.find(id);
    if (row == snapshot->generations.end()) {
      violations->push_back(
          absl::StrCat("acknowledged agent ", id, " missing"));
    } else if (row->second < generation) {
      violations->push_back(
          absl::StrCat("agent ", id, " generation went back: stored ",
                       row->second, " < acknowledged ", generation));
    }
    ++counts.agents;
  }
  for (const auto& [id, recipient] : messages) {
    if (!snapshot->inbox.count({id, recipient})) {
      violations->push_back(absl::StrCat("acknowledged publish ", id, " to ",
                                         recipient, " missing"));
    }
    ++counts.messages;
  }
  for (const auto& key : acks) {
    auto row = snapshot->inbox.find(key);
    if (row == snapshot->inbox.end() || !row->second) {
      violations->push_back(absl::StrCat("acknowledged ack of ", key.first,
                                         " by ", key.second, " missing"));
    }
    ++counts.acks;
  }
  for (const auto& [wire, acked] : roles) {
    ++counts.roles;
    auto row = snapshot->roles.find(wire);
    if (row == snapshot->roles.end()) {
      violations->push_back(
          absl::StrCat("acknowledged role ", wire, " missing"));
      continue;
    }
    const StoredRole& stored = row->second;
    if (stored.epoch < acked.max_epoch) {
      violations->push_back(absl::StrCat("role ", wire,
                                         " epoch went back: ", stored.epoch,
                                         " < acknowledged ", acked.max_epoch));
    }
    if (stored.version < acked.max_version) {
      violations->push_back(
          absl::StrCat("role ", wire, " version went back: ", stored.version,
                       " < acknowledged ", acked.max_version));
    }
    // The stored holder at an acknowledged epoch is that epoch's holder (or
    // none, once the hub fenced it): never a second one.
    auto at = acked.holders.find(stored.epoch);
    if (at != acked.holders.end() && !stored.holder.empty() &&
        stored.holder != at->second) {
      violations->push_back(absl::StrCat("role ", wire, " epoch ", stored.epoch,
                                         " held by ", stored.holder,
                                         " but acknowledged to ", at->second));
    }
  }
  // A role key has one row (PRIMARY KEY), so "one active holder per role"
  // is the checks above plus this one: no two active rows name the same
  // project, kind and scope.
  std::map<std::string, int> active;
  for (const auto& [wire, role] : snapshot->roles) {
    if (role.state != "active") continue;
    const std::string key =
        absl::StrCat(role.project_id, "/", role.role_kind, "/", role.scope_id);
    if (++active[key] == 2) {
      violations->push_back(absl::StrCat("two active rows for role ", key));
    }
  }

  absl::MutexLock lock(&mu_);
  for (const auto& [wire, role] : snapshot->roles) {
    auto before = stored_epochs_.find(wire);
    if (before != stored_epochs_.end() && role.epoch < before->second) {
      violations->push_back(absl::StrCat("role ", wire,
                                         " epoch went back: ", role.epoch,
                                         " after ", before->second));
    }
    stored_epochs_[wire] = role.epoch;
  }
  for (std::string& v : violations_) violations->push_back(std::move(v));
  violations_.clear();
  return counts;
}

}  // namespace hub::chaos
