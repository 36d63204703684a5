#include "hub/console/console_hints.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "nlohmann/json.hpp"

namespace hub::console {
namespace {

using nlohmann::json;

constexpr char kHub[] = "h";
constexpr char kAgents[] = "a";
constexpr char kMessages[] = "m";
constexpr char kRoles[] = "r";
constexpr char kJobs[] = "j";
constexpr char kReset[] = "reset";

std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const json& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// Adds `id` to `list` unless `seen` has it.
// Tells every other hub's pages to load their snapshots again.
std::string ResetPayload(const std::string& hub_id) {
  return json({{kHub, hub_id}, {kReset, true}}).dump();
}

void AddOnce(const std::string& id, std::vector<std::string>* list,
             absl::flat_hash_set<std::string>* seen) {
  if (seen->insert(id).second) list->push_back(id);
}

}  // namespace

ConsoleHints::ConsoleHints(ConsoleModel* model, ConsoleHintsOptions options)
    : model_(model),
      options_(std::move(options)),
      link_(options_.signals->NewLink(options_.application_name_prefix +
                                      options_.hub_instance_id)) {
  sender_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hub-con-hints");  // top -H, perf
    RunSender();
  });
  if (model_ == nullptr) return;
  storage::SignalListenOptions listen;
  listen.channels = {kConsoleChannel};
  listen.on_signal = [this](const storage::Signal& s) { OnSignal(s); };
  listen.on_resync = [this] { OnResync(); };
  listener_ = options_.signals->Listen(std::move(listen));
}

ConsoleHints::~ConsoleHints() { Stop(); }

void ConsoleHints::Queue(const std::vector<std::string>& ids,
                         std::vector<std::string>* list,
                         absl::flat_hash_set<std::string>* seen) {
  if (ids.empty()) return;
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  for (const std::string& id : ids) AddOnce(id, list, seen);
  wake_.Signal();
}

void ConsoleHints::AgentsChanged(const std::vector<std::string>& agent_ids) {
  Queue(agent_ids, &agents_, &agent_set_);
}

void ConsoleHints::MessagesChanged(
    const std::vector<std::string>& message_ids) {
  Queue(message_ids, &messages_, &message_set_);
}

void ConsoleHints::RoleChanged(const std::string& wire) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  AddOnce(wire, &roles_, &role_set_);
  wake_.Signal();
}

void ConsoleHints::JobsChanged(const std::vector<std::string>& job_ids) {
  Queue(job_ids, &jobs_, &job_set_);
}

void ConsoleHints::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (listener_ != nullptr) listener_->Stop();
  if (sender_.joinable()) sender_.join();
}

int64_t ConsoleHints::sent() const {
  absl::MutexLock lock(&mu_);
  return sent_;
}

int64_t ConsoleHints::received() const {
  absl::MutexLock lock(&mu_);
  return received_;
}

int64_t ConsoleHints::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

std::vector<std::string> ConsoleHints::Payloads(
    const std::string& hub_id, const std::vector<std::string>& agents,
    const std::vector<std::string>& messages,
    const std::vector<std::string>& roles, const std::vector<std::string>& jobs,
    const ConsoleHintsOptions& limits) {
  // The newest messages only (the list is oldest first).
  const size_t skip = messages.size() > limits.max_messages
                          ? messages.size() - limits.max_messages
                          : 0;
  std::vector<std::string> payloads;
  json current = {{kHub, hub_id}};
  // The JSON text of an id is at most 6 bytes per byte (\u00XX) plus quotes
  // and a comma; ids are short, so the payload is measured as it grows.
  size_t size = current.dump().size();
  auto add = [&](const char* key, const std::string& id) {
    const size_t more = json(id).dump().size() + 1 + std::strlen(key) + 4;
    if (size + more > limits.max_payload && current.size() > 1) {
      payloads.push_back(current.dump());
      current = {{kHub, hub_id}};
      size = current.dump().size();
    }
    current[key].push_back(id);
    size += more;
  };
  for (const std::string& wire : roles) add(kRoles, wire);
  for (const std::string& id : agents) add(kAgents, id);
  for (size_t i = skip; i < messages.size(); ++i) add(kMessages, messages[i]);
  for (const std::string& id : jobs) add(kJobs, id);
  if (current.size() > 1) payloads.push_back(current.dump());
  if (payloads.size() > limits.max_notifications) {
    payloads = {ResetPayload(hub_id)};
  }
  return payloads;
}

