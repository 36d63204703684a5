// reservations list | reserve | renew | release | force-release | check |
// install-hook (docs/design/reservations.md, docs/api.md).
//
// The acting agent comes from --agent, else $HUB_AGENT_ID; the project from
// --project, else $HUB_PROJECT_ID. `check --staged` reads the paths staged
// in the git repository of the current directory (or --repo); it exits 9
// (FAILED_PRECONDITION) naming the holder and reservation of every staged
// path another agent holds exclusively, which is what the pre-commit hook
// `install-hook` writes runs.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "clients/cpp/hub_error.h"
#include "status/status.h"
#include "tools/hubctl/commands.h"

namespace hub::hubctl {
namespace {

constexpr char kHookMarker[] =
    "# hub: path reservations (hubctl reservations install-hook)";
constexpr char kChainedHook[] = "pre-commit.hub-chained";

std::string ModeWord(hub::v1::ReservationMode mode) {
  return EnumWord(hub::v1::ReservationMode_Name(mode), "RESERVATION_MODE_");
}

void PrintReservation(Env& env, const hub::v1::Reservation& r) {
  PrintFields(*env.out, {{"reservation_id", r.reservation_id()},
                         {"project_id", r.project_id()},
                         {"agent_id", r.agent_id()},
                         {"mode", ModeWord(r.mode())},
                         {"token", absl::StrCat(r.token())},
                         {"patterns", absl::StrJoin(r.patterns(), " ")},
                         {"reason", r.reason()},
                         {"expires_at", FormatTimestamp(r.expires_at())}});
}

absl::Status List(Env& env, const Args& args) {
  hub::v1::ListReservationsRequest request;
  request.set_project_id(ProjectFromArgs(args));
  request.set_agent_id(args.Get("agent"));
  request.set_path(args.Get("path"));
  auto page_size = args.GetInt("page-size");
  if (!page_size.ok()) return page_size.status();
  request.set_page_size(static_cast<int32_t>(page_size->value_or(0)));
  request.set_page_token(args.Get("page-token"));
  auto listed = env.client->ListReservations(request);
  if (!listed.ok()) return listed.status();
  if (env.json) {
    *env.out << ToJson(*listed) << "\n";
    return absl::OkStatus();
  }
  Table table(
      {"RESERVATION_ID", "AGENT", "MODE", "TOKEN", "EXPIRES_AT", "PATTERNS"});
  for (const hub::v1::Reservation& r : listed->reservations()) {
    table.Add({r.reservation_id(), r.agent_id(), ModeWord(r.mode()),
               absl::StrCat(r.token()), FormatTimestamp(r.expires_at()),
               absl::StrJoin(r.patterns(), " ")});
  }
  table.Print(*env.out);
  if (!listed->next_page_token().empty()) {
    *env.out << "next page: --page-token=" << listed->next_page_token() << "\n";
  }
  return absl::OkStatus();
}

absl::Status Reserve(Env& env, const Args& args) {
  hub::v1::ReserveRequest request;
  request.set_project_id(ProjectFromArgs(args));
  request.set_agent_id(AgentFromArgs(args));
  for (const std::string& p : args.positional()) request.add_patterns(p);
  request.set_mode(args.Has("shared") ? hub::v1::RESERVATION_MODE_SHARED
                                      : hub::v1::RESERVATION_MODE_EXCLUSIVE);
  request.set_reason(args.Get("reason"));
  auto ttl = args.GetDuration("ttl");
  if (!ttl.ok()) return ttl.status();
  if (ttl->has_value()) *request.mutable_ttl() = ToProtoDuration(**ttl);
  auto wait = args.GetDuration("wait");
  if (!wait.ok()) return wait.status();
  client::CallOptions call;
  if (wait->has_value()) {
    *request.mutable_wait() = ToProtoDuration(**wait);
    // The call lasts as long as the wait, and a little more for the answer.
    call.deadline = **wait + absl::Seconds(10);
  }
  auto reserved = env.client->Reserve(request, call);
  if (!reserved.ok()) return reserved.status();
  if (env.json) {
    *env.out << ToJson(*reserved) << "\n";
    return absl::OkStatus();
  }
  PrintReservation(env, reserved->reservation());
  return absl::OkStatus();
}

absl::Status Renew(Env& env, const Args& args) {
  hub::v1::RenewReservationRequest request;
  request.set_reservation_id(args.positional()[0]);
  request.set_agent_id(AgentFromArgs(args));
  auto token = args.GetInt("token");
  if (!token.ok()) return token.status();
  if (!token->has_value()) return UsageError("--token is required");
  request.set_token(**token);
  auto ttl = args.GetDuration("ttl");
  if (!ttl.ok()) return ttl.status();
  if (ttl->has_value()) *request.mutable_ttl() = ToProtoDuration(**ttl);
  auto renewed = env.client->RenewReservation(request);
  if (!renewed.ok()) return renewed.status();
  if (env.json) {
    *env.out << ToJson(*renewed) << "\n";
    return absl::OkStatus();
  }
  PrintReservation(env, renewed->reservation());
  return absl::OkStatus();
}

absl::Status Release(Env& env, const Args& args) {
  hub::v1::ReleaseReservationRequest request;
  request.set_reservation_id(args.positional()[0]);
  request.set_agent_id(AgentFromArgs(args));
  auto token = args.GetInt("token");
  if (!token.ok()) return token.status();
  if (token->has_value()) request.set_token(**token);
  for (size_t i = 1; i < args.positional().size(); ++i) {
    request.add_patterns(args.positional()[i]);
  }
  auto released = env.client->ReleaseReservation(request);
  if (!released.ok()) return released.status();
  if (env.json) {
    *env.out << ToJson(*released) << "\n";
    return absl::OkStatus();
  }
  if (released->ended()) {
    PrintFields(*env.out, {{"reservation_id", request.reservation_id()},
                           {"ended", "true"}});
  } else {
    PrintReservation(env, released->reservation());
  }
  return absl::OkStatus();
}

absl::Status ForceRelease(Env& env, const Args& args) {
  hub::v1::ForceReleaseReservationRequest request;
  request.set_reservation_id(args.positional()[0]);
  auto forced = env.client->ForceReleaseReservation(request);
  if (!forced.ok()) return forced.status();
  if (env.json) {
    *env.out << ToJson(*forced) << "\n";
    return absl::OkStatus();
  }
  PrintReservation(env, forced->reservation());
  return absl::OkStatus();
}

// Runs `argv` (no shell) in `dir` ("" = here) and returns its stdout, or
// a usage error naming the command when it cannot run or fails.
absl::StatusOr<std::string> Capture(const std::vector<std::string>& argv,
                                    const std::string& dir) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return UsageError("cannot create a pipe");
  const pid_t pid = fork();
  if (pid < 0) return UsageError("cannot fork");
  if (pid == 0) {
    close(pipefd[0]);
    dup2(pipefd[1], STDOUT_FILENO);
    close(pipefd[1]);
    if (!dir.empty() && chdir(dir.c_str()) != 0) _exit(127);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(pipefd[1]);
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) out.append(buf, n);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return UsageError(absl::StrCat("`", absl::StrJoin(argv, " "),
                                   "` failed (not a git repository?)"));
  }
  return out;
}

