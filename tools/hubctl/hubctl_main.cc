// hubctl: the operator's command line for a running hub (and, offline,
// for its databases: db copy, db verify).
//
//   hubctl [--addr=host:port] [--json] [--timeout=10s] [--tls_ca=ca.pem
//          [--tls_cert=c.pem --tls_key=k.pem]] [--token_file=f] COMMAND ...
//
// The bearer token comes from --token_file (the file's first line) or, when
// that flag is absent, from $HUB_TOKEN. It is never printed.
//
// Run `hubctl --help` for the commands and `hubctl COMMAND --help` for one.
// Exit status: 0 on success, the gRPC status code of a failed call (1..16),
// 64 for a command line hubctl refused before calling the hub.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "clients/cpp/hub_client.h"
#include "tools/hubctl/cli.h"
#include "tools/hubctl/commands.h"

namespace hub::hubctl {
namespace {

const std::vector<FlagSpec> kGlobalFlags = {
    {"addr", "HOST:PORT", "the hub (default $HUB_ADDR, else 127.0.0.1:27889)"},
    {"json", "", "print proto JSON (one object per line) instead of tables"},
    {"timeout", "DURATION", "deadline of each call (default 10s)"},
    {"tls_ca", "PEM", "connect with TLS, trusting this CA for the hub"},
    {"tls_cert", "PEM", "client certificate for mutual TLS (with --tls_key)"},
    {"tls_key", "PEM", "private key of --tls_cert"},
    {"tls_server_name", "NAME",
     "name the hub's certificate must carry (default: the --addr host)"},
    {"token_file", "FILE",
     "file whose first line is the bearer token (default $HUB_TOKEN)"},
    {"help", "", "show help"}};

constexpr char kExitCodes[] =
    "Exit status:\n"
    "  0   success\n"
    "  1..16  the call failed with this gRPC status code: 1 CANCELLED,\n"
    "      2 UNKNOWN, 3 INVALID_ARGUMENT, 4 DEADLINE_EXCEEDED, 5 NOT_FOUND,\n"
    "      6 ALREADY_EXISTS, 7 PERMISSION_DENIED, 8 RESOURCE_EXHAUSTED,\n"
    "      9 FAILED_PRECONDITION, 10 ABORTED, 11 OUT_OF_RANGE,\n"
    "      12 UNIMPLEMENTED, 13 INTERNAL, 14 UNAVAILABLE (hub unreachable),\n"
    "      15 DATA_LOSS, 16 UNAUTHENTICATED; the hub's reason code is printed\n"
    "      on stderr (with --json as {\"code\",\"reason\",\"metadata\",...})\n"
    "  64  usage error: unknown command or flag, bad or missing argument\n";

// Applies the TLS and token flags to `options`; usage errors name the file.
absl::Status ApplySecurityFlags(const Args& args,
                                client::HubClientOptions* options) {
  if (args.Has("tls_cert") != args.Has("tls_key")) {
    return UsageError("--tls_cert and --tls_key go together");
  }
  if (args.Has("tls_cert") && !args.Has("tls_ca")) {
    return UsageError("--tls_cert needs --tls_ca");
  }
  const std::pair<const char*, std::string*> pems[] = {
      {"tls_ca", &options->tls_root_certs_pem},
      {"tls_cert", &options->tls_cert_chain_pem},
      {"tls_key", &options->tls_private_key_pem}};
  for (const auto& [flag, target] : pems) {
    if (!args.Has(flag)) continue;
    absl::StatusOr<std::string> pem = client::ReadPemFile(args.Get(flag));
    if (!pem.ok()) {
      return UsageError(absl::StrCat("--", flag, ": ", pem.status().message()));
    }
    *target = *pem;
  }
  options->tls = args.Has("tls_ca");
  options->tls_server_name = args.Get("tls_server_name");
  if (args.Has("token_file")) {
    std::ifstream in(args.Get("token_file"));
    std::string line;
    if (!in || !std::getline(in, line)) {
      return UsageError(
          absl::StrCat("--token_file: cannot read ", args.Get("token_file")));
    }
    options->token = std::string(absl::StripAsciiWhitespace(line));
    if (options->token.empty()) {
      return UsageError(
          absl::StrCat("--token_file: ", args.Get("token_file"), " is empty"));
    }
  } else if (const char* env = std::getenv("HUB_TOKEN"); env != nullptr) {
    options->token = std::string(absl::StripAsciiWhitespace(env));
  }
  return absl::OkStatus();
}

std::vector<Command> AllCommands() {
  std::vector<Command> all;
  for (auto group :
       {HubCommands(), AgentCommands(), RoleCommands(), MessageCommands(),
        ReservationCommands(), JobCommands(), DbCommands()}) {
    all.insert(all.end(), group.begin(), group.end());
  }
  return all;
}

void PrintFlags(std::ostream& out, const std::vector<FlagSpec>& flags) {
  size_t width = 0;
  std::vector<std::string> lefts;
  for (const FlagSpec& f : flags) {
    lefts.push_back(
        absl::StrCat("--", f.name, f.value.empty() ? "" : "=" + f.value));
    width = std::max(width, lefts.back().size());
  }
  for (size_t i = 0; i < flags.size(); ++i) {
    out << "  " << lefts[i] << std::string(width - lefts[i].size() + 2, ' ')
        << flags[i].help << "\n";
  }
}

void TopHelp(std::ostream& out, const std::vector<Command>& commands) {
  out << "hubctl: operator command line for a running hub (the db commands\n"
         "work on database files directly, offline).\n\n"
         "Usage: hubctl [global flags] COMMAND [arguments] [flags]\n\n"
         "Commands:\n";
  size_t width = 0;
  for (const Command& c : commands) width = std::max(width, c.name.size());
  for (const Command& c : commands) {
    out << "  " << c.name << std::string(width - c.name.size() + 2, ' ')
        << c.summary << "\n";
  }
  out << "\nGlobal flags (anywhere on the line):\n";
  PrintFlags(out, kGlobalFlags);
  out << "\nRun 'hubctl COMMAND --help' for a command's arguments.\n\n"
      << kExitCodes;
}

void CommandHelp(std::ostream& out, const Command& c) {
  out << "Usage: hubctl " << c.name << (c.arguments.empty() ? "" : " ")
      << c.arguments << (c.flags.empty() ? "" : " [flags]") << "\n\n"
      << c.summary << "\n";
  if (!c.details.empty()) out << c.details << "\n";
  if (!c.flags.empty()) {
    out << "\nFlags:\n";
    PrintFlags(out, c.flags);
  }
  out << "\nGlobal flags:\n";
  PrintFlags(out, kGlobalFlags);
  out << "\n" << kExitCodes;
}

void GroupHelp(std::ostream& out, const std::string& group,
               const std::vector<Command>& commands) {
  out << "Usage: hubctl " << group << " SUBCOMMAND [arguments] [flags]\n\n"
      << "Subcommands:\n";
  size_t width = 0;
  for (const Command& c : commands) {
    if (absl::StartsWith(c.name, group + " ")) {
      width = std::max(width, c.name.size());
    }
  }
  for (const Command& c : commands) {
    if (absl::StartsWith(c.name, group + " ")) {
      out << "  " << c.name << std::string(width - c.name.size() + 2, ' ')
          << c.summary << "\n";
    }
  }
  out << "\nRun 'hubctl " << group << " SUBCOMMAND --help' for details.\n";
}

int Main(int argc, char** argv) {
  const std::vector<Command> commands = AllCommands();
  std::vector<std::string> words(argv + 1, argv + argc);
  if (!words.empty() && (words[0] == "help" || words[0] == "-h")) {
    words[0] = "--help";
  }

  // Which flags take a value, to find the command words among the rest.
  std::set<std::string> valued;
  for (const FlagSpec& f : kGlobalFlags) {
    if (!f.value.empty()) valued.insert(f.name);
  }
  for (const Command& c : commands) {
    for (const FlagSpec& f : c.flags) {
      if (!f.value.empty()) valued.insert(f.name);
    }
  }
  std::vector<size_t> bare;  // indexes of non-flag words
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") break;
    if (absl::StartsWith(w, "--")) {
      if (w.find('=') == std::string::npos && valued.count(w.substr(2)) > 0) {
        ++i;
      }
      continue;
    }
    bare.push_back(i);
  }
  const bool wants_help =
      std::find(words.begin(), words.end(), "--help") != words.end();

