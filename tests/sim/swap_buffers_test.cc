// NVMe swap buffers (sim/swap_buffers.h): the slice DeepSpeed's parameter swapper puts into one
// buffer, the buffer_size that holds it, and the pinned memory the memory model counts for them
// (partitioned_param_swapper.py, stage3.py; reference §2.2 "NVMe swap buffers").
#include "sim/swap_buffers.h"

#include <catch2/catch.hpp>

#include "models/catalog.h"
#include "sim/memory_model.h"
#include "tests/sim/sim_test_util.h"

namespace zplan::sim {
namespace {

using testing::config;
using testing::ideal_cluster;

TEST_CASE("swap I/O is aligned to 1 KiB x intra_op_parallelism", "[sim][swap]") {
  AioConfig aio;
  CHECK(aio_numel_alignment(aio, 2) == 512);  // 1024 bytes / 2-byte elements
  aio.intra_op_parallelism = 4;
  CHECK(aio_numel_alignment(aio, 4) == 1024);  // 4096 bytes / 4-byte elements
  // 1e8 = 195,312 x 512 + 256.
  CHECK(io_aligned_numel(100'000'000, 512) == 100'000'256);
  CHECK(io_aligned_numel(525'336'576, 512) == 525'336'576);  // 1,026,048 x 512
}

TEST_CASE("buffer_size covers the largest per-rank slice the swapper stores", "[sim][swap]") {
  DsConfig c;
  c.precision = Precision::kBf16;
  // The embedding is the largest tensor of both: 128,256 x 4,096 and 128,256 x 8,192 elements.
  const models::Model l8 = models::load_model("llama3-8b");
  const models::Model l70 = models::load_model("llama3-70b");
  CHECK(largest_swapped_param_slice(l8, 1, c) == 525'336'576);
  CHECK(largest_swapped_param_slice(l70, 8, c) == 131'334'144);  // 1,050,673,152 / 8
  CHECK(param_swap_buffer_size(l8, 1, c) == 525'336'576);
  CHECK(param_swap_buffer_size(l70, 8, c) == 131'334'144);
  // Slices under DeepSpeed's 1e8 default keep it: 1,050,673,152 / 16 = 65,667,072.
  CHECK(param_swap_buffer_size(l70, 16, c) == 100'000'000);
  // A slice under MIN_AIO_BYTES (1 MiB) is not swapped at all: 125m's largest tensor over enough
  // ranks that each slice is just under 1 MiB.
  const models::Model tiny = models::load_model("125m");
  const int64_t largest = tiny.largest_param_numel();
  const int dp = static_cast<int>((largest * 2) / (1 << 20)) + 1;  // slices just under 1 MiB
  CHECK(largest_swapped_param_slice(tiny, dp, c) == 0);
  CHECK(param_swap_buffer_size(tiny, dp, c) == 100'000'000);
}

TEST_CASE("the pinned swap buffers and reuse buffer are counted in host memory", "[sim][swap]") {
  // llama3-8b on one GPU, parameters on NVMe with buffer_size = the embedding (525,336,576):
  // 5 buffers x 525,336,576 x 2 bytes = 5,253,365,760 pinned bytes. The partition (8.03e9) is
  // over max_in_cpu (1e9), so stage3.py also pins a reuse buffer of the largest sub-group's full
  // numel; with sub_group_size above the model there is one sub-group: all of it, 2 bytes each.
  const models::Model model = models::load_model("llama3-8b");
  const std::string nvme = R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "sub_group_size": 100000000000,
        "offload_param": {"device": "nvme", "nvme_path": "/nvme", "buffer_size": 525336576)";
  DsConfig c = config(nvme + "}}}", 1);
  const double psi = static_cast<double>(model.num_params());
  MemoryReport r = analyze_memory(model, ideal_cluster(1), c, Workload{1, Attention::kSdpa});
  CHECK(r.phases[0][Tier::kPinnedHost][Category::kSwapBuffers] ==
        Approx(5'253'365'760.0 + 2 * psi));
  // With the whole partition in CPU memory no sub-group lacks a flat buffer: no reuse buffer.
  c = config(nvme + R"(, "max_in_cpu": 10000000000}}})", 1);
  r = analyze_memory(model, ideal_cluster(1), c, Workload{1, Attention::kSdpa});
  CHECK(r.phases[0][Tier::kPinnedHost][Category::kSwapBuffers] == Approx(5'253'365'760.0));
  // 1e8 is not a multiple of the 512-element alignment: each buffer holds 100,000,256.
  c = config(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/n",
        "max_in_cpu": 10000000000}}})",
             1);
  CHECK(param_swap_buffer_bytes(c) == 5.0 * 100'000'256 * 2);
}

}  // namespace
}  // namespace zplan::sim
