// Loading, validating and writing hardware profiles. The schema is documented key by key in
// docs/formats.md ("Hardware profile"); every unit conversion happens here and nowhere else.
#include "hardware/profile.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include <sys/stat.h>

#include "base/units.h"
#include "hardware/stock_profiles.h"
#include "base/input_error.h"
#include "base/json_reader.h"

namespace zplan::hardware {

namespace {

// Units of the file -> SI units of the structs.
constexpr double kGBps = 1e9;  // GB/s as NCCL and nccl-tests count them
constexpr double kTflops = 1e12;
constexpr double kUs = 1e-6;
constexpr double kMparams = 1e6;
constexpr double kUsPerMb = 1e-12;  // 1 us per 1e6 bytes, in seconds per byte

// Counts (GPUs, cores, NICs, ranks) beyond this are typos, and would overflow an int later.
constexpr int64_t kMaxCount = 1 << 20;

// The largest double below which every integer is exact; integral values under it are written
// as JSON integers so that "80" stays "80".
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

// The JSON names of the enums, in enum order.
constexpr const char* kArchNames[] = {"volta", "ampere", "hopper", "blackwell", "cpu"};
constexpr const char* kIntraLinkNames[] = {"nvlink", "pcie", "shm"};
constexpr const char* kCpuVendorNames[] = {"intel", "amd", "other"};
constexpr const char* kCollectiveNames[] = {"all_gather", "reduce_scatter", "all_reduce"};
constexpr const char* kRingNicsNames[] = {"node", "gpu"};

template <size_t N, typename Enum>
const char* name_of(const char* const (&names)[N], Enum value) {
  size_t i = static_cast<size_t>(value);
  return i < N ? names[i] : "?";
}

// Reads member `key` as one of `names` (in enum order) and returns its index.
template <size_t N>
int read_enum(const JsonReader& r, std::string_view key, const char* const (&names)[N]) {
  std::string value = r.string(key);
  for (size_t i = 0; i < N; ++i) {
    if (value == names[i]) return static_cast<int>(i);
  }
  std::string list;
  for (size_t i = 0; i < N; ++i) list += std::string(i ? ", " : "") + names[i];
  r.fail(key,
         "must be one of " + list + "; got " + describe_json_value(r.json().at(std::string(key))));
}

// The accepted range of a measured value, in file units (docs/formats.md, "Ranges"). The bounds
// keep every duration the simulator derives from a profile far inside its int64-nanosecond clock
// (+-292 years): a latency of at most 1 s, and a bandwidth or rate no slower than 1 MB/s,
// 1 GFLOP/s or 1000 params/s, put even a trillion-parameter step at days, not centuries. The
// upper ends lie a thousand times past any hardware; only a typo or a unit slip reaches them.
struct Range {
  double min;
  bool min_excluded;  // true: the value must be above min (a capacity or bandwidth of 0 is no use)
  double max;
  const char* unit;
};
constexpr Range kLatencyRange = {0, false, 1e6, "us"};         // up to 1 s
constexpr Range kBandwidthRange = {kMinBandwidthBytesPerS / kGBps, false, 1e6,
                                   "GB/s"};  // 1 MB/s to 1 PB/s
constexpr Range kFlopsRange = {1e-3, false, 1e6, "TFLOP/s"};   // 1 GFLOP/s to 1 EFLOP/s
constexpr Range kMparamsRange = {1e-3, false, 1e6, "M params/s"};
constexpr Range kCapacityRange = {0, true, 1e6, "GiB"};  // up to 1 PiB
constexpr Range kOverheadRange = {0, false, 1e6, "GiB"};
constexpr Range kUsPerMbRange = {0, true, 1e6, "us/MB"};  // the inverse of >= 1 MB/s
constexpr Range kPointBytesRange = {0, true, 1e15, "bytes"};
constexpr Range kPointSecondsRange = {0, true, 1e6, "s"};
constexpr Range kStepOverheadRange = {0, false, 1e6, "ms"};  // up to 1000 s per step

// "1e6", "0.001", "1e15": %g without the exponent's '+' and leading zeros.
std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  std::string t = buf;
  size_t e = t.find('e');
  if (e != std::string::npos) {
    size_t digits = e + 1;
    if (digits < t.size() && t[digits] == '+') t.erase(digits, 1);
    if (digits < t.size() && t[digits] == '-') ++digits;
    while (digits + 1 < t.size() && t[digits] == '0') t.erase(digits, 1);
  }
  return t;
}

// Checks a number already read against `range`; `fail` reports the problem at its place.
template <typename Fail>
double check_range(double v, const Range& range, Fail fail) {
  const bool low = range.min_excluded ? !(v > range.min) : !(v >= range.min);
  if (low || !(v <= range.max)) {
    fail(short_number(v) + " is out of range (" + (range.min_excluded ? "above " : "") +
         short_number(range.min) + " to " + short_number(range.max) + " " + range.unit + ")");
  }
  return v;
}

// A required number in file units within `range`, converted to SI units by `scale`.
double in_range(const JsonReader& r, std::string_view key, const Range& range, double scale) {
  // Signs first, with the reader's own message ("must be positive"), then the range.
  double v =
      range.min > 0 || range.min_excluded ? r.positive_number(key) : r.non_negative_number(key);
  check_range(v, range, [&](const std::string& problem) { r.fail(key, problem); });
  return v * scale;
}

double fraction(const JsonReader& r, std::string_view key) {
  double v = r.number(key);
  if (!(v > 0 && v <= 1)) {
    r.fail(key, "must be in (0, 1], got " + describe_json_value(r.json().at(std::string(key))));
  }
  return v;
}

double unit_interval(const JsonReader& r, std::string_view key) {
  double v = r.non_negative_number(key);
  if (!(v <= 1)) {
    r.fail(key, "must be in [0, 1], got " + describe_json_value(r.json().at(std::string(key))));
  }
  return v;
}

int count(const JsonReader& r, std::string_view key, int64_t min) {
  int64_t v = r.integer(key);
  if (v < min || v > kMaxCount) {
    r.fail(key, "must be an integer from " + std::to_string(min) + " to " +
                    std::to_string(kMaxCount) + ", got " + std::to_string(v));
  }
  return static_cast<int>(v);
}

// An array element that must be a [a, b] pair of numbers.
std::pair<double, double> read_pair(const JsonReader& element, const char* what) {
  if (!element.json().is_array() || element.size() != 2) {
    element.fail(std::string("must be a pair ") + what + ", got " +
                 describe_json_value(element.json()));
  }
  return {element.at(0).as_number(), element.at(1).as_number()};
}

GpuSpec read_gpu(const JsonReader& r) {
  r.reject_unknown_keys({"name", "arch", "memory_gib", "peak_tflops", "peak_fp32_tflops",
                         "hbm_gbps", "hbm_efficiency", "gemm_efficiency", "attention_efficiency",
                         "flash3_attention_efficiency", "comm_compute_slowdown", "framework_efficiency", "kernel_launch_us"});
  GpuSpec g;
  g.name = r.string("name");
  g.arch = static_cast<Arch>(read_enum(r, "arch", kArchNames));
  g.memory_bytes = in_range(r, "memory_gib", kCapacityRange, kGiB);
  g.peak_flops_per_s = in_range(r, "peak_tflops", kFlopsRange, kTflops);
  g.peak_fp32_flops_per_s = in_range(r, "peak_fp32_tflops", kFlopsRange, kTflops);
  g.hbm_bw_bytes_per_s = in_range(r, "hbm_gbps", kBandwidthRange, kGBps);
  g.hbm_efficiency = fraction(r, "hbm_efficiency");
  JsonReader curve = r.require_array("gemm_efficiency");
  if (curve.size() == 0) r.fail("gemm_efficiency", "must have at least one [flops, efficiency]");
  for (size_t i = 0; i < curve.size(); ++i) {
    JsonReader point = curve.at(i);
    auto [flops, efficiency] = read_pair(point, "[flops, efficiency]");
    if (!(flops > 0)) point.at(0).fail("flops must be positive");
    if (!(efficiency > 0 && efficiency <= 1)) point.at(1).fail("efficiency must be in (0, 1]");
    if (i > 0 && !(flops > g.gemm_efficiency.back().flops)) {
      point.at(0).fail("flops must increase from one point to the next");
    }
    g.gemm_efficiency.push_back({flops, efficiency});
  }
  g.attention_efficiency = fraction(r, "attention_efficiency");
  if (r.has("flash3_attention_efficiency")) {
    g.flash3_attention_efficiency = fraction(r, "flash3_attention_efficiency");
  }
  g.comm_compute_slowdown = unit_interval(r, "comm_compute_slowdown");
  g.framework_efficiency = fraction(r, "framework_efficiency");
  g.kernel_launch_s = in_range(r, "kernel_launch_us", kLatencyRange, kUs);
  return g;
}

NodeSpec read_node(const JsonReader& r, Arch arch) {
  r.reject_unknown_keys({"gpus_per_node", "intra_link", "intra_busbw_gbps", "nvls_busbw_gbps",
                         "intra_latency_us", "h2d_pinned_gbps", "d2h_pinned_gbps",
                         "h2d_pageable_gbps", "d2h_pageable_gbps", "gpus_per_pcie_switch",
                         "pcie_uplink_gbps", "cpu_vendor", "cpu_cores", "host_memory_gib",
                         "host_memory_gbps", "cpu_adam_mparams_per_s_per_core", "nvme_read_gbps",
                         "nvme_write_gbps", "nvme_capacity_gib"});
  NodeSpec n;
  n.gpus_per_node = count(r, "gpus_per_node", 1);
  n.intra_link = static_cast<IntraLink>(read_enum(r, "intra_link", kIntraLinkNames));
  if (arch == Arch::kCpu && n.intra_link != IntraLink::kSharedMemory) {
    r.fail("intra_link", "must be \"shm\" for a cpu device (gpu.arch is \"cpu\")");
  }
  n.intra_busbw_bytes_per_s = in_range(r, "intra_busbw_gbps", kBandwidthRange, kGBps);
  if (r.has("nvls_busbw_gbps")) {
    if (n.intra_link != IntraLink::kNvlink || (arch != Arch::kHopper && arch != Arch::kBlackwell)) {
      r.fail("nvls_busbw_gbps",
             "NVLink SHARP needs intra_link \"nvlink\" and a hopper or "
             "blackwell GPU");
    }
    n.nvls_busbw_bytes_per_s = in_range(r, "nvls_busbw_gbps", kBandwidthRange, kGBps);
  }
  if (n.intra_link == IntraLink::kSharedMemory) {
    n.intra_latency_s = in_range(r, "intra_latency_us", kLatencyRange, kUs);
  } else if (r.has("intra_latency_us")) {
    r.fail("intra_latency_us",
           "only used with intra_link \"shm\" (NCCL's per-hop latencies "
           "apply to nvlink and pcie)");
  }
  n.h2d_pinned_bytes_per_s = in_range(r, "h2d_pinned_gbps", kBandwidthRange, kGBps);
  n.d2h_pinned_bytes_per_s = in_range(r, "d2h_pinned_gbps", kBandwidthRange, kGBps);
  n.h2d_pageable_bytes_per_s = in_range(r, "h2d_pageable_gbps", kBandwidthRange, kGBps);
  n.d2h_pageable_bytes_per_s = in_range(r, "d2h_pageable_gbps", kBandwidthRange, kGBps);
  n.gpus_per_pcie_switch = count(r, "gpus_per_pcie_switch", 1);
  n.pcie_uplink_bytes_per_s = in_range(r, "pcie_uplink_gbps", kBandwidthRange, kGBps);
  n.cpu_vendor = static_cast<CpuVendor>(read_enum(r, "cpu_vendor", kCpuVendorNames));
  n.cpu_cores = count(r, "cpu_cores", 1);
  n.host_memory_bytes = in_range(r, "host_memory_gib", kCapacityRange, kGiB);
  n.host_memory_bw_bytes_per_s = in_range(r, "host_memory_gbps", kBandwidthRange, kGBps);
  n.cpu_adam_params_per_s_per_core =
      in_range(r, "cpu_adam_mparams_per_s_per_core", kMparamsRange, kMparams);
  n.nvme_read_bytes_per_s = in_range(r, "nvme_read_gbps", kBandwidthRange, kGBps);
  n.nvme_write_bytes_per_s = in_range(r, "nvme_write_gbps", kBandwidthRange, kGBps);
  n.nvme_capacity_bytes = in_range(r, "nvme_capacity_gib", kCapacityRange, kGiB);
  return n;
}

NetworkSpec read_network(const JsonReader& r) {
  r.reject_unknown_keys({"nics_per_node", "nic_gbps", "latency_us", "ring_nics"});
  NetworkSpec n;
  n.nics_per_node = count(r, "nics_per_node", 0);
  n.nic_bw_bytes_per_s = in_range(r, "nic_gbps", kBandwidthRange, kGBps);
  n.latency_s = in_range(r, "latency_us", kLatencyRange, kUs);
  if (r.has("ring_nics")) {
    n.ring_nics = static_cast<RingNics>(read_enum(r, "ring_nics", kRingNicsNames));
  }
  return n;
}

RuntimeSpec read_runtime(const JsonReader& r) {
  r.reject_unknown_keys(
      {"cuda_context_gib", "nccl_buffer_gib", "allocator_fragmentation", "host_process_gib"});
  RuntimeSpec rt;
  rt.cuda_context_bytes = in_range(r, "cuda_context_gib", kOverheadRange, kGiB);
  rt.nccl_buffer_bytes = in_range(r, "nccl_buffer_gib", kOverheadRange, kGiB);
  rt.allocator_fragmentation = r.non_negative_number("allocator_fragmentation");
  if (!(rt.allocator_fragmentation < 1)) {
    r.fail("allocator_fragmentation",
           "must be a fraction below 1, got " +
               describe_json_value(r.json().at("allocator_fragmentation")));
  }
  rt.host_process_bytes = in_range(r, "host_process_gib", kOverheadRange, kGiB);
  return rt;
}

// The optional "framework" section: every key optional, the fitted constants of framework.h
// otherwise (docs/fidelity.md).
FrameworkSpec read_framework(const JsonReader& r) {
  r.reject_unknown_keys({"host_op_us", "step_overhead_ms", "stage3_fetch_us",
                         "cpu_oversubscription_efficiency", "omp_num_threads"});
  FrameworkSpec f = fitted_framework();
  if (r.has("host_op_us")) f.host_op_s = in_range(r, "host_op_us", kLatencyRange, kUs);
  if (r.has("step_overhead_ms")) {
    f.step_overhead_s = in_range(r, "step_overhead_ms", kStepOverheadRange, 1e-3);
  }
  if (r.has("stage3_fetch_us")) {
    f.stage3_fetch_s = in_range(r, "stage3_fetch_us", kLatencyRange, kUs);
  }
  if (r.has("cpu_oversubscription_efficiency")) {
    f.cpu_oversubscription_efficiency = fraction(r, "cpu_oversubscription_efficiency");
  }
  if (r.has("omp_num_threads")) f.omp_num_threads = count(r, "omp_num_threads", 0);
  return f;
}

CollectiveTable read_collective(const JsonReader& r) {
  r.reject_unknown_keys({"op", "ranks", "nodes", "points", "regimes"});
  CollectiveTable t;
  t.op = static_cast<Collective>(read_enum(r, "op", kCollectiveNames));
  t.ranks = count(r, "ranks", 2);
  t.nodes = count(r, "nodes", 1);
  if (t.ranks % t.nodes != 0) {
    r.fail("ranks", std::to_string(t.ranks) + " ranks do not divide evenly over " +
                        std::to_string(t.nodes) + " nodes");
  }
  JsonReader points = r.require_array("points");
  if (points.size() == 0) r.fail("points", "must have at least one [bytes, seconds]");
  for (size_t i = 0; i < points.size(); ++i) {
    JsonReader point = points.at(i);
    auto [bytes, seconds] = read_pair(point, "[bytes, seconds]");
    if (!(bytes > 0)) point.at(0).fail("bytes must be positive");
    if (!(seconds > 0)) point.at(1).fail("seconds must be positive");
    check_range(bytes, kPointBytesRange, [&](const std::string& p) { point.at(0).fail(p); });
    check_range(seconds, kPointSecondsRange, [&](const std::string& p) { point.at(1).fail(p); });
    if (i > 0 && !(bytes > t.points.back().bytes)) {
      point.at(0).fail("bytes must increase from one point to the next");
    }
    t.points.push_back({bytes, seconds});
  }
  if (r.has("regimes")) {
    JsonReader regimes = r.require_array("regimes");
    for (size_t i = 0; i < regimes.size(); ++i) {
      JsonReader regime = regimes.at(i);
      if (!regime.is_object()) {
        regime.fail("must be an object, got " + describe_json_value(regime.json()));
      }
      regime.reject_unknown_keys({"max_bytes", "alpha_us", "beta_us_per_mb"});
      CollectiveTable::Regime g;
      g.max_bytes = regime.positive_number("max_bytes");
      g.alpha_s = in_range(regime, "alpha_us", kLatencyRange, kUs);
      g.beta_s_per_byte = in_range(regime, "beta_us_per_mb", kUsPerMbRange, kUsPerMb);
      if (i > 0 && !(g.max_bytes > t.regimes.back().max_bytes)) {
        regime.fail("max_bytes", "must increase from one regime to the next");
      }
      t.regimes.push_back(g);
    }
  }
  return t;
}

// SI value -> file units. x * scale / scale is not always x in binary floating point, so the
// quotient is rounded to 15 significant digits: any number the file held with at most 15
// significant digits comes back exactly (docs/formats.md, "Round trip").
double to_file_units(double v, double scale) {
  double q = v / scale;
  if (!std::isfinite(q) || q == 0) return q;
  char buf[40];
  auto out = std::to_chars(buf, buf + sizeof buf, q, std::chars_format::general, 15);
  double r = q;
  std::from_chars(buf, out.ptr, r);
  return r;
}

nlohmann::json number_json(double v) {
  if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < kMaxExactInteger) {
    return static_cast<int64_t>(v);
  }
  return v;
}