void ConsoleHints::RunSender() {
  absl::Time next_batch = absl::InfinitePast();
  // A batch was dropped (the send failed): the next send is a reset, tried
  // again after `retry` even if nothing else changes.
  bool lost = false;
  absl::Duration retry = options_.retry_initial;
  for (;;) {
    std::vector<std::string> agents;
    std::vector<std::string> messages;
    std::vector<std::string> roles;
    std::vector<std::string> jobs;
    {
      absl::MutexLock lock(&mu_);
      // A CondVar, not Mutex::Await: ThreadSanitizer's shim sees its waits
      // (tools/tsan/README.md).
      while (!stopping_ && !lost && agents_.empty() && messages_.empty() &&
             roles_.empty() && jobs_.empty()) {
        wake_.Wait(&mu_);
      }
      while (!stopping_ && absl::Now() < next_batch) {
        wake_.WaitWithDeadline(&mu_, next_batch);
      }
      if (stopping_) break;
      agents.swap(agents_);
      messages.swap(messages_);
      roles.swap(roles_);
      jobs.swap(jobs_);
      agent_set_.clear();
      message_set_.clear();
      role_set_.clear();
      job_set_.clear();
    }
    // After a loss, the reset stands for what was dropped and for this
    // batch too: the pages read their snapshots after it arrives.
    const std::vector<std::string> payloads =
        lost ? std::vector<std::string>{ResetPayload(options_.hub_instance_id)}
             : Payloads(options_.hub_instance_id, agents, messages, roles, jobs,
                        options_);
    absl::Status sent = Send(payloads);
    if (sent.ok()) {
      if (lost && options_.on_caught_up) options_.on_caught_up();
      lost = false;
      retry = options_.retry_initial;
      next_batch = absl::Now() + options_.min_interval;
      absl::MutexLock lock(&mu_);
      sent_ += static_cast<int64_t>(payloads.size());
    } else {
      // Dropped (hints are not the data), to be made good by a reset.
      if (!lost && options_.on_send_failed) options_.on_send_failed(sent);
      lost = true;
      next_batch = absl::Now() + retry;
      retry = std::min(retry * 2, options_.retry_max);
      absl::MutexLock lock(&mu_);
      ++failed_;
    }
  }
  link_.reset();
}

absl::Status ConsoleHints::Send(const std::vector<std::string>& payloads) {
  return link_->Send(kConsoleChannel, payloads);
}

void ConsoleHints::OnSignal(const storage::Signal& s) {
  const json j = json::parse(s.payload, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  auto hub = j.find(kHub);
  if (hub == j.end() || !hub->is_string() ||
      hub->get<std::string>() == options_.hub_instance_id) {
    return;  // not a console hint, or this hub's own
  }
  {
    absl::MutexLock lock(&mu_);
    ++received_;
  }
  if (j.contains(kReset)) {
    model_->Resync();
    return;
  }
  model_->AgentsChanged(Strings(j, kAgents));
  model_->MessagesChanged(Strings(j, kMessages));
  for (const std::string& wire : Strings(j, kRoles)) model_->RoleChanged(wire);
  model_->JobsChanged(Strings(j, kJobs));
}

void ConsoleHints::OnResync() {
  bool again = false;
  {
    absl::MutexLock lock(&mu_);
    again = connected_once_;
    connected_once_ = true;
  }
  // Hints sent while the listener was away are lost: the pages load their
  // snapshots again (the first connect has nothing to make good).
  if (again) model_->Resync();
}

}  // namespace hub::console
