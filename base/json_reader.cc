#include "base/json_reader.h"

#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <vector>

#include <sys/stat.h>

#include "base/input_error.h"

namespace zplan {

namespace {

// Input files are small (the largest is a calibrated profile with tables); anything bigger is
// almost certainly the wrong file, and reading it whole would be a way to exhaust memory.
constexpr int64_t kMaxJsonFileBytes = 64LL << 20;

bool is_integral_double(double v) {
  return std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9.2e18;
}

// The JSON pointer of each open object or array while nlohmann parses, and the keys each object
// has had so far: a key seen twice in one object throws.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(const std::string& name) : name_(name) {}

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        frames_.push_back(Frame{event == Event::object_start, child_pointer(), {}, {}, 0});
        break;
      case Event::key: {
        Frame& f = frames_.back();
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!f.keys.insert(key).second) {
          throw InputError(json_location(name_, f.pointer + "/" + json_pointer_escape(key)),
                           "is given twice in one object (DeepSpeed refuses duplicate keys)");
        }
        f.current = key;
        break;
      }
      case Event::object_end:
      case Event::array_end:
        frames_.pop_back();
        element_done();
        break;
      case Event::value:
        element_done();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::string pointer;
    std::set<std::string> keys;
    std::string current;
    int64_t index;
  };
  std::string child_pointer() const {
    if (frames_.empty()) return "";
    const Frame& f = frames_.back();
    return f.pointer + "/" + (f.object ? json_pointer_escape(f.current) : std::to_string(f.index));
  }
  void element_done() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }

  const std::string& name_;
  std::vector<Frame> frames_;
};

// Python's json module writes a float that is not finite as NaN, Infinity or -Infinity, and
// reads them back (transformers' config.json files carry them, e.g. Nemotron-H's
// "time_step_limit": [0.0, Infinity]); RFC 8259 and nlohmann do not. In kStrict text each such
// token outside a string becomes a marker string ("\u0001" and the like, which no real config
// holds), and after parsing each marker becomes the double Python reads, so a key zplan does
// not read is no error and one it reads is checked as any other non-finite number is.
constexpr std::string_view kNonFinite[] = {"Infinity", "-Infinity", "NaN"};
constexpr std::string_view kNonFiniteMarker[] = {"\"\\u0001\"", "\"\\u0002\"", "\"\\u0003\""};

// The text with each non-finite token marked, or "" (and *found false) when it has none: most
// files have none, and are not copied.
std::string mark_non_finite(std::string_view text, bool* found) {
  std::string out;
  size_t copied = 0;  // text before this is in `out`
  bool in_string = false;
  *found = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    for (size_t k = 0; k < std::size(kNonFinite); ++k) {
      const std::string_view word = kNonFinite[k];
      if (text.substr(i, word.size()) != word) continue;
      const size_t end = i + word.size();
      if (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                                text[end] == '_' || text[end] == '.')) {
        continue;
      }
      out.append(text.substr(copied, i - copied));
      out += kNonFiniteMarker[k];
      copied = end;
      i = end - 1;
      *found = true;
      break;
    }
  }
  if (*found) out.append(text.substr(copied));
  return out;
}

