#include "hub/console/console_http.h"

#include <httplib.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "hub/console/assets.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub::console {
namespace {

using nlohmann::json;

constexpr char kCookieName[] = "hub_console";
constexpr char kCsrfHeader[] = "X-Console-CSRF";
// With its charset: cpp-httplib then leaves the body uncompressed. It would
// otherwise brotli it at quality 11 for any browser (Accept-Encoding: br),
// which takes seconds for a fleet of 10,000 agents (measured 2026-12-01,
// commit e1f4679; the run is in git history of docs/BENCHMARKS.md).
constexpr char kJson[] = "application/json; charset=utf-8";
constexpr char kJsonType[] = "application/json";
// The most agents a partial fleet (/api/fleet?first=N) carries: more rows
// than a screen shows.
constexpr size_t kMaxFirstAgents = 1000;
// Requests bodies the console accepts at most (a login, an action).
constexpr size_t kMaxBody = 16 * 1024;

// Scripts, styles and connections from this origin only; no inline code, no
// eval, no plugins, no framing.
constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kFailedPrecondition:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void Reply(httplib::Response& response, const json& body, int status = 200) {
  response.status = status;
  response.set_content(Dump(body), kJson);
}

// The status as the API's ErrorInfo has it: code, reason, message and the
// metadata (e.g. which limit refused it).
void Fail(httplib::Response& response, const absl::Status& status) {
  Reply(response,
        {{"code", absl::StatusCodeToString(status.code())},
         {"reason", ReasonOf(status)},
         {"message", std::string(status.message())},
         {"metadata", MetadataOf(status)}},
        HttpStatusOf(status.code()));
}

void Refuse(httplib::Response& response, int http_status,
            absl::string_view reason, absl::string_view message) {
  Reply(response,
        {{"code", http_status == 401 ? "UNAUTHENTICATED" : "PERMISSION_DENIED"},
         {"reason", std::string(reason)},
         {"message", std::string(message)}},
        http_status);
}

// The value of cookie `name` in a Cookie header ("" when absent).
std::string CookieValue(absl::string_view header, absl::string_view name) {
  for (absl::string_view part : absl::StrSplit(header, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, name) && absl::ConsumePrefix(&part, "=")) {
      return std::string(part);
    }
  }
  return "";
}

// The host of a Host header, without its port.
absl::string_view HostName(absl::string_view host) {
  if (absl::StartsWith(host, "[")) {
    const size_t end = host.find(']');
    return end == absl::string_view::npos ? host : host.substr(0, end + 1);
  }
  const size_t colon = host.rfind(':');
  return colon == absl::string_view::npos ? host : host.substr(0, colon);
}

json SessionJson(const ConsoleSession& s, bool tokens) {
  const Principal& p = s.principal;
  return {{"principal", p.anonymous ? "anonymous" : p.name},
          {"kind", std::string(PrincipalKindName(p.kind))},
          {"anonymous", p.anonymous},
          {"all_projects", p.anonymous || p.all_projects},
          {"projects", p.projects},
          {"may_act", p.anonymous || p.kind >= PrincipalKind::kOperator},
          {"tokens_required", tokens},
          {"csrf", s.csrf}};
}

void SetStatic(httplib::Server* server, const std::string& route,
               const std::string& asset) {
  const Asset* found = FindAsset(asset);
  if (found == nullptr) return;
  server->Get(route, [found](const httplib::Request&, httplib::Response& r) {
    // Revalidated on every load (they change with hubd), unlike the
    // default no-store of the API.
    r.headers.erase("Cache-Control");
    r.set_header("Cache-Control", "no-cache");
    // Through a content provider of known length, which cpp-httplib sends
    // as it is: a body set with set_content it would brotli at quality 11
    // on every request (text/*), 30-200 ms each of the page's first load
    // for 45 kB (measured 2026-12-02, commit 6511355; the run is in git
    // history of docs/BENCHMARKS.md).
    r.set_content_provider(
        found->body.size(), std::string(found->content_type),
        [found](size_t offset, size_t length, httplib::DataSink& sink) {
          return sink.write(found->body.data() + offset, length);
        });
  });
}

}  // namespace

