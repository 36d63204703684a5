#include "storage/reservations.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paths/path_pattern.h"
#include "status/status.h"

namespace hub::storage {

using paths::PathPattern;

namespace {

// The request's patterns by literal prefix, so that each candidate is
// compared only with the patterns it can overlap: two patterns overlap only
// when one's prefix is a component prefix of the other's (paths/
// path_pattern.h; checked by its property test).
class MinePatterns {
 public:
  MinePatterns(const std::vector<std::string>& mine, bool literal) {
    for (const std::string& p : mine) {
      absl::StatusOr<PathPattern> pattern =
          literal ? PathPattern::ParseLiteral(p) : PathPattern::Parse(p);
      if (!pattern.ok()) continue;
      const size_t i = parsed_.size();
      parsed_.push_back(*std::move(pattern));
      const std::string& prefix = parsed_.back().literal_prefix();
      if (prefix.empty()) {
        everywhere_.push_back(i);
      } else {
        by_prefix_[prefix].push_back(i);
        sorted_.emplace_back(prefix, i);
      }
    }
    std::sort(sorted_.begin(), sorted_.end());
  }

  const PathPattern& operator[](size_t i) const { return parsed_[i]; }

  // The request patterns that can overlap a held pattern whose literal
  // prefix is `q`, in request order.
  std::vector<size_t> Near(absl::string_view q) const {
    if (q.empty()) {
      std::vector<size_t> all(parsed_.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      return all;
    }
    std::vector<size_t> out = everywhere_;
    for (const std::string& a : paths::PrefixAndAncestors(q)) {  // at/above q
      if (a.empty()) continue;
      auto it = by_prefix_.find(a);
      if (it != by_prefix_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
      }
    }
    const paths::PrefixRange below = paths::BelowPrefix(q);  // below q
    for (auto it = std::lower_bound(sorted_.begin(), sorted_.end(),
                                    std::make_pair(below.low, size_t{0}));
         it != sorted_.end() && it->first < below.high; ++it) {
      out.push_back(it->second);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

 private:
  std::vector<PathPattern> parsed_;
  std::vector<size_t> everywhere_;
  std::map<std::string, std::vector<size_t>> by_prefix_;
  std::vector<std::pair<std::string, size_t>> sorted_;
};

}  // namespace

ReservationRecord WaiterAsRecord(const ReservationWaiter& w) {
  ReservationRecord r;
  r.reservation_id = w.waiter_id;
  r.project_id = w.project_id;
  r.agent_id = w.agent_id;
  r.presence_generation = w.presence_generation;
  r.exclusive = w.exclusive;
  r.created_at_ms = w.created_at_ms;
  r.expires_at_ms = w.deadline_ms;
  r.patterns = w.patterns;
  r.waits_for = w.waits_for;
  return r;
}

std::vector<std::string> WaitsFor(
    const std::vector<ReservationConflict>& conflicts) {
  std::vector<std::string> ids;
  for (const ReservationConflict& c : conflicts) {
    if (ids.size() >= kMaxWaiterBlockers) break;
    if (std::find(ids.begin(), ids.end(), c.reservation_id) == ids.end()) {
      ids.push_back(c.reservation_id);
    }
  }
  return ids;
}

bool RequestConflictsWith(const std::vector<std::string>& patterns,
                          bool exclusive, absl::string_view self,
                          const ReservationRecord& held) {
  std::vector<ReservationCandidate> candidates;
  candidates.reserve(held.patterns.size());
  for (const std::string& pattern : held.patterns) {
    ReservationCandidate& c = candidates.emplace_back();
    c.reservation_id = held.reservation_id;
    c.pattern = pattern;
    c.agent_id = held.agent_id;
    c.exclusive = held.exclusive;
    c.token = held.token;
    c.expires_at_ms = held.expires_at_ms;
    c.live = true;
  }
  return !DecideConflicts(patterns, exclusive, self, candidates, 1).empty();
}

std::vector<ReservationConflict> DecideConflicts(
    const std::vector<std::string>& mine, bool exclusive,
    absl::string_view self, const std::vector<ReservationCandidate>& candidates,
    size_t max_conflicts, bool literal) {
  if (max_conflicts == 0) max_conflicts = 1;
  const MinePatterns parsed(mine, literal);
  // One order on every engine: by reservation, then its pattern.
  std::vector<const ReservationCandidate*> sorted;
  sorted.reserve(candidates.size());
  for (const ReservationCandidate& c : candidates) sorted.push_back(&c);
  std::sort(sorted.begin(), sorted.end(),
            [](const ReservationCandidate* x, const ReservationCandidate* y) {
              return std::tie(x->reservation_id, x->pattern) <
                     std::tie(y->reservation_id, y->pattern);
            });
  std::vector<ReservationConflict> out;
  std::set<std::pair<std::string, size_t>> seen;
  for (const ReservationCandidate* candidate : sorted) {
    const ReservationCandidate& c = *candidate;
    if (!c.live) continue;
    if (!self.empty() && c.agent_id == self) continue;
    if (!exclusive && !c.exclusive) continue;  // shared beside shared
    absl::StatusOr<PathPattern> held = PathPattern::Parse(c.pattern);
    if (!held.ok()) continue;  // not written by a hub: cannot be matched
    for (size_t i : parsed.Near(held->literal_prefix())) {
      if (!parsed[i].Overlaps(*held)) continue;
      if (!seen.insert({c.reservation_id, i}).second) continue;
      out.push_back({c.reservation_id, c.agent_id, c.exclusive, c.token,
                     c.expires_at_ms, c.pattern, parsed[i].text()});
      if (out.size() >= max_conflicts) return out;
    }
  }
  return out;
}

CandidateKeys CandidateKeysFor(const std::vector<std::string>& patterns,
                               bool literal) {
  CandidateKeys keys;
  std::set<std::string> above;
  std::set<std::string> below;
  for (const std::string& p : patterns) {
    const std::string prefix = ReservationPrefix(p, literal);
    if (prefix.empty()) {
      keys.whole_project = true;
      continue;
    }
    for (std::string& a : paths::PrefixAndAncestors(prefix)) {
      above.insert(std::move(a));
    }
    below.insert(prefix);
  }
  keys.at_or_above.assign(above.begin(), above.end());
  for (const std::string& b : below) {
    paths::PrefixRange r = paths::BelowPrefix(b);
    keys.below.emplace_back(std::move(r.low), std::move(r.high));
  }
  return keys;
}

std::string ReservationPrefix(absl::string_view pattern, bool literal) {
  absl::StatusOr<PathPattern> p = literal ? PathPattern::ParseLiteral(pattern)
                                          : PathPattern::Parse(pattern);
  return p.ok() ? p->literal_prefix() : "";
}

absl::Status ReservationConflictError(
    const std::vector<ReservationConflict>& conflicts) {
  if (conflicts.empty()) return absl::OkStatus();
  const ReservationConflict& c = conflicts.front();
  absl::Status s = FailedPreconditionError(
      "RESERVATION_CONFLICT",
      c.waiting
          ? absl::StrCat("pattern \"", ErrorText(c.pattern),
                         "\" overlaps the waiting reserve ", c.reservation_id,
                         " of agent ", ErrorText(c.agent_id), " (\"",
                         ErrorText(c.held_pattern),
                         "\"), which is ahead in the queue")
          : absl::StrCat("pattern \"", ErrorText(c.pattern),
                         "\" conflicts with ",
                         c.exclusive ? "exclusive" : "shared", " reservation ",
                         c.reservation_id, " of agent ", ErrorText(c.agent_id),
                         " (\"", ErrorText(c.held_pattern), "\", token ",
                         c.token, ", expires at ", c.expires_at_ms, " ms)"));
  s = WithMetadata(s, "reservation_id", ErrorText(c.reservation_id));
  s = WithMetadata(s, "holder_agent_id", ErrorText(c.agent_id));
  s = WithMetadata(s, "held_pattern", ErrorText(c.held_pattern));
  s = WithMetadata(s, "pattern", ErrorText(c.pattern));
  s = WithMetadata(s, "expires_at_ms", absl::StrCat(c.expires_at_ms));
  s = WithMetadata(s, "token", absl::StrCat(c.token));
  s = WithMetadata(s, "conflicts", absl::StrCat(conflicts.size()));
  if (c.waiting) s = WithMetadata(s, "waiting", "true");
  return s;
}

absl::Status ReservationNotFound(absl::string_view reservation_id) {
  return WithMetadata(NotFoundError("RESERVATION_NOT_FOUND",
                                    absl::StrCat("no live reservation ",
                                                 ErrorText(reservation_id))),
                      "reservation_id", ErrorText(reservation_id));
}

namespace {
constexpr std::pair<ReservationChangeKind, absl::string_view> kChangeWords[] = {
    {ReservationChangeKind::kGranted, "granted"},
    {ReservationChangeKind::kRenewed, "renewed"},
    {ReservationChangeKind::kNarrowed, "narrowed"},
    {ReservationChangeKind::kReleased, "released"},
    {ReservationChangeKind::kForced, "forced"},
    {ReservationChangeKind::kExpired, "expired"},
    {ReservationChangeKind::kHolderGone, "holder_gone"},
    {ReservationChangeKind::kWaiting, "waiting"},
    {ReservationChangeKind::kWaitEnded, "wait_ended"},
};
}  // namespace

absl::string_view ReservationChangeWord(ReservationChangeKind kind) {
  for (const auto& [k, word] : kChangeWords) {
    if (k == kind) return word;
  }
  return "granted";
}

std::optional<ReservationChangeKind> ReservationChangeKindOf(
    absl::string_view word) {
  for (const auto& [k, w] : kChangeWords) {
    if (w == word) return k;
  }
  return std::nullopt;
}

}  // namespace hub::storage
