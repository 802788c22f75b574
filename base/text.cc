#include "base/text.h"

#include <cstdarg>
#include <cstdio>

#include "base/units.h"

namespace zplan {

std::string strformat(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  // Most strings fit the stack buffer; a longer one is formatted a second time at its length.
  char buf[512];
  const int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  std::string out;
  if (n > 0 && static_cast<size_t>(n) < sizeof buf) {
    out.assign(buf, static_cast<size_t>(n));
  } else if (n > 0) {
    out.resize(static_cast<size_t>(n));
    std::vsnprintf(out.data(), out.size() + 1, format, again);
  }
  va_end(again);
  return out;
}

std::string gib(double bytes) { return strformat("%.1f GiB", bytes / kGiB); }

}  // namespace zplan
