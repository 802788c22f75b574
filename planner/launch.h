// The ds_config.json zplan writes for a planned configuration, and the command lines that start
// a job with it on each path a user takes: a plain script under the DeepSpeed launcher, the
// Hugging Face Trainer (and Accelerate), and Megatron-DeepSpeed; on several nodes, the hostfile.
//
// What each path checks (sources in launch.cc): deepspeed.initialize reads the file named by
// args.deepspeed_config (--deepspeed --deepspeed_config FILE, deepspeed.add_config_arguments);
// the Trainer takes --deepspeed FILE and raises unless train_micro_batch_size_per_gpu,
// gradient_accumulation_steps, train_batch_size, gradient_clipping, fp16/bf16 "enabled" and the
// optimizer's hyper-parameters equal its own arguments or are "auto"
// (transformers/integrations/deepspeed.py, HfTrainerDeepSpeedConfig.trainer_config_process).
#ifndef ZPLAN_PLANNER_LAUNCH_H_
#define ZPLAN_PLANNER_LAUNCH_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/search_space.h"
#include "sim/ds_config/zero_config.h"

namespace zplan::planner {

// Who reads the written file.
enum class DsConfigFormat {
  // Every value written out: starts under any launcher. The optimizer block holds the Hugging
  // Face Trainer's default hyper-parameters, so a Trainer run with default arguments matches it.
  kDeepSpeed,
  // The Trainer's form: the optimizer's hyper-parameters "auto", filled from --learning_rate,
  // --adam_beta1/2, --adam_epsilon and --weight_decay. A plain DeepSpeed script cannot read it.
  kHf,
};
const char* ds_config_format_name(DsConfigFormat format);  // "deepspeed", "hf"

// The TrainingArguments defaults (transformers training_args.py) the kDeepSpeed optimizer block
// repeats: learning_rate, adam_beta1, adam_beta2, adam_epsilon, weight_decay.
inline constexpr double kTrainerLearningRate = 5e-5;
inline constexpr double kTrainerAdamBeta1 = 0.9;
inline constexpr double kTrainerAdamBeta2 = 0.999;
inline constexpr double kTrainerAdamEpsilon = 1e-8;
inline constexpr double kTrainerWeightDecay = 0.0;

// The planned `config` as the file to write: the same keys, plus what a job needs beyond the
// prediction's keys -- the AdamW optimizer block the prediction assumes (DeepSpeed builds
// DeepSpeedCPUAdam from it under optimizer offload; a script that passes its own optimizer
// overrides it), and at stage 3 stage3_gather_16bit_weights_on_model_save, without which the
// Trainer cannot save consolidated weights. A user's own "optimizer" block is kept.
sim::DsConfig runnable_config(const sim::DsConfig& config, DsConfigFormat format);

// The command lines that start `config` written to `file` on problem.cluster (the path shell-
// quoted where it needs it).
struct LaunchCommands {
  std::string deepspeed;   // a plain script that calls deepspeed.initialize(args=...)
  std::string hf_trainer;  // a Trainer script, with the flags the file must match
  std::string accelerate;  // accelerate launch with the file
  std::string megatron;    // Megatron-DeepSpeed's pretrain_gpt.py
  std::string hostfile;    // several nodes: what the hostfile holds; empty on one node
};
LaunchCommands launch_commands(const Problem& problem, const sim::DsConfig& config,
                               const std::string& file, DsConfigFormat format);
nlohmann::json launch_commands_json(const LaunchCommands& commands);

// Whether Megatron-DeepSpeed's pretrain_gpt.py can train the model: it builds its own GPTModel
// from flags (GPT blocks, or Llama's with --swiglu, --normalization rmsnorm and rotary), with
// every weight trained. It runs no Hugging Face remote code (Qwen v1's QWenLMHeadModel), has no
// PEFT adapters or frozen layers, and its mixture of experts is DeepSpeed-MoE's own layout, not a
// Hugging Face MoE's; it has no latent attention. Else LaunchCommands::megatron stays empty.
bool megatron_builds(const models::Model& model);

// The "before you run it" lines about launching and the optimizer, for plan's output.
std::vector<std::string> launch_lines(const Problem& problem, const sim::DsConfig& config,
                                      const std::string& file, DsConfigFormat format);

}  // namespace zplan::planner

#endif  // ZPLAN_PLANNER_LAUNCH_H_
