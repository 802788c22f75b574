#include "sim/event_queue.h"

#include <algorithm>

namespace zplan::sim {

void EventQueue::reset(uint32_t targets, uint64_t shuffle_seed) {
  heap_.clear();
  pos_.assign(targets, kAbsent);
  key_.resize(targets);
  next_seq_ = 0;
  shuffle_ = shuffle_seed != 0;
  rng_.seed(shuffle_seed);
}

void EventQueue::schedule(uint32_t target, SimTime at) {
  // In shuffle mode a random sequence number orders equal-time events arbitrarily (but
  // reproducibly for a seed); distinct times are unaffected.
  key_[target] = Key{at, shuffle_ ? static_cast<uint32_t>(rng_()) : next_seq_++};
  uint32_t i = pos_[target];
  if (i == kAbsent) {
    i = static_cast<uint32_t>(heap_.size());
    heap_.push_back(target);
    pos_[target] = i;
    sift_up(i);
  } else {
    sift_up(i);
    sift_down(pos_[target]);
  }
}

void EventQueue::cancel(uint32_t target) {
  uint32_t i = pos_[target];
  if (i == kAbsent) return;
  pos_[target] = kAbsent;
  uint32_t last = heap_.back();
  heap_.pop_back();
  if (i == heap_.size()) return;
  place(i, last);
  sift_up(i);
  sift_down(pos_[last]);
}

Event EventQueue::pop() {
  uint32_t target = heap_.front();
  Event e{key_[target].at, target};
  pos_[target] = kAbsent;
  uint32_t last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) {
    place(0, last);
    sift_down(0);
  }
  return e;
}

void EventQueue::pending(std::vector<Event>* out) const {
  const size_t first = out->size();
  for (uint32_t target : heap_) out->push_back(Event{key_[target].at, target});
  std::sort(out->begin() + static_cast<ptrdiff_t>(first), out->end(),
            [&](const Event& x, const Event& y) { return before(x.target, y.target); });
}

void EventQueue::shift(uint32_t target_delta, SimDuration time_delta) {
  // The heap's shape is kept: shifting every key by the same amount keeps their order. The keys
  // are read out first, since a new target may be an old one still to be moved.
  scratch_.clear();
  for (uint32_t target : heap_) {
    scratch_.push_back(key_[target]);
    pos_[target] = kAbsent;
  }
  for (uint32_t i = 0; i < heap_.size(); ++i) {
    const uint32_t target = heap_[i] + target_delta;
    key_[target] = Key{scratch_[i].at + time_delta, scratch_[i].seq};
    place(i, target);
  }
}

void EventQueue::sift_up(uint32_t i) {
  uint32_t t = heap_[i];
  while (i > 0) {
    uint32_t parent = (i - 1) / 2;
    if (!before(t, heap_[parent])) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, t);
}

void EventQueue::sift_down(uint32_t i) {
  uint32_t t = heap_[i];
  const uint32_t n = static_cast<uint32_t>(heap_.size());
  while (true) {
    uint32_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
    if (!before(heap_[child], t)) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, t);
}

}  // namespace zplan::sim
