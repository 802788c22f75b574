#include "planner/text.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"
#include "base/units.h"
#include "sim/memory_model.h"

namespace zplan::planner {

std::string shortfall_size(double bytes) {
  if (bytes >= 0.1 * kGiB) return gib(bytes);
  return strformat("%.0f MiB", std::max(1.0, std::ceil(bytes / kMiB)));
}

std::string si(double v) {
  if (v >= 1e9) return strformat("%.2f G", v / 1e9);
  if (v >= 1e6) return strformat("%.2f M", v / 1e6);
  if (v >= 1e4) return strformat("%.1f k", v / 1e3);
  return strformat("%.0f", v);
}

std::string category_words(int category, sim::Precision precision, sim::Precision master) {
  std::string s = sim::category_name(static_cast<sim::Category>(category));
  const std::string dtype = sim::precision_name(precision);
  if (s == "params16") return dtype + " params";
  // The master rows in the master's dtype (OptimizerConfig::master_dtype), which the fp16/bf16
  // flags set whatever the training dtype is.
  const std::string mdtype = sim::precision_name(master);
  if (s == "master32") return mdtype + " master weights";
  if (s == "grads32") return master == sim::Precision::kFp32 ? "fp32 grads" : mdtype + " master grads";
  for (char& c : s) {
    if (c == '_') c = ' ';
  }
  return s;
}

}  // namespace zplan::planner
