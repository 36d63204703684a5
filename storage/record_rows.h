// The engine-neutral half of reading hub's rows: the column lists every
// store selects, in this order, and the readers that turn a row of them into
// a record. A row is anything with Text/Int/OptText/OptInt(column): SQLite's
// Stmt (storage/sqlite/sqlite_rows.h) or a PostgreSQL result row
// (storage/pg/pg_rows.h). Internal to storage/.
#ifndef HUB_STORAGE_RECORD_ROWS_H_
#define HUB_STORAGE_RECORD_ROWS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "storage/store.h"

namespace hub::storage::rows {

// The state stored as `word`. The schema's CHECKs admit only the enums'
// words (storage/stored_words_test.cc walks them on both engines), so the
// fallback, the state with the least authority, is never read from a row
// hub or triflux wrote.
inline AgentStatus StoredAgentStatus(absl::string_view word) {
  return ParseAgentStatus(word).value_or(AgentStatus::kOffline);
}
inline RoleState StoredRoleState(absl::string_view word) {
  return ParseRoleState(word).value_or(RoleState::kQuarantined);
}
inline MessageStatus StoredMessageStatus(absl::string_view word) {
  return ParseMessageStatus(word).value_or(MessageStatus::kDeadLetter);
}

// The stored words of `states`, in their order.
inline std::vector<std::string> StoredWords(
    const std::vector<RoleState>& states) {
  std::vector<std::string> words;
  words.reserve(states.size());
  for (RoleState state : states) words.emplace_back(RoleStateName(state));
  return words;
}

#define HUB_AGENT_COLUMNS                                              \
  "agent_id, cli, pid, capabilities_json, topics_json, last_seen_ms, " \
  "lease_expires_ms, presence_generation, status, metadata_json, "     \
  "project_id, session_id, host_id, transport_locators_json, lease_ttl_ms"

#define HUB_ROLE_COLUMNS                                                     \
  "role_key_wire, project_id, role_kind, scope_id, state, holder_agent_id, " \
  "previous_holder_agent_id, epoch, activation_seq, activation_id, "         \
  "activation_deadline_ms, holder_lease_expires_ms, charter_version, "       \
  "charter_acked_epoch, retry_count, next_probe_ms, blocked_reason, "        \
  "last_transition_ms, last_reason, version"

#define HUB_CANDIDATE_COLUMNS                                            \
  "role_key_wire, agent_id, source, priority, transport_locators_json, " \
  "consecutive_probe_failures, excluded_until_ms, last_probe_ms, "       \
  "last_probe_code, updated_at_ms"

#define HUB_MESSAGE_COLUMNS                                                  \
  "id, type, from_agent, to_agent, topic, priority, ttl_ms, created_at_ms, " \
  "expires_at_ms, correlation_id, trace_id, payload_json, status, "          \
  "role_key_wire"

#define HUB_CLOSED_SCOPE_COLUMNS                                           \
  "project_id, scope_id, role_key_wire, closed_at_ms, closed_by, reason, " \
  "dead_lettered_count"

template <typename Row>
AgentRecord ReadAgentRow(const Row& s) {
  AgentRecord a;
  a.agent_id = s.Text(0);
  a.cli = s.Text(1);
  a.pid = s.OptInt(2);
  a.capabilities_json = s.Text(3);
  a.topics_json = s.Text(4);
  a.last_seen_ms = s.Int(5);
  a.lease_expires_ms = s.Int(6);
  a.presence_generation = s.Int(7);
  a.status = StoredAgentStatus(s.Text(8));
  a.metadata_json = s.Text(9);
  a.project_id = s.OptText(10);
  a.session_id = s.OptText(11);
  a.host_id = s.OptText(12);
  a.transport_locators_json = s.Text(13);
  a.lease_ttl_ms = s.OptInt(14);
  return a;
}

template <typename Row>
RoleRecord ReadRoleRow(const Row& s) {
  RoleRecord r;
  r.role_key_wire = s.Text(0);
  r.project_id = s.Text(1);
  r.role_kind = s.Text(2);
  r.scope_id = s.Text(3);
  r.state = StoredRoleState(s.Text(4));
  r.holder_agent_id = s.OptText(5);
  r.previous_holder_agent_id = s.OptText(6);
  r.epoch = s.Int(7);
  r.activation_seq = s.Int(8);
  r.activation_id = s.OptText(9);
  r.activation_deadline_ms = s.OptInt(10);
  r.holder_lease_expires_ms = s.OptInt(11);
  r.charter_version = s.OptText(12);
  r.charter_acked_epoch = s.OptInt(13);
  r.retry_count = s.Int(14);
  r.next_probe_ms = s.OptInt(15);
  r.blocked_reason = s.OptText(16);
  r.last_transition_ms = s.Int(17);
  r.last_reason = s.Text(18);
  r.version = s.Int(19);
  return r;
}

template <typename Row>
CandidateRecord ReadCandidateRow(const Row& s) {
  CandidateRecord c;
  c.role_key_wire = s.Text(0);
  c.agent_id = s.Text(1);
  c.source = s.Text(2);
  c.priority = s.Int(3);
  c.transport_locators_json = s.Text(4);
  c.consecutive_probe_failures = s.Int(5);
  c.excluded_until_ms = s.OptInt(6);
  c.last_probe_ms = s.OptInt(7);
  c.last_probe_code = s.OptText(8);
  c.updated_at_ms = s.Int(9);
  return c;
}

template <typename Row>
MessageRecord ReadMessageRow(const Row& s) {
  MessageRecord m;
  m.id = s.Text(0);
  m.type = s.Text(1);
  m.from_agent = s.Text(2);
  m.to_agent = s.Text(3);
  m.topic = s.Text(4);
  m.priority = s.Int(5);
  m.ttl_ms = s.Int(6);
  m.created_at_ms = s.Int(7);
  m.expires_at_ms = s.Int(8);
  m.correlation_id = s.Text(9);
  m.trace_id = s.Text(10);
  m.payload_json = s.Text(11);
  m.status = StoredMessageStatus(s.Text(12));
  m.role_key_wire = s.OptText(13);
  return m;
}

template <typename Row>
ClosedScopeRecord ReadClosedScopeRow(const Row& s) {
  ClosedScopeRecord r;
  r.project_id = s.Text(0);
  r.scope_id = s.Text(1);
  r.role_key_wire = s.Text(2);
  r.closed_at_ms = s.Int(3);
  r.closed_by = s.Text(4);
  r.reason = s.Text(5);
  r.dead_lettered_count = s.OptInt(6);
  return r;
}

#define HUB_INBOX_COLUMNS \
  "message_id, agent_id, delivered_at_ms, acked_at_ms, attempts"

template <typename Row>
InboxRecord ReadInboxRow(const Row& s) {
  InboxRecord r;
  r.message_id = s.Text(0);
  r.agent_id = s.Text(1);
  r.delivered_at_ms = s.OptInt(2);
  r.acked_at_ms = s.OptInt(3);
  r.attempts = s.Int(4);
  return r;
}

// The dead-letter columns (message_id, reason, failed_at_ms, last_error)
// from column `first` on.
template <typename Row>
DeadLetterRecord ReadDeadLetterRow(const Row& s, int first = 0) {
  DeadLetterRecord d;
  d.message_id = s.Text(first);
  d.reason = s.Text(first + 1);
  d.failed_at_ms = s.Int(first + 2);
  d.last_error = s.OptText(first + 3);
  return d;
}

}  // namespace hub::storage::rows

#endif  // HUB_STORAGE_RECORD_ROWS_H_
