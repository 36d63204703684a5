#include "storage/reservation_ops.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "status/status.h"
#include "storage/store.h"

namespace hub::storage {

namespace {

// The holder's generation, when it may reserve.
absl::StatusOr<int64_t> HolderGeneration(
    absl::string_view agent_id,
    const std::optional<std::pair<int64_t, std::string>>& row,
    std::optional<int64_t> claimed) {
  if (!row.has_value()) return AgentNotFound(agent_id);
  if (claimed.has_value() && *claimed != row->first) {
    absl::Status s = FailedPreconditionError(
        "STALE_PRESENCE_OWNER",
        absl::StrCat("agent ", ErrorText(agent_id),
                     " was registered again; presence generation ", *claimed,
                     " is superseded by ", row->first));
    s = WithMetadata(s, "agent_id", ErrorText(agent_id));
    return WithMetadata(s, "presence_generation", absl::StrCat(row->first));
  }
  if (row->second == "offline") {
    return WithMetadata(
        FailedPreconditionError(
            "AGENT_OFFLINE",
            absl::StrCat("agent ", ErrorText(agent_id),
                         " is offline; register again to reserve")),
        "agent_id", ErrorText(agent_id));
  }
  return row->first;
}

absl::Status NotHolder(const ReservationRecord& r, absl::string_view agent) {
  absl::Status s = FailedPreconditionError(
      "RESERVATION_NOT_HOLDER",
      absl::StrCat("reservation ", r.reservation_id, " is held by agent ",
                   ErrorText(r.agent_id), ", not ", ErrorText(agent)));
  s = WithMetadata(s, "reservation_id", r.reservation_id);
  return WithMetadata(s, "holder_agent_id", ErrorText(r.agent_id));
}

absl::Status StaleToken(const ReservationRecord& r, int64_t token) {
  absl::Status s = FailedPreconditionError(
      "RESERVATION_STALE_TOKEN",
      absl::StrCat("reservation ", r.reservation_id, " has token ", r.token,
                   ", not ", token));
  s = WithMetadata(s, "reservation_id", r.reservation_id);
  return WithMetadata(s, "token", absl::StrCat(r.token));
}

// The live reservation `id` held by `agent` under `token`, else the reason.
absl::StatusOr<ReservationRecord> LoadHeld(ReservationRows& rows,
                                           absl::string_view id,
                                           absl::string_view agent,
                                           std::optional<int64_t> token,
                                           int64_t now_ms) {
  absl::StatusOr<std::optional<std::pair<ReservationRecord, bool>>> row =
      rows.Load(id, now_ms);
  if (!row.ok()) return row.status();
  if (!row->has_value() || !(*row)->second) return ReservationNotFound(id);
  ReservationRecord& r = (*row)->first;
  if (!agent.empty() && r.agent_id != agent) return NotHolder(r, agent);
  if (token.has_value() && r.token != *token) return StaleToken(r, *token);
  return std::move(r);
}

// Lowers the project's row count by `removed` (token row locked).
absl::Status Forget(ReservationRows& rows, absl::string_view project,
                    std::pair<int64_t, int64_t> counter, int64_t removed) {
  if (removed == 0) return absl::OkStatus();
  return rows.SetProject(project, counter.first,
                         std::max<int64_t>(counter.second - removed, 0));
}

// Ends the reservations among `ids` that are not live at `now_ms`: each is
// read (for the change log), deleted only if still ended, and logged as
// expired (its TTL passed) or holder_gone. Returns {expired, holder_gone}.
// REQUIRES: their project's token row locked.
absl::StatusOr<std::pair<int64_t, int64_t>> EndEnded(
    ReservationRows& rows, const std::vector<std::string>& ids,
    int64_t now_ms) {
  std::pair<int64_t, int64_t> counts = {0, 0};
  for (const std::string& id : ids) {
    absl::StatusOr<std::optional<std::pair<ReservationRecord, bool>>> row =
        rows.Load(id, now_ms);
    if (!row.ok()) return row.status();
    if (!row->has_value() || (*row)->second) continue;  // gone, or live
    absl::StatusOr<int64_t> n = rows.Delete({id}, now_ms);
    if (!n.ok()) return n.status();
    if (*n == 0) continue;
    const ReservationRecord& r = (*row)->first;
    const bool expired = r.expires_at_ms <= now_ms;
    if (absl::Status s =
            rows.AppendChange(expired ? ReservationChangeKind::kExpired
                                      : ReservationChangeKind::kHolderGone,
                              r, now_ms);
        !s.ok()) {
      return s;
    }
    ++(expired ? counts.first : counts.second);
  }
  return counts;
}

}  // namespace

absl::StatusOr<ReservationOutcome> ReserveWith(ReservationRows& rows,
                                               const ReservationRequest& r) {
  absl::StatusOr<std::optional<std::pair<int64_t, std::string>>> holder =
      rows.Holder(r.agent_id);
  if (!holder.ok()) return holder.status();
  absl::StatusOr<int64_t> generation =
      HolderGeneration(r.agent_id, *holder, r.presence_generation);
  if (!generation.ok()) return generation.status();

  // The lock first: every later statement sees what the previous holder of
  // the project's token row committed.
  absl::StatusOr<std::pair<int64_t, int64_t>> counter =
      rows.LockProject(r.project_id);
  if (!counter.ok()) return counter.status();
  CandidateKeys keys = CandidateKeysFor(r.patterns);
  keys.exclusive_only = !r.exclusive;
  absl::StatusOr<std::vector<ReservationCandidate>> candidates =
      rows.Candidates(r.project_id, keys, r.now_ms);
  if (!candidates.ok()) return candidates.status();
  // Waiters of other agents ahead in the queue conflict like reservations
  // of their mode, so the first waiter for a path gets it first; for a
  // reserve that does not wait, every one is ahead.
  absl::StatusOr<std::vector<ReservationWaiter>> waiters =
      rows.Waiters(r.project_id, r.now_ms);
  if (!waiters.ok()) return waiters.status();
  int64_t my_seq = std::numeric_limits<int64_t>::max();
  const ReservationWaiter* me = nullptr;
  if (r.waiter_id.has_value()) {
    for (const ReservationWaiter& w : *waiters) {
      if (w.waiter_id == *r.waiter_id) {
        my_seq = w.seq;
        me = &w;
      }
    }
  }
  const bool queued = me != nullptr;
  std::set<std::string> ahead;
  for (const ReservationWaiter& w : *waiters) {
    if (w.agent_id == r.agent_id || w.seq >= my_seq) continue;
    ahead.insert(w.waiter_id);
    for (const std::string& p : w.patterns) {
      candidates->push_back(ReservationCandidate{
          w.waiter_id, p, w.agent_id, w.exclusive, 0, w.deadline_ms, true});
    }
  }
  ReservationOutcome outcome;
  outcome.conflicts = DecideConflicts(r.patterns, r.exclusive, r.agent_id,
                                      *candidates, r.max_conflicts);
  for (ReservationConflict& c : outcome.conflicts) {
    c.waiting = ahead.count(c.reservation_id) > 0;
  }
  if (!outcome.conflicts.empty()) {
    // Nothing written, unless a queued waiter now waits behind something
    // else: its row and a `waiting` change name what (one guarded UPDATE
    // and one insert, neither can fail on expected input).
    if (queued) {
      ReservationWaiter now_waiting = *me;
      now_waiting.waits_for = WaitsFor(outcome.conflicts);
      if (now_waiting.waits_for != me->waits_for) {
        absl::StatusOr<int64_t> n =
            rows.SetWaitsFor(now_waiting.waiter_id, now_waiting.waits_for);
        if (!n.ok()) return n.status();
        if (absl::Status s =
                rows.AppendChange(ReservationChangeKind::kWaiting,
                                  WaiterAsRecord(now_waiting), r.now_ms);
            !s.ok()) {
          return s;
        }
        outcome.waiter_updated = true;
      }
    }
    return outcome;
  }

  if (r.max_per_agent > 0) {
    absl::StatusOr<int64_t> mine =
        rows.CountHeld(r.project_id, r.agent_id, *generation, r.now_ms);
    if (!mine.ok()) return mine.status();
    if (*mine >= r.max_per_agent) {
      return WithMetadata(
          LimitExceededError(
              "max_reservations_per_agent", r.max_per_agent,
              absl::StrCat("agent ", ErrorText(r.agent_id), " already holds ",
                           *mine, " reservations in project ",
                           ErrorText(r.project_id))),
          "agent_id", ErrorText(r.agent_id));
    }
  }
  // Reservations judged ended here are deleted in this transaction, so no
  // later write (a renew with an older clock reading) can bring one back
  // beside the reservation granted now.
  std::set<std::string> ended;
  for (const ReservationCandidate& c : *candidates) {
    if (!c.live) ended.insert(c.reservation_id);
  }
  int64_t held = counter->second;
  if (!ended.empty()) {
    absl::StatusOr<std::pair<int64_t, int64_t>> n = EndEnded(
        rows, std::vector<std::string>(ended.begin(), ended.end()), r.now_ms);
    if (!n.ok()) return n.status();
    held = std::max<int64_t>(held - n->first - n->second, 0);
  }
  if (r.max_per_project > 0 && held >= r.max_per_project) {
    // At the limit the count may still hold ended rows: drop them, count
    // again (exact under the lock), then decide.
    absl::StatusOr<std::vector<EndedReservation>> project_ended =
        rows.Ended(r.now_ms, held, r.project_id);
    if (!project_ended.ok()) return project_ended.status();
    std::vector<std::string> ids;
    for (const EndedReservation& e : *project_ended) {
      ids.push_back(e.reservation_id);
    }
    absl::StatusOr<std::pair<int64_t, int64_t>> n =
        EndEnded(rows, ids, r.now_ms);
    if (!n.ok()) return n.status();
    absl::StatusOr<int64_t> rows_left = rows.CountRows(r.project_id);
    if (!rows_left.ok()) return rows_left.status();
    held = *rows_left;
    if (held >= r.max_per_project) {
      return WithMetadata(
          LimitExceededError(
              "max_reservations_per_project", r.max_per_project,
              absl::StrCat("project ", ErrorText(r.project_id),
                           " already holds ", held, " reservations")),
          "project_id", ErrorText(r.project_id));
    }
  }

  ReservationRecord record;
  record.reservation_id = r.reservation_id;
  record.project_id = r.project_id;
  record.agent_id = r.agent_id;
  record.presence_generation = *generation;
  record.exclusive = r.exclusive;
  record.token = counter->first + 1;
  record.reason = r.reason;
  record.created_at_ms = r.now_ms;
  record.expires_at_ms = r.now_ms + r.ttl_ms;
  record.patterns = r.patterns;
  if (absl::Status s = rows.Insert(record); !s.ok()) return s;
  if (absl::Status s = rows.SetProject(r.project_id, record.token, held + 1);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          rows.AppendChange(ReservationChangeKind::kGranted, record, r.now_ms);
      !s.ok()) {
    return s;
  }
  if (queued) {  // granted: out of the queue
    absl::StatusOr<int64_t> n = rows.DeleteWaiter(*r.waiter_id);
    if (!n.ok()) return n.status();
  }
  outcome.granted = std::move(record);
  return outcome;
}

absl::StatusOr<std::vector<ReservationConflict>> CheckWith(
    ReservationRows& rows, const ReservationCheck& check) {
  CandidateKeys keys = CandidateKeysFor(check.patterns, check.literal);
  keys.exclusive_only = !check.exclusive;
  absl::StatusOr<std::vector<ReservationCandidate>> candidates =
      rows.Candidates(check.project_id, keys, check.now_ms);
  if (!candidates.ok()) return candidates.status();
  return DecideConflicts(check.patterns, check.exclusive,
                         check.agent_id.value_or(""), *candidates,
                         check.max_conflicts, check.literal);
}

absl::StatusOr<ReservationRecord> RenewWith(ReservationRows& rows,
                                            const ReservationRenewal& r) {
  absl::StatusOr<ReservationRecord> held =
      LoadHeld(rows, r.reservation_id, r.agent_id, r.token, r.now_ms);
  if (!held.ok()) return held.status();
  // Serialized with the project's reserves: a reserve that judged this
  // reservation ended deleted it, and this renew then changes nothing.
  absl::StatusOr<std::pair<int64_t, int64_t>> counter =
      rows.LockProject(held->project_id);
  if (!counter.ok()) return counter.status();
  const int64_t expires = r.now_ms + r.ttl_ms;
  absl::StatusOr<bool> extended =
      rows.Extend(r.reservation_id, r.agent_id, r.token, r.now_ms, expires);
  if (!extended.ok()) return extended.status();
  if (!*extended) return ReservationNotFound(r.reservation_id);
  held->expires_at_ms = expires;
  if (absl::Status s =
          rows.AppendChange(ReservationChangeKind::kRenewed, *held, r.now_ms);
      !s.ok()) {
    return s;
  }
  return held;
}

absl::StatusOr<std::optional<ReservationRecord>> ReleaseWith(
    ReservationRows& rows, const ReservationRelease& r) {
  absl::StatusOr<ReservationRecord> held =
      LoadHeld(rows, r.reservation_id, r.agent_id, r.token, r.now_ms);
  if (!held.ok()) return held.status();
  absl::StatusOr<std::pair<int64_t, int64_t>> counter =
      rows.LockProject(held->project_id);
  if (!counter.ok()) return counter.status();
  std::vector<std::string> left;
  for (const std::string& p : held->patterns) {
    if (std::find(r.patterns.begin(), r.patterns.end(), p) ==
        r.patterns.end()) {
      left.push_back(p);
    }
  }
  if (!r.patterns.empty() && !left.empty()) {
    if (left.size() == held->patterns.size()) return held;  // none held
    absl::StatusOr<int64_t> n =
        rows.DeletePatterns(r.reservation_id, r.patterns);
    if (!n.ok()) return n.status();
    held->patterns = std::move(left);
    if (absl::Status s = rows.AppendChange(ReservationChangeKind::kNarrowed,
                                           *held, r.now_ms);
        !s.ok()) {
      return s;
    }
    return held;
  }
  absl::StatusOr<int64_t> n =
      r.agent_id.empty()
          ? rows.Delete({r.reservation_id}, std::nullopt)
          : rows.DeleteHeld(r.reservation_id, r.agent_id, r.token);
  if (!n.ok()) return n.status();
  if (*n == 0) return ReservationNotFound(r.reservation_id);
  if (absl::Status s = Forget(rows, held->project_id, *counter, *n); !s.ok()) {
    return s;
  }
  if (absl::Status s = rows.AppendChange(r.agent_id.empty()
                                             ? ReservationChangeKind::kForced
                                             : ReservationChangeKind::kReleased,
                                         *held, r.now_ms);
      !s.ok()) {
    return s;
  }
  return std::optional<ReservationRecord>();
}

absl::StatusOr<int64_t> ReleaseAgentWith(ReservationRows& rows,
                                         absl::string_view agent_id,
                                         std::optional<int64_t> generation,
                                         int64_t now_ms) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> mine =
      rows.OfAgent(agent_id, generation);
  if (!mine.ok()) return mine.status();
  std::map<std::string, std::vector<std::string>> by_project;
  for (auto& [id, project] : *mine) by_project[project].push_back(id);
  int64_t total = 0;
  for (const auto& [project, ids] : by_project) {  // token rows in order
    absl::StatusOr<std::pair<int64_t, int64_t>> counter =
        rows.LockProject(project);
    if (!counter.ok()) return counter.status();
    // Read first, for the change log: under the token row, what exists
    // now is what the delete removes.
    std::vector<ReservationRecord> ending;
    for (const std::string& id : ids) {
      absl::StatusOr<std::optional<std::pair<ReservationRecord, bool>>> row =
          rows.Load(id, now_ms);
      if (!row.ok()) return row.status();
      if (row->has_value()) ending.push_back(std::move((*row)->first));
    }
    absl::StatusOr<int64_t> n = rows.Delete(ids, std::nullopt);
    if (!n.ok()) return n.status();
    if (absl::Status s = Forget(rows, project, *counter, *n); !s.ok()) {
      return s;
    }
    for (const ReservationRecord& r : ending) {
      if (absl::Status s =
              rows.AppendChange(ReservationChangeKind::kHolderGone, r, now_ms);
          !s.ok()) {
        return s;
      }
    }
    total += *n;
  }
  return total;
}

