// Helpers shared by the tests of models/.
#ifndef ZPLAN_TESTS_MODELS_TEST_UTIL_H_
#define ZPLAN_TESTS_MODELS_TEST_UTIL_H_

#include <string>

#include <catch2/catch.hpp>

#include "base/input_error.h"

namespace zplan::models::testing {

inline std::string data_path(const std::string& name) {
  return std::string(ZPLAN_SOURCE_DIR) + "/tests/models/data/" + name;
}

inline std::string example_path(const std::string& name) {
  return std::string(ZPLAN_SOURCE_DIR) + "/examples/hf/" + name;
}

// Runs `f`, which must throw InputError; returns its message (what()).
template <typename F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("expected an InputError");
  return "";
}

}  // namespace zplan::models::testing

#endif  // ZPLAN_TESTS_MODELS_TEST_UTIL_H_
