// Helpers for the executor's tests: a CPU profile, configs from ds_config JSON, and several ranks
// run as threads of this process (the thread communicator), so that no test needs mpirun.
#ifndef ZPLAN_TESTS_CALIBRATE_EXECUTOR_TEST_UTIL_H_
#define ZPLAN_TESTS_CALIBRATE_EXECUTOR_TEST_UTIL_H_

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/device.h"
#include "executor/executor.h"
#include "hardware/profile.h"
#include "kernels/comm.h"
#include "models/catalog.h"
#include "sim/zero_config.h"

namespace zplan::testing {

// A 2-rank CPU node; its numbers only matter for predicted times, which no test asserts.
inline hardware::Profile cpu_test_profile() {
  nlohmann::json j = nlohmann::json::parse(R"({
    "name": "cpu-test",
    "gpu": {"name": "test cpu rank", "arch": "cpu", "memory_gib": 8, "peak_tflops": 0.05,
            "peak_fp32_tflops": 0.05, "hbm_gbps": 5, "hbm_efficiency": 1,
            "gemm_efficiency": [[1e6, 0.8], [1e9, 0.9]], "attention_efficiency": 0.8,
            "comm_compute_slowdown": 0.5, "framework_efficiency": 1, "kernel_launch_us": 1},
    "node": {"gpus_per_node": 2, "intra_link": "shm", "intra_busbw_gbps": 2,
             "intra_latency_us": 2, "h2d_pinned_gbps": 4, "d2h_pinned_gbps": 4,
             "h2d_pageable_gbps": 4, "d2h_pageable_gbps": 4, "gpus_per_pcie_switch": 1,
             "pcie_uplink_gbps": 4, "cpu_vendor": "intel", "cpu_cores": 2,
             "host_memory_gib": 16, "host_memory_gbps": 10,
             "cpu_adam_mparams_per_s_per_core": 200, "nvme_read_gbps": 1,
             "nvme_write_gbps": 1, "nvme_capacity_gib": 100},
    "network": {"nics_per_node": 0, "nic_gbps": 12.5, "latency_us": 0},
    "runtime": {"cuda_context_gib": 0, "nccl_buffer_gib": 0, "allocator_fragmentation": 0,
                "host_process_gib": 0.1}
  })");
  return hardware::profile_from_json(j, "cpu-test");
}

// A DsConfig from a ds_config document for `ranks` data-parallel ranks.
inline sim::DsConfig ds_config(const nlohmann::json& j, int ranks) {
  sim::ParseContext c;
  c.dp_world_size = ranks;
  return sim::parse_ds_config(j, "test ds_config", c);
}

// Runs fn(rank, device) on `ranks` threads, each with its own CPU device over a shared thread
// communicator; rethrows the first exception.
template <typename Fn>
void run_ranks(int ranks, Fn fn, double timeout_s = 60) {
  auto comms = kernels::make_thread_comms(ranks, executor::kExecutorChannels, timeout_s);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        executor::CpuDeviceOptions o;
        o.blas_threads = 1;
        auto device = executor::make_cpu_device(comms[static_cast<size_t>(r)].get(), o);
        fn(r, *device);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace zplan::testing

#endif  // ZPLAN_TESTS_CALIBRATE_EXECUTOR_TEST_UTIL_H_
