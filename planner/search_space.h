// SearchSpace: the configurations the planner considers for one model on one cluster, and the
// global batch they all train.
//
// A configuration (Candidate) is one value per knob (sim/knobs.h). The space is the product
// of one list per knob -- the user's, or a default list chosen for the model (docs/planner.md,
// "Defaults") -- restricted to what DeepSpeed accepts (validate_ds_config's rules: optimizer
// offload needs stage >= 1, NVMe optimizer offload and parameter offload need stage 3) and
// canonicalized: a knob a stage does not read is set to DeepSpeed's default, so configurations
// DeepSpeed would run identically appear once. Enumeration order is fixed (the order of the
// lists, stage outermost), which is what makes every result independent of the thread count.
#ifndef ZPLAN_PLANNER_SEARCH_SPACE_H_
#define ZPLAN_PLANNER_SEARCH_SPACE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hardware/profile.h"
#include "models/model.h"
#include "sim/ds_config/zero_config.h"
#include "sim/knobs.h"

namespace zplan::planner {

// The planner searches over the knobs of sim/knobs.h (which the single-config commands' flags
// use too), by their names here.
using sim::Knob;
using sim::KnobRequest;
using sim::KnobValues;
using sim::kNumKnobs;

// What is planned: the model, the GPUs, the workload and the parts of every config the search
// does not vary.
// The headroom plan and sweep keep by default (Problem::headroom says why); memory and simulate
// say when a config that fits leaves less than this free.
inline constexpr double kDefaultHeadroom = 0.05;

struct Problem {
  models::Model model;
  hardware::Cluster cluster;
  sim::Workload workload;
  sim::Precision precision = sim::Precision::kBf16;
  // Written as nvme_path of every NVMe offload block.
  std::string nvme_path = "/local_nvme";
  // Fraction of each tier's capacity (GPU memory, host memory per node, NVMe per node) a config
  // must leave free to count as fitting. 5% by default: the caching allocator's fragmentation
  // varies from run to run beyond what the profile's average models, NCCL creates communicators
  // lazily, and the data loader and framework take GPU and host memory the model does not see.
  double headroom = kDefaultHeadroom;
};

// Whether flash-attn 2 could run for this problem's model and hardware where the model's code
// decides (Qwen v1's remote code: a 16-bit model on Ampere or newer, use_flash_attn not false).
bool flash_attn_2_could_run(const Problem& p);

// How the global batch is asked for; at most one of global_batch and global_batch_tokens.
struct BatchRequest {
  std::optional<int64_t> global_batch;           // samples (--global-batch)
  std::optional<int64_t> global_batch_tokens;    // tokens (--global-batch-tokens)
  std::optional<int64_t> gradient_accumulation;  // --gas: fixes micro-batch = per-GPU / gas
};

// The default global batch: about 2^21 = 2,097,152 tokens, the middle of what large-model runs
// use (GPT-3: 0.5M-3.2M tokens, Llama 2: 4M), with the per-GPU share rounded to a power of two so
// that it has many micro-batch divisors, and at least one sample per GPU.
inline constexpr double kDefaultGlobalBatchTokens = 2'097'152;

struct BatchPlan {
  int64_t global_batch = 0;  // train_batch_size, samples
  int64_t per_gpu = 0;       // global_batch / GPUs = micro-batch x gradient accumulation
  std::string origin;        // how it was chosen, for the output ("--global-batch", "default")
};

// Micro-batches in the default list make micro-batch x seq_len at most this many tokens: past
// ~128k tokens per micro-batch every GEMM of these models runs at its efficiency plateau, so
// larger micro-batches only add activation memory.
inline constexpr int64_t kMaxDefaultMicroBatchTokens = 131'072;

// The default lists and the limits of a search (docs/planner.md).
inline constexpr int64_t kDeepSpeedBucket = 500'000'000;      // reduce/allgather_bucket_size
inline constexpr int64_t kDeepSpeedPrefetch = 50'000'000;     // stage3_prefetch_bucket_size
inline constexpr int64_t kDeepSpeedMaxLive = 1'000'000'000;   // stage3_max_live_parameters
inline constexpr int64_t kDeepSpeedPersistence = 100'000;     // stage3_param_persistence_threshold
inline constexpr int64_t kDeepSpeedSubGroup = 1'000'000'000;  // sub_group_size
// A grid larger than this is refused: at ~10k configs/s per core it would take minutes.
inline constexpr double kMaxGridSize = 2'000'000;

struct SearchSpace {
  BatchPlan batch;
  std::array<KnobValues, kNumKnobs> values;   // every list non-empty
  std::array<bool, kNumKnobs> given{};        // from the user (else a default list)
  std::array<std::string, kNumKnobs> source;  // how the user wrote a given knob, for messages
  // Things the user should know about how their request was read (micro-batches that do not
  // divide the batch and were skipped, ...), one line each, for stderr.
  std::vector<std::string> notes;
};

// Resolves the batch and every knob's list. Throws InputError with one line naming the flag for:
// both batch forms given, a global batch that is not a multiple of the GPUs, --gas that does not
// divide the per-GPU batch, micro-batches none of which divide it, and contradictory lists -- a
// value that no value of the other lists can be combined with (e.g. --stage 1 --offload-param
// cpu: parameter offload needs stage 3), or a stage-specific knob given only with stages that do
// not read it (--prefetch-bucket with --stage 1,2).
SearchSpace resolve_search_space(const Problem& problem, const KnobRequest& knobs,
                                 const BatchRequest& batch);

// ZeRO++ and MiCS settings of a stage-3 candidate. They are not knobs of the grid: the planner
// tries them as variants of its best stage-3 configs on multi-node clusters
// (planner/comm_variants.h).
struct CommVariant {
  int64_t hpz = 1;         // zero_hpz_partition_size
  bool qwz = false;        // zero_quantized_weights
  bool qgz = false;        // zero_quantized_gradients
  int64_t mics = -1;       // mics_shard_size
  bool mics_hier = false;  // mics_hierarchical_params_gather
  bool zeropp() const { return hpz > 1 || qwz || qgz; }
  bool plain() const { return !zeropp() && mics <= 0; }
  // Quantizes what it communicates (qwZ's int8 weights, qgZ's int4 gradients), so that training
  // computes with other numbers than plain ZeRO-3 does; hpZ and MiCS only move the same bytes
  // among other ranks.
  bool lossy() const { return qwz || qgz; }
  // 0: plain ZeRO, 1: ZeRO++, 2: MiCS.
  int family() const { return mics > 0 ? 2 : zeropp() ? 1 : 0; }
  bool operator==(const CommVariant&) const = default;

