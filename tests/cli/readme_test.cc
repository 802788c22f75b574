// The README's promise: exactly two set-up commands, the second being what CI runs.
#include <catch2/catch.hpp>

#include <sstream>

#include "tests/cli/cli_test_util.h"

namespace zplan::testing {
namespace {

TEST_CASE("README gives two set-up commands and .ci/run runs the second", "[cli]") {
  const std::string root = ZPLAN_SOURCE_DIR;
  std::istringstream readme(slurp(root + "/README.md"));
  std::vector<std::string> commands;
  std::string line;
  // The set-up commands are the lines of the README's first code block.
  bool in_code = false;
  while (std::getline(readme, line)) {
    if (line.rfind("```", 0) == 0) {
      if (in_code) break;
      in_code = true;
      continue;
    }
    if (in_code && !line.empty()) commands.push_back(line);
  }
  REQUIRE(commands.size() == 2);
  CHECK(commands[0].find("zplan --model 20b --gpus 8 --hw a100.json") != std::string::npos);
  const std::string ci = slurp(root + "/.ci/run");
  CHECK(ci.find("\n" + commands[1] + "\n") != std::string::npos);
}

}  // namespace
}  // namespace zplan::testing
