// The nested blocks of zero_optimization, as DeepSpeed 0.19 reads them: offload_param and
// offload_optimizer (DeepSpeedZeroOffloadParamConfig and DeepSpeedZeroOffloadOptimizerConfig in
// deepspeed/runtime/zero/offload_config.py) and leaf_module (DeepSpeedZeroLeafModuleConfig in
// leaf_module_config.py), and how zplan writes them back (reference/deepspeed_internals.md §1.1).
#include <algorithm>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim::internal {

namespace {

using nlohmann::json;

// DeepSpeedZeroOffloadParamConfig and DeepSpeedZeroOffloadOptimizerConfig (offload_config.py).
constexpr std::string_view kOffloadParamKeys[] = {"device",      "nvme_path",  "buffer_count",
                                                  "buffer_size", "max_in_cpu", "pin_memory"};
constexpr std::string_view kOffloadOptimizerKeys[] = {
    "device",         "nvme_path", "buffer_count", "pin_memory",    "pipeline_read",
    "pipeline_write", "fast_init", "ratio",        "super_offload", "cpuadam_cores_perc"};
// DeepSpeedZeroLeafModuleConfig (leaf_module_config.py).
constexpr std::string_view kLeafModuleKeys[] = {"classes", "names", "name_suffixes"};

OffloadDevice read_device(const BlockReader& b) {
  std::optional<std::string> d = b.string("device");
  if (!d || *d == "none") return OffloadDevice::kNone;
  if (*d == "cpu") return OffloadDevice::kCpu;
  if (*d == "nvme") return OffloadDevice::kNvme;
  b.reader().fail("device", "must be \"none\", \"cpu\" or \"nvme\", got " + json_quoted(*d));
}

// A float Field(ge=0.0, le=1.0).
void read_fraction(const BlockReader& b, std::string_view key, double& out) {
  if (std::optional<double> v = b.number(key)) {
    if (*v < 0 || *v > 1) {
      b.reader().fail(key, "must be between 0 and 1, got " + json(*v).dump());
    }
    out = *v;
  }
}

// A List[str] field of DeepSpeedZeroLeafModuleConfig: its "before" validator turns a string into
// a list of one, the "after" one drops repeats keeping the first; null is not a list.
void read_name_list(const JsonReader& r, std::string_view key, std::vector<std::string>& out) {
  if (r.is_auto(key) || !r.json().contains(key)) return;  // a dropped "auto" keeps the default
  const json& v = r.json().at(std::string(key));
  std::vector<std::string> names;
  if (v.is_string()) {
    names.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) {
        r.require_array(key).at(i).fail("must be a string (a class or module name), got " +
                                        describe_json_value(v[i]));
      }
      const std::string name = v[i].get<std::string>();
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  } else {
    r.fail(key, "must be a list of names or one name, got " + describe_json_value(v));
  }
  out = std::move(names);
}

}  // namespace

// An integer Field(ge=0): negative values are rejected where they are read.
void read_count(const BlockReader& b, std::string_view key, int64_t& out) {
  if (std::optional<int64_t> v = b.integer(key)) {
    if (*v < 0) b.reader().fail(key, "must not be negative, got " + std::to_string(*v));
    out = *v;
  }
}

OffloadParamConfig read_offload_param(const JsonReader& r, Errors& errors) {
  reject_unknown_keys(r, kOffloadParamKeys, AutoRule::kMeansDefault,
                      "DeepSpeedZeroOffloadParamConfig (offload_param)", errors);
  BlockReader b(r, AutoRule::kMeansDefault);
  OffloadParamConfig p;
  p.device = read_device(b);
  if (auto v = b.string("nvme_path", Null::kMeansDefault)) p.nvme_path = *v;
  read_count(b, "buffer_count", p.buffer_count);
  read_count(b, "buffer_size", p.buffer_size);
  read_count(b, "max_in_cpu", p.max_in_cpu);
  if (auto v = b.boolean("pin_memory")) p.pin_memory = *v;
  // With device "none" DeepSpeed never looks at the rest of the block.
  if (p.device == OffloadDevice::kNone) return OffloadParamConfig{};
  return p;
}

