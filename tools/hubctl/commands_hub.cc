// status, backup, rolekey encode|decode, agents list|get.
#include <cstdio>
#include <fstream>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "tools/hubctl/commands.h"

namespace hub::hubctl {
namespace {

absl::Status Status(Env& env, const Args&) {
  auto status = env.client->GetStatus();
  if (!status.ok()) return status.status();
  if (env.json) {
    *env.out << ToJson(*status) << "\n";
    return absl::OkStatus();
  }
  const auto& s = *status;
  PrintFields(
      *env.out,
      {{"version", s.version()},
       {"hub_instance_id", s.hub_instance_id()},
       {"started_at", FormatTimestamp(s.started_at())},
       {"uptime", FormatDuration(s.uptime())},
       {"store", absl::StrCat(s.store_type(), " ", s.store_path())},
       {"store_fingerprint", s.store_fingerprint()},
       {"agents",
        absl::StrCat("online ", s.agents().online(), ", stale ",
                     s.agents().stale(), ", offline ", s.agents().offline())},
       {"presence_streams", absl::StrCat(s.open_presence_streams())},
       {"roles", absl::StrCat("electable ", s.roles().electable(),
                              ", elected-probing ", s.roles().elected_probing(),
                              ", active ", s.roles().active(), ", unreachable ",
                              s.roles().unreachable(), ", quarantined ",
                              s.roles().quarantined())}});
  return absl::OkStatus();
}

// Writes FILE.partial and renames it to FILE only once the whole database
// arrived, so FILE is never a truncated copy.
absl::Status Backup(Env& env, const Args& args) {
  const std::string out = args.Get("out");
  if (out.empty()) return UsageError("backup needs --out=FILE");
  const std::string partial = out + ".partial";
  std::ofstream file(partial, std::ios::binary | std::ios::trunc);
  if (!file) return UsageError(absl::StrCat("cannot write ", partial));
  client::CallOptions call;
  // The whole transfer shares one deadline: 10 minutes unless --timeout.
  if (!args.Has("timeout")) call.deadline = absl::Minutes(10);
  absl::StatusOr<int64_t> bytes = env.client->BackupStore(file, call);
  file.close();
  if (bytes.ok() && !file) {
    bytes = absl::DataLossError(absl::StrCat("writing ", partial, " failed"));
  }
  if (bytes.ok() && std::rename(partial.c_str(), out.c_str()) != 0) {
    bytes = absl::DataLossError(
        absl::StrCat("cannot rename ", partial, " to ", out));
  }
  if (!bytes.ok()) {
    std::remove(partial.c_str());
    return bytes.status();
  }
  if (env.json) {
    google::protobuf::Struct result;
    (*result.mutable_fields())["out"].set_string_value(out);
    (*result.mutable_fields())["bytes"].set_string_value(absl::StrCat(*bytes));
    *env.out << ToJson(result) << "\n";
  } else {
    PrintFields(*env.out, {{"out", out}, {"bytes", absl::StrCat(*bytes)}});
  }
  return absl::OkStatus();
}

void PrintRoleKeyResult(Env& env, const hub::v1::RoleKey& key,
                        const std::string& wire, const std::string& topic) {
  PrintFields(
      *env.out,
      {{"wire", wire},
       {"topic", topic},
       {"project_id", key.project_id()},
       {"kind", EnumWord(hub::v1::RoleKind_Name(key.kind()), "ROLE_KIND_")},
       {"scope_id", key.scope_id().empty() ? "-" : key.scope_id()}});
}

absl::Status Encode(Env& env, const Args& args) {
  hub::v1::EncodeRoleKeyRequest request;
  std::string wire;
  absl::Status key =
      RoleKeyFromArgs(args, 99, request.mutable_role_key(), &wire);
  if (!key.ok()) return key;
  auto encoded = env.client->EncodeRoleKey(request);
  if (!encoded.ok()) return encoded.status();
  if (env.json) {
    *env.out << ToJson(*encoded) << "\n";
  } else {
    PrintRoleKeyResult(env, encoded->role_key(), encoded->wire(),
                       encoded->topic());
  }
  return absl::OkStatus();
}

absl::Status Decode(Env& env, const Args& args) {
  hub::v1::DecodeRoleKeyRequest request;
  request.set_wire(args.positional()[0]);
  auto decoded = env.client->DecodeRoleKey(request);
  if (!decoded.ok()) return decoded.status();
  if (env.json) {
    *env.out << ToJson(*decoded) << "\n";
  } else {
    PrintRoleKeyResult(env, decoded->role_key(), decoded->wire(),
                       decoded->topic());
  }
  return absl::OkStatus();
}

std::vector<std::string> AgentRow(const hub::v1::Agent& a) {
  return {a.agent_id(),
          EnumWord(hub::v1::AgentCli_Name(a.cli()), "AGENT_CLI_"),
          EnumWord(hub::v1::AgentStatus_Name(a.status()), "AGENT_STATUS_"),
          absl::StrCat(a.presence_generation()),
          a.live() ? "yes" : "no",
          a.stream_attached() ? "yes" : "no",
          a.has_project_id() ? a.project_id() : "-",
          FormatTimestamp(a.lease_expires_at())};
}

const std::vector<std::string> kAgentHeader = {
    "AGENT_ID", "CLI",    "STATUS",  "GEN",
    "LIVE",     "STREAM", "PROJECT", "LEASE_EXPIRES_AT"};

absl::Status ListAgents(Env& env, const Args& args) {
  hub::v1::ListAgentsRequest request;
  for (absl::string_view word :
       absl::StrSplit(args.Get("status"), ',', absl::SkipEmpty())) {
    auto status = ParseEnumWord<hub::v1::AgentStatus>(
        "status", std::string(word), "AGENT_STATUS_",
        &hub::v1::AgentStatus_Parse);
    if (!status.ok()) return status.status();
    request.add_statuses(*status);
  }
  for (absl::string_view word :
       absl::StrSplit(args.Get("cli"), ',', absl::SkipEmpty())) {
    auto cli = ParseEnumWord<hub::v1::AgentCli>(
        "cli", std::string(word), "AGENT_CLI_", &hub::v1::AgentCli_Parse);
    if (!cli.ok()) return cli.status();
    request.add_clis(*cli);
  }
  request.set_project_id(args.Get("project"));
  request.set_topic(args.Get("topic"));
  auto page_size = args.GetInt("page-size");
  if (!page_size.ok()) return page_size.status();
  request.set_page_size(static_cast<int32_t>(page_size->value_or(0)));
  request.set_page_token(args.Get("page-token"));
  auto listed = env.client->ListAgents(request);
  if (!listed.ok()) return listed.status();
  if (env.json) {
    *env.out << ToJson(*listed) << "\n";
    return absl::OkStatus();
  }
  Table table(kAgentHeader);
  for (const auto& agent : listed->agents()) table.Add(AgentRow(agent));
  table.Print(*env.out);
  if (!listed->next_page_token().empty()) {
    *env.out << "next page: --page-token=" << listed->next_page_token() << "\n";
  }
  return absl::OkStatus();
}

absl::Status GetAgent(Env& env, const Args& args) {
  hub::v1::GetAgentRequest request;
  request.set_agent_id(args.positional()[0]);
  auto got = env.client->GetAgent(request);
  if (!got.ok()) return got.status();
  if (env.json) {
    *env.out << ToJson(*got) << "\n";
    return absl::OkStatus();
  }
  const hub::v1::Agent& a = got->agent();
  std::vector<std::string> row = AgentRow(a);
  std::vector<std::pair<std::string, std::string>> fields;
  for (size_t i = 0; i < row.size(); ++i) {
    fields.emplace_back(absl::AsciiStrToLower(kAgentHeader[i]), row[i]);
  }
  fields.emplace_back("pid", a.has_pid() ? absl::StrCat(a.pid()) : "-");
  fields.emplace_back("capabilities", absl::StrJoin(a.capabilities(), ","));
  fields.emplace_back("topics", absl::StrJoin(a.topics(), ","));
  fields.emplace_back("last_seen_at", FormatTimestamp(a.last_seen_at()));
  fields.emplace_back("heartbeat_ttl", FormatDuration(a.heartbeat_ttl()));
  fields.emplace_back("session_id", a.has_session_id() ? a.session_id() : "-");
  fields.emplace_back("host_id", a.has_host_id() ? a.host_id() : "-");
  PrintFields(*env.out, fields);
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> HubCommands() {
  return {
      {"status",
       "",
       "Show the hub's version, identity, store and counts.",
       "",
       {},
       0,
       0,
       Status},
      {"backup",
       "",
       "Copy the hub's database to a local file while the hub serves.",
       "The hub writes a consistent copy (SQLite VACUUM INTO) and streams it;\n"
       "hubctl writes FILE.partial and renames it to FILE when complete.\n"
       "Restore: stop hubd, put FILE in place of its --db file, start hubd.\n"
       "An --out that cannot be written is a usage error (exit 64); a\n"
       "transfer that ends short exits 15 (DATA_LOSS).",
       {{"out", "FILE", "where to write the backup (required)"}},
       0,
       0,
       Backup},
      {"rolekey encode",
       "",
       "Encode a role key (--project, --kind, --scope) into its rk2 wire.",
       "",
       {{"project", "PROJECT_ID", "the project (prj_ + 22 characters)"},
        {"kind", "cto|lead", "the role kind"},
        {"scope", "SCOPE_ID", "the lead's scope (scp_ + 22 characters)"}},
       0,
       0,
       Encode},
      {"rolekey decode",
       "WIRE",
       "Decode an rk2 wire into its role key.",
       "",
       {},
       1,
       1,
       Decode},
  };
}

std::vector<Command> AgentCommands() {
  return {
      {"agents list",
       "",
       "List agents (filters combine with AND).",
       "",
       {{"status", "S[,S...]", "online, stale, offline"},
        {"cli", "C[,C...]", "codex, gemini, claude, other"},
        {"project", "PROJECT_ID", "only agents of this project"},
        {"topic", "TOPIC", "only agents subscribed to this topic"},
        {"page-size", "N", "agents per page (default 100, at most 1000)"},
        {"page-token", "TOKEN", "the next page of an earlier listing"}},
       0,
       0,
       ListAgents},
      {"agents get", "AGENT_ID", "Show one agent.", "", {}, 1, 1, GetAgent},
  };
}

}  // namespace hub::hubctl
