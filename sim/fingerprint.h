// Fingerprinter: 128-bit fingerprints of sequences of 64-bit words (step graphs, configurations),
// for caches that must tell different inputs apart with overwhelming probability (~2^-128 per
// pair) without comparing them whole.
#ifndef ZPLAN_SIM_FINGERPRINT_H_
#define ZPLAN_SIM_FINGERPRINT_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace zplan::sim {

struct GraphFingerprint {
  uint64_t lo = 0, hi = 0;
  bool operator==(const GraphFingerprint& o) const { return lo == o.lo && hi == o.hi; }
};

struct GraphFingerprintHash {
  size_t operator()(const GraphFingerprint& f) const { return static_cast<size_t>(f.lo); }
};

// Four accumulators taking 64-bit words in turn, each a round of xxHash64 (so they run in
// parallel, not in one chain of multiplies); two differently seeded mixes of them make 128 bits.
class Fingerprinter {
 public:
  void add(uint64_t w) {
    uint64_t& acc = lane_[n_++ & 3];
    acc = rotl(acc + w * kPrime2, 31) * kPrime1;
  }
  void add(double d) {
    uint64_t w;
    std::memcpy(&w, &d, sizeof w);
    add(w);
  }
  void add(int64_t v) { add(static_cast<uint64_t>(v)); }
  void add(int v) { add(static_cast<uint64_t>(static_cast<int64_t>(v))); }
  void add(bool b) { add(static_cast<uint64_t>(b)); }
  void add(const std::string& s) {
    add(static_cast<uint64_t>(s.size()));
    for (size_t i = 0; i < s.size(); i += 8) {
      uint64_t w = 0;
      std::memcpy(&w, s.data() + i, std::min<size_t>(8, s.size() - i));
      add(w);
    }
  }
  GraphFingerprint finish() const {
    uint64_t lo = rotl(lane_[0], 1) + rotl(lane_[1], 7) + rotl(lane_[2], 12) + rotl(lane_[3], 18);
    uint64_t hi = lane_[0] ^ rotl(lane_[1], 23) ^ rotl(lane_[2], 41) ^ rotl(lane_[3], 57);
    return {fmix(lo ^ n_), fmix(hi + kPrime1 * n_)};
  }

 private:
  static constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
  static constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  // MurmurHash3's finalizer.
  static uint64_t fmix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    k ^= k >> 33;
    return k;
  }
  uint64_t lane_[4] = {0x60EA27EEADC0B5D6ull, 0xC2B2AE3D27D4EB4Full, 0x0ull, 0x61C8864E7A143579ull};
  uint64_t n_ = 0;
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_FINGERPRINT_H_
