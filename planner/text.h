// Small text helpers the planner's explanations and report share: printf into a std::string and
// memory sizes in GiB (binary units, as nvidia-smi and PyTorch report memory).
#ifndef ZPLAN_PLANNER_TEXT_H_
#define ZPLAN_PLANNER_TEXT_H_

#include <string>

namespace zplan::planner {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string strf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "12.3 GiB"
std::string gib(double bytes);
// A shortfall: gib(), or "42 MiB" below 0.1 GiB, where gib() would print "0.0 GiB".
std::string shortfall_size(double bytes);

// "1.23 M", "456.7 k", "89": token rates and counts.
std::string si(double value);

// A memory category in words: "optimizer states", "gathered params".
std::string category_words(int category);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_TEXT_H_
