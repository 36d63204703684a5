// roles list|get|watch|ensure|reserve|close|closed, candidates list|add.
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "clients/cpp/role_watcher.h"
#include "tools/hubctl/commands.h"

namespace hub::hubctl {

const std::vector<FlagSpec> kRoleKeyFlags = {
    {"project", "PROJECT_ID", "the role's project (instead of a WIRE)"},
    {"kind", "cto|lead", "the role's kind (with --project)"},
    {"scope", "SCOPE_ID", "the lead's scope (with --project --kind=lead)"}};

absl::Status RoleKeyFromArgs(const Args& args, size_t index,
                             hub::v1::RoleKey* key, std::string* wire) {
  const bool has_wire = index < args.positional().size();
  const bool has_key =
      args.Has("project") || args.Has("kind") || args.Has("scope");
  if (has_wire && has_key) {
    return UsageError("give a role key either as WIRE or as --project/--kind");
  }
  if (has_wire) {
    *wire = args.positional()[index];
    return absl::OkStatus();
  }
  if (!args.Has("project") || !args.Has("kind")) {
    return UsageError("a role key needs WIRE, or --project and --kind");
  }
  auto kind = ParseEnumWord<hub::v1::RoleKind>(
      "kind", args.Get("kind"), "ROLE_KIND_", &hub::v1::RoleKind_Parse);
  if (!kind.ok()) return kind.status();
  key->set_project_id(args.Get("project"));
  key->set_kind(*kind);
  key->set_scope_id(args.Get("scope"));
  return absl::OkStatus();
}

namespace {

std::vector<FlagSpec> WithKeyFlags(std::vector<FlagSpec> flags) {
  flags.insert(flags.begin(), kRoleKeyFlags.begin(), kRoleKeyFlags.end());
  return flags;
}

const std::vector<std::string> kRoleHeader = {
    "KIND", "PROJECT", "SCOPE", "STATE", "HOLDER", "EPOCH", "VERSION", "WIRE"};

std::vector<std::string> RoleRow(const hub::v1::Role& r) {
  return {EnumWord(hub::v1::RoleKind_Name(r.role_key().kind()), "ROLE_KIND_"),
          r.role_key().project_id(),
          r.role_key().scope_id().empty() ? "-" : r.role_key().scope_id(),
          EnumWord(hub::v1::RoleState_Name(r.state()), "ROLE_STATE_"),
          r.has_holder_agent_id() ? r.holder_agent_id() : "-",
          absl::StrCat(r.epoch()),
          absl::StrCat(r.version()),
          r.role_key_wire()};
}

void PrintRole(Env& env, const hub::v1::Role& r) {
  std::vector<std::string> row = RoleRow(r);
  std::vector<std::pair<std::string, std::string>> fields;
  for (size_t i = 0; i < row.size(); ++i) {
    fields.emplace_back(absl::AsciiStrToLower(kRoleHeader[i]), row[i]);
  }
  fields.emplace_back("activation_seq", absl::StrCat(r.activation_seq()));
  fields.emplace_back("activation_id",
                      r.has_activation_id() ? r.activation_id() : "-");
  fields.emplace_back("activation_deadline",
                      FormatTimestamp(r.activation_deadline()));
  fields.emplace_back("charter_version",
                      r.has_charter_version() ? r.charter_version() : "-");
  fields.emplace_back("last_reason", r.last_reason());
  fields.emplace_back("last_transition_at",
                      FormatTimestamp(r.last_transition_at()));
  PrintFields(*env.out, fields);
}

absl::Status ListRoles(Env& env, const Args& args) {
  hub::v1::ListRolesRequest request;
  request.set_project_id(args.Get("project"));
  request.set_scope_id(args.Get("scope"));
  if (args.Has("kind")) {
    auto kind = ParseEnumWord<hub::v1::RoleKind>(
        "kind", args.Get("kind"), "ROLE_KIND_", &hub::v1::RoleKind_Parse);
    if (!kind.ok()) return kind.status();
    request.set_kind(*kind);
  }
  for (absl::string_view word :
       absl::StrSplit(args.Get("state"), ',', absl::SkipEmpty())) {
    auto state = ParseEnumWord<hub::v1::RoleState>(
        "state", std::string(word), "ROLE_STATE_", &hub::v1::RoleState_Parse);
    if (!state.ok()) return state.status();
    request.add_states(*state);
  }
  auto page_size = args.GetInt("page-size");
  if (!page_size.ok()) return page_size.status();
  request.set_page_size(static_cast<int32_t>(page_size->value_or(0)));
  request.set_page_token(args.Get("page-token"));
  auto listed = env.client->ListRoles(request);
  if (!listed.ok()) return listed.status();
  if (env.json) {
    *env.out << ToJson(*listed) << "\n";
    return absl::OkStatus();
  }
  Table table(kRoleHeader);
  for (const auto& role : listed->roles()) table.Add(RoleRow(role));
  table.Print(*env.out);
  if (!listed->next_page_token().empty()) {
    *env.out << "next page: --page-token=" << listed->next_page_token() << "\n";
  }
  return absl::OkStatus();
}

absl::Status GetRole(Env& env, const Args& args) {
  hub::v1::GetRoleRequest request;
  absl::Status key = RoleKeyFromArgs(args, 0, request.mutable_role_key(),
                                     request.mutable_role_key_wire());
  if (!key.ok()) return key;
  if (request.role_key_wire().empty() == false) request.clear_role_key();
  auto got = env.client->GetRole(request);
  if (!got.ok()) return got.status();
  if (env.json) {
    *env.out << ToJson(*got) << "\n";
  } else {
    PrintRole(env, got->role());
  }
  return absl::OkStatus();
}

// Follows WatchRoles with a RoleWatcher (which reconnects and resumes) until
// --count changes were printed, --timeout passed, or a permanent failure.
absl::Status WatchRoles(Env& env, const Args& args) {
  client::RoleWatcherOptions options;
  if (!args.positional().empty() || args.Has("scope")) {
    absl::Status key =
        RoleKeyFromArgs(args, 0, options.filter.mutable_role_key(),
                        options.filter.mutable_role_key_wire());
    if (!key.ok()) return key;
    if (!options.filter.role_key_wire().empty()) {
      options.filter.clear_role_key();
    }
  } else {
    options.filter.set_project_id(args.Get("project"));
    if (args.Has("kind")) {
      auto kind = ParseEnumWord<hub::v1::RoleKind>(
          "kind", args.Get("kind"), "ROLE_KIND_", &hub::v1::RoleKind_Parse);
      if (!kind.ok()) return kind.status();
      options.filter.set_kind(*kind);
    }
  }
  auto count = args.GetInt("count");
  if (!count.ok()) return count.status();
  auto timeout = args.GetDuration("timeout");
  if (!timeout.ok()) return timeout.status();

  absl::Mutex mu;
  int64_t printed = 0;
  bool done = false;
  absl::Status failure;
  client::RoleWatcherCallbacks callbacks;
  callbacks.on_change = [&](const hub::v1::RoleChange& change) {
    absl::MutexLock lock(&mu);
    if (done) return;
    if (env.json) {
      hub::v1::WatchRolesResponse item;
      *item.mutable_change() = change;
      *env.out << ToJson(item) << std::endl;
    } else {
      std::vector<std::string> row = RoleRow(change.role());
      *env.out << EnumWord(hub::v1::RoleChangeKind_Name(change.kind()),
                           "ROLE_CHANGE_KIND_")
               << " " << row[0] << " " << row[1] << " " << row[2]
               << " state=" << row[3] << " holder=" << row[4]
               << " epoch=" << row[5] << " version=" << row[6] << std::endl;
    }
    if (count->has_value() && ++printed >= **count) done = true;
  };
  callbacks.on_snapshot_end = [&](const hub::v1::RoleSnapshotEnd& end,
                                  bool resumed) {
    absl::MutexLock lock(&mu);
    if (done) return;
    if (env.json) {
      hub::v1::WatchRolesResponse item;
      *item.mutable_snapshot_end() = end;
      *env.out << ToJson(item) << std::endl;
    } else {
      *env.out << (resumed ? "-- resumed: " : "-- snapshot: ")
               << end.role_count() << " roles; live changes follow"
               << std::endl;
    }
  };
  callbacks.on_disconnect = [&](const absl::Status& status, bool permanent) {
    absl::MutexLock lock(&mu);
    if (permanent) {
      failure = status;
      done = true;
    } else {
      *env.err << "hubctl: watch interrupted (" << status << "); reconnecting"
               << std::endl;
    }
  };
  client::RoleWatcher watcher(env.client, options, std::move(callbacks));
  absl::Status started = watcher.Start();
  if (!started.ok()) return started;
  {
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(absl::Condition(&done),
                        timeout->value_or(absl::InfiniteDuration()));
    done = true;
  }
  watcher.Stop();
  absl::MutexLock lock(&mu);
  return failure;
}

absl::StatusOr<hub::v1::EnsureRoleTrigger> TriggerOf(const Args& args) {
  return ParseEnumWord<hub::v1::EnsureRoleTrigger>(
      "trigger", args.Get("trigger", "manual"), "ENSURE_ROLE_TRIGGER_",
      &hub::v1::EnsureRoleTrigger_Parse);
}

absl::Status EnsureRole(Env& env, const Args& args) {
  hub::v1::EnsureRoleRequest request;
  absl::Status key = RoleKeyFromArgs(args, 0, request.mutable_role_key(),
                                     request.mutable_role_key_wire());
  if (!key.ok()) return key;
  if (!request.role_key_wire().empty()) request.clear_role_key();
  auto trigger = TriggerOf(args);
  if (!trigger.ok()) return trigger.status();
  request.set_trigger(*trigger);
  request.set_cause_id(args.Get("cause", "hubctl"));
  request.set_agent_id(args.Get("agent"));
  auto ensured = env.client->EnsureRole(request);
  if (!ensured.ok()) return ensured.status();
  if (env.json) {
    *env.out << ToJson(*ensured) << "\n";
    return absl::OkStatus();
  }
  const hub::v1::EnsureRoleReceipt& r = ensured->receipt();
  PrintFields(
      *env.out,
      {{"accepted", r.accepted() ? "yes" : "no"},
       {"disposition",
        EnumWord(hub::v1::EnsureRoleDisposition_Name(r.disposition()),
                 "ENSURE_ROLE_DISPOSITION_")},
       {"state", EnumWord(hub::v1::RoleState_Name(r.state()), "ROLE_STATE_")},
       {"holder", r.has_holder_agent_id() ? r.holder_agent_id() : "-"},
       {"epoch", absl::StrCat(r.epoch())},
       {"activation_id", r.has_activation_id() ? r.activation_id() : "-"},
       {"activation_deadline", FormatTimestamp(r.activation_deadline())},
       {"blocked_reason", r.has_blocked_reason() ? r.blocked_reason() : "-"},
       {"wire", r.role_key_wire()}});
  return absl::OkStatus();
}

absl::Status ReserveRole(Env& env, const Args& args) {
  hub::v1::ReserveRoleRequest request;
  absl::Status key = RoleKeyFromArgs(args, 0, request.mutable_role_key(),
                                     request.mutable_role_key_wire());
  if (!key.ok()) return key;
  if (!request.role_key_wire().empty()) request.clear_role_key();
  auto version = args.GetInt("expected-version");
  if (!version.ok()) return version.status();
  if (version->has_value()) request.set_expected_version(**version);
  auto epoch = args.GetInt("expected-epoch");
  if (!epoch.ok()) return epoch.status();
  if (epoch->has_value()) request.set_expected_epoch(**epoch);
  if (args.Has("holder")) {
    request.mutable_patch()->set_holder_agent_id(args.Get("holder"));
  }
  auto reserved = env.client->ReserveRole(request);
  if (!reserved.ok()) return reserved.status();
  if (env.json) {
    *env.out << ToJson(*reserved) << "\n";
    return absl::OkStatus();
  }
  *env.out << (reserved->created() ? "created" : "reserved") << "\n";
  PrintRole(env, reserved->role());
  return absl::OkStatus();
}

absl::Status CloseScope(Env& env, const Args& args) {
  hub::v1::CloseRoleScopeRequest request;
  absl::Status key = RoleKeyFromArgs(args, 0, request.mutable_role_key(),
                                     request.mutable_role_key_wire());
  if (!key.ok()) return key;
  if (!request.role_key_wire().empty()) request.clear_role_key();
  request.set_reason(args.Get("reason"));
  auto closed = env.client->CloseRoleScope(request);
  if (!closed.ok()) return closed.status();
  if (env.json) {
    *env.out << ToJson(*closed) << "\n";
    return absl::OkStatus();
  }
  const hub::v1::ClosedRoleScope& c = closed->closed();
  PrintFields(
      *env.out,
      {{"result", closed->already_closed() ? "already closed" : "closed"},
       {"project", c.role_key().project_id()},
       {"scope", c.role_key().scope_id()},
       {"closed_at", FormatTimestamp(c.closed_at())},
       {"closed_by", c.closed_by()},
       {"reason", c.reason().empty() ? "-" : c.reason()},
       {"role_removed", closed->role_removed() ? "yes" : "no"},
       {"holder", closed->removed_role().has_holder_agent_id()
                      ? closed->removed_role().holder_agent_id()
                      : "-"},
       {"candidates_removed", absl::StrCat(closed->candidates_removed())},
       {"dead_lettered", absl::StrCat(closed->dead_lettered_count())},
       {"wire", c.role_key_wire()}});
  return absl::OkStatus();
}

absl::Status ListClosedScopes(Env& env, const Args& args) {
  hub::v1::ListClosedScopesRequest request;
  request.set_project_id(args.Get("project"));
  request.set_scope_id(args.Get("scope"));
  auto page_size = args.GetInt("page-size");
  if (!page_size.ok()) return page_size.status();
  request.set_page_size(static_cast<int32_t>(page_size->value_or(0)));
  request.set_page_token(args.Get("page-token"));
  auto listed = env.client->ListClosedScopes(request);
  if (!listed.ok()) return listed.status();
  if (env.json) {
    *env.out << ToJson(*listed) << "\n";
    return absl::OkStatus();
  }
  Table table({"PROJECT", "SCOPE", "CLOSED_AT", "CLOSED_BY", "DEAD_LETTERED",
               "REASON", "WIRE"});
  for (const hub::v1::ClosedRoleScope& c : listed->closed_scopes()) {
    table.Add({c.role_key().project_id(), c.role_key().scope_id(),
               FormatTimestamp(c.closed_at()), c.closed_by(),
               c.has_dead_lettered_count()
                   ? absl::StrCat(c.dead_lettered_count())
                   : "-",
               c.reason().empty() ? "-" : c.reason(), c.role_key_wire()});
  }
  table.Print(*env.out);
  if (!listed->next_page_token().empty()) {
    *env.out << "next page: --page-token=" << listed->next_page_token() << "\n";
  }
  return absl::OkStatus();
}

absl::Status ListCandidates(Env& env, const Args& args) {
  hub::v1::ListRoleCandidatesRequest request;
  absl::Status key = RoleKeyFromArgs(args, 0, request.mutable_role_key(),
                                     request.mutable_role_key_wire());
  if (!key.ok()) return key;
  if (!request.role_key_wire().empty()) request.clear_role_key();
  request.set_agent_id(args.Get("agent"));
  auto page_size = args.GetInt("page-size");
  if (!page_size.ok()) return page_size.status();
  request.set_page_size(static_cast<int32_t>(page_size->value_or(0)));
  request.set_page_token(args.Get("page-token"));
  auto listed = env.client->ListRoleCandidates(request);
  if (!listed.ok()) return listed.status();
  if (env.json) {
    *env.out << ToJson(*listed) << "\n";
    return absl::OkStatus();
  }
  Table table({"AGENT_ID", "SOURCE", "PRIORITY", "FAILURES", "EXCLUDED_UNTIL",
               "LAST_PROBE", "UPDATED_AT"});
  for (const auto& c : listed->candidates()) {
    table.Add({c.agent_id(),
               EnumWord(hub::v1::CandidateSource_Name(c.source()),
                        "CANDIDATE_SOURCE_"),
               absl::StrCat(c.priority()),
               absl::StrCat(c.consecutive_probe_failures()),
               FormatTimestamp(c.excluded_until()),
               c.has_last_probe_code() ? c.last_probe_code() : "-",
               FormatTimestamp(c.updated_at())});
  }
  table.Print(*env.out);
  if (!listed->next_page_token().empty()) {
    *env.out << "next page: --page-token=" << listed->next_page_token() << "\n";
  }
  return absl::OkStatus();
}

absl::Status AddCandidate(Env& env, const Args& args) {
  hub::v1::UpsertRoleCandidateRequest request;
  // Positional: [WIRE] AGENT_ID.
  const bool has_wire = args.positional().size() == 2;
  if (has_wire) {
    request.set_role_key_wire(args.positional()[0]);
  } else {
    absl::Status key =
        RoleKeyFromArgs(args, 99, request.mutable_role_key(), nullptr);
    if (!key.ok()) return key;
  }
  request.set_agent_id(args.positional().back());
  auto priority = args.GetInt("priority");
  if (!priority.ok()) return priority.status();
  if (priority->has_value())
    request.mutable_candidate()->set_priority(**priority);
  if (args.Has("source")) {
    auto source = ParseEnumWord<hub::v1::CandidateSource>(
        "source", args.Get("source"), "CANDIDATE_SOURCE_",
        &hub::v1::CandidateSource_Parse);
    if (!source.ok()) return source.status();
    request.mutable_candidate()->set_source(*source);
  }
  auto upserted = env.client->UpsertRoleCandidate(request);
  if (!upserted.ok()) return upserted.status();
  if (env.json) {
    *env.out << ToJson(*upserted) << "\n";
    return absl::OkStatus();
  }
  const hub::v1::RoleCandidate& c = upserted->candidate();
  PrintFields(*env.out,
              {{"result", upserted->created() ? "created" : "updated"},
               {"agent_id", c.agent_id()},
               {"wire", c.role_key_wire()},
               {"source", EnumWord(hub::v1::CandidateSource_Name(c.source()),
                                   "CANDIDATE_SOURCE_")},
               {"priority", absl::StrCat(c.priority())}});
  return absl::OkStatus();
}

const char kKeyHelp[] =
    "The role is named by its rk2 WIRE or by --project, --kind and (for a "
    "lead) --scope.";

}  // namespace

std::vector<Command> RoleCommands() {
  return {
      {"roles list",
       "",
       "List roles (filters combine with AND).",
       "",
       {{"project", "PROJECT_ID", "only roles of this project"},
        {"kind", "cto|lead", "only roles of this kind"},
        {"scope", "SCOPE_ID", "only this scope's lead"},
        {"state", "S[,S...]",
         "electable, elected-probing, active, unreachable, quarantined"},
        {"page-size", "N", "roles per page (default 100)"},
        {"page-token", "TOKEN", "the next page of an earlier listing"}},
       0,
       0,
       ListRoles},
      {"roles get", "[WIRE]", "Show one role.", kKeyHelp, kRoleKeyFlags, 0, 1,
       GetRole},
      {"roles watch", "[WIRE]",
       "Print the roles' snapshot, then every change as it commits.",
       "Without WIRE/--scope it watches every role, or those of --project "
       "and/or --kind. Reconnects by itself when the hub restarts.",
       WithKeyFlags(
           {{"count", "N", "exit after N role items (snapshot included)"},
            {"timeout", "DURATION", "exit after this long (e.g. 30s)"}}),
       0, 1, WatchRoles},
      {"roles ensure", "[WIRE]",
       "Ask the activator to make the role active; prints the receipt.",
       kKeyHelp,
       WithKeyFlags({{"trigger", "TRIGGER",
                      "manual (default), session-start, publish-no-holder, "
                      "lease-expired, restart-recovery, ..."},
                     {"cause", "ID", "cause id (default hubctl)"},
                     {"agent", "AGENT_ID", "the acting agent, if any"}}),
       0, 1, EnsureRole},
      {"roles reserve", "[WIRE]",
       "Reserve a role: create its row, or fence the current authority "
       "(epoch + 1).",
       kKeyHelp,
       WithKeyFlags({{"expected-version", "N", "fail unless version is N"},
                     {"expected-epoch", "N", "fail unless epoch is N"},
                     {"holder", "AGENT_ID", "the new holder"}}),
       0, 1, ReserveRole},
      {"roles close", "[WIRE]",
       "Close a lead scope for good: its role, candidates and pending "
       "messages go, and the scope id is never used again.",
       "The lead is named by its rk2 WIRE or by --project, --kind=lead and "
       "--scope. Its pending messages are dead-lettered with reason "
       "ROLE_SCOPE_CLOSED. Closing a closed scope changes nothing.",
       WithKeyFlags({{"reason", "TEXT", "why (recorded with the scope)"}}), 0,
       1, CloseScope},
      {"roles closed",
       "",
       "List the closed lead scopes: who closed each, when, why, and how "
       "many pending messages were dead-lettered.",
       "Filters combine with AND. DEAD_LETTERED is '-' for a scope closed by "
       "a hub that did not record it.",
       {{"project", "PROJECT_ID", "only scopes of this project"},
        {"scope", "SCOPE_ID", "only this scope"},
        {"page-size", "N", "scopes per page (default 100)"},
        {"page-token", "TOKEN", "the next page of an earlier listing"}},
       0,
       0,
       ListClosedScopes},
      {"candidates list", "[WIRE]", "List a role's candidates.", kKeyHelp,
       WithKeyFlags({{"agent", "AGENT_ID", "only this agent"},
                     {"page-size", "N", "candidates per page"},
                     {"page-token", "TOKEN", "the next page"}}),
       0, 1, ListCandidates},
      {"candidates add", "[WIRE] AGENT_ID",
       "Create or update a role candidate.", kKeyHelp,
       WithKeyFlags({{"priority", "N", "higher is chosen first"},
                     {"source", "grant|standup|operator",
                      "where the candidacy comes from"}}),
       1, 2, AddCandidate},
  };
}

}  // namespace hub::hubctl
