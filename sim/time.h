// Simulated time: an integer count of nanoseconds on a clock of its own.
//
// SimTime (a point) and SimDuration (a span) are std::chrono types, so the compiler keeps points
// and spans apart and checks unit conversions. Cost models compute in double seconds; they are
// converted to SimDuration exactly once, by to_duration(), rounding to nearest (never truncating,
// which would bias every task short). int64 nanoseconds cover +-292 years.
#ifndef ZPLAN_SIM_TIME_H_
#define ZPLAN_SIM_TIME_H_

#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdint>

namespace zplan::sim {

struct SimClock {
  using rep = int64_t;
  using period = std::nano;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<SimClock>;
  static constexpr bool is_steady = true;
};

using SimDuration = SimClock::duration;
using SimTime = SimClock::time_point;

// The longest a simulated step graph may take, with margin: no schedule of a graph lasts longer
// than the sum of its tasks' durations at full rate (every resource shares work-conservingly),
// and StepGraph::finalize refuses graphs whose sum exceeds this, so no time the engine computes
// comes near the clock's +-292 years (9.2e9 s). 1e9 s is 31.7 years.
inline constexpr double kMaxGraphSeconds = 1e9;

// REQUIRES: seconds >= 0 and finite.
inline SimDuration to_duration(double seconds) {
  assert(seconds >= 0 && std::isfinite(seconds));
  // Round half up; for non-negative values this is llround without the libm call.
  return SimDuration(static_cast<int64_t>(seconds * 1e9 + 0.5));
}

inline double to_seconds(SimDuration d) { return static_cast<double>(d.count()) * 1e-9; }
inline double to_seconds(SimTime t) { return to_seconds(t.time_since_epoch()); }

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_TIME_H_
