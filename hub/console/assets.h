// The console's static files (hub/console/assets/), compiled into hubd by
// embed_assets, so that the page needs no build step, no CDN and no files
// beside the binary.
#ifndef HUB_HUB_CONSOLE_ASSETS_H_
#define HUB_HUB_CONSOLE_ASSETS_H_

#include "absl/strings/string_view.h"

namespace hub::console {

struct Asset {
  absl::string_view name;  // file name, e.g. "console.js"
  absl::string_view content_type;
  absl::string_view body;
};

// The asset of that file name; nullptr when there is none.
const Asset* FindAsset(absl::string_view name);

}  // namespace hub::console

#endif  // HUB_HUB_CONSOLE_ASSETS_H_
