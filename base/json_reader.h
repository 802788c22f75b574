// JsonReader: typed, located access to one JSON value inside an input file.
//
// Every loader (hardware profiles, ds_config.json, Hugging Face config.json, zplan's own model
// files) reads through it, so that every complaint about input has the same shape: one line naming
// the file and the JSON pointer of the offending value, e.g.
//   "a100.json: /node/pcie_h2d_pinned_gbps: must be a positive number, got -3".
// Getters throw InputError; they never return a default for a required key. A reader holds a
// reference to the JSON value it wraps: keep the document alive while readers of it exist.
#ifndef ZPLAN_BASE_JSON_READER_H_
#define ZPLAN_BASE_JSON_READER_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zplan {

// How strictly a file is read. kStrict: RFC 8259 JSON, the last of repeated keys wins (Python's
// json.load, which transformers uses for config.json). kDeepSpeedConfig: as DeepSpeed 0.19 reads a
// ds_config path (runtime/config.py DeepSpeedConfig: hjson.load with
// object_pairs_hook=dict_raise_error_on_duplicate_keys): // and /* */ comments are skipped, and a
// key given twice in one object is an error naming it.
enum class JsonDialect { kStrict, kDeepSpeedConfig };

// Reads and parses a JSON file. Throws InputError naming the file when it is missing, unreadable,
// not valid JSON (with line and column), or larger than 64 MiB.
nlohmann::json load_json_file(const std::string& path, JsonDialect dialect = JsonDialect::kStrict);

// Parses JSON text; `name` is used in error messages in place of a file name.
nlohmann::json parse_json_text(std::string_view text, const std::string& name,
                               JsonDialect dialect = JsonDialect::kStrict);

// Escapes one object key for use in a JSON pointer (RFC 6901: "~" -> "~0", "/" -> "~1").
std::string json_pointer_escape(std::string_view key);

class JsonReader {
 public:
  JsonReader(const nlohmann::json& value, std::string file, std::string pointer = "");

  const nlohmann::json& json() const { return *value_; }
  const std::string& file() const { return file_; }
  const std::string& pointer() const { return pointer_; }
  // "file: /pointer" of this value, or of its member `key`.
  std::string location() const;
  std::string location(std::string_view key) const;

  bool is_object() const { return value_->is_object(); }
  bool has(std::string_view key) const;  // REQUIRES: is_object()
  // True iff member `key` exists and is null (has() is false for it, as for an absent one).
  bool is_null(std::string_view key) const;
  // True iff member `key` exists and is the string "auto" (Hugging Face's placeholder).
  bool is_auto(std::string_view key) const;

  // A required member that must be an object (throws otherwise).
  JsonReader child(std::string_view key) const;
  std::optional<JsonReader> optional_child(std::string_view key) const;
  // Array access: REQUIRES the wrapped value is an array (check with require_array()).
  JsonReader require_array(std::string_view key) const;  // member `key`, which must be an array
  size_t size() const;
  JsonReader at(size_t index) const;

  // Required members. Each throws InputError naming the member when it is missing or has the
  // wrong type or range.
  double number(std::string_view key) const;
  double positive_number(std::string_view key) const;      // > 0 and finite
  double non_negative_number(std::string_view key) const;  // >= 0 and finite
  // Accepts JSON integers and integral floats such as 5e8 (as DeepSpeed's pydantic ints do).
  int64_t integer(std::string_view key) const;
  int64_t positive_integer(std::string_view key) const;
  int64_t non_negative_integer(std::string_view key) const;
  bool boolean(std::string_view key) const;
  std::string string(std::string_view key) const;

  // Optional members: nullopt when absent (or JSON null); throw when present with a bad value.
  std::optional<double> optional_number(std::string_view key) const;
  std::optional<double> optional_positive_number(std::string_view key) const;
  std::optional<int64_t> optional_integer(std::string_view key) const;
  std::optional<bool> optional_boolean(std::string_view key) const;
  std::optional<std::string> optional_string(std::string_view key) const;

  // The number held by this value itself (for array elements).
  double as_number() const;
  int64_t as_integer() const;
  std::string as_string() const;

  // Throws InputError naming the first member whose key is not in `allowed`.
  void reject_unknown_keys(std::initializer_list<std::string_view> allowed) const;
  // Throws InputError("<location of key>: <problem>").
  [[noreturn]] void fail(std::string_view key, const std::string& problem) const;
  [[noreturn]] void fail(const std::string& problem) const;  // about this value itself

 private:
  const nlohmann::json& member(std::string_view key) const;  // REQUIRES: has(key)
  // "missing (expected an object)", or "is null (expected ...)" for a key written as null.
  [[noreturn]] void fail_missing(std::string_view key, const char* expected) const;

  const nlohmann::json* value_;
  std::string file_;
  std::string pointer_;
};

// A short rendering of a JSON value for error messages ("-3", "\"abc\"", "an object").
std::string describe_json_value(const nlohmann::json& value);

}  // namespace zplan

#endif  // ZPLAN_BASE_JSON_READER_H_
