// EventQueue: the pending events of a simulation, ordered by (time, sequence number).
//
// The sequence number increases with every (re)scheduling, so events at the same time pop in the
// order they were scheduled (FIFO), as ns-3's EventKey and ninja's edge-id tie-break do. That
// makes every run deterministic without relying on how a container happens to order equal keys.
// A test-only mode draws the sequence numbers from a seeded generator instead, which shuffles
// equal-time events; results that do not change under it do not depend on tie order.
//
// Each target (a task) has at most one pending event: scheduling a target that already has one
// moves it (an indexed binary heap with decrease/increase-key). The heap therefore holds only the
// running tasks' next events -- a handful -- instead of every rescheduled event ever pushed.
#ifndef ZPLAN_SIM_EVENT_QUEUE_H_
#define ZPLAN_SIM_EVENT_QUEUE_H_

#include <cstdint>
#include <random>
#include <vector>

#include "sim/time.h"

namespace zplan::sim {

struct Event {
  SimTime at;
  uint32_t target = 0;
};

class EventQueue {
 public:
  // seed == 0: FIFO ties. seed != 0: equal-time events pop in a seeded random order.
  explicit EventQueue(uint64_t shuffle_seed = 0) { reset(0, shuffle_seed); }

  // Empties the queue for targets 0 .. targets-1 and restarts the sequence (keeping the buffers).
  void reset(uint32_t targets, uint64_t shuffle_seed);

  // Schedules target's event at `at`, replacing the one it had pending, if any.
  void schedule(uint32_t target, SimTime at);
  // Removes target's pending event, if any.
  void cancel(uint32_t target);
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // REQUIRES: !empty(). The time of the earliest event.
  SimTime top_time() const { return key_[heap_.front()].at; }
  // REQUIRES: !empty(). Removes and returns the earliest event.
  Event pop();
  // The pending events in the order they would pop (appended to *out).
  void pending(std::vector<Event>* out) const;
  // Moves every pending event to target + target_delta and time + time_delta, keeping their
  // order. REQUIRES: the new targets are below the reset() count.
  void shift(uint32_t target_delta, SimDuration time_delta);

 private:
  struct Key {
    SimTime at;
    uint32_t seq = 0;
  };
  static constexpr uint32_t kAbsent = ~0u;

  bool before(uint32_t a, uint32_t b) const {
    const Key& x = key_[a];
    const Key& y = key_[b];
    return x.at != y.at ? x.at < y.at : x.seq < y.seq;
  }
  void sift_up(uint32_t i);
  void sift_down(uint32_t i);
  void place(uint32_t i, uint32_t target) {
    heap_[i] = target;
    pos_[target] = i;
  }

  std::vector<uint32_t> heap_;  // targets; heap_[0] is the earliest
  std::vector<uint32_t> pos_;   // target -> index in heap_, or kAbsent
  std::vector<Key> key_;        // target -> its pending event's key
  std::vector<Key> scratch_;    // shift()'s copy of the pending keys
  uint32_t next_seq_ = 0;       // a run schedules far fewer than 2^32 events
  bool shuffle_ = false;
  std::mt19937_64 rng_;
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_EVENT_QUEUE_H_
