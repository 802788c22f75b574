// The located, typed reads every part of the ds_config reader shares (zero_config_internal.h):
// Locator, BlockReader, Errors, the unknown-key check with its "did you mean", and top_block.
// Sources: reference/deepspeed_internals.md §1.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim::internal {

void Locator::redirect(const std::string& pointer, const std::string& actual) {
  redirects_[pointer] = actual;
}

std::string Locator::at(const std::string& pointer) const {
  for (std::string p = pointer; !p.empty();) {
    auto it = redirects_.find(p);
    if (it != redirects_.end()) return json_location(file_, it->second);
    size_t slash = p.rfind('/');
    p.resize(slash == std::string::npos ? 0 : slash);
  }
  return json_location(file_, pointer);
}

void Locator::fail(const std::string& pointer, const std::string& problem) const {
  throw InputError(at(pointer), problem);
}

bool BlockReader::given(std::string_view key) const {
  auto it = reader_.json().find(key);
  if (it == reader_.json().end()) return false;
  return !(auto_rule_ == AutoRule::kMeansDefault && it->is_string() &&
           it->get_ref<const std::string&>() == "auto");
}

bool BlockReader::has_value(std::string_view key, Null null, const char* expected) const {
  auto it = reader_.json().find(key);
  if (it == reader_.json().end()) return false;
  if (it->is_null()) {
    if (null == Null::kMeansDefault) return false;
    reader_.fail(key, std::string("must be ") + expected + ", got null");
  }
  if (it->is_string() && it->get_ref<const std::string&>() == "auto") {
    if (auto_rule_ == AutoRule::kMeansDefault) return false;
    reader_.fail(key,
                 "\"auto\" is not accepted inside this block (DeepSpeed drops \"auto\" only "
                 "directly inside zero_optimization, fp16 and bf16; the Hugging Face Trainer "
                 "fills the batch keys and a few others)");
  }
  return true;
}

namespace {

// Python's str.strip() on ASCII whitespace, which pydantic-core applies to a string it parses as
// a number.
std::string_view strip(std::string_view s) {
  const char* kSpace = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

// Digits with single underscores between them (Python's numeric literal rule, which pydantic-core
// follows for strings): appends the digits to `out` and returns true when all of `s` is such a run.
bool digit_run(std::string_view s, std::string& out) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 == s.size() || s[i + 1] == '_') return false;
    } else if (s[i] >= '0' && s[i] <= '9') {
      out += s[i];
    } else {
      return false;
    }
  }
  return true;
}

// pydantic-core's lax str -> int: stripped, an optional sign, digits (underscores between them),
// optionally "." and zeros only ("8.0" is 8, "8.5", "8." and "5e8" are not integers).
std::optional<int64_t> int_from_string(std::string_view text) {
  std::string_view s = strip(text);
  std::string digits;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    if (s[0] == '-') digits = "-";
    s.remove_prefix(1);
  }
  const size_t dot = s.find('.');
  if (dot != std::string_view::npos) {
    std::string zeros;
    if (!digit_run(s.substr(dot + 1), zeros) ||
        zeros.find_first_not_of('0') != std::string::npos) {
      return std::nullopt;
    }
    s = s.substr(0, dot);
  }
  if (!digit_run(s, digits)) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0') return std::nullopt;
  return v;
}

// pydantic-core's lax str -> float (Python's float() syntax): stripped; a sign; digits with
// underscores between them, a fraction, an exponent; or inf, infinity and nan in any case.
std::optional<double> float_from_string(std::string_view text) {
  std::string_view s = strip(text);
  std::string plain;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    plain += s[0];
    s.remove_prefix(1);
  }
  const std::string lower = ascii_lower(std::string(s));
  if (lower == "inf" || lower == "infinity") return plain == "-" ? -HUGE_VAL : HUGE_VAL;
  if (lower == "nan") return std::nan("");
  const size_t e = lower.find('e');
  std::string_view mantissa = s.substr(0, e);
  const size_t dot = mantissa.find('.');
  const std::string_view whole = mantissa.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : mantissa.substr(dot + 1);
  if (whole.empty() && fraction.empty()) return std::nullopt;
  if (!whole.empty() && !digit_run(whole, plain)) return std::nullopt;
  if (dot != std::string_view::npos) {
    plain += '.';
    if (!fraction.empty() && !digit_run(fraction, plain)) return std::nullopt;
  }
  if (e != std::string::npos) {
    std::string_view exponent = s.substr(e + 1);
    plain += 'e';
    if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) {
      plain += exponent[0];
      exponent.remove_prefix(1);
    }
    if (!digit_run(exponent, plain)) return std::nullopt;
  }
  return std::strtod(plain.c_str(), nullptr);
}

}  // namespace

