// The options every subcommand that looks at one training setup shares (--model, --gpus, --hw,
// --ds-config or ZeRO flags, batch and sequence length), and their resolution into the library's
// types. Values are checked here and reported as InputError naming the flag.
#ifndef ZPLAN_CLI_COMMON_OPTIONS_H_
#define ZPLAN_CLI_COMMON_OPTIONS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "hardware/profile.h"
#include "models/model.h"
#include "sim/ds_config/zero_config.h"

namespace zplan::cli {

// Exit codes (README "Exit codes").
inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 1;     // bad file, value or configuration
inline constexpr int kExitUsage = 2;        // bad flag or missing required flag
inline constexpr int kExitNoFit = 3;        // plan: nothing fits (memory and simulate report a
                                            // config that does not fit and exit 0)
inline constexpr int kExitCheckFailed = 4;  // validate --max-error exceeded
inline constexpr int kExitInternal = 70;    // a bug: please report

// --seq-len not given: the model's default sequence length.
inline constexpr int64_t kModelSeqLen = std::numeric_limits<int64_t>::min();

struct SetupOptions {
  std::string model;
  std::string hw;
  int gpus = 0;
  int nodes = 1;
  int64_t seq_len = kModelSeqLen;
  std::optional<int64_t> micro_batch;
  std::optional<int64_t> gradient_accumulation;
  std::optional<int64_t> global_batch;
  std::string precision;          // --precision as given; empty: default_precision
  std::string default_precision;  // empty: bf16, or fp16 on GPUs without bf16 (V100)
  std::string checkpointing;      // "", "none", "full"
  std::string attention;  // --attention as given; empty: sdpa
  bool no_flash_attention = false;  // the older spelling of --attention eager
  std::string loss;       // --loss: "", "standard", "no-upcast", "fused", "liger"
  bool no_zero_init = false;  // --no-zero-init: the model is built outside deepspeed.zero.Init
  std::string transformers;   // --transformers as given ("5", "4.57.1"); empty: 5
  // Fine-tuning (models/finetune.h): --lora-rank, --lora-targets, --trainable.
  std::optional<int64_t> lora_rank;
  std::optional<std::string> lora_targets;
  std::optional<double> lora_dropout;
  std::optional<std::string> lora_modules_to_save;
  std::optional<double> trainable;
  std::string ds_config;
  // ZeRO flags, an alternative to --ds-config.
  std::optional<int> stage;
  std::string offload_optimizer;  // none | cpu | nvme
  std::string offload_param;
  // Sizes in elements as written ("5e8"), read as the planner reads its lists' items.
  std::optional<std::string> reduce_bucket_size;
  std::optional<std::string> allgather_bucket_size;
  std::optional<std::string> prefetch_bucket_size;
  std::optional<std::string> max_live_parameters;
  std::optional<std::string> param_persistence_threshold;
  std::optional<std::string> sub_group_size;
  std::optional<bool> overlap_comm;
  // --autotp: tensor_parallel.autotp_size (AutoTP training, sim/tensor_parallel.h).
  std::optional<int> autotp;
  std::string nvme_path = "/local_nvme";
  // --client-optimizer: how the script's own Adam (no optimizer block) updates on the GPU.
  std::string client_optimizer;
};

// Adds --model --hw --gpus --nodes --seq-len --micro-batch --gas --global-batch --precision
// --checkpointing --attention --no-flash-attention --loss --transformers --lora-rank
// --lora-targets --trainable.
// With `zero_flags`, also --ds-config and
// the ZeRO flags.
void add_setup_options(CLI::App& app, SetupOptions& options, bool zero_flags);

// --transformers: the release line's major version, 4 or 5 (the default, empty). Throws
// InputError naming the flag for anything else.
int resolve_transformers(const SetupOptions& options);

// True iff any ZeRO flag (--stage, --offload-*, bucket sizes, ...) was given.
bool any_zero_flag(const SetupOptions& options);

// The files a setup reads, as {flag, path}: --model, --hw and --ds-config (a preset name that
// names no file is skipped by check_output_not_input).
std::vector<std::pair<std::string, std::string>> setup_inputs(const SetupOptions& options);

struct Setup {
  models::Model model;  // the whole model (what the output describes)
  hardware::Cluster cluster;
  sim::DsConfig config;
  sim::Workload workload;
  // Remarks for stderr ("--reduce-bucket has no effect at stage 0"), one line each.
  std::vector<std::string> notes;
  // With AutoTP (workload.tensor_parallel > 1): what one GPU holds and runs of `model`
  // (models::tensor_parallel_shard), which the simulator is given.
  std::optional<models::Model> shard;