// Iterative: a file may nest deeper than the stack would allow recursion.
void restore_non_finite(nlohmann::json& root) {
  std::vector<nlohmann::json*> todo = {&root};
  while (!todo.empty()) {
    nlohmann::json& j = *todo.back();
    todo.pop_back();
    if (j.is_structured()) {
      for (auto& child : j) todo.push_back(&child);
      continue;
    }
    if (!j.is_string()) continue;
    const std::string& v = j.get_ref<const std::string&>();
    if (v.size() != 1) continue;
    const char marker = v[0];  // assigning j below ends v's life
    if (marker == '\x01') j = std::numeric_limits<double>::infinity();
    if (marker == '\x02') j = -std::numeric_limits<double>::infinity();
    if (marker == '\x03') j = std::numeric_limits<double>::quiet_NaN();
  }
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& name,
                               JsonDialect dialect) {
  bool non_finite = false;
  const std::string marked =
      dialect == JsonDialect::kStrict ? mark_non_finite(text, &non_finite) : std::string();
  try {
    if (dialect == JsonDialect::kDeepSpeedConfig) {
      DuplicateKeyCheck check(name);
      return nlohmann::json::parse(
          text.begin(), text.end(),
          [&check](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
            return check(depth, event, parsed);
          },
          /*allow_exceptions=*/true, /*ignore_comments=*/true);
    }
    if (!non_finite) return nlohmann::json::parse(text.begin(), text.end());
    nlohmann::json j = nlohmann::json::parse(marked.begin(), marked.end());
    restore_non_finite(j);
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    // Turn nlohmann's byte offset into a line and column a person can go to (in the text
    // parsed: the same lines, a column or a few more after a NaN on the line).
    if (non_finite) text = marked;
    size_t offset = e.byte == 0 ? 0 : e.byte - 1;
    if (offset > text.size()) offset = text.size();
    int line = 1, column = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column 2:
    // syntax error while parsing value - invalid literal; last read: 'x'". Keep the last part.
    const std::string marker = "syntax error while parsing";
    size_t at = what.find(marker);
    std::string detail = at == std::string::npos ? what : what.substr(at);
    // The commonest slip in hand-edited configs: a comma before a closing } or ].
    if (offset < text.size() && (text[offset] == '}' || text[offset] == ']')) {
      size_t before = offset;
      while (before > 0 && std::isspace(static_cast<unsigned char>(text[before - 1]))) --before;
      if (before > 0 && text[before - 1] == ',') {
        // DeepSpeed reads a config path with hjson, which skips it; the Hugging Face Trainer
        // (HfDeepSpeedConfig) and Accelerate read the file with json.load, which does not.
        detail += " (a trailing comma before '" + std::string(1, text[offset]) +
                  "': JSON allows none; the Hugging Face Trainer and Accelerate read the file "
                  "with Python's json module, which refuses it, though DeepSpeed's own hjson "
                  "reader skips it: remove it)";
      }
    }
    throw InputError(name, "line " + std::to_string(line) + ", column " +
                               std::to_string(column) + ": invalid JSON: " + detail);
  } catch (const nlohmann::json::exception& e) {
    // Other failures while parsing, e.g. "number overflow parsing '2e444'" (out_of_range.406).
    std::string what = e.what();
    size_t at = what.find("] ");
    throw InputError(name, "invalid JSON: " + (at == std::string::npos ? what : what.substr(at + 2)));
  }
}

nlohmann::json load_json_file(const std::string& path, JsonDialect dialect) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    throw InputError(path, "cannot open: " + std::generic_category().message(errno));
  }
  if (S_ISDIR(st.st_mode)) throw InputError(path, "is a directory, expected a JSON file");
  if (st.st_size > kMaxJsonFileBytes) {
    throw InputError(path, "file is larger than 64 MiB; is it really a zplan input?");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open: " + std::generic_category().message(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw InputError(path, "read error");
  return parse_json_text(buf.str(), path, dialect);
}

std::string json_pointer_escape(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string describe_json_value(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::string: {
      std::string s = value.get<std::string>();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return nlohmann::json(s).dump();
    }
    case nlohmann::json::value_t::number_float: {
      // nlohmann writes a non-finite double as null; say what the file said (Python's words).
      const double v = value.get<double>();
      if (std::isnan(v)) return "NaN";
      if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
      return value.dump();
    }
    default:
      return value.dump();
  }
}

JsonReader::JsonReader(const nlohmann::json& value, std::string file, std::string pointer)
    : value_(&value), file_(std::move(file)), pointer_(std::move(pointer)) {}

std::string JsonReader::location() const { return json_location(file_, pointer_); }

std::string JsonReader::location(std::string_view key) const {
  return json_location(file_, pointer_ + "/" + json_pointer_escape(key));
}

