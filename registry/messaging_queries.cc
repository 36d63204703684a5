// Messaging: pending lists, dead letters, traces, Ask and the expiry sweep.
#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "registry/agent_validation.h"
#include "registry/messaging.h"
#include "registry/messaging_internal.h"
#include "registry/role_key.h"
#include "status/status.h"

namespace hub {

namespace messaging_internal {

bool IsLabel(absl::string_view text) {
  if (text.empty() || text.size() > 128) return false;
  for (char c : text) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                    c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string EncodePageToken(absl::string_view kind, absl::string_view scope,
                            const std::vector<std::string>& fields) {
  nlohmann::json doc = {
      {"k", std::string(kind)}, {"s", std::string(scope)}, {"f", fields}};
  return Base64UrlEncode(doc.dump());
}

absl::StatusOr<std::vector<std::string>> DecodePageToken(
    absl::string_view token, absl::string_view kind, absl::string_view scope,
    size_t arity) {
  if (token.empty()) return std::vector<std::string>();
  const absl::Status invalid = WithMetadata(
      InvalidArgumentError("PAGE_TOKEN_INVALID",
                           "page_token is not a token from this query"),
      "field", "page_token");
  std::optional<std::string> raw = Base64UrlDecodeStrict(token);
  if (!raw.has_value()) return invalid;
  nlohmann::json doc = nlohmann::json::parse(*raw, nullptr, false);
  if (!doc.is_object() || doc.value("k", "") != kind ||
      doc.value("s", "") != scope || !doc.contains("f") ||
      !doc["f"].is_array() || doc["f"].size() != arity) {
    return invalid;
  }
  std::vector<std::string> fields;
  for (const auto& f : doc["f"]) {
    if (!f.is_string()) return invalid;
    fields.push_back(f.get<std::string>());
  }
  return fields;
}

}  // namespace messaging_internal

namespace {

using messaging_internal::DecodePageToken;
using messaging_internal::EncodePageToken;

absl::Status BadPageSize() {
  return WithMetadata(
      InvalidArgumentError("REQUEST_INVALID", "page_size must not be negative"),
      "field", "page_size");
}

// The fewest rows one store read of a list filtered in memory asks for.
constexpr int64_t kMinListChunk = 64;

int EffectivePageSize(int requested, int fallback, int max) {
  if (requested == 0) return fallback;
  return std::min(requested, max);
}

// Parses "a" of a page-token field as an int64, or fails the token.
absl::StatusOr<int64_t> TokenInt(const std::string& field) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(field, &v)) {
    return WithMetadata(
        InvalidArgumentError("PAGE_TOKEN_INVALID", "page_token is malformed"),
        "field", "page_token");
  }
  return v;
}

}  // namespace

absl::StatusOr<PendingPage> Messaging::ListPending(const PendingQuery& query) {
  if (absl::Status s = ValidateAgentId(query.agent_id); !s.ok())
    return WithMetadata(s, "field", "agent_id");
  if (!query.topic.empty() && !messaging_internal::IsLabel(query.topic)) {
    return WithMetadata(
        InvalidArgumentError("TOPIC_INVALID",
                             "topic must be 1..128 characters of "
                             "[A-Za-z0-9._:-]"),
        "field", "topic");
  }
  if (query.page_size < 0) return BadPageSize();
  const size_t page_size =
      static_cast<size_t>(EffectivePageSize(query.page_size, 20, 100));
  const std::string scope = absl::StrCat(query.agent_id, "\n", query.topic);
  absl::StatusOr<std::vector<std::string>> after =
      DecodePageToken(query.page_token, "pending", scope, 3);
  if (!after.ok()) return after.status();
  if (absl::Status s = CheckAgent(query.agent_id, query.presence_generation);
      !s.ok()) {
    return s;
  }
  // One keyset read (priority DESC, created ASC, id ASC) of the page and
  // one row more, which proves a next page; the topic is in the query.
  storage::PendingPageQuery pending_query;
  pending_query.agent_id = query.agent_id;
  if (!query.topic.empty()) pending_query.topic = query.topic;
  if (!after->empty()) {
    absl::StatusOr<int64_t> priority = TokenInt((*after)[0]);
    absl::StatusOr<int64_t> created = TokenInt((*after)[1]);
    if (!priority.ok()) return priority.status();
    if (!created.ok()) return created.status();
    pending_query.after =
        storage::PendingPageQuery::Key{*priority, *created, (*after)[2]};
  }
  const int64_t now_ms = UnixMillis(clock_->Now());
  pending_query.now_ms = now_ms;
  pending_query.limit = static_cast<int64_t>(page_size) + 1;
  absl::StatusOr<std::vector<MessageRecord>> pending =
      store_->ListPendingPage(pending_query);
  if (!pending.ok()) return pending.status();
  PendingPage page;
  page.server_time_ms = now_ms;
  bool more = false;
  // The next page starts after the last row read, returned or not.
  size_t read = 0;
  const MessageRecord* last = nullptr;
  for (const MessageRecord& m : *pending) {
    if (read == page_size) {
      more = true;
      break;
    }
    ++read;
    last = &m;
    if (!query.peek) {
      absl::StatusOr<std::optional<InboxRecord>> marked =
          store_->MarkDeliveredIfUnacked(m.id, query.agent_id, now_ms);
      if (!marked.ok()) return marked.status();
      // Acknowledged since the read (the agent acked it on its stream):
      // no longer pending, so not on the page.
      if (!marked->has_value()) continue;
      if (events_ != nullptr) {
        events_->Publish(MessagesChanged{{m.id}, {}, std::nullopt});
      }
    }
    MessageDelivery d;
    d.message = m;
    if (!query.peek) d.message.status = MessageStatus::kDelivered;
    absl::StatusOr<std::vector<InboxRecord>> inbox = store_->ListInbox(m.id);
    if (!inbox.ok()) return inbox.status();
    for (const auto& row : *inbox) {
      if (row.agent_id == query.agent_id) d.inbox = row;
    }
    page.deliveries.push_back(std::move(d));
  }
  if (more) {
    const MessageRecord& m = *last;
    page.next_page_token = EncodePageToken(
        "pending", scope,
        {absl::StrCat(m.priority), absl::StrCat(m.created_at_ms), m.id});
  }
  return page;
}

