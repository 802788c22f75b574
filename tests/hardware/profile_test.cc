#include "hardware/profile.h"

#include <functional>
#include <string>

#include <catch2/catch.hpp>

#include "hardware/stock_profiles.h"
#include "base/input_error.h"
#include "base/json_reader.h"

namespace zplan::hardware {
namespace {

using nlohmann::json;

json stock_json(const std::string& name) {
  for (const StockProfile& s : stock_profiles()) {
    if (name == s.name) return json::parse(s.json);
  }
  FAIL("no stock profile " << name);
  return {};
}

// The message of the InputError that profile_from_json(doc, "x.json") throws ("" if none).
std::string error_of(const json& doc) {
  try {
    profile_from_json(doc, "x.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// a100.json with the value at `pointer` replaced (or removed when `value` is discarded).
json with(const std::string& pointer, const json& value) {
  json doc = stock_json("a100");
  doc[json::json_pointer(pointer)] = value;
  return doc;
}

json without(const std::string& pointer) {
  json doc = stock_json("a100");
  json::json_pointer p(pointer);
  doc[p.parent_pointer()].erase(p.back());
  return doc;
}

// Calls `visit(pointer, value)` for every number in `j`.
void for_each_number(const json& j, const std::string& pointer,
                     const std::function<void(const std::string&, const json&)>& visit) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      for_each_number(value, pointer + "/" + json_pointer_escape(key), visit);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      for_each_number(j[i], pointer + "/" + std::to_string(i), visit);
    }
  } else if (j.is_number()) {
    visit(pointer, j);
  }
}

TEST_CASE("every stock profile loads by name, by name.json and by path", "[hardware]") {
  REQUIRE(stock_profile_names() ==
          std::vector<std::string>{"v100", "a100-40g", "a100", "h100", "h200", "a100-pcie",
                                   "h100-pcie", "l4", "a10g", "l40s", "rtx4090"});
  for (const std::string& name : stock_profile_names()) {
    CAPTURE(name);
    Profile by_name = load_profile(name);
    CHECK(by_name.name == name);
    CHECK(by_name.file == "<stock>/" + name + ".json");
    CHECK(by_name.node.gpus_per_node == 8);
    CHECK_FALSE(by_name.description.empty());
    Profile by_file_name = load_profile(name + ".json");
    CHECK(profile_to_json(by_file_name) == profile_to_json(by_name));
    const std::string path = std::string(ZPLAN_SOURCE_DIR) + "/hardware/" + name + ".json";
    Profile by_path = load_profile(path);
    CHECK(by_path.file == path);
    CHECK(profile_to_json(by_path) == profile_to_json(by_name));
  }
}

TEST_CASE("stock profiles: every number has a source and every source names a value",
          "[hardware]") {
  for (const std::string& name : stock_profile_names()) {
    const json doc = stock_json(name);
    const json& sources = doc.at("sources");
    for_each_number(doc, "", [&](const std::string& pointer, const json&) {
      if (pointer.rfind("/sources", 0) == 0) return;
      // A number inside an array (a curve point) may be covered by the array's entry.
      std::string p = pointer;
      bool covered = sources.contains(p);
      while (!covered && p.find('/') != std::string::npos) {
        p = p.substr(0, p.rfind('/'));
        covered = !p.empty() && doc.at(json::json_pointer(p)).is_array() && sources.contains(p);
      }
      INFO(name << ".json: " << pointer << " has no entry in sources");
      CHECK(covered);
    });
    for (const auto& [pointer, text] : sources.items()) {
      INFO(name << ".json: sources names " << pointer);
      CHECK(doc.contains(json::json_pointer(pointer)));
      CHECK_FALSE(text.get<std::string>().empty());
    }
  }
}

TEST_CASE("stock profiles hold the reference figures in SI units", "[hardware]") {
  Profile a100 = load_profile("a100");
  CHECK(a100.gpu.arch == Arch::kAmpere);
  CHECK(a100.gpu.memory_bytes == 80.0 * (1 << 30));
  CHECK(a100.gpu.peak_flops_per_s == Approx(312e12));
  CHECK(a100.node.intra_busbw_bytes_per_s == Approx(234.9e9));
  CHECK(a100.node.cpu_vendor == CpuVendor::kAmd);
  CHECK(a100.network.nic_bw_bytes_per_s == Approx(24e9));
  CHECK(a100.node.cpu_adam_params_per_s_per_core == Approx(30e6));  // AVX2 EPYC 7742
  CHECK(load_profile("h100").node.cpu_adam_params_per_s_per_core == Approx(60e6));  // AVX-512
  CHECK(a100.gpu.kernel_launch_s == Approx(4e-6));
  CHECK(a100.gpu.gemm_efficiency.back().efficiency == Approx(0.869));
  Profile h200 = load_profile("h200");
  CHECK(h200.node.nvls_busbw_bytes_per_s == Approx(480e9));
  CHECK(h200.node.intra_latency_s == 0);
  CHECK(load_profile("v100").node.nvls_busbw_bytes_per_s == 0);
}

TEST_CASE("the PCIe stock profiles hold their datasheet and measured figures", "[hardware]") {
  struct Expected {
    const char* name;
    const char* gpu;
    Arch arch;
    double memory_gib;  // what nvidia-smi / the CUDA runtime reports, not the marketing GB
    double dense_tflops;  // FP16/BF16 tensor peak without sparsity
    double fp32_tflops;
    double memory_gbps;
    double gemm_top;  // measured best matmul / dense peak
    int nics;
  };
  // The values cited in the profiles' sources (docs/formats.md, "Stock profiles"); a datasheet's
  // sparse figure (L4 242, L40S 733, H100 PCIe 1513, RTX 4090 330.4) would fail here.
  const Expected expected[] = {
      {"a100-pcie", "A100-PCIe-80GB", Arch::kAmpere, 80, 312, 19.5, 1935, 0.811, 1},
      {"h100-pcie", "H100-PCIe-80GB", Arch::kHopper, 79.65, 756, 51, 2000, 0.656, 1},
      {"l4", "L4", Arch::kAmpere, 22.49, 121, 30.3, 300, 0.491, 1},
      {"a10g", "A10G", Arch::kAmpere, 22.49, 70, 35, 600, 0.992, 1},
      {"l40s", "L40S", Arch::kAmpere, 44.99, 362.05, 91.6, 864, 0.743, 4},
      {"rtx4090", "GeForce RTX 4090", Arch::kAmpere, 23.99, 165.2, 82.6, 1008, 0.970, 1},
  };
  for (const Expected& e : expected) {
    CAPTURE(e.name);
    const Profile p = load_profile(e.name);
    CHECK(p.gpu.name == e.gpu);
    CHECK(p.gpu.arch == e.arch);
    CHECK(p.gpu.memory_bytes == Approx(e.memory_gib * (1 << 30)));
    CHECK(p.gpu.peak_flops_per_s == Approx(e.dense_tflops * 1e12));
    CHECK(p.gpu.peak_fp32_flops_per_s == Approx(e.fp32_tflops * 1e12));
    CHECK(p.gpu.hbm_bw_bytes_per_s == Approx(e.memory_gbps * 1e9));
    CHECK(p.gpu.gemm_efficiency.back().efficiency == Approx(e.gemm_top));
    // No NVLink on any of them: PCIe rings, no NVLink SHARP, slower than the NVLink nodes.
    CHECK(p.node.intra_link == IntraLink::kPcie);
    CHECK(p.node.nvls_busbw_bytes_per_s == 0);
    CHECK(p.node.intra_busbw_bytes_per_s < load_profile("v100").node.intra_busbw_bytes_per_s);
    CHECK(p.network.nics_per_node == e.nics);
    // Attention runs below the best GEMM, as in the NVLink profiles.
    CHECK(p.gpu.attention_efficiency < e.gemm_top);
  }
  // The 24 GB cards are smaller than their marketing size, as CUDA reports them.
  for (const char* name : {"l4", "a10g", "rtx4090"}) {
    CHECK(load_profile(name).gpu.memory_bytes < 24.0 * (1 << 30));
  }
  // The RTX 4090 box has no peer-to-peer and no RDMA fabric: the slowest links of all.
  const Profile rtx = load_profile("rtx4090");
  for (const std::string& name : stock_profile_names()) {
    if (name == "rtx4090") continue;
    CAPTURE(name);
    const Profile other = load_profile(name);
    CHECK(rtx.node.intra_busbw_bytes_per_s < other.node.intra_busbw_bytes_per_s);
    CHECK(rtx.network.nic_bw_bytes_per_s * rtx.network.nics_per_node <
          other.network.nic_bw_bytes_per_s * other.network.nics_per_node);
  }
}

TEST_CASE("profile_to_json inverts profile_from_json", "[hardware]") {
  for (const std::string& name : stock_profile_names()) {
    CAPTURE(name);
    const json doc = stock_json(name);
    json out = profile_to_json(profile_from_json(doc, name + ".json"));
    // Value equality: 1e8 in a file comes back as the integer 100000000.
    CHECK(out == doc);
  }

  // A calibrated-looking profile: a CPU device, tables with regimes, provenance.
  json doc = stock_json("a100");
  doc["name"] = "cpu-box";
  doc["gpu"]["arch"] = "cpu";
  doc["node"]["intra_link"] = "shm";
  doc["node"]["intra_latency_us"] = 3.7;
  doc["node"]["cpu_vendor"] = "other";
  doc["collectives"] = json::parse(R"([
    {"op": "all_reduce", "ranks": 4, "nodes": 1,
     "points": [[8, 2.5e-05], [1048576, 0.00031], [67108864, 0.0171]],
     "regimes": [{"max_bytes": 65536, "alpha_us": 24.5, "beta_us_per_mb": 0.37},
                 {"max_bytes": 67108864, "alpha_us": 40.1, "beta_us_per_mb": 254.3}]},
    {"op": "all_gather", "ranks": 2, "nodes": 1, "points": [[1024, 1.2e-05]]}])");
  doc["provenance"] = {
      {"date", "2026-07-01"}, {"hosts", json::array({"a", "b"})}, {"command", "zplan calibrate"}};
  Profile p = profile_from_json(doc, "cpu.json");
  CHECK(p.node.intra_latency_s == Approx(3.7e-6));
  REQUIRE(p.collectives.size() == 2);
  CHECK(p.collectives[0].regimes[1].beta_s_per_byte == Approx(254.3e-12));
  CHECK(p.collectives[0].regimes[0].alpha_s == Approx(24.5e-6));
  CHECK(profile_to_json(p) == doc);
}

TEST_CASE("the framework section: fitted defaults unless a profile overrides them", "[hardware]") {
  // The stock profiles carry no framework section: they get the fitted constants, and
  // profile_to_json writes none back (a later fit must not be pinned by a written profile).
  const Profile stock = load_profile("h100");
  const FrameworkSpec& fitted = fitted_framework();
  CHECK(stock.framework.host_op_s == fitted.host_op_s);
  CHECK(stock.framework.step_overhead_s == fitted.step_overhead_s);
  CHECK(stock.framework.stage3_fetch_s == fitted.stage3_fetch_s);
  CHECK(stock.framework.cpu_oversubscription_efficiency == fitted.cpu_oversubscription_efficiency);
  CHECK_FALSE(profile_to_json(stock).contains("framework"));
  // An override is read in its file units and written back as it was.
  json doc = stock_json("h100");
  doc["framework"] = {{"host_op_us", 25},
                      {"step_overhead_ms", 120},
                      {"stage3_fetch_us", 300},
                      {"omp_num_threads", 1}};
  const Profile p = profile_from_json(doc, "x.json");
  CHECK(p.framework.host_op_s == Approx(25e-6));
  CHECK(p.framework.stage3_fetch_s == Approx(300e-6));
  CHECK(p.framework.step_overhead_s == Approx(0.12));
  CHECK(p.framework.omp_num_threads == 1);
  CHECK(stock.framework.omp_num_threads == 0);
  CHECK(p.framework.cpu_oversubscription_efficiency == fitted.cpu_oversubscription_efficiency);
  CHECK(profile_to_json(p) == doc);
}

TEST_CASE("network.ring_nics: the node's NICs unless a profile says each GPU's share",
          "[hardware]") {
  // The stock profiles leave it out and get "node"; profile_to_json writes it only when it
  // differs, so that a profile written today round-trips and the stock ones stay as they are.
  const Profile stock = load_profile("a100");
  CHECK(stock.network.ring_nics == RingNics::kNode);
  CHECK_FALSE(profile_to_json(stock)["network"].contains("ring_nics"));
  json doc = stock_json("a100");
  doc["network"]["ring_nics"] = "gpu";
  const Profile p = profile_from_json(doc, "x.json");
  CHECK(p.network.ring_nics == RingNics::kGpu);
  CHECK(profile_to_json(p) == doc);
}

TEST_CASE("profile_to_json of computed values is stable after one round", "[hardware]") {
  Profile p = load_profile("h100");
  p.node.intra_busbw_bytes_per_s = 1.0 / 3.0 * 1e12;  // not representable with 15 digits
  p.network.latency_s = 2.0 / 7.0 * 1e-6;
  json once = profile_to_json(p);
  json twice = profile_to_json(profile_from_json(once, "once.json"));
  CHECK(once == twice);
  CHECK(once["node"]["intra_busbw_gbps"].get<double>() == 333.333333333333);
}

TEST_CASE("profile validation names the file and the JSON pointer in one line", "[hardware]") {
  struct Case {
    json doc;
    std::string where;
    std::string what;
  };
  const Case cases[] = {
      {without("/gpu/hbm_gbps"), "x.json: /gpu/hbm_gbps", "missing"},
      {without("/name"), "x.json: /name", "missing"},
      {without("/runtime"), "x.json: /runtime", "missing"},
      {with("/gpu/memory_gib", "80"), "x.json: /gpu/memory_gib", "must be a number"},
      {with("/node/gpus_per_node", 8.5), "x.json: /node/gpus_per_node", "integer"},
      {with("/node", json::array()), "x.json: /node", "must be an object"},
      {with("/node/intra_busbw_gbps", 0), "x.json: /node/intra_busbw_gbps", "positive"},
      {with("/network/nic_gbps", -24), "x.json: /network/nic_gbps", "positive"},
      {with("/node/nvme_capacity_gib", 0), "x.json: /node/nvme_capacity_gib", "positive"},
      {with("/node/cpu_adam_mparams_per_s_per_core", -1), "x.json: /node/cpu_adam", "positive"},
      {with("/network/latency_us", -1), "x.json: /network/latency_us", "negative"},
      {with("/node/nvlink_gbps", 300), "x.json: /node/nvlink_gbps", "unknown key"},
      {with("/gpus", json::object()), "x.json: /gpus", "unknown key"},
      {with("/gpu/arch", "turing"), "x.json: /gpu/arch", "must be one of volta, ampere"},
      {with("/node/intra_link", "infinityfabric"), "x.json: /node/intra_link", "nvlink, pcie"},
      {with("/node/cpu_vendor", 3), "x.json: /node/cpu_vendor", "must be a string"},
      {with("/network/ring_nics", "rail"), "x.json: /network/ring_nics",
       "must be one of node, gpu"},
      {with("/gpu/hbm_efficiency", 1.2), "x.json: /gpu/hbm_efficiency", "(0, 1]"},
      {with("/gpu/hbm_efficiency", 0), "x.json: /gpu/hbm_efficiency", "(0, 1]"},
      {with("/gpu/flash3_attention_efficiency", 1.5), "x.json: /gpu/flash3_attention_efficiency",
       "(0, 1]"},
      {with("/gpu/gemm_efficiency/2/1", 0), "x.json: /gpu/gemm_efficiency/2/1", "(0, 1]"},
      {with("/gpu/gemm_efficiency/3/0", 1e9), "x.json: /gpu/gemm_efficiency/3/0", "increase"},
      {with("/gpu/gemm_efficiency/1", 5), "x.json: /gpu/gemm_efficiency/1", "pair"},
      {with("/gpu/gemm_efficiency", json::array()), "x.json: /gpu/gemm_efficiency", "at least"},
      {with("/runtime/allocator_fragmentation", 1.5), "x.json: /runtime/allocator", "below 1"},
      {with("/network/nic_gbps", 1e300), "x.json: /network/nic_gbps", "out of range"},
      // Values that would overflow the simulator's int64-nanosecond clock, or slow a step to
      // centuries: each field kind has a documented range (docs/formats.md, "Ranges").
      {with("/gpu/kernel_launch_us", 1e16), "x.json: /gpu/kernel_launch_us",
       "1e16 is out of range (0 to 1e6 us)"},
      {with("/network/latency_us", 1.5e6), "x.json: /network/latency_us", "out of range"},
      {with("/gpu/hbm_gbps", 1e-9), "x.json: /gpu/hbm_gbps",
       "1e-9 is out of range (0.001 to 1e6 GB/s)"},
      {with("/node/nvme_write_gbps", 2e6), "x.json: /node/nvme_write_gbps", "out of range"},
      {with("/gpu/peak_tflops", 1e-6), "x.json: /gpu/peak_tflops", "TFLOP/s"},
      {with("/gpu/peak_fp32_tflops", 1e7), "x.json: /gpu/peak_fp32_tflops", "out of range"},
      {with("/node/cpu_adam_mparams_per_s_per_core", 1e-4), "x.json: /node/cpu_adam",
       "out of range"},
      {with("/gpu/memory_gib", 1e9), "x.json: /gpu/memory_gib",
       "out of range (above 0 to 1e6 GiB)"},
      {with("/runtime/cuda_context_gib", 2e6), "x.json: /runtime/cuda_context_gib",
       "out of range"},
      {with("/collectives", json::parse(R"([{"op": "all_reduce", "ranks": 8, "nodes": 1,
                                              "points": [[8, 1e7]]}])")),
       "x.json: /collectives/0/points/0/1", "out of range (above 0 to 1e6 s)"},
      {with("/collectives", json::parse(R"([{"op": "all_reduce", "ranks": 8, "nodes": 1,
                                              "points": [[8, 1e-5]],
                                              "regimes": [{"max_bytes": 8, "alpha_us": 1e7,
                                                           "beta_us_per_mb": 1}]}])")),
       "x.json: /collectives/0/regimes/0/alpha_us", "out of range"},
      {with("/collectives", json::parse(R"([{"op": "all_reduce", "ranks": 8, "nodes": 1,
                                              "points": [[8, 1e-5]],
                                              "regimes": [{"max_bytes": 8, "alpha_us": 1,
                                                           "beta_us_per_mb": 1e9}]}])")),
       "x.json: /collectives/0/regimes/0/beta_us_per_mb", "out of range"},
      {with("/node/gpus_per_node", 1e12), "x.json: /node/gpus_per_node", "from 1 to"},
      {with("/node/intra_latency_us", 2), "x.json: /node/intra_latency_us", "only used"},
      {with("/framework/host_op_us", -3), "x.json: /framework/host_op_us", "negative"},
      {with("/framework/stage3_fetch_us", -1), "x.json: /framework/stage3_fetch_us", "negative"},
      {with("/framework/step_overhead_ms", 2e6), "x.json: /framework/step_overhead_ms",
       "out of range (0 to 1e6 ms)"},
      {with("/framework/cpu_oversubscription_efficiency", 0),
       "x.json: /framework/cpu_oversubscription_efficiency", "(0, 1]"},
      {with("/framework/omp_num_threads", -1), "x.json: /framework/omp_num_threads",
       "must be an integer from 0"},
      {with("/framework/python_us", 1), "x.json: /framework/python_us", "unknown key"},
      {with("/gpu/arch", "cpu"), "x.json: /node/intra_link", "must be \"shm\""},
      {with("/sources/~1gpu~1name", 7), "x.json: /sources/~1gpu~1name", "must be a string"},
      {with("/provenance", "today"), "x.json: /provenance", "must be an object"},
      {with("/collectives", json::object()), "x.json: /collectives", "must be an array"},
      {with("/collectives", json::parse(R"([{"op": "all_to_all", "ranks": 8, "nodes": 1,
                                              "points": [[8, 1e-5]]}])")),
       "x.json: /collectives/0/op", "must be one of all_gather, reduce_scatter, all_reduce"},
      {with("/collectives", json::parse(R"([{"op": "all_reduce", "ranks": 8, "nodes": 3,
                                              "points": [[8, 1e-5]]}])")),
       "x.json: /collectives/0/ranks", "divide evenly"},
      {with("/collectives", json::parse(R"([{"op": "all_reduce", "ranks": 16, "nodes": 1,
                                              "points": [[8, 1e-5]]}])")),
       "x.json: /collectives/0/ranks", "gpus_per_node is 8"},
      {with("/collectives", json::parse(R"([{"op": "all_reduce", "ranks": 8, "nodes": 1,
                                              "points": [[8, 1e-5], [8, 2e-5]]}])")),
       "x.json: /collectives/0/points/1/0", "increase"},
      {with("/collectives", json::parse(R"([{"op": "all_reduce", "ranks": 8, "nodes": 1,
                                              "points": [[8, 0]]}])")),
       "x.json: /collectives/0/points/0/1", "positive"},
      {with("/collectives", json::parse(R"([{"op": "all_reduce", "ranks": 8, "nodes": 1,
                                              "points": [[8, 1e-5]],
                                              "regimes": [{"max_bytes": 8, "alpha_us": 1,
                                                           "beta_s_per_byte": 1e-9}]}])")),
       "x.json: /collectives/0/regimes/0/beta_s_per_byte", "unknown key"},
      {with("/collectives", json::parse(R"([{"op": "all_reduce", "ranks": 8, "nodes": 1,
                                              "points": [[8, 1e-5]]},
                                             {"op": "all_reduce", "ranks": 8, "nodes": 1,
                                              "points": [[8, 1e-5]]}])")),
       "x.json: /collectives/1", "a second table"},
  };
  for (const Case& c : cases) {
    std::string message = error_of(c.doc);
    INFO(message);
    CHECK(message.rfind(c.where, 0) == 0);
    CHECK(message.find(c.what) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }

  // NVLink SHARP only on Hopper and later.
  std::string nvls = error_of(with("/node/nvls_busbw_gbps", 480));
  CHECK(nvls.rfind("x.json: /node/nvls_busbw_gbps", 0) == 0);
  CHECK(nvls.find("hopper") != std::string::npos);
  // A document that is not an object.
  CHECK(error_of(json::array()).rfind("x.json: ", 0) == 0);
  // A shm node needs its per-step latency.
  json shm = with("/node/intra_link", "shm");
  CHECK(error_of(shm).rfind("x.json: /node/intra_latency_us: missing", 0) == 0);
}