absl::StatusOr<std::optional<ReservationRecord>> GetWith(
    ReservationRows& rows, absl::string_view reservation_id, int64_t now_ms) {
  absl::StatusOr<std::optional<std::pair<ReservationRecord, bool>>> row =
      rows.Load(reservation_id, now_ms);
  if (!row.ok()) return row.status();
  if (!row->has_value() || !(*row)->second) {
    return std::optional<ReservationRecord>();
  }
  return std::optional<ReservationRecord>(std::move((*row)->first));
}

namespace {

// Fills each listed reservation's waiters: the queued waiters of other
// agents of its project that conflict with it. One read of the queue per
// project listed (normally empty), then DecideConflicts per pair.
absl::Status AddWaiters(ReservationRows& rows,
                        std::vector<ReservationRecord>& listed,
                        int64_t now_ms) {
  std::map<std::string, std::vector<ReservationWaiter>> queues;
  for (ReservationRecord& r : listed) {
    auto [it, fresh] = queues.try_emplace(r.project_id);
    if (fresh) {
      absl::StatusOr<std::vector<ReservationWaiter>> waiters =
          rows.Waiters(r.project_id, now_ms);
      if (!waiters.ok()) return waiters.status();
      it->second = *std::move(waiters);
    }
    if (it->second.empty()) continue;
    for (const ReservationWaiter& w : it->second) {
      if (!RequestConflictsWith(w.patterns, w.exclusive, w.agent_id, r)) {
        continue;
      }
      ++r.waiter_count;
      if (r.waiting_agent_ids.size() < kMaxListedWaitingAgents &&
          std::find(r.waiting_agent_ids.begin(), r.waiting_agent_ids.end(),
                    w.agent_id) == r.waiting_agent_ids.end()) {
        r.waiting_agent_ids.push_back(w.agent_id);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReservationRecord>> ListRecords(
    ReservationRows& rows, const ReservationFilter& filter) {
  if (!filter.overlapping.has_value()) return rows.Page(filter);
  // Reservations with a pattern overlapping the filter's: found through
  // the prefix index like conflicts, then read one by one.
  ReservationCheck check;
  check.project_id = filter.project_id.value_or("");
  check.patterns = {*filter.overlapping};
  check.now_ms = filter.now_ms;
  absl::StatusOr<std::vector<ReservationCandidate>> candidates =
      rows.Candidates(check.project_id, CandidateKeysFor(check.patterns),
                      check.now_ms);
  if (!candidates.ok()) return candidates.status();
  std::vector<ReservationConflict> overlapping =
      DecideConflicts(check.patterns, /*exclusive=*/true, /*self=*/"",
                      *candidates, candidates->size());
  std::set<std::string> ids;
  for (const ReservationConflict& c : overlapping) {
    if (c.reservation_id > filter.after_reservation_id) {
      ids.insert(c.reservation_id);
    }
  }
  std::vector<ReservationRecord> out;
  for (const std::string& id : ids) {
    if (static_cast<int64_t>(out.size()) >= filter.limit) break;
    absl::StatusOr<std::optional<ReservationRecord>> r =
        GetWith(rows, id, filter.now_ms);
    if (!r.ok()) return r.status();
    if (!r->has_value()) continue;
    if (filter.agent_id.has_value() && (*r)->agent_id != *filter.agent_id) {
      continue;
    }
    out.push_back(std::move(**r));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ReservationRecord>> ListWith(
    ReservationRows& rows, const ReservationFilter& filter) {
  absl::StatusOr<std::vector<ReservationRecord>> listed =
      ListRecords(rows, filter);
  if (!listed.ok()) return listed.status();
  if (absl::Status s = AddWaiters(rows, *listed, filter.now_ms); !s.ok()) {
    return s;
  }
  return listed;
}

absl::StatusOr<std::pair<int64_t, int64_t>> DeleteEndedWith(
    ReservationRows& rows, const std::vector<EndedReservation>& ended,
    int64_t now_ms) {
  std::map<std::string, std::vector<const EndedReservation*>> by_project;
  for (const EndedReservation& e : ended)
    by_project[e.project_id].push_back(&e);
  std::pair<int64_t, int64_t> counts = {0, 0};
  for (const auto& [project, list] : by_project) {
    absl::StatusOr<std::pair<int64_t, int64_t>> counter =
        rows.LockProject(project);
    if (!counter.ok()) return counter.status();
    std::vector<std::string> ids;
    for (const EndedReservation* e : list) ids.push_back(e->reservation_id);
    absl::StatusOr<std::pair<int64_t, int64_t>> n = EndEnded(rows, ids, now_ms);
    if (!n.ok()) return n.status();
    counts.first += n->first;
    counts.second += n->second;
    const int64_t removed = n->first + n->second;
    if (absl::Status s = Forget(rows, project, *counter, removed); !s.ok()) {
      return s;
    }
  }
  return counts;
}

absl::StatusOr<ReservationChangePage> ReadChangesWith(ReservationRows& rows,
                                                      int64_t after_seq,
                                                      int64_t limit) {
  if (limit <= 0) {
    return InvalidArgumentError(
        "REQUEST_INVALID", "a reservation change page needs a limit above 0");
  }
  // The head first: every change up to it is visible to the page's read,
  // which may run on a later snapshot (a read connection runs each
  // statement on its own), so an empty page means no change after
  // `after_seq` up to the head, never a hole.
  ReservationChangePage page;
  absl::StatusOr<int64_t> head = rows.ChangeHead();
  if (!head.ok()) return head.status();
  page.head = *head;
  absl::StatusOr<std::vector<ReservationChange>> changes =
      rows.ChangesAfter(after_seq, limit);
  if (!changes.ok()) return changes.status();
  page.changes = *std::move(changes);
  if (!page.changes.empty()) {
    page.head = std::max(page.head, page.changes.back().seq);
  }
  return page;
}

absl::StatusOr<ReservationSnapshot> SnapshotWith(
    ReservationRows& rows, const ReservationFilter& filter) {
  ReservationSnapshot snapshot;
  absl::StatusOr<int64_t> head = rows.ChangeHead();
  if (!head.ok()) return head.status();
  snapshot.head = *head;
  ReservationFilter page = filter;
  page.overlapping.reset();
  page.after_reservation_id.clear();
  page.limit = 1000;
  while (true) {
    absl::StatusOr<std::vector<ReservationRecord>> part = rows.Page(page);
    if (!part.ok()) return part.status();
    const bool last = static_cast<int64_t>(part->size()) < page.limit;
    if (!part->empty()) page.after_reservation_id = part->back().reservation_id;
    for (ReservationRecord& r : *part) {
      snapshot.reservations.push_back(std::move(r));
    }
    if (last) break;
  }
  // The queue is normally empty: one read of it, whole.
  absl::StatusOr<std::vector<ReservationWaiter>> waiters =
      filter.project_id.has_value()
          ? rows.Waiters(*filter.project_id, filter.now_ms)
          : rows.Waiters(std::nullopt, filter.now_ms);
  if (!waiters.ok()) return waiters.status();
  for (ReservationWaiter& w : *waiters) {
    if (filter.agent_id.has_value() && w.agent_id != *filter.agent_id) {
      continue;
    }
    snapshot.waiters.push_back(std::move(w));
  }
  return snapshot;
}

absl::StatusOr<ReservationWaiter> EnqueueWaiterWith(
    ReservationRows& rows, const ReservationWaiter& waiter) {
  absl::StatusOr<std::optional<std::pair<int64_t, std::string>>> holder =
      rows.Holder(waiter.agent_id);
  if (!holder.ok()) return holder.status();
  absl::StatusOr<int64_t> generation =
      HolderGeneration(waiter.agent_id, *holder, std::nullopt);
  if (!generation.ok()) return generation.status();
  // Under the token row: seqs follow the order in which the project's
  // writes take it, on every hub.
  absl::StatusOr<std::pair<int64_t, int64_t>> counter =
      rows.LockProject(waiter.project_id);
  if (!counter.ok()) return counter.status();
  absl::StatusOr<int64_t> last = rows.LastWaiterSeq(waiter.project_id);
  if (!last.ok()) return last.status();
  ReservationWaiter w = waiter;
  w.seq = *last + 1;
  w.presence_generation = *generation;
  if (absl::Status s = rows.InsertWaiter(w); !s.ok()) return s;
  if (absl::Status s = rows.AppendChange(ReservationChangeKind::kWaiting,
                                         WaiterAsRecord(w), w.created_at_ms);
      !s.ok()) {
    return s;
  }
  return w;
}

absl::StatusOr<bool> RemoveWaiterWith(ReservationRows& rows,
                                      absl::string_view waiter_id,
                                      int64_t now_ms) {
  absl::StatusOr<std::optional<ReservationWaiter>> w =
      rows.LoadWaiter(waiter_id);
  if (!w.ok()) return w.status();
  if (!w->has_value()) return false;
  absl::StatusOr<std::pair<int64_t, int64_t>> counter =
      rows.LockProject((*w)->project_id);
  if (!counter.ok()) return counter.status();
  absl::StatusOr<int64_t> n = rows.DeleteWaiter(waiter_id);
  if (!n.ok()) return n.status();
  if (*n == 0) return false;
  if (absl::Status s = rows.AppendChange(ReservationChangeKind::kWaitEnded,
                                         WaiterAsRecord(**w), now_ms);
      !s.ok()) {
    return s;
  }
  return true;
}

std::string JoinLoggedPatterns(const std::vector<std::string>& patterns) {
  return absl::StrJoin(patterns, "\n");
}

std::vector<std::string> SplitLoggedPatterns(absl::string_view joined) {
  if (joined.empty()) return {};
  return absl::StrSplit(joined, '\n');
}

}  // namespace hub::storage
