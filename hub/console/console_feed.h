// ConsoleFeed: the ordered changes the console's pages follow live (one
// Server-Sent Events stream per open page, docs/design/console.md).
//
// Responsible for numbering changes (1, 2, 3, ... in the order posted),
// keeping the newest ones in a bounded ring so that a page that reconnects
// resumes where it stopped, and waking the streams that wait. Not
// responsible for what a change says (ConsoleModel renders it) nor for who
// may see it (each change names its project; the stream filters). A page
// whose cursor fell out of the ring is told to reload its snapshot.
// Thread-safe.
#ifndef HUB_HUB_CONSOLE_CONSOLE_FEED_H_
#define HUB_HUB_CONSOLE_CONSOLE_FEED_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hub::console {

struct ConsoleChange {
  int64_t seq = 0;
  // "agent", "role", "message" or "event".
  std::string kind;
  // The projects it belongs to (a message: its role's, its sender's and its
  // recipient's); seen by a principal of any of them. Empty: none (seen
  // only by principals of every project).
  std::vector<std::string> projects;
  // A JSON object: the row as it is now, or the event.
  std::string json;
};

struct ConsoleBatch {
  std::vector<ConsoleChange> changes;  // seq ascending, all > the cursor
  // Changes after the cursor were dropped from the ring: reload.
  bool lost = false;
  // The feed was closed (hub shutting down).
  bool closed = false;
  int64_t head = 0;  // the newest seq posted
};

class ConsoleFeed {
 public:
  // Keeps the newest `capacity` (> 0) changes.
  explicit ConsoleFeed(size_t capacity = 4096) : capacity_(capacity) {}
  ConsoleFeed(const ConsoleFeed&) = delete;
  ConsoleFeed& operator=(const ConsoleFeed&) = delete;

  // Appends a change and wakes the waiting streams; returns its seq.
  int64_t Post(std::string kind, std::vector<std::string> projects,
               std::string json);
  // The newest seq posted (0 before the first).
  int64_t head() const;
  // The changes after `after` (at most `limit`), waiting up to `timeout` for
  // the first one. Returns at once when there are some, when some were lost,
  // or when the feed is closed.
  ConsoleBatch WaitAfter(int64_t after, absl::Duration timeout,
                         size_t limit = 512);
  // Wakes every waiter for good: WaitAfter returns closed from now on.
  void Close();

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  // Signalled on every post and on Close. A CondVar, not Mutex::Await:
  // ThreadSanitizer's shim sees its waits (tools/tsan/README.md).
  absl::CondVar changed_;
  std::deque<ConsoleChange> ring_ ABSL_GUARDED_BY(mu_);
  int64_t head_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hub::console

#endif  // HUB_HUB_CONSOLE_CONSOLE_FEED_H_