TEST_CASE("profile loader never fails except with InputError (fuzz by mutation)", "[hardware]") {
  const json base = stock_json("h100");
  std::vector<std::string> pointers;
  std::function<void(const json&, const std::string&)> collect = [&](const json& j,
                                                                     const std::string& p) {
    pointers.push_back(p);
    if (j.is_object()) {
      for (const auto& [k, v] : j.items()) collect(v, p + "/" + json_pointer_escape(k));
    } else if (j.is_array()) {
      for (size_t i = 0; i < j.size(); ++i) collect(j[i], p + "/" + std::to_string(i));
    }
  };
  collect(base, "");
  const json mutations[] = {nullptr,
                            "x",
                            -1,
                            0,
                            1e308,
                            -1e308,
                            3.5,
                            json::object(),
                            json::array(),
                            json::array({1, 2}),
                            true,
                            18446744073709551615u};
  int accepted = 0;
  int rejected = 0;
  for (const std::string& pointer : pointers) {
    for (const json& m : mutations) {
      json doc = base;
      if (pointer.empty()) {
        doc = m;
      } else {
        doc[json::json_pointer(pointer)] = m;
      }
      try {
        profile_from_json(doc, "f.json");
        ++accepted;
      } catch (const InputError& e) {
        ++rejected;
        CHECK(std::string(e.what()).rfind("f.json", 0) == 0);
      }
    }
  }
  CHECK(rejected > accepted);
}

