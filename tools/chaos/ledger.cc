#include "tools/chaos/ledger.h"

#include <sqlite3.h>

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"

namespace hub::chaos {
namespace {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Db = std::unique_ptr<sqlite3, DbCloser>;
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

Stmt Prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  return Stmt(stmt);
}

void BindText(sqlite3_stmt* s, int i, const std::string& v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()),
                    SQLITE_TRANSIENT);
}

std::string Text(sqlite3_stmt* s, int col) {
  const unsigned char* t = sqlite3_column_text(s, col);
  return t == nullptr ? "" : reinterpret_cast<const char*>(t);
}

}  // namespace

void Ledger::Registered(const std::string& agent_id, int64_t generation) {
  absl::MutexLock lock(&mu_);
  int64_t& g = generations_[agent_id];
  if (generation > g) g = generation;
  ++registrations_;
}

void Ledger::Reserved(const std::string& wire, int64_t epoch,
                      const std::string& holder) {
  absl::MutexLock lock(&mu_);
  ++reservations_;
  auto [it, inserted] = epochs_[wire].emplace(epoch, holder);
  if (!inserted && it->second != holder) {
    violations_.push_back(absl::StrCat("two holders acknowledged for ", wire,
                                       " at epoch ", epoch, ": ", it->second,
                                       " and ", holder));
  }
}

void Ledger::Published(const std::string& message_id,
                       const std::string& recipient) {
  absl::MutexLock lock(&mu_);
  messages_[message_id] = recipient;
}

void Ledger::Acked(const std::string& message_id, const std::string& agent_id) {
  absl::MutexLock lock(&mu_);
  acks_.emplace(message_id, agent_id);
}

std::vector<std::string> Ledger::TakeViolations() {
  absl::MutexLock lock(&mu_);
  return std::move(violations_);
}

int64_t Ledger::acked_registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}
int64_t Ledger::acked_reservations() const {
  absl::MutexLock lock(&mu_);
  return reservations_;
}
int64_t Ledger::acked_publishes() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(messages_.size());
}
int64_t Ledger::acked_acks() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(acks_.size());
}

CheckCounts Ledger::Check(const std::string& db_path,
                          std::vector<std::string>* violations) {
  CheckCounts counts;
  sqlite3* raw = nullptr;
  // Read-write, as hubd opens it: opening replays the WAL a crash left.
  if (sqlite3_open_v2(db_path.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr) !=
      SQLITE_OK) {
    violations->push_back(absl::StrCat("cannot open ", db_path, ": ",
                                       raw ? sqlite3_errmsg(raw) : "?"));
    sqlite3_close_v2(raw);
    return counts;
  }
  Db db(raw);
  sqlite3_busy_timeout(db.get(), 5000);
  absl::MutexLock lock(&mu_);

  Stmt agent = Prepare(
      db.get(), "SELECT presence_generation FROM agents WHERE agent_id = ?1");
  for (const auto& [id, generation] : generations_) {
    sqlite3_reset(agent.get());
    BindText(agent.get(), 1, id);
    if (sqlite3_step(agent.get()) != SQLITE_ROW) {
      violations->push_back(
          absl::StrCat("acknowledged agent ", id, " missing"));
    } else if (sqlite3_column_int64(agent.get(), 0) < generation) {
      violations->push_back(absl::StrCat("agent ", id,
                                         " generation went back: stored ",
                                         sqlite3_column_int64(agent.get(), 0),
                                         " < acknowledged ", generation));
    }
    ++counts.agents;
  }

  Stmt message =
      Prepare(db.get(),
              "SELECT 1 FROM message_inbox WHERE message_id = ?1 AND "
              "agent_id = ?2");
  for (const auto& [id, recipient] : messages_) {
    sqlite3_reset(message.get());
    BindText(message.get(), 1, id);
    BindText(message.get(), 2, recipient);
    if (sqlite3_step(message.get()) != SQLITE_ROW) {
      violations->push_back(absl::StrCat("acknowledged publish ", id, " to ",
                                         recipient, " missing"));
    }
    ++counts.messages;
  }

  Stmt ack = Prepare(db.get(),
                     "SELECT acked_at_ms FROM message_inbox WHERE "
                     "message_id = ?1 AND agent_id = ?2");
  for (const auto& [id, agent_id] : acks_) {
    sqlite3_reset(ack.get());
    BindText(ack.get(), 1, id);
    BindText(ack.get(), 2, agent_id);
    if (sqlite3_step(ack.get()) != SQLITE_ROW ||
        sqlite3_column_type(ack.get(), 0) == SQLITE_NULL) {
      violations->push_back(absl::StrCat("acknowledged ack of ", id, " by ",
                                         agent_id, " missing"));
    }
    ++counts.acks;
  }

  Stmt role = Prepare(db.get(),
                      "SELECT role_key_wire, epoch, holder_agent_id, state "
                      "FROM role_registry");
  std::map<std::string, std::pair<int64_t, std::string>> stored;
  while (sqlite3_step(role.get()) == SQLITE_ROW) {
    stored[Text(role.get(), 0)] = {sqlite3_column_int64(role.get(), 1),
                                   Text(role.get(), 2)};
  }
  for (const auto& [wire, by_epoch] : epochs_) {
    ++counts.roles;
    auto row = stored.find(wire);
    if (row == stored.end()) {
      violations->push_back(
          absl::StrCat("acknowledged role ", wire, " missing"));
      continue;
    }
    const auto& [epoch, holder] = row->second;
    const int64_t acked_max = by_epoch.rbegin()->first;
    if (epoch < acked_max) {
      violations->push_back(absl::StrCat("role ", wire, " epoch went back: ",
                                         epoch, " < acknowledged ", acked_max));
    }
    // The stored holder at an acknowledged epoch is that epoch's holder (or
    // none, once the hub fenced it): never a second one.
    auto at = by_epoch.find(epoch);
    if (at != by_epoch.end() && !holder.empty() && holder != at->second) {
      violations->push_back(absl::StrCat("role ", wire, " epoch ", epoch,
                                         " held by ", holder,
                                         " but acknowledged to ", at->second));
    }
  }
  for (const auto& [wire, row] : stored) {
    auto before = stored_epochs_.find(wire);
    if (before != stored_epochs_.end() && row.first < before->second) {
      violations->push_back(absl::StrCat("role ", wire, " epoch went back: ",
                                         row.first, " after ", before->second));
    }
    stored_epochs_[wire] = row.first;
  }
  // A role key has one row (PRIMARY KEY), so "one active holder per role"
  // is the acknowledged-epoch check above plus this one: no agent is the
  // active holder of two rows that name the same role key.
  Stmt dup = Prepare(db.get(),
                     "SELECT project_id, role_kind, scope_id, COUNT(*) FROM "
                     "role_registry WHERE state = 'active' GROUP BY 1, 2, 3 "
                     "HAVING COUNT(*) > 1");
  while (sqlite3_step(dup.get()) == SQLITE_ROW) {
    violations->push_back(
        absl::StrCat("two active rows for role ", Text(dup.get(), 0), "/",
                     Text(dup.get(), 1), "/", Text(dup.get(), 2)));
  }
  for (std::string& v : violations_) violations->push_back(std::move(v));
  violations_.clear();
  return counts;
}

}  // namespace hub::chaos