nlohmann::json in_units(double v, double scale) { return number_json(to_file_units(v, scale)); }

}  // namespace

const char* collective_name(Collective op) { return name_of(kCollectiveNames, op); }

const CollectiveTable* Profile::find_collective(Collective op, int ranks, int nodes) const {
  for (const CollectiveTable& t : collectives) {
    if (t.op == op && t.ranks == ranks && t.nodes == nodes) return &t;
  }
  return nullptr;
}

Profile profile_from_json(const nlohmann::json& json, const std::string& file) {
  JsonReader r(json, file);
  if (!r.is_object()) {
    r.fail("a hardware profile must be a JSON object, got " + describe_json_value(json));
  }
  r.reject_unknown_keys({"name", "description", "gpu", "node", "network", "runtime", "collectives",
                         "framework", "sources", "provenance"});
  Profile p;
  p.file = file;
  p.name = r.string("name");
  if (p.name.empty()) r.fail("name", "must not be empty");
  p.description = r.optional_string("description").value_or("");
  p.gpu = read_gpu(r.child("gpu"));
  p.node = read_node(r.child("node"), p.gpu.arch);
  p.network = read_network(r.child("network"));
  p.runtime = read_runtime(r.child("runtime"));
  p.framework = fitted_framework();
  if (auto framework = r.optional_child("framework")) p.framework = read_framework(*framework);
  if (r.has("collectives")) {
    JsonReader tables = r.require_array("collectives");
    for (size_t i = 0; i < tables.size(); ++i) {
      JsonReader table = tables.at(i);
      if (!table.is_object()) {
        table.fail("must be an object, got " + describe_json_value(table.json()));
      }
      CollectiveTable t = read_collective(table);
      if (p.find_collective(t.op, t.ranks, t.nodes) != nullptr) {
        table.fail(std::string("a second table for ") + collective_name(t.op) + " on " +
                   std::to_string(t.ranks) + " ranks, " + std::to_string(t.nodes) + " node(s)");
      }
      if (t.ranks / t.nodes > p.node.gpus_per_node) {
        table.fail("ranks", std::to_string(t.ranks / t.nodes) +
                                " ranks per node, but node.gpus_per_node is " +
                                std::to_string(p.node.gpus_per_node));
      }
      p.collectives.push_back(std::move(t));
    }
  }
  if (auto sources = r.optional_child("sources")) {
    for (const auto& [key, value] : sources->json().items()) {
      if (!value.is_string()) {
        sources->fail(key, "must be a string naming where the number comes from, got " +
                               describe_json_value(value));
      }
    }
    p.sources = sources->json();
  } else {
    p.sources = nlohmann::json::object();
  }
  if (auto provenance = r.optional_child("provenance")) {
    p.provenance = provenance->json();
  } else {
    p.provenance = nlohmann::json::object();
  }
  return p;
}

