// AttachedAgent: an agent of the chaos load that stays present through a
// presence stream (client::PresenceSession) and takes the messages the hubs
// push to it, recording each in the Ledger as delivered (and its
// registrations as acknowledged). When its session has not been attached
// for a while (its hub is dead, paused or without a seat), it starts a new
// session on the next hub, as an agent whose hub went away would.
//
// It is also a candidate of the roles it is given: it makes itself one
// through the first hub it attaches to, accepts every activation a hub
// pushes to it, and records each one the hub confirmed in the Ledger.
//
// Every message pushed to it goes to the PushLog too, with the hub and the
// moment its stream attached, and so does every end of a stream. A stream
// cut (Cut) ends the session as a lost connection would, and attaches again
// after a while.
//
// A sticky agent never leaves its hub and waits as long as it takes for it
// to answer: its stream lives through a pause of its hub, so what the hub
// does with it once resumed can be checked (push_log.h).
//
// Not responsible for publishing to it or for electing it (the workers do).
// Thread-safe; one supervising thread per agent.
#ifndef TOOLS_CHAOS_ATTACHED_AGENT_H_
#define TOOLS_CHAOS_ATTACHED_AGENT_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "clients/cpp/hub_client.h"
#include "clients/cpp/presence_session.h"
#include "tools/chaos/ledger.h"
#include "tools/chaos/push_log.h"

namespace hub::chaos {

class AttachedAgent {
 public:
  // Starts on hub `home` of `addresses`. `ledger` and `push_log` (which may
  // be null) must outlive the agent.
  AttachedAgent(Ledger* ledger, PushLog* push_log,
                const std::vector<std::string>& addresses, std::string agent_id,
                int home, bool sticky,
                std::vector<hub::v1::RoleKey> candidate_of = {});
  // Stops.
  ~AttachedAgent();

  void Start();
  // Ends the session without deregistering (the agent stays registered,
  // its pending messages wait) and joins the thread.
  void Stop();

  // Cuts the stream: ends the session without deregistering (the hub sees
  // the stream end and starts the agent's detach grace), waits `away`, then
  // starts a new session on hub `hub` (a sticky agent: on its own). Returns
  // at once, with the hub it will attach to.
  int Cut(int hub, absl::Duration away);

  const std::string& agent_id() const { return agent_id_; }
  // The epoch of `role_key_wire` its current session holds (confirmed by a
  // hub and not superseded by anything the hubs told it), or nullopt.
  std::optional<int64_t> HeldEpoch(const std::string& role_key_wire) const;
  // Stream cuts made so far.
  int64_t cuts() const { return cuts_.load(); }
  // Sessions started on another hub than the previous one's.
  int64_t moves() const { return moves_.load(); }
  // Activations of it that a hub confirmed.
  int64_t activations() const { return activations_.load(); }

 private:
  void Supervise();
  std::unique_ptr<client::PresenceSession> NewSession(int hub);
  // Replaces the current session with `next` (null: none); stops the old one.
  void Replace(std::unique_ptr<client::PresenceSession> next);
  // Makes the agent a candidate of every role of candidate_of_ through hub
  // `hub`; true when all are.
  bool BecomeCandidate(int hub);

  Ledger* const ledger_;
  PushLog* const push_log_;
  const std::string agent_id_;
  const int home_;
  const bool sticky_;
  const std::vector<hub::v1::RoleKey> candidate_of_;
  std::vector<std::unique_ptr<client::HubClient>> clients_;
  int hub_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> moves_{0};
  std::atomic<int64_t> activations_{0};
  std::atomic<int64_t> cuts_{0};
  // A requested cut: the hub to go to next (-1: none) and how long to wait.
  std::atomic<int> cut_to_{-1};
  std::atomic<int64_t> cut_away_ms_{0};
  // Set and replaced by the supervising thread only; read by HeldEpoch.
  mutable absl::Mutex mu_;
  std::unique_ptr<client::PresenceSession> session_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace hub::chaos

#endif  // TOOLS_CHAOS_ATTACHED_AGENT_H_
