// Words and JSON for what the library computes: the setup line every command prints first, and
// the memory report in text and JSON. Shared by the memory, simulate and plan commands.
#ifndef ZPLAN_CLI_DESCRIBE_H_
#define ZPLAN_CLI_DESCRIBE_H_

#include <initializer_list>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/common_options.h"
#include "sim/memory_model.h"

namespace zplan::cli {

// "20b (20.55 B params) on 8 x A100-SXM4-80GB (1 node)"
std::string describe_run(const models::Model& model, const hardware::Cluster& cluster);
// Fine-tuning: adds trainable_params and "lora": {"rank", "targets"} or "trainable_fraction" to a
// model's JSON object when some parameters are frozen; nothing otherwise.
void add_finetune_json(const models::Model& model, nlohmann::json& model_json);
// "ZeRO-3, offload optimizer cpu, params none"; with ZeRO++ or MiCS named as the planner names
// its families: "ZeRO-3 + ZeRO++ (hpZ 8, qwZ, qgZ), offload optimizer none, params none".
std::string describe_zero(const sim::DsConfig& config);
// Every zero_optimization setting the config's stage reads, as resolved ("auto" filled in,
// DeepSpeed's defaults where the file says nothing), ds_config key names and values:
// "stage 3, offload_optimizer cpu (pin_memory true), offload_param none, overlap_comm true,
// contiguous_gradients true, reduce_bucket_size 5e8, stage3_prefetch_bucket_size 5e7, ...", and
// the ZeRO++ and MiCS keys that are on (", zero_hpz_partition_size 8, mics_shard_size 16").
std::string describe_zero_knobs(const sim::DsConfig& config);
// "bf16, micro-batch 1 x gas 4 = 32 samples, seq 2048, checkpointing full, attention sdpa"
std::string describe_training(const sim::DsConfig& config, const sim::Workload& workload);
// describe_zero + ", " + describe_training
std::string describe_config(const sim::DsConfig& config, const sim::Workload& workload);

nlohmann::json setup_to_json(const Setup& setup);
nlohmann::json memory_report_to_json(const sim::MemoryReport& report);

// The per-tier, per-phase breakdown table, and the verdict lines under it.
// Categories are named in words, the model-dtype parameters by `precision`.
void print_memory_report(std::ostream& out, const sim::MemoryReport& report,
                         const hardware::Cluster& cluster, sim::Precision precision);
// The unit a per-GPU rate is printed in: TFLOP/s, or GFLOP/s below a 1 TFLOP/s peak (CPU ranks),
// where TFLOP/s would print 0.0.
struct FlopsUnit {
  const char* name;  // "TFLOP/s" or "GFLOP/s"
  double per_tflop;  // multiplies a value in TFLOP/s: 1 or 1000
};
FlopsUnit flops_unit(double peak_flops_per_s);

// One tier's peak against its capacity, for headroom_remark.
struct TierUse {
  const char* name;  // "GPU", "host", "NVMe"
  double peak = 0;
  double capacity = 0;
};
// "" unless a tier fits but leaves less free than planner::kDefaultHeadroom; then
// " (GPU 3.0% free: under the 5% headroom that plan and sweep keep, so they rule it out)", so that
// memory and simulate do not call "fits" what plan and sweep prune without saying why.
std::string headroom_remark(std::initializer_list<TierUse> tiers);
// "fits: peak 61.2 GiB of 80.0 GiB (backward, activations 45%)" or
// "does not fit: GPU short by 3.2 GiB at backward; optimizer states dominate (40%)".
std::string memory_verdict(const sim::MemoryReport& report, sim::Precision precision);

}  // namespace zplan::cli

#endif  // ZPLAN_CLI_DESCRIBE_H_