nlohmann::json profile_to_json(const Profile& p) {
  nlohmann::json j;
  j["name"] = p.name;
  if (!p.description.empty()) j["description"] = p.description;

  const GpuSpec& g = p.gpu;
  nlohmann::json curve = nlohmann::json::array();
  for (const GemmEfficiencyPoint& point : g.gemm_efficiency) {
    curve.push_back({number_json(point.flops), number_json(point.efficiency)});
  }
  j["gpu"] = {{"name", g.name},
              {"arch", name_of(kArchNames, g.arch)},
              {"memory_gib", in_units(g.memory_bytes, kGiB)},
              {"peak_tflops", in_units(g.peak_flops_per_s, kTflops)},
              {"peak_fp32_tflops", in_units(g.peak_fp32_flops_per_s, kTflops)},
              {"hbm_gbps", in_units(g.hbm_bw_bytes_per_s, kGBps)},
              {"hbm_efficiency", number_json(g.hbm_efficiency)},
              {"gemm_efficiency", curve},
              {"attention_efficiency", number_json(g.attention_efficiency)},
              {"comm_compute_slowdown", number_json(g.comm_compute_slowdown)},
              {"framework_efficiency", number_json(g.framework_efficiency)},
              {"kernel_launch_us", in_units(g.kernel_launch_s, kUs)}};
  if (g.flash3_attention_efficiency > 0) {
    j["gpu"]["flash3_attention_efficiency"] = number_json(g.flash3_attention_efficiency);
  }

  const NodeSpec& n = p.node;
  nlohmann::json node = {
      {"gpus_per_node", n.gpus_per_node},
      {"intra_link", name_of(kIntraLinkNames, n.intra_link)},
      {"intra_busbw_gbps", in_units(n.intra_busbw_bytes_per_s, kGBps)},
      {"h2d_pinned_gbps", in_units(n.h2d_pinned_bytes_per_s, kGBps)},
      {"d2h_pinned_gbps", in_units(n.d2h_pinned_bytes_per_s, kGBps)},
      {"h2d_pageable_gbps", in_units(n.h2d_pageable_bytes_per_s, kGBps)},
      {"d2h_pageable_gbps", in_units(n.d2h_pageable_bytes_per_s, kGBps)},
      {"gpus_per_pcie_switch", n.gpus_per_pcie_switch},
      {"pcie_uplink_gbps", in_units(n.pcie_uplink_bytes_per_s, kGBps)},
      {"cpu_vendor", name_of(kCpuVendorNames, n.cpu_vendor)},
      {"cpu_cores", n.cpu_cores},
      {"host_memory_gib", in_units(n.host_memory_bytes, kGiB)},
      {"host_memory_gbps", in_units(n.host_memory_bw_bytes_per_s, kGBps)},
      {"cpu_adam_mparams_per_s_per_core", in_units(n.cpu_adam_params_per_s_per_core, kMparams)},
      {"nvme_read_gbps", in_units(n.nvme_read_bytes_per_s, kGBps)},
      {"nvme_write_gbps", in_units(n.nvme_write_bytes_per_s, kGBps)},
      {"nvme_capacity_gib", in_units(n.nvme_capacity_bytes, kGiB)}};
  if (n.nvls_busbw_bytes_per_s > 0) {
    node["nvls_busbw_gbps"] = in_units(n.nvls_busbw_bytes_per_s, kGBps);
  }
  if (n.intra_link == IntraLink::kSharedMemory) {
    node["intra_latency_us"] = in_units(n.intra_latency_s, kUs);
  }
  j["node"] = std::move(node);

  j["network"] = {{"nics_per_node", p.network.nics_per_node},
                  {"nic_gbps", in_units(p.network.nic_bw_bytes_per_s, kGBps)},
                  {"latency_us", in_units(p.network.latency_s, kUs)}};
  if (p.network.ring_nics != NetworkSpec{}.ring_nics) {
    j["network"]["ring_nics"] = name_of(kRingNicsNames, p.network.ring_nics);
  }

  const RuntimeSpec& rt = p.runtime;
  j["runtime"] = {{"cuda_context_gib", in_units(rt.cuda_context_bytes, kGiB)},
                  {"nccl_buffer_gib", in_units(rt.nccl_buffer_bytes, kGiB)},
                  {"allocator_fragmentation", number_json(rt.allocator_fragmentation)},
                  {"host_process_gib", in_units(rt.host_process_bytes, kGiB)}};

  // The framework section only where it differs from the fitted constants, so that a profile
  // written today does not pin the constants a later fit moves.
  const FrameworkSpec& f0 = fitted_framework();
  const FrameworkSpec& f = p.framework;
  nlohmann::json framework = nlohmann::json::object();
  if (f.host_op_s != f0.host_op_s) framework["host_op_us"] = in_units(f.host_op_s, kUs);
  if (f.step_overhead_s != f0.step_overhead_s) {
    framework["step_overhead_ms"] = in_units(f.step_overhead_s, 1e-3);
  }
  if (f.stage3_fetch_s != f0.stage3_fetch_s) {
    framework["stage3_fetch_us"] = in_units(f.stage3_fetch_s, kUs);
  }
  if (f.cpu_oversubscription_efficiency != f0.cpu_oversubscription_efficiency) {
    framework["cpu_oversubscription_efficiency"] = number_json(f.cpu_oversubscription_efficiency);
  }
  if (f.omp_num_threads != f0.omp_num_threads) framework["omp_num_threads"] = f.omp_num_threads;
  if (!framework.empty()) j["framework"] = std::move(framework);

  if (!p.collectives.empty()) {
    nlohmann::json tables = nlohmann::json::array();
    for (const CollectiveTable& t : p.collectives) {
      nlohmann::json points = nlohmann::json::array();
      for (const auto& point : t.points) {
        points.push_back({number_json(point.bytes), number_json(point.seconds)});
      }
      nlohmann::json table = {{"op", collective_name(t.op)},
                              {"ranks", t.ranks},
                              {"nodes", t.nodes},
                              {"points", points}};
      if (!t.regimes.empty()) {
        nlohmann::json regimes = nlohmann::json::array();
        for (const auto& regime : t.regimes) {
          regimes.push_back({{"max_bytes", number_json(regime.max_bytes)},
                             {"alpha_us", in_units(regime.alpha_s, kUs)},
                             {"beta_us_per_mb", in_units(regime.beta_s_per_byte, kUsPerMb)}});
        }
        table["regimes"] = std::move(regimes);
      }
      tables.push_back(std::move(table));
    }
    j["collectives"] = std::move(tables);
  }
  if (p.sources.is_object() && !p.sources.empty()) j["sources"] = p.sources;
  if (p.provenance.is_object() && !p.provenance.empty()) j["provenance"] = p.provenance;
  return j;
}

