#include "registry/clock.h"

namespace hub {

RealClock* RealClock::Default() {
  static RealClock* clock = new RealClock();
  return clock;
}

}  // namespace hub