  const models::Model& rank_model() const { return shard ? *shard : model; }
};

// Loads model and profile, builds the cluster and the ds_config (from --ds-config, or from the
// ZeRO flags with DeepSpeed's defaults for the rest). Throws InputError on any bad value, and on
// --ds-config given together with ZeRO flags.
Setup resolve_setup(const SetupOptions& options);

// Prints each note to stderr as "zplan: note: <note>".
void print_notes(const std::vector<std::string>& notes);

// The parts of resolve_setup, for commands that build many configs (the planner).
// resolve_model applies the fine-tuning flags (models::apply_finetune).
models::Model resolve_model(const SetupOptions& options);
// The fine-tuning the flags ask for; throws InputError naming the flag for --lora-rank below 1,
// --lora-targets without --lora-rank, a bad target list, or --trainable outside (0, 1].
models::FineTune resolve_finetune(const SetupOptions& options);
hardware::Cluster resolve_cluster(const SetupOptions& options);
sim::Workload resolve_workload(const SetupOptions& options, const models::Model& model);
// Enum-valued flags are read case-insensitively ("BF16", "CPU", "Full"), as the planner's lists.
sim::Precision parse_precision(const std::string& text, const std::string& flag);
// Throws InputError naming `where` for a precision the GPU cannot train in at the rates its
// profile describes: bf16 on Volta.
void check_precision_runs(sim::Precision p, const hardware::GpuSpec& gpu, const std::string& where);
// --precision, else the default: default_precision if set, else bf16 where the GPU has it and
// fp16 where it does not (Volta). Throws InputError naming --precision for a bad value.
sim::Precision resolve_precision(const SetupOptions& options, const hardware::GpuSpec& gpu);
sim::OffloadDevice parse_offload(const std::string& text, const std::string& flag);
// Throws InputError naming --attention for an implementation the GPU or precision cannot run:
// FlashAttention-2 needs an Ampere or newer GPU and fp16/bf16, FlashAttention-3 a Hopper GPU and
// fp16/bf16 (the flash-attn packages' own checks).
// `has_sdpa`: the model's code has an sdpa path (Qwen v1's remote code has none).
void check_attention_runs(sim::Attention a, sim::Precision p, const hardware::GpuSpec& gpu,
                          bool has_sdpa = true);
// Qwen v1 without --attention (resolve_workload leaves flash-attn 2): use_flash_attn "auto"
// turns flash-attn on for a 16-bit model, and it runs from Ampere on; else eager. Sets the
// workload's attention and returns the note that says which; "" for any other model or an
// explicit --attention.
std::string settle_remote_attention(const SetupOptions& o, const models::Model& model,
                                    sim::Workload& w, sim::Precision p,
                                    const hardware::GpuSpec& gpu);
// --checkpointing: nullopt when not given (the ds_config decides), else 0 none, 1 full, 2 cpu
// (the checkpointing knob's values, sim/knobs.h).
std::optional<int64_t> parse_checkpointing(const std::string& text);
// Sets activation_checkpointing from a --checkpointing value: none turns it off, full on (keeping
// a file's cpu_checkpointing), cpu on with cpu_checkpointing.
void apply_checkpointing(int64_t value, sim::ActivationCheckpointingConfig& ac);

}  // namespace zplan::cli

#endif  // ZPLAN_CLI_COMMON_OPTIONS_H_
