// JsonReader and the JSON file helpers: every failure is an InputError naming the place.
#include <cmath>
#include <limits>

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
  // A trailing comma is named as such, in an object or an array; other slips are not.
  CHECK_THAT(error_of("{\n  \"a\": 1,\n}"), Catch::Contains("(a trailing comma before '}'"));
  CHECK_THAT(error_of("[1, 2 ,\t]"), Catch::Contains("(a trailing comma before ']'"));
  CHECK_THAT(error_of("[1, 2 ,\t]"), Catch::Contains("DeepSpeed's own hjson reader skips it"));
  CHECK(error_of("{\"a\": }").find("trailing comma") == std::string::npos);
  CHECK(error_of("{\"a\" 1}").find("trailing comma") == std::string::npos);
}

std::string ds_error_of(const std::string& text) {
  try {
    parse_json_text(text, "ds.json", JsonDialect::kDeepSpeedConfig);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("a ds_config is read as DeepSpeed reads a config path: comments, no repeated keys",
          "[models]") {
  // DeepSpeedConfig loads a path with hjson and dict_raise_error_on_duplicate_keys.
  const std::string commented = R"({
    // ZeRO-2 for the 7B run
    "train_micro_batch_size_per_gpu": 4, /* per GPU */
    "zero_optimization": {"stage": 2}
  })";
  nlohmann::json j = parse_json_text(commented, "ds.json", JsonDialect::kDeepSpeedConfig);
  CHECK(j["zero_optimization"]["stage"] == 2);
  CHECK(error_of(commented).rfind("x.json: line 2, column 5: invalid JSON", 0) == 0);

  CHECK(ds_error_of(R"({"zero_optimization": {"stage": 2, "stage": 3}})") ==
        "ds.json: /zero_optimization/stage: is given twice in one object (DeepSpeed refuses "
        "duplicate keys)");
  CHECK(ds_error_of(R"({"a": [1, {"x": 1}, {"x": 2, "y": 1, "y": 2}]})") ==
        "ds.json: /a/2/y: is given twice in one object (DeepSpeed refuses duplicate keys)");
  CHECK(ds_error_of(R"({"a/b": {"c": 1, "c": 1}})") ==
        "ds.json: /a~1b/c: is given twice in one object (DeepSpeed refuses duplicate keys)");
  // The same key in different objects, and strict files, are fine (the last one wins there, as
  // in Python's json.load).
  CHECK(ds_error_of(R"({"x": {"k": 1}, "y": {"k": 1}, "k": [{"k": 1}, {"k": 2}]})").empty());
  CHECK(parse_json_text(R"({"k": 1, "k": 2})", "m.json")["k"] == 2);
}

TEST_CASE("numbers JSON cannot hold are an input error, not an exception escaping",
          "[models]") {
  // Found by the fuzzer (tests/fuzz/regressions/number-overflow): nlohmann throws out_of_range,
  // not parse_error, for a number that overflows a double.
  CHECK(error_of("22222222222222222222e444") ==
        "x.json: invalid JSON: number overflow parsing '22222222222222222222e444'");
  CHECK_FALSE(error_of("[1e400]").empty());
}

TEST_CASE("NaN and Infinity read as Python's json reads them, outside strings only", "[models]") {
  // transformers writes config.json with json.dumps, which writes a non-finite float so
  // (Nemotron-H: "time_step_limit": [0.0, Infinity]).
  const nlohmann::json j = parse_json_text(
      R"({"a": [0.0, Infinity, -Infinity], "b": NaN, "s": "NaN Infinity",)"
      R"( "Infinity": 1})",
      "c.json");
  CHECK(j["a"][1].get<double>() == std::numeric_limits<double>::infinity());
  CHECK(j["a"][2].get<double>() == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(j["b"].get<double>()));
  CHECK(j["s"] == "NaN Infinity");
  CHECK(j["Infinity"] == 1);
  // A key zplan reads says what the file holds, in the file's words.
  CHECK_THROWS_WITH(JsonReader(j, "c.json").integer("b"),
                    "c.json: /b: must be an integer, got NaN");
  // However deep the file nests (nlohmann parses it iteratively; so is the marker pass).
  const int depth = 500000;
  const nlohmann::json deep = parse_json_text(
      std::string(depth, '[') + "NaN" + std::string(depth, ']'), "d.json");
  const nlohmann::json* inner = &deep;
  for (int i = 0; i < depth; ++i) inner = &(*inner)[0];
  CHECK(std::isnan(inner->get<double>()));
  // Words that only begin like them are still errors, with the position.
  CHECK(error_of("[Infinityx]").rfind("x.json: line 1, column 2: invalid JSON", 0) == 0);
  CHECK_THAT(error_of("[nan]"), Catch::StartsWith("x.json: line 1, column 3: invalid JSON"));
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
  nlohmann::json big = nlohmann::json::parse(R"({"k": 5e8, "huge": 1e20})");
  CHECK(JsonReader(big, "y.json").integer("k") == 500'000'000);
  // A whole number past int64 is an integer, too large a one (pydantic would take it).
  CHECK_THROWS_WITH(JsonReader(big, "y.json").integer("huge"),
                    "y.json: /huge: integer is too large");
}

}  // namespace
}  // namespace zplan
