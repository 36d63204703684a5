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
// Not responsible for publishing to it or for electing it (the workers do).
// Thread-safe; one supervising thread per agent.
#ifndef TOOLS_CHAOS_ATTACHED_AGENT_H_
#define TOOLS_CHAOS_ATTACHED_AGENT_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "clients/cpp/hub_client.h"
#include "clients/cpp/presence_session.h"
#include "tools/chaos/ledger.h"

namespace hub::chaos {

class AttachedAgent {
 public:
  // Starts on hub `home` of `addresses`. `ledger` must outlive the agent.
  AttachedAgent(Ledger* ledger, const std::vector<std::string>& addresses,
                std::string agent_id, int home,
                std::vector<hub::v1::RoleKey> candidate_of = {});
  // Stops.
  ~AttachedAgent();

  void Start();
  // Ends the session without deregistering (the agent stays registered,
  // its pending messages wait) and joins the thread.
  void Stop();

  const std::string& agent_id() const { return agent_id_; }
  // Sessions started on another hub than the previous one's.
  int64_t moves() const { return moves_.load(); }
  // Activations of it that a hub confirmed.
  int64_t activations() const { return activations_.load(); }

 private:
  void Supervise();
  std::unique_ptr<client::PresenceSession> NewSession(int hub);
  // Makes the agent a candidate of every role of candidate_of_ through hub
  // `hub`; true when all are.
  bool BecomeCandidate(int hub);

  Ledger* const ledger_;
  const std::string agent_id_;
  const std::vector<hub::v1::RoleKey> candidate_of_;
  std::vector<std::unique_ptr<client::HubClient>> clients_;
  int hub_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> moves_{0};
  std::atomic<int64_t> activations_{0};
  std::thread thread_;
};

}  // namespace hub::chaos

#endif  // TOOLS_CHAOS_ATTACHED_AGENT_H_
