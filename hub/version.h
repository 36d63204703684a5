// hub's release version, reported by GetStatus and the startup log line.
#ifndef HUB_HUB_VERSION_H_
#define HUB_HUB_VERSION_H_

namespace hub {

inline constexpr char kHubVersion[] = "0.1.0";

}  // namespace hub

#endif  // HUB_HUB_VERSION_H_