TEST_CASE("load_profile names the stock profiles when nothing matches", "[hardware]") {
  try {
    load_profile("a200");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "--hw: no file 'a200' and no stock profile of that name; stock profiles: v100, "
          "a100-40g, a100, h100, h200, a100-pcie, h100-pcie, l4, a10g, l40s, rtx4090");
  }
  CHECK_THROWS_AS(load_profile(""), InputError);
  CHECK_THROWS_AS(load_profile(".json"), InputError);
  // A directory is an existing path, not a stock name.
  CHECK_THROWS_WITH(load_profile(std::string(ZPLAN_SOURCE_DIR) + "/hardware"),
                    Catch::Contains("is a directory"));
}

TEST_CASE("make_cluster checks --gpus and --nodes", "[hardware]") {
  Profile a100 = load_profile("a100");
  Cluster c = make_cluster(a100, 16, 2);
  CHECK(c.gpus == 16);
  CHECK(c.nodes == 2);
  CHECK(c.gpus_per_node() == 8);
  CHECK(make_cluster(a100, 3, 1).gpus_per_node() == 3);

  auto error = [&](int gpus, int nodes) -> std::string {
    try {
      make_cluster(a100, gpus, nodes);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error(0, 1) == "--gpus: must be at least 1, got 0");
  CHECK(error(8, 0) == "--nodes: must be at least 1, got 0");
  CHECK(error(8, 3).rfind("--gpus: 8 GPUs do not divide evenly over 3 nodes", 0) == 0);
  CHECK(error(16, 1).rfind("--gpus: 16 GPUs on 1 node(s) need 16 GPUs per node, but a 'a100' "
                           "node has 8",
                           0) == 0);
  Profile lonely = a100;
  lonely.network.nics_per_node = 0;
  CHECK_NOTHROW(make_cluster(lonely, 8, 1));
  CHECK_THROWS_WITH(make_cluster(lonely, 16, 2), Catch::StartsWith("--nodes: profile 'a100'"));
}

TEST_CASE("find_collective and collective_name", "[hardware]") {
  CHECK(std::string(collective_name(Collective::kAllGather)) == "all_gather");
  CHECK(std::string(collective_name(Collective::kReduceScatter)) == "reduce_scatter");
  CHECK(std::string(collective_name(Collective::kAllReduce)) == "all_reduce");
  Profile p = load_profile("a100");
  CHECK(p.find_collective(Collective::kAllReduce, 8, 1) == nullptr);
  CollectiveTable t;
  t.op = Collective::kAllGather;
  t.ranks = 16;
  t.nodes = 2;
  t.points = {{1024, 1e-5}};
  p.collectives.push_back(t);
  CHECK(p.find_collective(Collective::kAllGather, 16, 2) == &p.collectives[0]);
  CHECK(p.find_collective(Collective::kAllGather, 16, 1) == nullptr);
  CHECK(p.find_collective(Collective::kAllReduce, 16, 2) == nullptr);
}

}  // namespace
}  // namespace zplan::hardware