absl::StatusOr<DeadLetterPage> Messaging::ListDeadLetters(
    const DeadLetterQuery& query) {
  if (query.page_size < 0) return BadPageSize();
  const size_t page_size =
      static_cast<size_t>(EffectivePageSize(query.page_size, 50, 1000));
  const std::string scope =
      absl::StrCat(query.reason, "\n", query.from_agent_id);
  absl::StatusOr<std::vector<std::string>> after =
      DecodePageToken(query.page_token, "dead_letters", scope, 2);
  if (!after.ok()) return after.status();
  // The reason and the sender are decided by the store; the caller's
  // projects only here (a message's project comes from its role key or its
  // agents). Read in keyset chunks from the last row seen until the page is
  // full and one more match proves a next page, or the rows run out.
  storage::DeadLetterPageQuery dl_query;
  if (!query.reason.empty()) dl_query.reason = query.reason;
  if (!query.from_agent_id.empty()) dl_query.from_agent = query.from_agent_id;
  if (!after->empty()) {
    absl::StatusOr<int64_t> failed = TokenInt((*after)[0]);
    if (!failed.ok()) return failed.status();
    dl_query.after = storage::DeadLetterPageQuery::Key{*failed, (*after)[1]};
  }
  dl_query.limit = query.scope.all
                       ? static_cast<int64_t>(page_size) + 1
                       : std::max<int64_t>(page_size + 1, kMinListChunk);
  DeadLetterPage page;
  std::map<std::string, std::optional<std::string>> cache;
  bool more = false;
  while (!more) {
    absl::StatusOr<std::vector<storage::DeadLetterRow>> rows =
        store_->ListDeadLetters(dl_query);
    if (!rows.ok()) return rows.status();
    for (storage::DeadLetterRow& row : *rows) {
      dl_query.after = storage::DeadLetterPageQuery::Key{
          row.dead_letter.failed_at_ms, row.dead_letter.message_id};
      if (!query.scope.all) {
        if (!row.message) continue;  // nothing to place it in a project
        absl::StatusOr<bool> visible =
            InScope(*row.message, query.scope, &cache);
        if (!visible.ok()) return visible.status();
        if (!*visible) continue;
      }
      if (page.dead_letters.size() == page_size) {
        more = true;
        break;
      }
      DeadLetterView view;
      view.dead_letter = std::move(row.dead_letter);
      view.message = std::move(row.message);
      page.dead_letters.push_back(std::move(view));
    }
    if (static_cast<int64_t>(rows->size()) < dl_query.limit) break;
  }
  if (more && !page.dead_letters.empty()) {
    const DeadLetterRecord& d = page.dead_letters.back().dead_letter;
    page.next_page_token = EncodePageToken(
        "dead_letters", scope, {absl::StrCat(d.failed_at_ms), d.message_id});
  }
  return page;
}

