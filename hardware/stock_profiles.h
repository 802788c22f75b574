// The stock hardware profiles (hardware/*.json), compiled into the library by CMake.
#ifndef ZPLAN_HARDWARE_STOCK_PROFILES_H_
#define ZPLAN_HARDWARE_STOCK_PROFILES_H_

#include <vector>

namespace zplan::hardware {

struct StockProfile {
  const char* name;  // file name without ".json"
  const char* json;  // the file's text
};

const std::vector<StockProfile>& stock_profiles();

}  // namespace zplan::hardware

#endif  // ZPLAN_HARDWARE_STOCK_PROFILES_H_
