// How a database file is named to clients: its absolute path and the
// triflux-compatible store fingerprint derived from it.
#ifndef HUB_HUB_STORE_IDENTITY_H_
#define HUB_HUB_STORE_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hub {

// The absolute, lexically normalized form of `path` (relative paths are taken
// from the working directory). Fails only if the working directory is gone.
absl::StatusOr<std::string> AbsoluteDatabasePath(absl::string_view path);

// "sqlite:" + lower-case hex SHA-256 of `absolute_path`: stable across
// restarts on the same file, different for different files (TRIFLUX-HUB §2.7).
std::string SqliteStoreFingerprint(absl::string_view absolute_path);

}  // namespace hub

#endif  // HUB_HUB_STORE_IDENTITY_H_