  const Command* command = nullptr;
  size_t used = 0;
  for (const Command& c : commands) {
    const std::vector<std::string> name = absl::StrSplit(c.name, ' ');
    if (bare.size() < name.size()) continue;
    bool match = true;
    for (size_t k = 0; k < name.size(); ++k) {
      if (words[bare[k]] != name[k]) match = false;
    }
    if (match && name.size() > used) {
      command = &c;
      used = name.size();
    }
  }
  if (command == nullptr) {
    if (!bare.empty()) {
      const std::string group = words[bare[0]];
      bool is_group = false;
      for (const Command& c : commands) {
        if (absl::StartsWith(c.name, group + " ")) is_group = true;
      }
      if (is_group) {
        GroupHelp(wants_help ? std::cout : std::cerr, group, commands);
        if (wants_help && bare.size() == 1) return 0;
        if (bare.size() > 1) {
          std::cerr << "hubctl: unknown subcommand '" << words[bare[1]]
                    << "'\n";
        }
        return kUsageExit;
      }
      std::cerr << "hubctl: unknown command '" << group
                << "'; run 'hubctl --help'\n";
      return kUsageExit;
    }
    TopHelp(wants_help ? std::cout : std::cerr, commands);
    return wants_help ? 0 : kUsageExit;
  }
  if (wants_help) {
    CommandHelp(std::cout, *command);
    return 0;
  }

