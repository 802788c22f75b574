// JsonReader and the JSON file helpers: every failure is an InputError naming the place.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "base/json_reader.h"

namespace zplan {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_json_text(text, "x.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("malformed JSON names the file, line and column", "[models]") {
  CHECK(error_of("{\n  \"a\": 1,\n}") .rfind("x.json: line 3, column 1: invalid JSON", 0) == 0);
  CHECK(error_of("").rfind("x.json: line 1, column 1: invalid JSON", 0) == 0);
}

TEST_CASE("numbers JSON cannot hold are an input error, not an exception escaping",
          "[models]") {
  // Found by the fuzzer (tests/fuzz/regressions/number-overflow): nlohmann throws out_of_range,
  // not parse_error, for a number that overflows a double.
  CHECK(error_of("22222222222222222222e444") ==
        "x.json: invalid JSON: number overflow parsing '22222222222222222222e444'");
  CHECK_FALSE(error_of("[1e400]").empty());
}

TEST_CASE("typed getters name the JSON pointer of the offending member", "[models]") {
  nlohmann::json j = nlohmann::json::parse(R"({"a": {"b/c": "x", "n": -2, "f": 1.5}})");
  JsonReader r(j, "x.json");
  JsonReader a = r.child("a");
  CHECK_THROWS_WITH(a.number("b/c"), "x.json: /a/b~1c: must be a number, got \"x\"");
  CHECK_THROWS_WITH(a.positive_number("n"), "x.json: /a/n: must be a positive number, got -2");
  CHECK_THROWS_WITH(a.integer("f"), "x.json: /a/f: must be an integer, got 1.5");
  CHECK_THROWS_WITH(a.boolean("missing"), "x.json: /a/missing: missing (expected true or false)");
  // A member written as null is not "missing".
  nlohmann::json with_null = nlohmann::json::parse(R"({"z": null})");
  JsonReader n(with_null, "n.json");
  CHECK_THROWS_WITH(n.child("z"), "n.json: /z: is null (expected an object)");
  CHECK_THROWS_WITH(n.integer("z"), "n.json: /z: is null (expected an integer)");
  CHECK_THROWS_WITH(a.reject_unknown_keys({"n", "f"}), "x.json: /a/b~1c: unknown key");
  CHECK(a.integer("n") == -2);
  nlohmann::json big = nlohmann::json::parse(R"({"k": 5e8})");
  CHECK(JsonReader(big, "y.json").integer("k") == 500'000'000);
}

}  // namespace
}  // namespace zplan
