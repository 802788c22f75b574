// EventQueue: the pending events of a simulation, ordered by (time, sequence number).
//
// The sequence number increases with every push, so events at the same time pop in the order
// they were pushed (FIFO), as ns-3's EventKey and ninja's edge-id tie-break do. That makes every
// run deterministic without relying on how a container happens to order equal keys. A test-only
// mode draws the sequence numbers from a seeded generator instead, which shuffles equal-time
// events; results that do not change under it do not depend on tie order.
//
// An event carries a target (a task or link index) and a version: the owner bumps its version to
// cancel an event it has rescheduled, and skips popped events whose version is stale.
#ifndef ZPLAN_SIM_EVENT_QUEUE_H_
#define ZPLAN_SIM_EVENT_QUEUE_H_

#include <cstdint>
#include <random>
#include <vector>

#include "sim/time.h"

namespace zplan::sim {

struct Event {
  SimTime at;
  uint64_t seq = 0;
  uint32_t target = 0;
  uint32_t version = 0;
  uint8_t kind = 0;
};

class EventQueue {
 public:
  // seed == 0: FIFO ties. seed != 0: equal-time events pop in a seeded random order.
  explicit EventQueue(uint64_t shuffle_seed = 0);

  void push(SimTime at, uint32_t target, uint32_t version, uint8_t kind);
  bool empty() const { return heap_.empty(); }
  // REQUIRES: !empty(). The time of the earliest event.
  SimTime top_time() const { return heap_.front().at; }
  size_t size() const { return heap_.size(); }
  // REQUIRES: !empty(). Removes and returns the earliest event.
  Event pop();
  void clear() { heap_.clear(); }
  // Empties the queue and restarts the sequence (keeping the buffer) with a new shuffle seed.
  void reset(uint64_t shuffle_seed);
  void reserve(size_t n) { heap_.reserve(n); }

 private:
  // Min-heap on (at, seq): std::push_heap with "greater" puts the smallest key on top.
  static bool later(const Event& a, const Event& b) {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }

  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
  bool shuffle_ = false;
  std::mt19937_64 rng_;
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_EVENT_QUEUE_H_