  std::vector<std::string> rest;
  for (size_t i = 0, k = 0; i < words.size(); ++i) {
    if (k < used && i == bare[k]) {
      ++k;
      continue;
    }
    rest.push_back(words[i]);
  }
  std::vector<FlagSpec> specs = command->flags;
  specs.insert(specs.end(), kGlobalFlags.begin(), kGlobalFlags.end());
  absl::StatusOr<Args> args = Args::Parse(rest, specs);
  absl::Status status = args.status();
  if (status.ok() && (args->positional().size() < command->min_args ||
                      args->positional().size() > command->max_args)) {
    status = UsageError(absl::StrCat(
        "'", command->name, "' takes ",
        command->arguments.empty() ? "no arguments" : command->arguments));
  }
  client::HubClientOptions options;
  const char* env_addr = std::getenv("HUB_ADDR");
  options.address = env_addr != nullptr && *env_addr != '\0'
                        ? env_addr
                        : client::kDefaultHubAddress;
  if (status.ok()) {
    if (args->Has("addr")) options.address = args->Get("addr");
    auto timeout = args->GetDuration("timeout");
    status = timeout.status();
    if (status.ok() && timeout->has_value()) {
      if (**timeout <= absl::ZeroDuration()) {
        status = UsageError("--timeout must be positive");
      } else {
        options.default_deadline = **timeout;
      }
    }
    if (status.ok()) status = ApplySecurityFlags(*args, &options);
  }
  if (!status.ok()) {
    std::cerr << "hubctl: " << status.message() << "\nRun 'hubctl "
              << command->name << " --help' for usage.\n";
    return kUsageExit;
  }
  client::HubClient client(options);
  Env env{&client, args->Has("json"), &std::cout, &std::cerr};
  status = command->run(env, *args);
  if (!status.ok()) {
    if (IsUsageError(status)) {
      std::cerr << "hubctl: " << status.message() << "\nRun 'hubctl "
                << command->name << " --help' for usage.\n";
    } else {
      PrintError(std::cerr, status, env.json);
    }
  }
  std::cout.flush();
  return ExitCodeOf(status);
}

}  // namespace
}  // namespace hub::hubctl

int main(int argc, char** argv) { return hub::hubctl::Main(argc, argv); }
