#include "base/text.h"

#include <string>

#include <catch2/catch.hpp>

#include "base/units.h"

namespace zplan {
namespace {

TEST_CASE("strformat formats like printf, at any length", "[base]") {
  CHECK(strformat("%s %d %.2f", "x", 42, 1.5) == "x 42 1.50");
  CHECK(strformat("%s", "") == "");
  // Longer than the 512-byte stack buffer: formatted again at its own length, nothing lost.
  const std::string long_text(5000, 'a');
  const std::string out = strformat("<%s|%d>", long_text.c_str(), 7);
  CHECK(out.size() == long_text.size() + 4);
  CHECK(out == "<" + long_text + "|7>");
  // Exactly at the buffer's edge: 511 characters fit with the terminator, 512 do not.
  CHECK(strformat("%s", std::string(511, 'b').c_str()).size() == 511);
  CHECK(strformat("%s", std::string(512, 'c').c_str()) == std::string(512, 'c'));
}

TEST_CASE("byte units are binary and gib prints one decimal", "[base]") {
  CHECK(kGiB == 1073741824.0);
  CHECK(kMiB * 1024 == kGiB);
  CHECK(gib(80 * kGiB) == "80.0 GiB");
  CHECK(gib(1.25 * kGiB) == "1.2 GiB");  // printf rounds half to even here: 1.25 is exact
  CHECK(gib(0) == "0.0 GiB");
}

}  // namespace
}  // namespace zplan
