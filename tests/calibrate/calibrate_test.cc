// A whole calibration on the fake backend: the profile it builds loads, carries provenance and
// fit errors, holds the measured tables -- and the simulator uses them: a calibrated profile
// changes sim::simulate_step's predictions against its base.
#include "calibrate/calibrate.h"

#include <sstream>

#include <catch2/catch.hpp>

#include "calibrate/collective_sweep.h"
#include "calibrate/fake_backend.h"
#include "calibrate/profile_builder.h"
#include "hardware/cost_model.h"
#include "kernels/config.h"
#include "models/catalog.h"
#include "base/input_error.h"
#include "sim/simulate.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::calibrate {
namespace {

using hardware::Collective;

// The fake backend through the driver (registry, checks, fit, profile), as `zplan calibrate
// --backend fake` runs it.
Calibration run_fake(const std::string& base) {
  CalibrateOptions o;
  o.backends = "fake";
  o.base = base;
  o.name = "fake-cluster";
  o.date = "2026-11-22T00:00:00Z";
  o.command_line = "zplan calibrate --backend fake";
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  return calibrate(o, *group, quiet);
}

// A fake of another spec, measured and built with the same code.
hardware::Profile fake_profile(const FakeSpec& spec) {
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  Measurements m;
  make_fake_backend(spec)->measure(*group, ProbeOptions{}, quiet, &m);
  BuildInputs in;
  in.measurements = &m;
  in.name = "fake";
  return build_profile(in).profile;
}

std::string stage_json(int stage, const std::string& extra = "", int micro = 1) {
  return R"({"train_micro_batch_size_per_gpu": )" + std::to_string(micro) +
         R"(, "gradient_accumulation_steps": 1, "bf16": {"enabled": true}, )"
         R"("zero_optimization": {"stage": )" +
         std::to_string(stage) + extra + "}}";
}

TEST_CASE("a fake calibration builds a profile that loads and says where it came from",
          "[calibrate]") {
  Calibration c = run_fake("");
  REQUIRE(c.built.has_value());
  const hardware::Profile& p = c.built->profile;
  // A CPU base built from the fake's host numbers: 8 ranks of 2 threads on a 16-core node.
  CHECK(p.name == "fake-cluster");
  CHECK(p.gpu.arch == hardware::Arch::kCpu);
  CHECK(p.node.intra_link == hardware::IntraLink::kSharedMemory);
  CHECK(p.node.gpus_per_node == 8);
  CHECK(p.node.cpu_cores == 16);
  CHECK(p.gpu.memory_bytes == Approx(64.0 * (1 << 30) / 8));
  CHECK(p.node.cpu_adam_params_per_s_per_core == Approx(250e6 / 2));
  CHECK(p.node.host_memory_bw_bytes_per_s == Approx(8e9 * 8));
  // One measured table per op, with the fit's regimes.
  for (Collective op :
       {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce}) {
    const hardware::CollectiveTable* t = p.find_collective(op, 8, 1);
    REQUIRE(t != nullptr);
    CHECK(t->points.size() >= 20);
    CHECK(!t->regimes.empty());
  }
  CHECK(p.find_collective(Collective::kAllReduce, 8, 1)->regimes.size() == 2);
  // shm node numbers from the all_reduce fit: busbw of the last regime (130 GB/s algbw x 14/8)
  // and the first regime's alpha over 2(n-1) = 14 ring steps (5 us / 14).
  CHECK(p.node.intra_busbw_bytes_per_s == Approx(130e9 * 14 / 8).epsilon(0.02));
  CHECK(p.node.intra_latency_s == Approx(5e-6 / 14).epsilon(0.02));
  // Provenance and sources.
  const nlohmann::json& prov = p.provenance;
  CHECK(prov["date"] == "2026-11-22T00:00:00Z");
  CHECK(prov["command"] == "zplan calibrate --backend fake");
  CHECK(prov["zplan_version"].is_string());
  CHECK(prov["hosts"].size() == 1);
  CHECK(prov["versions"]["fake"] == "seed 42");
  CHECK(prov["base"] == "built from the measurements (cpu)");
  REQUIRE(prov["fit"].size() == 4);  // 3 collectives + the GEMM curve
  for (const nlohmann::json& f : prov["fit"]) {
    CHECK(f["max_rel_error"].get<double>() >= 0);
    CHECK(f["median_rel_error"].get<double>() <= f["max_rel_error"].get<double>());
  }
  CHECK(p.sources["/node/cpu_adam_mparams_per_s_per_core"].get<std::string>().rfind(
            "measured by zplan calibrate 2026-11-22: ", 0) == 0);
  CHECK(p.sources["/gpu/attention_efficiency"].get<std::string>().rfind("[est] ", 0) == 0);
  // The written form loads back to the same profile.
  nlohmann::json j = hardware::profile_to_json(p);
  CHECK(hardware::profile_to_json(hardware::profile_from_json(j, "x.json")) == j);
  // Deterministic: a second run writes the same file, down to the host process's memory (it
  // used to be this process's resident size, which moves between runs).
  CHECK(p.runtime.host_process_bytes == default_fake_spec().process_bytes);
  std::vector<char> ballast(64 << 20, 1);  // grow this process's resident memory
  CHECK(hardware::profile_to_json(run_fake("").built->profile) == j);
  CHECK(ballast[12345] == 1);
}

TEST_CASE("a disk measured slower than a profile holds is written as the floor, and says so",
          "[calibrate]") {
  // Under load an O_DIRECT write with fdatasync can wait seconds behind other writers (seen at
  // 0.93 MB/s while six builds shared the disk); the profile must still load.
  FakeSpec spec = default_fake_spec();
  spec.nvme_write_bytes_per_s = 0.4e6;
  const hardware::Profile p = fake_profile(spec);
  CHECK(p.node.nvme_write_bytes_per_s == hardware::kMinBandwidthBytesPerS);
  CHECK(p.node.nvme_read_bytes_per_s == spec.nvme_read_bytes_per_s);
  CHECK_THAT(p.sources["/node/nvme_write_gbps"].get<std::string>(),
             Catch::Contains("measured 0.4 MB/s, below the 1 MB/s a profile holds"));
  const nlohmann::json j = hardware::profile_to_json(p);
  CHECK_NOTHROW(hardware::profile_from_json(j, "x.json"));
}

TEST_CASE("the measured tables replace NCCL's formulas in the cost model", "[calibrate]") {
  Calibration c = run_fake("a100");
  const hardware::Profile& p = c.built->profile;
  CHECK(p.gpu.arch == hardware::Arch::kAmpere);  // the base's device stays
  CHECK(p.provenance["base"].get<std::string>().rfind("a100", 0) == 0);
  hardware::Cluster calibrated = hardware::make_cluster(p, 8, 1);
  hardware::Cluster base = hardware::make_cluster(hardware::load_profile("a100"), 8, 1);
  const double s = 64.0 * 1024 * 1024;
  hardware::CollectiveCost cost = hardware::collective_cost(calibrated, Collective::kAllGather, s);
  CHECK(std::string(cost.algorithm) == "table");
  // The fake's all_gather: 10 us + S / 200 GB/s, measured with 1 % noise.
  CHECK(cost.total_s() == Approx(10e-6 + s / 200e9).epsilon(0.03));
  CHECK(std::string(hardware::collective_cost(base, Collective::kAllGather, s).algorithm) !=
        "table");
  // Host numbers replace the base's; the device's do not (no cuda backend ran).
  CHECK(p.node.cpu_adam_params_per_s_per_core == Approx(125e6));
  CHECK(p.gpu.peak_flops_per_s == base.profile.gpu.peak_flops_per_s);
}

TEST_CASE("a calibrated profile changes simulate_step's predictions against its base",
          "[calibrate]") {
  // ZeRO-3 on 8 A100s is bound by its all-gathers at micro-batch 1; the fake's all_gather (175 GB/s
  // busbw) is slower than the stock a100's 234.9 GB/s ring, so the calibrated step is slower. With
  // the optimizer offloaded, CPU Adam runs at min(threads x rate per core, DRAM share / 28 B)
  // (docs/cost_model.md §5): the a100 node's 16 threads x 30 M/s (AVX2) = 480 M/s per rank (its
  // DRAM share, 280 GB/s / 8 / 28 B = 1.25 G/s, does not bind) against the fake node's 2 threads x
  // 125 M/s = 250 M/s (DRAM share 64 GB/s / 8 / 28 B = 286 M/s): 1.92x the time.
  // The framework terms (hardware/framework.h) add the same host time to both; left out, so the
  // comparison sees only what calibration measured.
  Calibration c = run_fake("a100");
  hardware::Profile calibrated = c.built->profile;
  hardware::Profile base = hardware::load_profile("a100");
  calibrated.framework = base.framework = hardware::FrameworkSpec{};
  const models::Model model = models::load_model("1.3b");
  sim::Workload w{2048, sim::Attention::kSdpa};

  sim::DsConfig z3 = sim::testing::config(stage_json(3), 8, 2048);
  double t_base = sim::simulate_step(model, hardware::make_cluster(base, 8, 1), z3, w).step_time_s;
  double t_cal =
      sim::simulate_step(model, hardware::make_cluster(calibrated, 8, 1), z3, w).step_time_s;
  INFO("stage 3: base " << t_base << " s, calibrated " << t_cal << " s");
  CHECK(t_cal > t_base * 1.01);

  sim::DsConfig offload =
      sim::testing::config(stage_json(2, R"(, "offload_optimizer": {"device": "cpu"})"), 8, 2048);
  sim::StepResult r_base =
      sim::simulate_step(model, hardware::make_cluster(base, 8, 1), offload, w);
  sim::StepResult r_cal =
      sim::simulate_step(model, hardware::make_cluster(calibrated, 8, 1), offload, w);
  const int cpu = static_cast<int>(sim::Resource::kCpuOptimizer);
  INFO("CPU optimizer busy: base " << r_base.resources[cpu].busy_s << " s, calibrated "
                                   << r_cal.resources[cpu].busy_s << " s");
  // Per parameter the CPU also unscales/clips the fp32 host gradients first and casts the new
  // parameter to 16 bits after: 8 + 4 + 2 B at the rank's share of DRAM (8 ranks: 112 B per
  // parameter over the node's 280 or 64 GB/s).
  const double per_param_base = 1 / 480e6 + 112 / 280e9, per_param_cal = 1 / 250e6 + 112 / 64e9;
  CHECK(r_cal.resources[cpu].busy_s ==
        Approx(r_base.resources[cpu].busy_s * per_param_cal / per_param_base));
}

TEST_CASE("on a CPU profile the simulator follows the measured collectives", "[calibrate]") {
  // tiny-mlp on the fake's 8 CPU ranks, ZeRO-2, micro-batch 1: ~12 ms of compute and memory-bound
  // work against ~0.2 ms of collectives (16.8 MB of bf16 gradients reduce-scattered at 190 GB/s,
  // parameters all-gathered at 200 GB/s). The same calibration with a 50x slower all_reduce and
  // reduce_scatter (~4 ms more of reduce-scatter) must predict a step > 20 % slower.
  FakeSpec slow = default_fake_spec();
  for (FakeCollective& f : slow.collectives) {
    if (f.op == Collective::kAllGather) continue;
    for (auto& g : f.regimes) {
      g.alpha_s *= 50;
      g.beta_s_per_byte *= 50;
    }
  }
  const hardware::Profile fast_profile = fake_profile(default_fake_spec());
  const hardware::Profile slow_profile = fake_profile(slow);
  const models::Model model = models::load_model("tiny-mlp");
  sim::DsConfig z2 = sim::testing::config(stage_json(2, "", 1), 8, 1024);
  sim::Workload w{1, sim::Attention::kSdpa};
  double t_fast =
      sim::simulate_step(model, hardware::make_cluster(fast_profile, 8, 1), z2, w).step_time_s;
  double t_slow =
      sim::simulate_step(model, hardware::make_cluster(slow_profile, 8, 1), z2, w).step_time_s;
  INFO("fast " << t_fast << " s, slow " << t_slow << " s");
  CHECK(t_fast > 0);
  CHECK(t_slow > t_fast * 1.2);
}

TEST_CASE("two nodes give a two-tier profile whose ring model reproduces the cross-node alpha",
          "[calibrate]") {
  // What `zplan calibrate --backend mpi` measures on 2 nodes of 2 ranks (scripts/two-node.sh):
  // all_reduce among each node's 2 ranks (shared memory: 4 us, 4 GB/s), and all_gather and
  // all_reduce among all 4 ranks across the link (all_gather 150 us, 0.1 GB/s; all_reduce faster
  // than a ring, as MPI's recursive halving is). The profile must take the intra-node tier from
  // the first and the network from the cross-node all_gather, the intra-node ring steps' latency
  // taken out of its alpha, so that the two-tier ring model (the tables removed) gives back the
  // measured alphas and betas.
  auto fake = [](Collective op, double alpha, double algbw) {
    FakeCollective f;
    f.op = op;
    f.regimes = {{1e12, alpha, 1 / algbw}};
    return f;
  };
  FakeSpec across = default_fake_spec();
  across.ranks = 4;
  across.nodes = 2;
  across.noise = 0;
  across.collectives = {fake(Collective::kAllReduce, 100e-6, 0.2e9),
                        fake(Collective::kAllGather, 150e-6, 0.1e9)};
  FakeSpec intra = across;
  intra.ranks = 2;
  intra.nodes = 1;
  intra.collectives = {fake(Collective::kAllReduce, 4e-6, 4e9)};

  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  Measurements m;
  make_fake_backend(across)->measure(*group, ProbeOptions{}, quiet, &m);
  // After the cross-node tables, so that the builder must not depend on the order.
  FakeCollectiveBench intra_bench(intra, 0);
  m.collectives.push_back(sweep_collective(intra_bench, *group, Collective::kAllReduce,
                                           sweep_settings(ProbeOptions{}, false), quiet));
  BuildInputs in;
  in.measurements = &m;
  in.name = "two-node";
  in.nodes = 2;
  hardware::Profile p = build_profile(in).profile;
  CHECK(p.node.gpus_per_node == 2);
  CHECK(p.node.intra_busbw_bytes_per_s == Approx(4e9 * 1.0).epsilon(0.01));  // busbw = algbw x 1
  CHECK(p.node.intra_latency_s == Approx(4e-6 / 2).epsilon(0.01));           // 2(n-1) = 2 steps
  CHECK(p.network.nics_per_node == 1);
  CHECK(p.network.nic_bw_bytes_per_s == Approx(0.1e9 * 0.75).epsilon(0.01));  // x (n-1)/n
  // 3 ring steps, 1 across nodes: 150 us less 2 x 2 us.
  CHECK(p.network.latency_s == Approx(150e-6 - 2 * 2e-6).epsilon(0.01));

  // The tables out: the alpha-beta ring on two tiers gives back what was measured.
  p.collectives.clear();
  const hardware::Cluster two_nodes = hardware::make_cluster(p, 4, 2);
  const hardware::Cluster one_node = hardware::make_cluster(p, 2, 1);
  for (double bytes : {1e3, 1e6, 1e8}) {
    INFO(bytes << " B");
    const hardware::CollectiveCost x =
        hardware::collective_cost(two_nodes, Collective::kAllGather, bytes);
    CHECK(x.link == hardware::Link::kNetwork);
    CHECK(x.latency_s + x.transfer_s == Approx(150e-6 + bytes / 0.1e9).epsilon(0.01));
    const hardware::CollectiveCost y =
        hardware::collective_cost(one_node, Collective::kAllReduce, bytes);
    CHECK(y.latency_s + y.transfer_s == Approx(4e-6 + bytes / 4e9).epsilon(0.01));
  }
}

TEST_CASE("the report prints every table", "[calibrate]") {
  Calibration c = run_fake("");
  std::ostringstream out;
  print_report(out, c);
  const std::string text = out.str();
  CHECK_THAT(text, Catch::StartsWith("# zplan calibrate "));
  CHECK_THAT(text, Catch::Contains("# host: zplan fake CPU, 16 CPUs"));
  CHECK_THAT(text, Catch::Contains("# gemm: C[m x n] = A[m x k] B[k x n]"));
  CHECK_THAT(text, Catch::Contains("# all_gather (fake): 8 ranks on 1 node"));
  CHECK_THAT(text, Catch::Contains("# reduce_scatter (fake)"));
  CHECK_THAT(text, Catch::Contains("# all_reduce (fake)"));
  CHECK_THAT(text, Catch::Contains("# fit error: max "));
  CHECK_THAT(text, Catch::Contains("# profile 'fake-cluster'"));
  // A CPU rank's peak in GFLOP/s (TFLOP/s printed "0.1").
  CHECK_THAT(text, Catch::Contains(" GFLOP/s peak, "));
  nlohmann::json j = report_json(c);
  CHECK(j["collectives"].size() == 3);
  CHECK(j["profile"]["name"] == "fake-cluster");
}

TEST_CASE("bad calibrate options fail before measuring", "[calibrate]") {
  auto group = kernels::make_single_process_comm();
  Progress quiet(nullptr);
  CalibrateOptions o;
  o.probe.sweep = Sweep::kTiny;
  o.backends = "fake,host";
  CHECK_THROWS_WITH(calibrate(o, *group, quiet),
                    "--backend: 'fake' cannot be combined with other backends");
  o.backends = "fake";
  o.base = "a1000";
  CHECK_THROWS_WITH(calibrate(o, *group, quiet),
                    Catch::StartsWith("--base: no file 'a1000' and no stock profile of that "
                                      "name; stock profiles: "));
#if ZPLAN_HAVE_MPI
  if (kernels::mpi_launcher_variable().empty()) {
    o.base = "";
    o.backends = "mpi";
    CHECK_THROWS_WITH(calibrate(o, *group, quiet),
                      Catch::StartsWith("backend 'mpi': not started by an MPI launcher"));
  }
#endif
}

}  // namespace
}  // namespace zplan::calibrate
