// libFuzzer target for zplan's JSON loaders: hardware profiles, DeepSpeed ds_config files and
// model files (Hugging Face config.json or zplan's own). The first byte picks the loader
// ('h', 'd', 'm'; anything else tries all three); the rest is the file's text.
//
// Every input must end in a value or in zplan::InputError -- any other exception escapes and
// libFuzzer reports it, as it reports crashes, leaks and sanitizer findings.
#include <cstddef>
#include <cstdint>
#include <string>

#include "hardware/profile.h"
#include "models/catalog.h"
#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config.h"

namespace {

void load_profile(const nlohmann::json& j) { zplan::hardware::profile_from_json(j, "fuzz.json"); }

void load_ds_config(const nlohmann::json& j) {
  zplan::sim::ParseContext context;
  context.dp_world_size = 8;
  context.hidden_size = 4096;
  zplan::sim::DsConfig c = zplan::sim::parse_ds_config(j, "fuzz.json", context);
  // What is accepted must also be writable and valid again.
  zplan::sim::validate_ds_config(c, 8, "fuzz round trip");
  zplan::sim::parse_ds_config(zplan::sim::ds_config_to_json(c), "fuzz round trip", context);
}

void load_model(const nlohmann::json& j) {
  if (j.is_object() && j.contains("family")) {
    zplan::models::model_from_zplan_json(j, "fuzz.json");
  } else {
    zplan::models::model_from_hf_config(j, "fuzz.json");
  }
}

template <typename F>
void expect_value_or_input_error(F f, const nlohmann::json& j) {
  try {
    f(j);
  } catch (const zplan::InputError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char kind = static_cast<char>(data[0]);
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  nlohmann::json j;
  try {
    j = zplan::parse_json_text(text, "fuzz.json");
  } catch (const zplan::InputError&) {
    return 0;
  }
  if (kind == 'h' || (kind != 'd' && kind != 'm')) expect_value_or_input_error(load_profile, j);
  if (kind == 'd' || (kind != 'h' && kind != 'm')) expect_value_or_input_error(load_ds_config, j);
  if (kind == 'm' || (kind != 'h' && kind != 'd')) expect_value_or_input_error(load_model, j);
  return 0;
}
