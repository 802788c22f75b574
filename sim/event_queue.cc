#include "sim/event_queue.h"

#include <algorithm>

namespace zplan::sim {

EventQueue::EventQueue(uint64_t shuffle_seed) : shuffle_(shuffle_seed != 0), rng_(shuffle_seed) {}

void EventQueue::reset(uint64_t shuffle_seed) {
  heap_.clear();
  next_seq_ = 0;
  shuffle_ = shuffle_seed != 0;
  rng_.seed(shuffle_seed);
}

void EventQueue::push(SimTime at, uint32_t target, uint32_t version, uint8_t kind) {
  // In shuffle mode a random sequence number orders equal-time events arbitrarily (but
  // reproducibly for a seed); distinct times are unaffected.
  uint64_t seq = shuffle_ ? rng_() : next_seq_++;
  heap_.push_back(Event{at, seq, target, version, kind});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

Event EventQueue::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Event e = heap_.back();
  heap_.pop_back();
  return e;
}

}  // namespace zplan::sim