absl::StatusOr<TracePage> Messaging::ListTrace(const std::string& trace_id,
                                               int page_size,
                                               const std::string& page_token,
                                               const ProjectScope& scope) {
  if (trace_id.empty() || trace_id.size() > 128) {
    return WithMetadata(InvalidArgumentError("REQUEST_INVALID",
                                             "trace_id must be 1..128 "
                                             "characters"),
                        "field", "trace_id");
  }
  if (page_size < 0) return BadPageSize();
  const size_t size =
      static_cast<size_t>(EffectivePageSize(page_size, 100, 1000));
  absl::StatusOr<std::vector<std::string>> after =
      DecodePageToken(page_token, "trace", trace_id, 2);
  if (!after.ok()) return after.status();
  // The trace's rows in keyset chunks from the last row seen; the caller's
  // projects are checked here (see ListDeadLetters).
  storage::TracePageQuery trace_query;
  trace_query.trace_id = trace_id;
  if (!after->empty()) {
    absl::StatusOr<int64_t> created = TokenInt((*after)[0]);
    if (!created.ok()) return created.status();
    trace_query.after = storage::TracePageQuery::Key{*created, (*after)[1]};
  }
  trace_query.limit = scope.all ? static_cast<int64_t>(size) + 1
                                : std::max<int64_t>(size + 1, kMinListChunk);
  TracePage page;
  std::map<std::string, std::optional<std::string>> cache;
  bool more = false;
  while (!more) {
    absl::StatusOr<std::vector<MessageRecord>> rows =
        store_->ListTraceMessages(trace_query);
    if (!rows.ok()) return rows.status();
    for (MessageRecord& m : *rows) {
      trace_query.after = storage::TracePageQuery::Key{m.created_at_ms, m.id};
      absl::StatusOr<bool> visible = InScope(m, scope, &cache);
      if (!visible.ok()) return visible.status();
      if (!*visible) continue;
      if (page.messages.size() == size) {
        more = true;
        break;
      }
      page.messages.push_back(std::move(m));
    }
    if (static_cast<int64_t>(rows->size()) < trace_query.limit) break;
  }
  if (more && !page.messages.empty()) {
    const MessageRecord& m = page.messages.back();
    page.next_page_token = EncodePageToken(
        "trace", trace_id, {absl::StrCat(m.created_at_ms), m.id});
  }
  return page;
}

absl::StatusOr<std::optional<std::string>> Messaging::AgentProject(
    const std::string& agent_id,
    std::map<std::string, std::optional<std::string>>* cache) {
  auto it = cache->find(agent_id);
  if (it != cache->end()) return it->second;
  std::optional<std::string> project;
  // Addresses such as topic:<name> and the hub's own sender are no agent ids.
  if (ValidateAgentId(agent_id).ok()) {
    absl::StatusOr<AgentView> view = presence_->Get(agent_id);
    if (view.ok()) {
      project = view->record.project_id;
    } else if (!absl::IsNotFound(view.status())) {
      return view.status();
    }
  }
  cache->emplace(agent_id, project);
  return project;
}

absl::StatusOr<bool> Messaging::InScope(
    const MessageRecord& m, const ProjectScope& scope,
    std::map<std::string, std::optional<std::string>>* cache) {
  if (scope.all) return true;
  if (m.role_key_wire.has_value()) {
    absl::StatusOr<RoleKey> key = DecodeRoleKey(*m.role_key_wire);
    if (key.ok() && scope.Allows(key->project_id)) return true;
  }
  for (const std::string* agent : {&m.from_agent, &m.to_agent}) {
    absl::StatusOr<std::optional<std::string>> project =
        AgentProject(*agent, cache);
    if (!project.ok()) return project.status();
    if (scope.Allows(*project)) return true;
  }
  return false;
}

void Messaging::WakeAskers(const MessageRecord& response) {
  absl::MutexLock lock(&ask_mu_);
  auto it = waiters_.find(response.correlation_id);
  if (it == waiters_.end()) return;
  for (Waiter* w : it->second) {
    if (!w->response.has_value()) w->response = response;
  }
  ask_cv_.SignalAll();
}