OffloadOptimizerConfig read_offload_optimizer(const JsonReader& r, int stage, json& passthrough,
                                              Errors& errors) {
  reject_unknown_keys(r, kOffloadOptimizerKeys, AutoRule::kMeansDefault,
                      "DeepSpeedZeroOffloadOptimizerConfig (offload_optimizer)", errors);
  BlockReader b(r, AutoRule::kMeansDefault);
  OffloadOptimizerConfig o;
  o.device = read_device(b);
  if (auto v = b.string("nvme_path", Null::kMeansDefault)) o.nvme_path = *v;
  read_count(b, "buffer_count", o.buffer_count);
  if (auto v = b.boolean("pin_memory")) o.pin_memory = *v;
  if (auto v = b.boolean("pipeline_read")) o.pipeline_read = *v;
  if (auto v = b.boolean("pipeline_write")) o.pipeline_write = *v;
  if (auto v = b.boolean("fast_init")) o.fast_init = *v;
  read_fraction(b, "ratio", o.ratio);
  // offload_ratio_check (zero/config.py) runs whatever the device.
  if (o.ratio < 1.0 && stage != 3) {
    r.fail("ratio",
           "partial offload (ratio < 1) is only supported with ZeRO stage 3, but stage is " +
               std::to_string(stage));
  }
  json extras = json::object();
  if (auto v = b.boolean("super_offload")) extras["super_offload"] = *v;
  double cores = 0.8;
  if (b.given("cpuadam_cores_perc")) {
    read_fraction(b, "cpuadam_cores_perc", cores);
    extras["cpuadam_cores_perc"] = cores;
  }
  if (o.device == OffloadDevice::kNone) return OffloadOptimizerConfig{};
  if (!extras.empty()) passthrough = std::move(extras);
  return o;
}

// leaf_module: null, "auto" and {} keep the defaults (its "before" validator maps None to {}).
LeafModuleConfig read_leaf_module(const JsonReader& r, Errors& errors) {
  reject_unknown_keys(r, kLeafModuleKeys, AutoRule::kMeansDefault,
                      "DeepSpeedZeroLeafModuleConfig (leaf_module)", errors);
  LeafModuleConfig leaf;
  errors.step([&] { read_name_list(r, "classes", leaf.classes); });
  errors.step([&] { read_name_list(r, "names", leaf.names); });
  errors.step([&] { read_name_list(r, "name_suffixes", leaf.name_suffixes); });
  return leaf;
}

json leaf_module_to_json(const LeafModuleConfig& leaf) {
  json j = {{"classes", leaf.classes}};
  if (!leaf.names.empty()) j["names"] = leaf.names;
  if (!leaf.name_suffixes.empty()) j["name_suffixes"] = leaf.name_suffixes;
  return j;
}

json offload_param_to_json(const OffloadParamConfig& p) {
  json j = {{"device", offload_device_name(p.device)},
            {"buffer_count", p.buffer_count},
            {"buffer_size", p.buffer_size},
            {"max_in_cpu", p.max_in_cpu},
            {"pin_memory", p.pin_memory}};
  if (!p.nvme_path.empty()) j["nvme_path"] = p.nvme_path;
  return j;
}

json offload_optimizer_to_json(const OffloadOptimizerConfig& o, const json& extras) {
  json j = extras.is_object() ? extras : json::object();
  j["device"] = offload_device_name(o.device);
  if (!o.nvme_path.empty()) j["nvme_path"] = o.nvme_path;
  j["buffer_count"] = o.buffer_count;
  j["pin_memory"] = o.pin_memory;
  j["pipeline_read"] = o.pipeline_read;
  j["pipeline_write"] = o.pipeline_write;
  j["fast_init"] = o.fast_init;
  j["ratio"] = o.ratio;
  return j;
}

}  // namespace zplan::sim::internal