ConsoleHttp::ConsoleHttp(ConsoleModel* model, Activator* activator,
                         const Authority* authority, const Clock* clock,
                         ConsoleHttpOptions options)
    : model_(model),
      activator_(activator),
      clock_(clock),
      options_(options),
      sessions_(authority, clock, options.session_lifetime),
      login_limiter_(clock, options.login_limit) {}

std::string ConsoleHttp::Cookie(const std::string& value, bool expire) const {
  return absl::StrCat(
      kCookieName, "=", value, "; Path=/; HttpOnly; SameSite=Strict",
      options_.tls ? "; Secure" : "", expire ? "; Max-Age=0" : "");
}

bool ConsoleHttp::HostAllowed(const httplib::Request& request) const {
  // Without tokens the console answers anyone who reaches it, which the
  // listen rule keeps to loopback; a page of another site that rebinds its
  // name to 127.0.0.1 still sends its own name as Host: refused.
  if (sessions_.tokens_required()) return true;
  const std::string header = request.get_header_value("Host");
  const absl::string_view host = HostName(header);
  return host == "localhost" || host == "[::1]" ||
         absl::StartsWith(host, "127.");
}

std::optional<ConsoleSession> ConsoleHttp::SessionOf(
    const httplib::Request& request) {
  return sessions_.Find(
      CookieValue(request.get_header_value("Cookie"), kCookieName));
}

std::optional<ConsoleSession> ConsoleHttp::WriteSession(
    const httplib::Request& request, httplib::Response& response) {
  std::optional<ConsoleSession> session = SessionOf(request);
  if (!session.has_value()) {
    Refuse(response, 401, "PRINCIPAL_REQUIRED", "log in first");
    return std::nullopt;
  }
  const std::string csrf = request.get_header_value(kCsrfHeader);
  if (csrf.empty() || csrf != session->csrf) {
    Refuse(response, 403, "CSRF_TOKEN_INVALID",
           "a state-changing request must carry the session's CSRF token");
    return std::nullopt;
  }
  return session;
}