absl::Status Check(Env& env, const Args& args) {
  hub::v1::CheckReservationsRequest request;
  request.set_project_id(ProjectFromArgs(args));
  request.set_agent_id(AgentFromArgs(args));
  // A commit asks "does anyone else hold these exclusively?"; --exclusive
  // asks "could I hold them exclusively?".
  request.set_mode(args.Has("exclusive") ? hub::v1::RESERVATION_MODE_EXCLUSIVE
                                         : hub::v1::RESERVATION_MODE_SHARED);
  for (const std::string& p : args.positional()) request.add_patterns(p);
  if (args.Has("staged")) {
    auto staged = Capture(
        {"git", "diff", "--cached", "--name-only", "-z", "--no-renames"},
        args.Get("repo"));
    if (!staged.ok()) return staged.status();
    for (absl::string_view path : absl::StrSplit(*staged, '\0')) {
      if (!path.empty()) request.add_patterns(std::string(path));
    }
    request.set_literal(true);
    if (request.patterns_size() == 0) return absl::OkStatus();  // nothing
  } else if (args.Has("literal")) {
    request.set_literal(true);
  }
  if (request.patterns_size() == 0) {
    return UsageError("give PATH... or --staged");
  }
  auto checked = env.client->CheckReservations(request);
  if (!checked.ok()) return checked.status();
  if (env.json) {
    *env.out << ToJson(*checked) << "\n";
  } else if (checked->conflicts_size() > 0) {
    Table table({"PATH", "HOLDER", "RESERVATION_ID", "MODE", "TOKEN",
                 "HELD_PATTERN", "EXPIRES_AT"});
    for (const hub::v1::ReservationConflict& c : checked->conflicts()) {
      table.Add({c.pattern(), c.holder_agent_id(), c.reservation_id(),
                 ModeWord(c.mode()), absl::StrCat(c.token()), c.held_pattern(),
                 FormatTimestamp(c.expires_at())});
    }
    table.Print(*env.err);
  }
  if (checked->conflicts_size() == 0) return absl::OkStatus();
  const hub::v1::ReservationConflict& first = checked->conflicts(0);
  absl::Status s = FailedPreconditionError(
      "RESERVATION_CONFLICT",
      absl::StrCat(checked->conflicts_size() == 1
                       ? "a path is"
                       : absl::StrCat(checked->conflicts_size(), " paths are"),
                   " reserved by another agent: ", first.pattern(), " by ",
                   first.holder_agent_id(), " (reservation ",
                   first.reservation_id(), ")"));
  s = WithMetadata(s, "holder_agent_id", first.holder_agent_id());
  return WithMetadata(s, "reservation_id", first.reservation_id());
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status InstallHook(Env& env, const Args& args) {
  const std::string repo = args.Get("repo");
  auto hooks = Capture({"git", "rev-parse", "--git-path", "hooks"}, repo);
  if (!hooks.ok()) return hooks.status();
  std::string dir(absl::StripTrailingAsciiWhitespace(*hooks));
  if (!repo.empty() && !absl::StartsWith(dir, "/")) {
    dir = absl::StrCat(repo, "/", dir);
  }
  mkdir(dir.c_str(), 0755);
  const std::string hook = absl::StrCat(dir, "/pre-commit");
  const std::string chained = absl::StrCat(dir, "/", kChainedHook);
  absl::StatusOr<std::string> existing = ReadFile(hook);
  const bool ours = existing.ok() && absl::StrContains(*existing, kHookMarker);
  if (existing.ok() && !ours) {
    // Keep the existing hook: it runs first, and its failure stops the
    // commit as before.
    if (rename(hook.c_str(), chained.c_str()) != 0) {
      return UsageError(absl::StrCat("cannot move ", hook, " to ", chained));
    }
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return UsageError("cannot find hubctl's own path");
  const std::string hubctl(self, static_cast<size_t>(n));
  std::vector<std::string> command = {ShellQuote(hubctl)};
  if (args.Has("addr"))
    command.push_back(ShellQuote("--addr=" + args.Get("addr")));
  if (args.Has("token_file")) {
    command.push_back(ShellQuote("--token_file=" + args.Get("token_file")));
  }
  command.push_back("reservations check --staged");
  const std::string project = ProjectFromArgs(args);
  if (!project.empty()) command.push_back(ShellQuote("--project=" + project));
  const std::string script = absl::StrCat(
      "#!/bin/sh\n", kHookMarker,
      "\n# Refuses a commit whose staged paths another agent holds\n"
      "# exclusively. The committing agent is $HUB_AGENT_ID (its own\n"
      "# reservations never conflict).\n"
      "chained=\"$(dirname \"$0\")/",
      kChainedHook,
      "\"\n"
      "if [ -x \"$chained\" ]; then \"$chained\" \"$@\" || exit $?; fi\n"
      "exec ",
      absl::StrJoin(command, " "), "\n");
  {
    std::ofstream out(hook, std::ios::trunc | std::ios::binary);
    out << script;
    if (!out) return UsageError(absl::StrCat("cannot write ", hook));
  }
  chmod(hook.c_str(), 0755);
  if (env.json) {
    *env.out << "{\"hook\":\"" << hook
             << "\",\"chained\":" << (existing.ok() && !ours ? "true" : "false")
             << "}\n";
  } else {
    PrintFields(*env.out,
                {{"hook", hook},
                 {"chained", existing.ok() && !ours
                                 ? chained
                                 : (ours ? "(unchanged)" : "(none)")}});
  }
  return absl::OkStatus();
}

// One stream item as a line: a change with what a waiter waits behind
// ("<id> (<holder>: <patterns>)", from `known`), the snapshot's end, a
// resume's answer.
void PrintWatchItem(Env& env, const hub::v1::WatchReservationsResponse& item,
                    const std::map<std::string, std::string>& known) {
  if (env.json) {
    *env.out << ToJson(item) << std::endl;
    return;
  }
  if (item.has_snapshot_end()) {
    *env.out << "-- snapshot: " << item.snapshot_end().reservation_count()
             << " reservations, " << item.snapshot_end().waiter_count()
             << " waiters; live changes follow" << std::endl;
    return;
  }
  if (item.has_resume()) {
    const hub::v1::ReservationResume& r = item.resume();
    if (r.resumed()) {
      *env.out << "-- resumed after seq " << r.after_seq() << std::endl;
    } else {
      *env.out << "-- cannot resume after seq " << r.after_seq() << " ("
               << r.reason() << ", oldest " << r.oldest_seq()
               << "); a fresh snapshot follows" << std::endl;
    }
    return;
  }
  const hub::v1::Reservation& r = item.change().reservation();
  *env.out << EnumWord(
                  hub::v1::ReservationChangeKind_Name(item.change().kind()),
                  "RESERVATION_CHANGE_KIND_")
           << " " << r.reservation_id() << " agent=" << r.agent_id()
           << " mode=" << ModeWord(r.mode()) << " token=" << r.token()
           << " patterns=" << absl::StrJoin(r.patterns(), ",")
           << " expires_at=" << FormatTimestamp(r.expires_at());
  std::vector<std::string> behind;
  for (const std::string& id : r.waits_for()) {
    auto it = known.find(id);
    behind.push_back(
        it == known.end() ? id : absl::StrCat(id, " (", it->second, ")"));
  }
  if (!behind.empty()) {
    *env.out << " waits_for=" << absl::StrJoin(behind, "; ");
  }
  *env.out << std::endl;
}

// Keeps `known` (what each reservation or waiter seen is) current.
void Remember(const hub::v1::ReservationChange& change,
              std::map<std::string, std::string>& known) {
  const hub::v1::Reservation& r = change.reservation();
  switch (change.kind()) {
    case hub::v1::RESERVATION_CHANGE_KIND_RELEASED:
    case hub::v1::RESERVATION_CHANGE_KIND_FORCE_RELEASED:
    case hub::v1::RESERVATION_CHANGE_KIND_EXPIRED:
    case hub::v1::RESERVATION_CHANGE_KIND_HOLDER_GONE:
    case hub::v1::RESERVATION_CHANGE_KIND_WAIT_ENDED:
      known.erase(r.reservation_id());
      break;
    default:
      known[r.reservation_id()] =
          absl::StrCat(r.agent_id(), ": ", absl::StrJoin(r.patterns(), " "));
  }
}

// Prints the stream until --count changes (after the snapshot), --timeout,
// or the stream's end (its status is the command's). A stream that ends
// UNAVAILABLE or CANCELLED (the hub restarted or went away, or this client
// fell behind) after the snapshot is opened again, resuming after the last seq
// printed
// (--after-seq: from the start), so no change is missed or printed twice;
// when the hub cannot resume from there it says so and sends a snapshot.
absl::Status Watch(Env& env, const Args& args) {
  auto count = args.GetInt("count");
  if (!count.ok()) return count.status();
  auto timeout = args.GetDuration("timeout");
  if (!timeout.ok()) return timeout.status();
  auto after_flag = args.GetInt("after-seq");
  if (!after_flag.ok()) return after_flag.status();
  std::optional<int64_t> after = *after_flag;
  const absl::Time deadline =
      timeout->has_value() ? absl::Now() + **timeout : absl::InfiniteFuture();
  int64_t printed = 0;
  bool live = after.has_value();  // past the snapshot: --count counts these
  std::map<std::string, std::string> known;
  absl::Duration backoff = absl::Milliseconds(100);
  for (;;) {
    hub::v1::WatchReservationsRequest request;
    request.set_project_id(ProjectFromArgs(args));
    request.set_agent_id(args.Get("agent"));
    if (after.has_value()) request.set_after_seq(*after);
    grpc::ClientContext context;
    if (timeout->has_value())
      context.set_deadline(absl::ToChronoTime(deadline));
    auto reader = env.client->WatchReservations(&context, request);
    hub::v1::WatchReservationsResponse item;
    while (!(count->has_value() && printed >= **count) && reader->Read(&item)) {
      backoff = absl::Milliseconds(100);
      PrintWatchItem(env, item, known);
      if (item.has_resume() && !item.resume().resumed()) live = false;
      if (item.has_snapshot_end()) {
        live = true;
        after = item.snapshot_end().seq();
      }
      if (item.has_change()) {
        Remember(item.change(), known);
        if (item.change().seq() > 0) after = item.change().seq();
        if (live) ++printed;
      }
    }
    if (count->has_value() && printed >= **count) {
      context.TryCancel();
      reader->Finish().IgnoreError();
      return absl::OkStatus();
    }
    grpc::Status s = reader->Finish();
    // --timeout is how a watch without --count ends.
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
        timeout->has_value()) {
      return absl::OkStatus();
    }
    // A hub going away ends the stream UNAVAILABLE, or CANCELLED when it
    // cancels the calls it is draining (this client never cancels but at
    // --count, above).
    const bool broken = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                        s.error_code() == grpc::StatusCode::CANCELLED;
    if (!broken || !after.has_value() || absl::Now() + backoff >= deadline) {
      return client::FromGrpcStatus(s);
    }
    *env.err << "hubctl: the watch ended (" << s.error_message()
             << "); resuming after seq " << *after << std::endl;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

const FlagSpec kAgentFlag = {"agent", "AGENT_ID",
                             "the acting agent (default $HUB_AGENT_ID)"};
const FlagSpec kProjectFlag = {"project", "PROJECT_ID",
                               "the project (default $HUB_PROJECT_ID)"};

}  // namespace

std::vector<Command> ReservationCommands() {
  return {
      {"reservations list",
       "",
       "List live path reservations.",
       "",
       {kProjectFlag,
        {"agent", "AGENT_ID", "only this agent's"},
        {"path", "PATTERN", "only those overlapping this pattern"},
        {"page-size", "N", "reservations per page"},
        {"page-token", "TOKEN", "the next page"}},
       0,
       0,
       List},
      {"reservations reserve",
       "PATTERN...",
       "Reserve path patterns (all or none), exclusive unless --shared.",
       "A conflict exits 9 (FAILED_PRECONDITION / RESERVATION_CONFLICT) "
       "naming the holder.",
       {kAgentFlag,
        kProjectFlag,
        {"shared", "", "shared: conflicts only with exclusive reservations"},
        {"ttl", "DURATION", "how long (default 5m, 1s..24h)"},
        {"wait", "DURATION",
         "on a conflict, wait up to this long (first come, first served; "
         "at most 10m)"},
        {"reason", "TEXT", "why, shown to others"}},
       1,
       64,
       Reserve},
      {"reservations renew",
       "RESERVATION_ID",
       "Extend a reservation (fenced by holder and token).",
       "",
       {kAgentFlag,
        {"token", "N", "the reservation's fencing token"},
        {"ttl", "DURATION", "from now (default 5m)"}},
       1,
       1,
       Renew},
      {"reservations release",
       "RESERVATION_ID [PATTERN...]",
       "Release a reservation, or some of its patterns.",
       "",
       {kAgentFlag, {"token", "N", "fence on this token"}},
       1,
       65,
       Release},
      {"reservations force-release",
       "RESERVATION_ID",
       "End another agent's reservation (operators).",
       "",
       {},
       1,
       1,
       ForceRelease},
      {"reservations check",
       "[PATH...]",
       "Exit 9 when another agent holds any of the paths exclusively.",
       "--staged checks the files staged in git (what the pre-commit hook "
       "runs); the conflicts go to stderr, naming holder and reservation.",
       {kAgentFlag,
        kProjectFlag,
        {"staged", "", "the paths `git diff --cached` names"},
        {"repo", "DIR", "the git repository (default: the current directory)"},
        {"literal", "", "PATHs are file names: * and ? are plain characters"},
        {"exclusive", "", "also conflict with shared reservations"}},
       0,
       10000,
       Check},
      {"reservations watch",
       "",
       "Print the project's live reservations, then each change as it "
       "commits.",
       "One line per change (SNAPSHOT, GRANTED, RENEWED, NARROWED, RELEASED, "
       "FORCE_RELEASED, EXPIRED, HOLDER_GONE) with the reservation and its "
       "token; --json prints each stream item as JSON. Runs until --count "
       "changes after the snapshot, --timeout, or the stream's end; when "
       "the stream breaks (UNAVAILABLE: a hub restart) it reconnects and "
       "resumes after the last seq it printed.",
       {kProjectFlag,
        {"agent", "AGENT_ID", "only this holder's reservations"},
        {"count", "N", "stop after N changes"},
        {"timeout", "DURATION", "stop after this long"},
        {"after-seq", "SEQ",
         "resume after this change (a seq printed before) instead of a "
         "snapshot"}},
       0,
       0,
       Watch},
      {"reservations install-hook",
       "",
       "Install `reservations check --staged` as the git pre-commit hook.",
       "Idempotent; an existing pre-commit hook is kept and runs first. The "
       "hook calls this hubctl with this --addr, --token_file and --project.",
       {kProjectFlag,
        {"repo", "DIR", "the git repository (default: the current directory)"}},
       0,
       0,
       InstallHook},
  };
}

}  // namespace hub::hubctl
