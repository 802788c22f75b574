#include "planner/text.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <vector>

#include "sim/memory_model.h"

namespace zplan::planner {

std::string strf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out;
  if (n > 0) {
    std::vector<char> buf(static_cast<size_t>(n) + 1);
    std::vsnprintf(buf.data(), buf.size(), format, args);
    out.assign(buf.data(), static_cast<size_t>(n));
  }
  va_end(args);
  return out;
}

std::string gib(double bytes) { return strf("%.1f GiB", bytes / kGiB); }

std::string shortfall_size(double bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  if (bytes >= 0.1 * kGiB) return gib(bytes);
  return strf("%.0f MiB", std::max(1.0, std::ceil(bytes / kMiB)));
}

std::string si(double v) {
  if (v >= 1e9) return strf("%.2f G", v / 1e9);
  if (v >= 1e6) return strf("%.2f M", v / 1e6);
  if (v >= 1e4) return strf("%.1f k", v / 1e3);
  return strf("%.0f", v);
}

std::string category_words(int category) {
  std::string s = sim::category_name(static_cast<sim::Category>(category));
  if (s == "params16") return "16-bit params";
  if (s == "master32") return "fp32 master weights";
  if (s == "grads32") return "fp32 grads";
  for (char& c : s) {
    if (c == '_') c = ' ';
  }
  return s;
}

}  // namespace zplan::planner