bool JsonReader::has(std::string_view key) const {
  auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

bool JsonReader::is_null(std::string_view key) const {
  auto it = value_->find(key);
  return it != value_->end() && it->is_null();
}

bool JsonReader::is_auto(std::string_view key) const {
  auto it = value_->find(key);
  return it != value_->end() && it->is_string() && it->get_ref<const std::string&>() == "auto";
}

const nlohmann::json& JsonReader::member(std::string_view key) const {
  return *value_->find(key);
}

void JsonReader::fail(std::string_view key, const std::string& problem) const {
  throw InputError(location(key), problem);
}

void JsonReader::fail(const std::string& problem) const { throw InputError(location(), problem); }

void JsonReader::fail_missing(std::string_view key, const char* expected) const {
  const bool null = value_->contains(key);  // has() is false: present means null
  fail(key, std::string(null ? "is null" : "missing") + " (expected " + expected + ")");
}

JsonReader JsonReader::child(std::string_view key) const {
  if (!has(key)) fail_missing(key, "an object");
  const auto& v = member(key);
  if (!v.is_object()) fail(key, "must be an object, got " + describe_json_value(v));
  return JsonReader(v, file_, pointer_ + "/" + json_pointer_escape(key));
}

std::optional<JsonReader> JsonReader::optional_child(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return child(key);
}

JsonReader JsonReader::require_array(std::string_view key) const {
  if (!has(key)) fail_missing(key, "an array");
  const auto& v = member(key);
  if (!v.is_array()) fail(key, "must be an array, got " + describe_json_value(v));
  return JsonReader(v, file_, pointer_ + "/" + json_pointer_escape(key));
}

size_t JsonReader::size() const { return value_->size(); }

JsonReader JsonReader::at(size_t index) const {
  return JsonReader((*value_)[index], file_, pointer_ + "/" + std::to_string(index));
}

double JsonReader::as_number() const {
  if (!value_->is_number()) fail("must be a number, got " + describe_json_value(*value_));
  double v = value_->get<double>();
  if (!std::isfinite(v)) fail("must be a finite number");
  return v;
}

int64_t JsonReader::as_integer() const {
  if (value_->is_number_integer()) {
    if (value_->is_number_unsigned() && value_->get<uint64_t>() > uint64_t{INT64_MAX}) {
      fail("integer is too large");
    }
    return value_->get<int64_t>();
  }
  if (value_->is_number_float()) {
    const double v = value_->get<double>();
    if (is_integral_double(v)) return static_cast<int64_t>(v);
    // A whole number past int64 (1e20): the value is an integer, too large a one.
    if (std::isfinite(v) && std::floor(v) == v) fail("integer is too large");
  }
  fail("must be an integer, got " + describe_json_value(*value_));
}

std::string JsonReader::as_string() const {
  if (!value_->is_string()) fail("must be a string, got " + describe_json_value(*value_));
  return value_->get<std::string>();
}

double JsonReader::number(std::string_view key) const {
  if (!has(key)) fail_missing(key, "a number");
  return JsonReader(member(key), file_, pointer_ + "/" + json_pointer_escape(key)).as_number();
}

double JsonReader::positive_number(std::string_view key) const {
  double v = number(key);
  if (!(v > 0)) fail(key, "must be a positive number, got " + describe_json_value(member(key)));
  return v;
}

double JsonReader::non_negative_number(std::string_view key) const {
  double v = number(key);
  if (v < 0) fail(key, "must not be negative, got " + describe_json_value(member(key)));
  return v;
}

int64_t JsonReader::integer(std::string_view key) const {
  if (!has(key)) fail_missing(key, "an integer");
  return JsonReader(member(key), file_, pointer_ + "/" + json_pointer_escape(key)).as_integer();
}

int64_t JsonReader::positive_integer(std::string_view key) const {
  int64_t v = integer(key);
  if (v <= 0) fail(key, "must be a positive integer, got " + std::to_string(v));
  return v;
}

int64_t JsonReader::non_negative_integer(std::string_view key) const {
  int64_t v = integer(key);
  if (v < 0) fail(key, "must not be negative, got " + std::to_string(v));
  return v;
}

bool JsonReader::boolean(std::string_view key) const {
  if (!has(key)) fail_missing(key, "true or false");
  const auto& v = member(key);
  if (!v.is_boolean()) fail(key, "must be true or false, got " + describe_json_value(v));
  return v.get<bool>();
}

std::string JsonReader::string(std::string_view key) const {
  if (!has(key)) fail_missing(key, "a string");
  return JsonReader(member(key), file_, pointer_ + "/" + json_pointer_escape(key)).as_string();
}

std::optional<double> JsonReader::optional_number(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return number(key);
}

std::optional<double> JsonReader::optional_positive_number(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return positive_number(key);
}

std::optional<int64_t> JsonReader::optional_integer(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return integer(key);
}

std::optional<bool> JsonReader::optional_boolean(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return boolean(key);
}

std::optional<std::string> JsonReader::optional_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

void JsonReader::reject_unknown_keys(std::initializer_list<std::string_view> allowed) const {
  if (!value_->is_object()) fail("must be an object, got " + describe_json_value(*value_));
  for (const auto& [key, value] : value_->items()) {
    bool known = false;
    for (std::string_view a : allowed) {
      if (a == key) {
        known = true;
        break;
      }
    }
    if (!known) fail(key, "unknown key");
  }
}

}  // namespace zplan
