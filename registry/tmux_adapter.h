// The tmux transport adapter: probes a locator's session with
// `tmux has-session` and wakes it by typing the activation envelope into the
// session (`send-keys -l`, then Enter). argv only, never a shell, so nothing
// in a locator or an envelope is ever interpreted by one.
#ifndef HUB_REGISTRY_TMUX_ADAPTER_H_
#define HUB_REGISTRY_TMUX_ADAPTER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "registry/transport_adapter.h"

namespace hub {

struct TmuxAdapterOptions {
  // The tmux program (looked up in PATH).
  std::string tmux = "tmux";
  // Which tmux server a locator's mux_server_id names: the arguments that
  // select it (e.g. {"-S", "/run/user/1000/tmux-1000/default"}), or nullopt
  // when this host does not know the server (the probe then reports
  // target_not_found). Default: the server tmux would use by default when
  // mux_server_id is "default", else a socket of that name (`-L`).
  std::function<std::optional<std::vector<std::string>>(
      const std::string& mux_server_id)>
      server_args;
};

class TmuxAdapter final : public TransportAdapter {
 public:
  explicit TmuxAdapter(TmuxAdapterOptions options = {});

  absl::string_view kind() const override { return kKindTmux; }
  TransportResult Probe(const TransportLocator& locator,
                        absl::Duration timeout) override;
  TransportResult Wake(const TransportLocator& locator,
                       absl::string_view activation_json,
                       absl::Duration timeout) override;

 private:
  // tmux + server selection, or a failure result when the locator is not a
  // tmux locator or names an unknown server.
  std::optional<std::vector<std::string>> Command(
      const TransportLocator& l, TransportResult* failure) const;

  TmuxAdapterOptions options_;
};

}  // namespace hub

#endif  // HUB_REGISTRY_TMUX_ADAPTER_H_