std::vector<std::string> stock_profile_names() {
  std::vector<std::string> names;
  for (const StockProfile& s : stock_profiles()) names.emplace_back(s.name);
  return names;
}

Profile load_profile(const std::string& spec) {
  struct stat st;
  if (!spec.empty() && stat(spec.c_str(), &st) == 0) {
    return profile_from_json(load_json_file(spec), spec);
  }
  std::string_view name = spec;
  constexpr std::string_view kSuffix = ".json";
  if (name.size() > kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix) {
    name.remove_suffix(kSuffix.size());
  }
  for (const StockProfile& s : stock_profiles()) {
    if (name == s.name) {
      std::string file = "<stock>/" + std::string(s.name) + ".json";
      return profile_from_json(parse_json_text(s.json, file), file);
    }
  }
  std::string list;
  for (const std::string& n : stock_profile_names()) list += (list.empty() ? "" : ", ") + n;
  throw InputError("--hw", "no file '" + spec + "' and no stock profile of that name; " +
                               "stock profiles: " + list);
}

Cluster make_cluster(Profile profile, int gpus, int nodes) {
  if (gpus < 1) throw InputError("--gpus", "must be at least 1, got " + std::to_string(gpus));
  if (nodes < 1) throw InputError("--nodes", "must be at least 1, got " + std::to_string(nodes));
  if (gpus % nodes != 0) {
    throw InputError("--gpus", std::to_string(gpus) + " GPUs do not divide evenly over " +
                                   std::to_string(nodes) + " nodes (--nodes)");
  }
  const int per_node = gpus / nodes;
  if (per_node > profile.node.gpus_per_node) {
    throw InputError("--gpus", std::to_string(gpus) + " GPUs on " + std::to_string(nodes) +
                                   " node(s) need " + std::to_string(per_node) +
                                   " GPUs per node, but a '" + profile.name + "' node has " +
                                   std::to_string(profile.node.gpus_per_node) +
                                   "; use more --nodes");
  }
  if (nodes > 1 && profile.network.nics_per_node == 0) {
    throw InputError("--nodes", "profile '" + profile.name +
                                    "' has no network (network.nics_per_node is 0); use "
                                    "--nodes 1");
  }
  Cluster c;
  c.profile = std::move(profile);
  c.gpus = gpus;
  c.nodes = nodes;
  return c;
}

}  // namespace zplan::hardware