absl::StatusOr<AskResult> Messaging::Ask(PublishInput input,
                                         absl::Duration wait) {
  if (wait < absl::ZeroDuration() || wait > config_.max_ask_wait) {
    return WithMetadata(InvalidArgumentError("REQUEST_INVALID",
                                             "await_timeout must be 0 .. 30 s"),
                        "field", "await_timeout");
  }
  // The wait counts from the call, not from the end of the request's write:
  // a caller's wait (and a deadline derived from it) includes the write.
  const absl::Time wait_until = absl::Now() + wait;
  input.type = "request";
  // The correlation id is fixed before publishing so the waiter is in place
  // before any answer can be published.
  if (input.correlation_id.empty()) input.correlation_id = ids_->Next();
  const std::string correlation = input.correlation_id;
  Waiter waiter;
  {
    absl::MutexLock lock(&ask_mu_);
    waiters_[correlation].push_back(&waiter);
  }
  absl::StatusOr<PublishResult> published = Publish(input);
  AskResult result;
  {
    absl::MutexLock lock(&ask_mu_);
    if (published.ok() && wait > absl::ZeroDuration()) {
      while (!waiter.response.has_value() && !shutting_down_ &&
             !ask_cv_.WaitWithDeadline(&ask_mu_, wait_until)) {
      }
    }
    result.response = waiter.response;
    auto& list = waiters_[correlation];
    list.remove(&waiter);
    if (list.empty()) waiters_.erase(correlation);
  }
  if (!published.ok()) return published.status();
  result.request = *published;
  if (result.response.has_value() && wait > absl::ZeroDuration()) {
    result.state = AskState::kAnswered;
  } else {
    result.response.reset();
    absl::StatusOr<MessageRecord> now =
        store_->GetMessage(published->message.id);
    const bool delivered =
        now.ok() ? now->status != MessageStatus::kQueued
                 : published->message.status != MessageStatus::kQueued;
    result.state = (wait > absl::ZeroDuration() && delivered)
                       ? AskState::kDelivered
                       : AskState::kQueued;
  }
  return result;
}

void Messaging::Shutdown() {
  {
    absl::MutexLock lock(&ask_mu_);
    shutting_down_ = true;
    ask_cv_.SignalAll();
  }
  acks_.Quiesce();
}

void Messaging::SendDeadLetterNotice(
    const MessageRecord& expired, const storage::ExpiryTransition& transition) {
  if (expired.type != "request" && expired.type != "handoff") return;
  if (!ValidateAgentId(expired.from_agent).ok()) return;
  const int64_t now_ms = UnixMillis(clock_->Now());
  MessageRecord notice;
  notice.id = ids_->Next();
  notice.type = "system";
  notice.from_agent = "hub";
  notice.to_agent = expired.from_agent;
  notice.topic = "handoff.dead_letter";
  notice.priority = 7;
  notice.ttl_ms = 5 * 60 * 1000;
  notice.created_at_ms = now_ms;
  notice.expires_at_ms = now_ms + notice.ttl_ms;
  notice.correlation_id = expired.correlation_id;
  notice.trace_id = expired.trace_id;
  nlohmann::json payload = {{"event", "handoff.dead_letter"},
                            {"message_id", expired.id},
                            {"type", expired.type},
                            {"to", expired.to_agent},
                            {"reason", transition.reason},
                            {"failed_at_ms", transition.failed_at_ms}};
  notice.payload_json = payload.dump();
  notice.status = MessageStatus::kQueued;
  if (!store_->InsertMessage(notice, {expired.from_agent}).ok()) return;
  Push(notice, expired.from_agent, std::nullopt);
}

absl::StatusOr<int> Messaging::SweepExpired() {
  const int64_t now_ms = UnixMillis(clock_->Now());
  absl::StatusOr<std::vector<storage::ExpiryTransition>> claimed =
      store_->SweepExpiredMessages(now_ms);
  if (!claimed.ok()) return claimed.status();
  // Each transition is one claim (fenced by the row's previous status), so a
  // racing sweep never sees the same row: one notice per claimed row.
  for (const storage::ExpiryTransition& t : *claimed) {
    absl::StatusOr<MessageRecord> m = store_->GetMessage(t.message_id);
    if (m.ok()) SendDeadLetterNotice(*m, t);
    if (events_ != nullptr) {
      MessageRecord only_id;
      only_id.id = t.message_id;
      events_->Publish(MessageDeadLettered{m.ok() ? *m : only_id, t});
    }
  }
  return static_cast<int>(claimed->size());
}

void Messaging::OnScopeClosed(const storage::ScopeCloseResult& closed) {
  // Each message was claimed once, by the closing transaction: one notice
  // per message.
  for (const storage::ClaimedMessage& claimed : closed.dead_lettered) {
    SendDeadLetterNotice(claimed.message, claimed.transition);
    if (events_ != nullptr) {
      MessageRecord dead = claimed.message;
      dead.status = MessageStatus::kDeadLetter;
      events_->Publish(MessageDeadLettered{dead, claimed.transition});
    }
  }
}

void Messaging::Tick() {
  const int64_t now_ms = UnixMillis(clock_->Now());
  {
    absl::MutexLock lock(&tick_mu_);
    if (last_sweep_ms_ >= 0 &&
        now_ms - last_sweep_ms_ <
            absl::ToInt64Milliseconds(config_.sweep_interval)) {
      return;
    }
    last_sweep_ms_ = now_ms;
  }
  (void)SweepExpired();
}

}  // namespace hub
