// publish, pending, ack, dead-letters, dead-letters redrive.
#include "absl/strings/str_join.h"
#include "tools/hubctl/commands.h"

namespace hub::hubctl {
namespace {

std::string TypeWord(hub::v1::MessageType type) {
  return EnumWord(hub::v1::MessageType_Name(type), "MESSAGE_TYPE_");
}

absl::Status Publish(Env& env, const Args& args) {
  hub::v1::PublishRequest request;
  request.set_from_agent_id(args.Get("from"));
  request.set_to(args.positional()[0]);
  request.set_topic(args.Get("topic"));
  request.set_correlation_id(args.Get("correlation"));
  request.set_trace_id(args.Get("trace"));
  request.set_project_id(args.Get("project"));
  if (args.Has("type")) {
    auto type = ParseEnumWord<hub::v1::MessageType>(
        "type", args.Get("type"), "MESSAGE_TYPE_", &hub::v1::MessageType_Parse);
    if (!type.ok()) return type.status();
    request.set_type(*type);
  }
  auto priority = args.GetInt("priority");
  if (!priority.ok()) return priority.status();
  if (priority->has_value()) {
    request.set_priority(static_cast<int32_t>(**priority));
  }
  auto ttl = args.GetDuration("ttl");
  if (!ttl.ok()) return ttl.status();
  if (ttl->has_value()) *request.mutable_ttl() = ToProtoDuration(**ttl);
  if (absl::Status s = JsonFlag(args, "payload", request.mutable_payload());
      !s.ok()) {
    return s;
  }
  auto published = env.client->Publish(request);
  if (!published.ok()) return published.status();
  if (env.json) {
    *env.out << ToJson(*published) << "\n";
    return absl::OkStatus();
  }
  PrintFields(*env.out,
              {{"message_id", published->message_id()},
               {"recipients", absl::StrCat(published->recipient_count())},
               {"type", TypeWord(published->type())},
               {"expires_at", FormatTimestamp(published->expires_at())},
               {"correlation_id", published->correlation_id()},
               {"trace_id", published->trace_id()}});
  return absl::OkStatus();
}

absl::Status Pending(Env& env, const Args& args) {
  hub::v1::ListPendingRequest request;
  request.set_agent_id(args.positional()[0]);
  request.set_topic(args.Get("topic"));
  // An operator looking at an inbox must not change it: peek unless asked.
  request.set_peek(!args.Has("mark-delivered"));
  auto page_size = args.GetInt("page-size");
  if (!page_size.ok()) return page_size.status();
  request.set_page_size(static_cast<int32_t>(page_size->value_or(0)));
  request.set_page_token(args.Get("page-token"));
  auto listed = env.client->ListPending(request);
  if (!listed.ok()) return listed.status();
  if (env.json) {
    *env.out << ToJson(*listed) << "\n";
    return absl::OkStatus();
  }
  Table table({"MESSAGE_ID", "TYPE", "FROM", "TO", "PRIORITY", "STATE",
               "ATTEMPTS", "CREATED_AT"});
  for (const auto& d : listed->deliveries()) {
    const hub::v1::Message& m = d.message();
    table.Add(
        {m.message_id(), TypeWord(m.type()), m.from_agent_id(), m.to(),
         absl::StrCat(m.priority()),
         EnumWord(hub::v1::DeliveryState_Name(d.state()), "DELIVERY_STATE_"),
         absl::StrCat(d.attempts()), FormatTimestamp(m.created_at())});
  }
  table.Print(*env.out);
  if (!listed->next_page_token().empty()) {
    *env.out << "next page: --page-token=" << listed->next_page_token() << "\n";
  }
  return absl::OkStatus();
}

absl::Status Ack(Env& env, const Args& args) {
  hub::v1::AckRequest request;
  request.set_agent_id(args.positional()[0]);
  for (size_t i = 1; i < args.positional().size(); ++i) {
    request.add_message_ids(args.positional()[i]);
  }
  auto generation = args.GetInt("generation");
  if (!generation.ok()) return generation.status();
  if (generation->has_value()) request.set_presence_generation(**generation);
  auto acked = env.client->Ack(request);
  if (!acked.ok()) return acked.status();
  if (env.json) {
    *env.out << ToJson(*acked) << "\n";
    return absl::OkStatus();
  }
  PrintFields(
      *env.out,
      {{"acked", absl::StrJoin(acked->result().acked_message_ids(), ",")},
       {"ignored", absl::StrJoin(acked->result().ignored_message_ids(), ",")}});
  return absl::OkStatus();
}

absl::Status DeadLetters(Env& env, const Args& args) {
  hub::v1::ListDeadLettersRequest request;
  request.set_reason(args.Get("reason"));
  request.set_from_agent_id(args.Get("from"));
  auto page_size = args.GetInt("page-size");
  if (!page_size.ok()) return page_size.status();
  request.set_page_size(static_cast<int32_t>(page_size->value_or(0)));
  request.set_page_token(args.Get("page-token"));
  auto listed = env.client->ListDeadLetters(request);
  if (!listed.ok()) return listed.status();
  if (env.json) {
    *env.out << ToJson(*listed) << "\n";
    return absl::OkStatus();
  }
  Table table(
      {"MESSAGE_ID", "REASON", "FAILED_AT", "FROM", "TO", "LAST_ERROR"});
  for (const auto& d : listed->dead_letters()) {
    table.Add({d.message_id(), d.reason(), FormatTimestamp(d.failed_at()),
               d.message().from_agent_id(), d.message().to(),
               d.has_last_error() ? d.last_error() : "-"});
  }
  table.Print(*env.out);
  if (!listed->next_page_token().empty()) {
    *env.out << "next page: --page-token=" << listed->next_page_token() << "\n";
  }
  return absl::OkStatus();
}

absl::Status Redrive(Env& env, const Args& args) {
  hub::v1::RedriveDeadLetterRequest request;
  request.set_message_id(args.positional()[0]);
  auto redriven = env.client->RedriveDeadLetter(request);
  if (!redriven.ok()) return redriven.status();
  if (env.json) {
    *env.out << ToJson(*redriven) << "\n";
    return absl::OkStatus();
  }
  const hub::v1::Message& m = redriven->message();
  std::vector<std::pair<std::string, std::string>> fields = {
      {"message_id", m.message_id()},
      {"was",
       redriven->has_dead_letter() ? redriven->dead_letter().reason() : "-"},
      {"status",
       EnumWord(hub::v1::MessageStatus_Name(m.status()), "MESSAGE_STATUS_")},
      {"recipients",
       redriven->recipient_agent_ids().empty()
           ? (m.has_role_key_wire() ? "none (role backlog)" : "none")
           : absl::StrJoin(redriven->recipient_agent_ids(), ",")},
      {"pushed", absl::StrJoin(redriven->pushed_agent_ids(), ",")},
      {"expires_at", FormatTimestamp(m.expires_at())}};
  if (redriven->has_activation()) {
    fields.emplace_back("ensure", redriven->activation().cause_id());
  }
  PrintFields(*env.out, fields);
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> MessageCommands() {
  return {
      {"publish",
       "TO",
       "Publish a message to an agent id, topic:<name> or topic:role:<wire>.",
       "",
       {{"from", "AGENT_ID", "the sender"},
        {"type", "TYPE", "request, response, event (default), handoff, ..."},
        {"priority", "N", "1..9"},
        {"ttl", "DURATION", "lifetime, 1s..24h (e.g. 10m)"},
        {"payload", "JSON", "a JSON object"},
        {"topic", "TOPIC", "topic label"},
        {"project", "PROJECT_ID", "project for topic:cto"},
        {"correlation", "ID", "correlation id"},
        {"trace", "ID", "trace id"}},
       1,
       1,
       Publish},
      {"pending",
       "AGENT_ID",
       "List an agent's pending messages (without marking them delivered).",
       "",
       {{"topic", "TOPIC", "only this topic"},
        {"mark-delivered", "", "mark listed messages delivered (no peek)"},
        {"page-size", "N", "messages per page"},
        {"page-token", "TOKEN", "the next page"}},
       1,
       1,
       Pending},
      {"ack",
       "AGENT_ID MESSAGE_ID...",
       "Acknowledge messages delivered to an agent.",
       "",
       {{"generation", "N", "fence on this presence generation"}},
       2,
       101,
       Ack},
      {"dead-letters",
       "",
       "List dead letters, newest first.",
       "",
       {{"reason", "REASON", "only this reason"},
        {"from", "AGENT_ID", "only from this sender"},
        {"page-size", "N", "dead letters per page"},
        {"page-token", "TOKEN", "the next page"}},
       0,
       0,
       DeadLetters},
      {"dead-letters redrive",
       "MESSAGE_ID",
       "Put a dead letter back in the queue (operators).",
       "Queues the message again, with a new expiry, for every recipient "
       "that had not acknowledged it, or for a role message its role's live "
       "holder (else the role's backlog, with an election asked for). Once "
       "only: a message that is no longer a dead letter is refused "
       "(MESSAGE_NOT_DEAD_LETTER), and so is one of a closed lead scope "
       "(ROLE_SCOPE_CLOSED).",
       {},
       1,
       1,
       Redrive},
  };
}

}  // namespace hub::hubctl
