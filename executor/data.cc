#include "executor/data.h"

#include <cmath>

namespace zplan::executor {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

float synthetic_uniform(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t h = splitmix(seed ^ splitmix(a * 0x632BE59BD9B4E019ULL + b));
  return static_cast<float>(static_cast<double>(h >> 40) * (2.0 / 16777216.0) - 1.0);
}

float initial_weight(uint64_t seed, int id, int64_t i, bool mlp, bool square_weight,
                     int64_t hidden) {
  const double fan_in = mlp ? static_cast<double>(hidden) : 50.0;
  double scale = 1.0 / std::sqrt(fan_in);
  if (!mlp || !square_weight) scale *= 0.5;
  return static_cast<float>(
      scale * synthetic_uniform(seed, static_cast<uint64_t>(id) + 1, static_cast<uint64_t>(i)));
}

float mlp_input(uint64_t seed, uint64_t row, int64_t c) {
  return synthetic_uniform(seed, 1'000'000'000 + row, static_cast<uint64_t>(c));
}

float mlp_target(uint64_t seed, uint64_t row, int64_t c) {
  return 0.5f * synthetic_uniform(seed, 2'000'000'000 + row, static_cast<uint64_t>(c));
}

}  // namespace zplan::executor