void ConsoleHttp::Install(httplib::Server* server) {
  server->set_default_headers({
      {"Content-Security-Policy", kContentSecurityPolicy},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      {"Cross-Origin-Opener-Policy", "same-origin"},
      {"Cross-Origin-Resource-Policy", "same-origin"},
      {"Cache-Control", "no-store"},
  });
  server->set_payload_max_length(kMaxBody);
  server->set_pre_routing_handler([this](const httplib::Request& request,
                                         httplib::Response& response) {
    // /metrics stays open to scrapers, by whatever name they use.
    if (request.path != "/metrics" && !HostAllowed(request)) {
      Refuse(response, 403, "HOST_NOT_ALLOWED",
             "without tokens the console answers loopback names only");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (request.method == "POST" && absl::StartsWith(request.path, "/api/")) {
      // Only the page's own fetches: JSON bodies (no form can send
      // them cross-site without a preflight) from this origin.
      const std::string origin = request.get_header_value("Origin");
      const std::string host = request.get_header_value("Host");
      if (!origin.empty() && origin != absl::StrCat("http://", host) &&
          origin != absl::StrCat("https://", host)) {
        Refuse(response, 403, "ORIGIN_NOT_ALLOWED",
               "cross-origin requests are refused");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (!absl::StartsWith(request.get_header_value("Content-Type"),
                            kJsonType)) {
        Reply(response,
              {{"code", "INVALID_ARGUMENT"},
               {"reason", "REQUEST_INVALID"},
               {"message", "the body must be application/json"}},
              415);
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  SetStatic(server, "/", "index.html");
  SetStatic(server, "/console.js", "console.js");
  SetStatic(server, "/console.css", "console.css");
  server->Get("/api/session",
              [this](const auto& q, auto& r) { Session(q, r); });
  server->Post("/api/login", [this](const auto& q, auto& r) { Login(q, r); });
  server->Post("/api/logout", [this](const auto& q, auto& r) { Logout(q, r); });
  server->Get("/api/fleet",
              [this](const auto& q, auto& r) { View(q, r, "fleet"); });
  server->Get("/api/roles",
              [this](const auto& q, auto& r) { View(q, r, "roles"); });
  server->Get("/api/events",
              [this](const auto& q, auto& r) { View(q, r, "events"); });
  server->Get("/api/messages",
              [this](const auto& q, auto& r) { View(q, r, "messages"); });
  server->Get("/api/reservations",
              [this](const auto& q, auto& r) { View(q, r, "reservations"); });
  server->Get("/api/jobs",
              [this](const auto& q, auto& r) { View(q, r, "jobs"); });
  server->Get("/api/trace",
              [this](const auto& q, auto& r) { View(q, r, "trace"); });
  server->Get("/api/stream", [this](const auto& q, auto& r) { Stream(q, r); });
  server->Post("/api/roles/ensure",
               [this](const auto& q, auto& r) { Ensure(q, r); });
  server->Post("/api/roles/close",
               [this](const auto& q, auto& r) { CloseScope(q, r); });
  server->Post("/api/dead-letters/redrive",
               [this](const auto& q, auto& r) { Redrive(q, r); });
  server->Post("/api/reservations/release",
               [this](const auto& q, auto& r) { ReleaseReservation(q, r); });
}

void ConsoleHttp::Session(const httplib::Request& request,
                          httplib::Response& response) {
  std::optional<ConsoleSession> session = SessionOf(request);
  if (!session.has_value() && !sessions_.tokens_required()) {
    // No token file: every caller is the anonymous admin, as on the gRPC
    // API; the session exists for its CSRF token.
    absl::StatusOr<ConsoleSession> opened = sessions_.Login("");
    if (!opened.ok()) return Fail(response, opened.status());
    response.set_header("Set-Cookie", Cookie(opened->id, false));
    session = *opened;
  }
  if (!session.has_value()) {
    return Refuse(response, 401, "PRINCIPAL_REQUIRED", "log in first");
  }
  Reply(response, SessionJson(*session, sessions_.tokens_required()));
}

void ConsoleHttp::Login(const httplib::Request& request,
                        httplib::Response& response) {
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("token") ||
      !body["token"].is_string()) {
    return Fail(response, InvalidArgumentError(
                              "REQUEST_INVALID",
                              "the body must be {\"token\": \"<token>\"}"));
  }
  // Refused before the token is looked at: a guesser learns nothing while
  // its address is refused.
  const std::string& address = request.remote_addr;
  if (const absl::Duration wait = login_limiter_.RetryAfter(address);
      wait > absl::ZeroDuration()) {
    const int64_t seconds =
        absl::ToInt64Seconds(absl::Ceil(wait, absl::Seconds(1)));
    response.set_header("Retry-After", absl::StrCat(seconds));
    return Reply(
        response,
        {{"code", "RESOURCE_EXHAUSTED"},
         {"reason", "CONSOLE_LOGIN_RATE_LIMITED"},
         {"message", absl::StrCat("too many failed logins from ", address,
                                  "; try again in ", seconds, " s")},
         {"retry_after_s", seconds}},
        429);
  }
  absl::StatusOr<ConsoleSession> session =
      sessions_.Login(body["token"].get<std::string>());
  if (!session.ok()) {
    if (absl::IsUnauthenticated(session.status())) {
      login_limiter_.Failed(address);
    }
    return Fail(response, session.status());
  }
  login_limiter_.Succeeded(address);
  // A login replaces whatever session the browser held.
  const std::string previous =
      CookieValue(request.get_header_value("Cookie"), kCookieName);
  if (!previous.empty()) sessions_.Logout(previous);
  response.set_header("Set-Cookie", Cookie(session->id, false));
  Reply(response, SessionJson(*session, sessions_.tokens_required()));
}

void ConsoleHttp::Logout(const httplib::Request& request,
                         httplib::Response& response) {
  std::optional<ConsoleSession> session = WriteSession(request, response);
  if (!session.has_value()) return;
  sessions_.Logout(session->id);
  response.set_header("Set-Cookie", Cookie("", true));
  Reply(response, {{"logged_out", true}});
}

void ConsoleHttp::View(const httplib::Request& request,
                       httplib::Response& response, const std::string& which) {
  std::optional<ConsoleSession> session = SessionOf(request);
  if (!session.has_value()) {
    return Refuse(response, 401, "PRINCIPAL_REQUIRED", "log in first");
  }
  const ProjectScope scope = ScopeOf(session->principal);
  absl::StatusOr<json> view;
  if (which == "fleet") {
    // ?first=N: the first N agents and every count (the page's first
    // draw); without it, the whole fleet.
    std::optional<size_t> first;
    if (request.has_param("first")) {
      size_t n = 0;
      if (!absl::SimpleAtoi(request.get_param_value("first"), &n) || n < 1 ||
          n > kMaxFirstAgents) {
        return Fail(response, InvalidArgumentError(
                                  "REQUEST_INVALID",
                                  absl::StrCat("first must be a number of "
                                               "agents from 1 to ",
                                               kMaxFirstAgents)));
      }
      first = n;
    }
    view = model_->Fleet(scope, first);
  } else if (which == "roles") {
    view = model_->Roles(scope);
  } else if (which == "messages") {
    view = model_->Messages(scope);
  } else if (which == "reservations") {
    view = model_->Reservations(scope);
  } else if (which == "jobs") {
    view = model_->Jobs(scope);
  } else if (which == "trace") {
    view = model_->Trace(request.get_param_value("trace_id"), scope);
  } else {
    view = model_->RecentEvents(scope);
  }
  if (!view.ok()) return Fail(response, view.status());
  Reply(response, *view);
}

void ConsoleHttp::Stream(const httplib::Request& request,
                         httplib::Response& response) {
  std::optional<ConsoleSession> session = SessionOf(request);
  if (!session.has_value()) {
    return Refuse(response, 401, "PRINCIPAL_REQUIRED", "log in first");
  }
  // Resume after Last-Event-ID (the browser's reconnect), else after the
  // seq of the snapshot the page rendered.
  int64_t after = -1;
  std::string from = request.get_header_value("Last-Event-ID");
  if (from.empty() && request.has_param("after")) {
    from = request.get_param_value("after");
  }
  if (!absl::SimpleAtoi(from, &after) || after < 0) {
    return Fail(
        response,
        InvalidArgumentError("REQUEST_INVALID",
                             "the stream needs ?after=<seq> or Last-Event-ID"));
  }
  if (open_streams_.fetch_add(1) >= options_.max_event_streams) {
    open_streams_.fetch_sub(1);
    return Fail(response,
                UnavailableError("CONSOLE_STREAMS_EXHAUSTED",
                                 "too many console event streams are open"));
  }
  struct State {
    std::string session_id;
    int64_t cursor;
    absl::Time last_write;
    bool started = false;
  };
  auto state =
      std::make_shared<State>(State{session->id, after, clock_->Now()});
  response.set_header("X-Accel-Buffering", "no");
  response.set_chunked_content_provider(
      "text/event-stream",
      [this, state](size_t, httplib::DataSink& sink) {
        if (!state->started) {
          // At once, so that the browser sees the stream open; and so that
          // it reconnects a second after the stream ends (a restarted hub,
          // a session that ended), not after its default three.
          state->started = true;
          static constexpr char kRetry[] = "retry: 1000\n\n";
          return sink.write(kRetry, sizeof(kRetry) - 1);
        }
        // Woken by a change, or each second to look at the session again.
        ConsoleBatch batch = model_->feed()->WaitAfter(
            state->cursor, std::min(options_.stream_keepalive,
                                    options_.session_check_interval));
        // Logged out, expired or its token revoked: the stream ends.
        std::optional<ConsoleSession> session =
            sessions_.Find(state->session_id);
        if (batch.closed || !session.has_value()) {
          sink.done();
          return true;
        }
        std::string out;
        if (batch.lost) {
          absl::StrAppend(&out, "id: ", batch.head,
                          "\nevent: reset\ndata: {}\n\n");
          state->cursor = batch.head;
        }
        const ProjectScope scope = ScopeOf(session->principal);
        for (const ConsoleChange& c : batch.changes) {
          state->cursor = c.seq;
          // A reset (reload the snapshots) is for every page.
          if (c.kind != "reset" && !ConsoleModel::Visible(scope, c.projects))
            continue;
          absl::StrAppend(&out, "id: ", c.seq, "\nevent: ", c.kind,
                          "\ndata: ", c.json, "\n\n");
        }
        const absl::Time now = clock_->Now();
        if (out.empty()) {
          if (now - state->last_write < options_.stream_keepalive) {
            return sink.is_writable();
          }
          out = ": idle\n\n";
        }
        state->last_write = now;
        return sink.is_writable() && sink.write(out.data(), out.size());
      },
      [this](bool) { open_streams_.fetch_sub(1); });
}

std::optional<ConsoleHttp::RoleAction> ConsoleHttp::OperatorOnRole(
    const httplib::Request& request, httplib::Response& response,
    absl::string_view what) {
  std::optional<ConsoleSession> session = WriteSession(request, response);
  if (!session.has_value()) return std::nullopt;
  RoleAction action;
  action.body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (!action.body.is_object() || !action.body.contains("wire") ||
      !action.body["wire"].is_string()) {
    Fail(response,
         InvalidArgumentError("REQUEST_INVALID",
                              "the body must be {\"wire\": \"rk2....\", ...}"));
    return std::nullopt;
  }
  action.wire = action.body["wire"].get<std::string>();
  absl::StatusOr<RoleKey> key = DecodeRoleKey(action.wire);
  if (!key.ok()) {
    Fail(response, key.status());
    return std::nullopt;
  }
  // The gRPC call's rules for an operator (docs/design/auth.md): an
  // operator or admin token whose projects hold the role's.
  const Principal& principal = session->principal;
  absl::Status s = RequireKind(principal, PrincipalKind::kOperator,
                               absl::StrCat(what, " from the console"));
  if (s.ok()) s = RequireProject(principal, key->project_id);
  if (!s.ok()) {
    Fail(response, s);
    return std::nullopt;
  }
  action.key = *key;
  action.principal = principal.anonymous ? "anonymous" : principal.name;
  return action;
}

void ConsoleHttp::Ensure(const httplib::Request& request,
                         httplib::Response& response) {
  std::optional<RoleAction> action =
      OperatorOnRole(request, response, "EnsureRole");
  if (!action.has_value()) return;
  EnsureRequest ensure;
  ensure.role.wire = action->wire;
  ensure.trigger = "manual";
  ensure.cause_id = absl::StrCat("console:", action->principal, ":",
                                 RandomHex32().substr(0, 16));
  absl::StatusOr<EnsureReceipt> receipt = activator_->Ensure(ensure);
  if (!receipt.ok()) return Fail(response, receipt.status());
  Reply(response, {{"accepted", receipt->accepted},
                   {"disposition",
                    std::string(EnsureDispositionName(receipt->disposition))},
                   {"cause_id", ensure.cause_id},
                   {"state", std::string(RoleStateName(receipt->role.state))},
                   {"holder", receipt->role.holder_agent_id.has_value()
                                  ? json(*receipt->role.holder_agent_id)
                                  : json(nullptr)},
                   {"epoch", receipt->role.epoch}});
}

void ConsoleHttp::CloseScope(const httplib::Request& request,
                             httplib::Response& response) {
  std::optional<RoleAction> action =
      OperatorOnRole(request, response, "CloseRoleScope");
  if (!action.has_value()) return;
  ScopeCloseInput input;
  input.role.wire = action->wire;
  input.closed_by = action->principal;
  if (action->body.contains("reason") && action->body["reason"].is_string()) {
    input.reason = action->body["reason"].get<std::string>();
  }
  // The activator's close, as CloseRoleScope's: the row, its candidates
  // and its backlog in one transaction, then the dead-letter notices.
  absl::StatusOr<ScopeCloseOutcome> closed = activator_->CloseScope(input);
  if (!closed.ok()) return Fail(response, closed.status());
  const storage::ScopeCloseResult& r = closed->result;
  Reply(response,
        {{"already_closed", r.already_closed},
         {"closed_by", r.closed.closed_by},
         {"reason", r.closed.reason},
         {"role_removed", r.removed_role.has_value()},
         {"candidates_removed", r.candidates_removed},
         {"dead_lettered", static_cast<int64_t>(r.dead_lettered.size())}});
}

std::optional<ConsoleHttp::IdAction> ConsoleHttp::OperatorOnId(
    const httplib::Request& request, httplib::Response& response,
    absl::string_view what, absl::string_view id_of) {
  std::optional<ConsoleSession> session = WriteSession(request, response);
  if (!session.has_value()) return std::nullopt;
  const json body =
      json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("id") || !body["id"].is_string()) {
    Fail(response,
         InvalidArgumentError(
             "REQUEST_INVALID",
             absl::StrCat("the body must be {\"id\": \"<", id_of, " id>\"}")));
    return std::nullopt;
  }
  // The gRPC call's first rule: an operator or admin token (its project
  // is checked once the thing is read).
  if (absl::Status s = RequireKind(session->principal, PrincipalKind::kOperator,
                                   absl::StrCat(what, " from the console"));
      !s.ok()) {
    Fail(response, s);
    return std::nullopt;
  }
  IdAction action;
  action.id = body["id"].get<std::string>();
  action.principal = session->principal;
  action.by = action.principal.anonymous ? "anonymous" : action.principal.name;
  return action;
}

void ConsoleHttp::Redrive(const httplib::Request& request,
                          httplib::Response& response) {
  std::optional<IdAction> action =
      OperatorOnId(request, response, "RedriveDeadLetter", "message");
  if (!action.has_value()) return;
  // The message within the token's projects: checked by the messaging once
  // it is read, as for the gRPC call.
  absl::StatusOr<RedriveOutcome> outcome =
      model_->messaging()->RedriveDeadLetter(
          action->id, ScopeOf(action->principal), action->by);
  if (!outcome.ok()) return Fail(response, outcome.status());
  Reply(response,
        {{"id", outcome->message.id},
         {"status", std::string(MessageStatusName(outcome->message.status))},
         {"expires_at_ms", outcome->message.expires_at_ms},
         {"was", outcome->dead_letter.has_value()
                     ? json(outcome->dead_letter->reason)
                     : json(nullptr)},
         {"recipients", outcome->recipients},
         {"pushed", outcome->pushed},
         {"ensure", outcome->activation.has_value()
                        ? json(std::string(EnsureDispositionName(
                              outcome->activation->disposition)))
                        : json(nullptr)}});
}

void ConsoleHttp::ReleaseReservation(const httplib::Request& request,
                                     httplib::Response& response) {
  std::optional<IdAction> action =
      OperatorOnId(request, response, "ForceReleaseReservation", "reservation");
  if (!action.has_value()) return;
  ReservationBook* book = model_->reservations();
  if (book == nullptr) {
    return Fail(response, NotFoundError("RESERVATION_NOT_FOUND",
                                        "this hub keeps no reservations"));
  }
  // ForceReleaseReservation's second rule: the reservation's project among
  // the token's (read first).
  absl::StatusOr<storage::ReservationRecord> held = book->Get(action->id);
  if (!held.ok()) return Fail(response, held.status());
  if (absl::Status s = RequireProject(action->principal, held->project_id);
      !s.ok()) {
    return Fail(response, s);
  }
  absl::StatusOr<storage::ReservationRecord> released =
      book->ForceRelease(action->id);
  if (!released.ok()) return Fail(response, released.status());
  Reply(response, {{"id", released->reservation_id},
                   {"holder", released->agent_id},
                   {"token", released->token},
                   {"patterns", released->patterns},
                   {"released_by", action->by}});
}

}  // namespace hub::console