  // The settings `zero` runs with: none below stage 3, where DeepSpeed reads none of them.
  static CommVariant of(const sim::ZeroConfig& zero);
};

struct Candidate {
  std::array<int64_t, kNumKnobs> v{};
  int64_t gas = 1;
  CommVariant comm;

  int64_t operator[](Knob k) const { return v[index(k)]; }
  int stage() const { return static_cast<int>(v[index(Knob::kStage)]); }
  sim::OffloadDevice offload_optimizer() const;
  sim::OffloadDevice offload_param() const;
  // 0: nothing offloaded, 1: something offloaded to CPU memory, 2: something to NVMe.
  int offload_level() const;
  // (stage, offload_optimizer, offload_param, plain / ZeRO++ / MiCS) as one number: configs of
  // one family differ only in batch split, checkpointing and tuning knobs.
  int family() const;
};

// "ZeRO-3 + optimizer->cpu", "ZeRO-2", "ZeRO-3 + optimizer->nvme, params->nvme",
// "ZeRO-3 + ZeRO++ (hpZ 8, qwZ, qgZ)", "ZeRO-3 + MiCS (shard 16, hierarchical)".
std::string family_name(const Candidate& c);
// "ZeRO++ (hpZ 8, qwZ, qgZ)", "MiCS (shard 16, hierarchical)", "" for plain ZeRO.
std::string comm_variant_words(const CommVariant& v);
// family_name plus "micro-batch 2 x gas 64, checkpointing" -- the short form used in lines.
std::string short_description(const Candidate& c);

struct EnumerateOptions {
  // Drop default-list values of stage3_param_persistence_threshold that keep the same set of
  // parameters resident as an earlier value: DeepSpeed would run them identically. User lists
  // are kept as given.
  bool dedupe_by_effect = true;
};

// Every valid, canonical, distinct configuration of `space`, in enumeration order.
std::vector<Candidate> enumerate_candidates(const Problem& problem, const SearchSpace& space,
                                            const EnumerateOptions& options = {});

// The ds_config every candidate starts from: `problem`'s precision, DeepSpeed 0.19's defaults.
sim::DsConfig base_config(const Problem& problem, const BatchPlan& batch);
// The candidate as a DsConfig (batch keys consistent: train_batch_size = micro-batch x gas x
// GPUs). It passes validate_ds_config by construction (a test checks every enumerated one).
sim::DsConfig to_ds_config(const Candidate& c, const sim::DsConfig& base, const Problem& problem);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_SEARCH_SPACE_H_
