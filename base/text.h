// Text helpers every library and the command line share: printf into a std::string, and memory
// sizes in GiB (binary units, base/units.h).
#ifndef ZPLAN_BASE_TEXT_H_
#define ZPLAN_BASE_TEXT_H_

#include <string>

namespace zplan {

// printf-style formatting into a std::string, of any length.
std::string strformat(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "12.3 GiB": bytes in GiB with one decimal.
std::string gib(double bytes);

}  // namespace zplan

#endif  // ZPLAN_BASE_TEXT_H_
