// Small text helpers the planner's explanations and report share, beyond base/text.h: shortfalls,
// rates and memory categories in words.
#ifndef ZPLAN_PLANNER_TEXT_H_
#define ZPLAN_PLANNER_TEXT_H_

#include <string>

#include "sim/ds_config/zero_config.h"

namespace zplan::planner {

// A shortfall: gib() (base/text.h), or "42 MiB" below 0.1 GiB, where gib() would print "0.0 GiB".
std::string shortfall_size(double bytes);

// "1.23 M", "456.7 k", "89": token rates and counts.
std::string si(double value);

// A memory category in words: "optimizer states", "gathered params"; the model-dtype parameters
// by the dtype they are in ("bf16 params", "fp32 params" when training in fp32).
std::string category_words(int category, sim::Precision precision,
                           sim::Precision master = sim::Precision::kFp32);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_TEXT_H_