// The blocks read with AutoRule::kMeansDefault are DeepSpeed's pydantic models
// (DeepSpeedConfigModel), which validate in pydantic 2's lax mode: "3" and 3.0 are the int 3,
// "yes" and 1 are True (checked against DeepSpeed 0.19.5's classes under pydantic 2.13 with
// tools/ds-config-check). The plain-dict blocks take JSON's own types.
std::optional<bool> BlockReader::boolean(std::string_view key, Null null) const {
  if (!has_value(key, null, "true or false")) return std::nullopt;
  if (auto_rule_ == AutoRule::kIsAnError) return reader_.boolean(key);
  const nlohmann::json& v = *reader_.json().find(key);
  // pydantic's bool: 0/1 as numbers, and these strings in any case (not stripped).
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number() && (v == 0 || v == 1)) return v == 1;
  if (v.is_string()) {
    const std::string s = ascii_lower(v.get<std::string>());
    for (const char* t : {"1", "on", "t", "true", "y", "yes"}) {
      if (s == t) return true;
    }
    for (const char* f : {"0", "off", "f", "false", "n", "no"}) {
      if (s == f) return false;
    }
  }
  reader_.fail(key, "must be true or false (or what pydantic reads as one: 0, 1, \"yes\", "
                    "\"no\", \"on\", \"off\", ...), got " + describe_json_value(v));
}

std::optional<int64_t> BlockReader::integer(std::string_view key, Null null) const {
  if (!has_value(key, null, "an integer")) return std::nullopt;
  const nlohmann::json& v = *reader_.json().find(key);
  if (auto_rule_ == AutoRule::kMeansDefault) {
    if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
    if (v.is_string()) {
      if (std::optional<int64_t> i = int_from_string(v.get_ref<const std::string&>())) return i;
      reader_.fail(key, "must be an integer (a string must hold one, as pydantic reads it: \"8\" "
                        "or \"8.0\", not \"5e8\"), got " + describe_json_value(v));
    }
  }
  return reader_.integer(key);
}

std::optional<double> BlockReader::number(std::string_view key, Null null) const {
  if (!has_value(key, null, "a number")) return std::nullopt;
  const nlohmann::json& v = *reader_.json().find(key);
  if (auto_rule_ == AutoRule::kMeansDefault) {
    if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
    if (v.is_string()) {
      std::optional<double> d = float_from_string(v.get_ref<const std::string&>());
      if (!d) reader_.fail(key, "must be a number, got " + describe_json_value(v));
      if (!std::isfinite(*d)) reader_.fail(key, "must be a finite number, got " + describe_json_value(v));
      return d;
    }
  }
  return reader_.number(key);
}

std::optional<std::string> BlockReader::string(std::string_view key, Null null) const {
  if (!has_value(key, null, "a string")) return std::nullopt;
  return reader_.string(key);
}

const nlohmann::json* BlockReader::object(std::string_view key, Null null) const {
  if (!has_value(key, null, "an object")) return nullptr;
  const nlohmann::json& v = *reader_.json().find(key);
  if (!v.is_object()) reader_.fail(key, "must be an object, got " + describe_json_value(v));
  return &v;
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 0; i < a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i + 1;
    for (size_t j = 0; j < b.size(); ++j) {
      size_t above = row[j + 1];
      row[j + 1] = std::min({above + 1, row[j] + 1, diagonal + (a[i] == b[j] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

void Errors::add(const InputError& e) { errors_.push_back(e); }

void Errors::throw_if_any() const {
  if (errors_.empty()) return;
  if (errors_.size() == 1) throw errors_.front();
  std::string problem = errors_.front().problem();
  const size_t shown = std::min(errors_.size(), kMaxLines);
  for (size_t i = 1; i < shown; ++i) problem += "\n" + std::string(errors_[i].what());
  if (errors_.size() > shown) {
    problem += "\n(and " + std::to_string(errors_.size() - shown) + " more problems)";
  }
  throw InputError(errors_.front().where(), problem);
}

std::string did_you_mean(std::string_view key, std::span<const std::string_view> known) {
  std::string_view best;
  size_t best_distance = 4;  // suggest only near misses
  if (key.size() <= 64) {
    for (std::string_view k : known) {
      size_t d = edit_distance(key, k);
      if (d < best_distance) {
        best = k;
        best_distance = d;
      }
    }
  }
  return best.empty() ? std::string() : "; did you mean " + json_quoted(best) + "?";
}

void reject_unknown_keys(const JsonReader& reader, std::span<const std::string_view> known,
                         AutoRule auto_rule, std::string_view block, Errors& errors) {
  for (const auto& [key, value] : reader.json().items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    // DeepSpeedConfigModel drops "auto" members before pydantic looks for unknown keys.
    if (auto_rule == AutoRule::kMeansDefault && value.is_string() &&
        value.get_ref<const std::string&>() == "auto") {
      continue;
    }
    std::string hint = did_you_mean(key, known);
    // A block written one level too deep (aio or bf16 inside zero_optimization).
    const auto top = deepspeed_top_keys();
    if (hint.empty() && std::find(top.begin(), top.end(), key) != top.end()) {
      hint = "; it is a top-level key of the ds_config, not one of this block's";
    }
    const std::string problem =
        "unknown key (" + std::string(block) + " does not accept it)" + hint;
    errors.step([&] { reader.fail(key, problem); });
  }
}

bool python_truthy(const nlohmann::json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

std::string json_quoted(std::string_view text) { return nlohmann::json(std::string(text)).dump(); }

// A top-level block that must be an object when present. nullopt when absent (or null, if
// DeepSpeed takes null as absent there).
std::optional<JsonReader> top_block(const JsonReader& top, const char* key, Null null) {
  auto it = top.json().find(key);
  if (it == top.json().end()) return std::nullopt;
  if (it->is_null() && null == Null::kMeansDefault) return std::nullopt;
  if (!it->is_object()) top.fail(key, "must be an object, got " + describe_json_value(*it));
  return top.child(key);
}

}  // namespace zplan::sim::internal
