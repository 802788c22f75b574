// The located, typed reads every part of the ds_config reader shares (zero_config_internal.h):
// Locator, BlockReader, Errors, the unknown-key check with its "did you mean", and top_block.
// Sources: reference/deepspeed_internals.md §1.
#include <algorithm>
#include <optional>
#include <string>

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

std::optional<bool> BlockReader::boolean(std::string_view key, Null null) const {
  if (!has_value(key, null, "true or false")) return std::nullopt;
  return reader_.boolean(key);
}

std::optional<int64_t> BlockReader::integer(std::string_view key, Null null) const {
  if (!has_value(key, null, "an integer")) return std::nullopt;
  return reader_.integer(key);
}

std::optional<double> BlockReader::number(std::string_view key, Null null) const {
  if (!has_value(key, null, "a number")) return std::nullopt;
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

void reject_unknown_keys(const JsonReader& reader, std::span<const std::string_view> known,
                         AutoRule auto_rule, std::string_view block, Errors& errors) {
  for (const auto& [key, value] : reader.json().items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    // DeepSpeedConfigModel drops "auto" members before pydantic looks for unknown keys.
    if (auto_rule == AutoRule::kMeansDefault && value.is_string() &&
        value.get_ref<const std::string&>() == "auto") {
      continue;
    }
    std::string problem = "unknown key (" + std::string(block) + " does not accept it)";
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
    if (!best.empty()) problem += "; did you mean " + json_quoted(best) + "?";
    errors.step([&] { reader.fail(key, problem); });
  }
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
