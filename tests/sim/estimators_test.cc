// DeepSpeed's estimators reproduced to the byte (reference/deepspeed_internals.md §3).
#include <catch2/catch.hpp>

#include "sim/estimators.h"

namespace zplan::sim {
namespace {

TEST_CASE("zero3 all_cold reproduces the t5-3b example of DeepSpeed's docs", "[estimators]") {
  // estimate_zero3_model_states_mem_needs_all_cold(total_params=2851e6,
  // largest_layer_params=32e6, num_gpus_per_node=8, num_nodes=1); bytes from reference §3.3:
  //   gpu (cpu,cpu) = 4 * 32e6 = 128e6; gpu (none,cpu) = 128e6 + int(2 * 2851e6 / 8)
  //   gpu (none,none) = 128e6 + int(18 * 2851e6 / 8); cpu (x,cpu,1) = 2851e6 * 18 or 16 * 1.5
  auto rows = estimate_zero3_all_cold(2'851'000'000, 32'000'000, 8, 1);
  REQUIRE(rows.size() == 6);
  const int64_t cpu[] = {76'977'000'000, 136'848'000'000, 68'424'000'000,
                         136'848'000'000, 1'536'000'000,  136'848'000'000};
  const int64_t gpu[] = {128'000'000, 128'000'000, 840'750'000,
                         840'750'000, 6'542'750'000, 6'542'750'000};
  const char* printed[][2] = {{"71.69GB", "0.12GB"},  {"127.45GB", "0.12GB"},
                              {"63.72GB", "0.78GB"},  {"127.45GB", "0.78GB"},
                              {"1.43GB", "6.09GB"},   {"127.45GB", "6.09GB"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].cpu_bytes == cpu[i]);
    CHECK(rows[i].gpu_bytes == gpu[i]);
    CHECK(deepspeed_gb(rows[i].cpu_bytes) == printed[i][0]);
    CHECK(deepspeed_gb(rows[i].gpu_bytes) == printed[i][1]);
  }
  CHECK(rows[0].options == "offload_param=cpu, offload_optimizer=cpu, zero_init=1");
  CHECK(rows[5].options == "offload_param=none, offload_optimizer=none, zero_init=0");
}

TEST_CASE("zero2 all_cold follows the current formula, not the docs' old one", "[estimators]") {
  // reference §3.3: offload 136,848,000,000 / 5,702,000,000; no offload
  // 136,848,000,000 / 12,116,750,000 (2 * 2851e6 + int(18 * 2851e6 / 8)); the docs still print
  // 15.93GB from the pre-PR-#5099 formula 4 * P + 16 * P / N.
  auto rows = estimate_zero2_all_cold(2'851'000'000, 8, 1);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].cpu_bytes == 136'848'000'000);
  CHECK(rows[0].gpu_bytes == 5'702'000'000);
  CHECK(rows[1].cpu_bytes == 136'848'000'000);
  CHECK(rows[1].gpu_bytes == 12'116'750'000);
  CHECK(deepspeed_gb(rows[1].gpu_bytes) == "11.28GB");
  CHECK(deepspeed_gb(rows[0].gpu_bytes) == "5.31GB");
}

TEST_CASE("zero3 all_live table for T0_3B on one GPU matches the Hugging Face docs",
          "[estimators]") {
  // bigscience/T0_3B (T5 v1.1 XL encoder-decoder, AutoModel): 2,783,959,040 parameters
  // (24 encoder layers x 48,238,592 + 24 decoder layers x 65,017,856 + 2 x 1024 relative
  // position biases + 2 x 2048 final norms + the shared 32128 x 2048 embedding), largest module
  // the embedding, 65,798,144. The HF DeepSpeed guide prints "2783M total params, 65M largest"
  // and the rows below.
  auto rows = estimate_zero3_all_cold(2'783'959'040, 65'798'144, 1, 1);
  const char* printed[][2] = {{"70.00GB", "0.25GB"}, {"70.00GB", "0.25GB"},
                              {"62.23GB", "5.43GB"}, {"62.23GB", "5.43GB"},
                              {"0.37GB", "46.91GB"}, {"15.56GB", "46.91GB"}};
  REQUIRE(rows.size() == 6);
  for (size_t i = 0; i < rows.size(); ++i) {
    CHECK(deepspeed_gb(rows[i].cpu_bytes) == printed[i][0]);
    CHECK(deepspeed_gb(rows[i].gpu_bytes) == printed[i][1]);
  }
}

TEST_CASE("multi-node estimator uses total GPUs and 1/nodes as DeepSpeed does", "[estimators]") {
  // 3 nodes x 8 GPUs, zero3 no offload, zero_init: gpu = 4 * L + int(18 * P / 24),
  // cpu = L * 4 * 8 * 1.5. Offload params+optimizer: cpu = P * 18 * (1/3) * 1.5 in Python's
  // left-to-right float order.
  const int64_t P = 13'000'000'000, L = 262'144'000;
  EstimatorRow r = estimate_zero3(P, L, 8, 3, false, false, true);
  CHECK(r.gpu_bytes == 4 * L + static_cast<int64_t>(18.0 * P / 24));
  CHECK(r.cpu_bytes == static_cast<int64_t>(static_cast<double>(L) * 4 * 8 * 1.5));
  EstimatorRow o = estimate_zero3(P, L, 8, 3, true, true, true);
  CHECK(o.cpu_bytes == static_cast<int64_t>(static_cast<double>(P) * 18 * (1.0 / 3) * 1.5));
  EstimatorRow z2 = estimate_zero2(P, 8, 3, true);
  CHECK(z2.cpu_bytes == static_cast<int64_t>(static_cast<double>(P) * 96 * 1.5));  // max(4*24,16)
}

}  // namespace
}  // namespace zplan::sim
