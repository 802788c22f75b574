// The runnable ds_config and its launch lines (planner/launch.h). Sources: DeepSpeed 0.19.5
// (deepspeedai/DeepSpeed) and transformers' integrations/deepspeed.py, cited where used.
#include "planner/launch.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "base/text.h"
#include "hardware/cost_model.h"

namespace zplan::planner {

namespace {

using nlohmann::json;

// "1.0", "0.5", "5e-05": a number as JSON (and Python's float()) writes it.
std::string number(double v) { return json(v).dump(); }

// The DeepSpeed launcher's head: one node, or every node of the hostfile.
std::string deepspeed_launcher(const hardware::Cluster& cl) {
  if (cl.nodes > 1) {
    return strformat("deepspeed --hostfile hostfile --num_nodes %d --num_gpus %d", cl.nodes,
                     cl.gpus_per_node());
  }
  return strformat("deepspeed --num_gpus %d", cl.gpus);
}

// A path as one POSIX shell word: as it is when it holds only characters no shell treats
// specially, else in single quotes (each ' written '\'').
std::string shell_word(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) ||
           std::string_view("/._-+=:,@%").find(ch) != std::string_view::npos;
  });
  if (plain) return text;
  std::string out = "'";
  for (char ch : text) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

bool offloads_optimizer(const sim::DsConfig& c) {
  return c.zero.offload_optimizer.device != sim::OffloadDevice::kNone;
}

// How many threads each rank's DeepSpeedCPUAdam runs, which the launcher decides
// (docs/cost_model.md, "CPU Adam threads under oversubscription"): what the prediction assumed,
// and how to launch so that each rank gets its share of the cores.
std::string cpu_adam_threads_line(const hardware::Cluster& cl) {
  const hardware::FrameworkSpec& f = cl.profile.framework;
  const int ranks = std::max(1, cl.gpus_per_node());
  // The rule the prediction priced (hardware::cpu_adam_threads), so the line says what it used.
  const hardware::CpuAdamThreads t = hardware::cpu_adam_threads(cl.profile, ranks);
  const int share = t.share;
  std::string line = "CPU Adam threads: ";
  using Rule = hardware::CpuAdamThreads::Rule;
  if (t.rule == Rule::kOmpNumThreads) {
    line += strformat(
        "the prediction assumes OMP_NUM_THREADS=%d in every rank (the profile's "
        "framework.omp_num_threads)",
        f.omp_num_threads);
  } else if (t.rule == Rule::kOversubscribed && f.omp_num_threads > 0) {
    line += strformat(
        "the profile's OMP_NUM_THREADS=%d in each of the node's %d ranks oversubscribes its %d "
        "cores, and zplan keeps %.2f of each rank's fair share of %d cores "
        "(framework.cpu_oversubscription_efficiency)",
        f.omp_num_threads, ranks, cl.profile.node.cpu_cores, f.cpu_oversubscription_efficiency,
        share);
  } else if (t.rule == Rule::kOversubscribed) {
    // deepspeed/launcher/launch.py sets OMP_NUM_THREADS only with --bind_cores_to_rank
    // (cores / ranks, and numactl -C over those cores).
    line += strformat(
        "the prediction assumes the deepspeed launcher above, which leaves OMP_NUM_THREADS "
        "unset: each of the node's %d ranks runs DeepSpeedCPUAdam on a pool of every core, "
        "and zplan keeps %.2f of its fair share of %d cores "
        "(framework.cpu_oversubscription_efficiency)",
        ranks, f.cpu_oversubscription_efficiency, share);
  } else if (ranks > 1) {
    line += strformat("the prediction gives each of the node's %d ranks its fair share of %d cores",
                      ranks, share);
  } else {
    line += strformat("the prediction gives the node's one rank all %d cores", share);
  }
  if (ranks > 1) {
    // --bind_cores_to_rank: launch.py's numactl binding; torch/distributed/run.py sets
    // OMP_NUM_THREADS=1 for more than one process per node when it is unset (accelerate launch
    // runs it).
    line += strformat(
        "; deepspeed --bind_cores_to_rank gives each rank its own %d cores with "
        "OMP_NUM_THREADS=%d, its CPU Adam at the whole share (%.2fx; a CPU-Adam-bound "
        "ZeRO-Offload step on a DGX A100 ran 1.16x faster so, docs/fidelity.md); accelerate "
        "launch and torchrun set OMP_NUM_THREADS=1 when it is unset -- export "
        "OMP_NUM_THREADS=%d before them, or each rank's CPU Adam runs on one thread",
        share, share, 1 / std::max(0.01, f.cpu_oversubscription_efficiency), share);
  }
  return line;
}

}  // namespace

bool megatron_builds(const models::Model& model) {
  const models::ModelShape& s = model.shape();
  const models::FineTune& ft = model.finetune();
  return !s.qwen_names && !s.moe() && !s.mla() && ft.lora_rank == 0 &&
         ft.trainable_fraction >= 1 && ft.modules_to_save.empty();
}

const char* ds_config_format_name(DsConfigFormat format) {
  return format == DsConfigFormat::kHf ? "hf" : "deepspeed";
}

sim::DsConfig runnable_config(const sim::DsConfig& config, DsConfigFormat format) {
  sim::DsConfig c = config;
  if (!c.other.contains("optimizer")) {
    // Without an optimizer block and without a client optimizer, deepspeed.initialize builds
    // none (engine.py: _configure_optimizer runs only for one or the other). With the block it
    // builds AdamW -- FusedAdam, or DeepSpeedCPUAdam when the optimizer is offloaded
    // (_configure_basic_optimizer), the CPU Adam the prediction times; the Trainer then passes a
    // DummyOptim and lets DeepSpeed build it (deepspeed_optim_sched), which ZeRO-Offload needs:
    // a client torch optimizer raises ZeRORuntimeException (zero_force_ds_cpu_optimizer).
    const bool hf = format == DsConfigFormat::kHf;
    json params = {
        {"lr", hf ? json("auto") : json(kTrainerLearningRate)},
        {"betas", hf ? json("auto") : json::array({kTrainerAdamBeta1, kTrainerAdamBeta2})},
        {"eps", hf ? json("auto") : json(kTrainerAdamEpsilon)},
        {"weight_decay", hf ? json("auto") : json(kTrainerWeightDecay)}};
    c.other["optimizer"] = {{"type", "AdamW"}, {"params", std::move(params)}};
  }
  // Without it, stage 3 saves each rank's partition only: the Trainer's save_model (and
  // engine.save_16bit_model) need it to write consolidated 16-bit weights.
  if (c.zero.stage == 3 && !c.zero.other.contains("stage3_gather_16bit_weights_on_model_save")) {
    c.zero.other["stage3_gather_16bit_weights_on_model_save"] = true;
  }
  return c;
}

LaunchCommands launch_commands(const Problem& problem, const sim::DsConfig& c,
                               const std::string& path, DsConfigFormat format) {
  const hardware::Cluster& cl = problem.cluster;
  const std::string file = shell_word(path);
  const std::string launcher = deepspeed_launcher(cl);
  const long long micro = static_cast<long long>(c.micro_batch);
  const long long gas = static_cast<long long>(c.gradient_accumulation_steps);
  const bool ckpt = c.activation_checkpointing.enabled;
  LaunchCommands out;
  // deepspeed.add_config_arguments adds --deepspeed (a switch) and --deepspeed_config FILE;
  // deepspeed.initialize(args=args) reads args.deepspeed_config (deepspeed/__init__.py).
  if (format == DsConfigFormat::kDeepSpeed) {
    out.deepspeed = launcher + " train.py --deepspeed --deepspeed_config " + file;
  }
  // TrainingArguments.deepspeed takes the file; trainer_config_process compares
  // per_device_train_batch_size, gradient_accumulation_steps, world size x both,
  // max_grad_norm, fp16 and bf16 with the file.
  std::string trainer = " --deepspeed " + file +
                        strformat(
                            " --per_device_train_batch_size %lld"
                            " --gradient_accumulation_steps %lld",
                            micro, gas);
  if (c.precision == sim::Precision::kBf16) trainer += " --bf16";
  if (c.precision == sim::Precision::kFp16) trainer += " --fp16";
  trainer += " --max_grad_norm " + number(c.gradient_clipping);
  if (ckpt) trainer += " --gradient_checkpointing";
  out.hf_trainer = launcher + " train.py" + trainer;
  // accelerate launch: the file sets the batch keys, clipping and precision; Accelerate refuses
  // --mixed_precision, --gradient_accumulation_steps and the like beside --deepspeed_config_file.
  // On several nodes it runs once per node, with that node's rank: the "standard" multi-node
  // launcher (torchrun on each node); Accelerate's default, "pdsh", would instead start the
  // deepspeed runner over a hostfile from one node (accelerate/commands/launch.py).
  out.accelerate =
      strformat("accelerate launch --use_deepspeed --deepspeed_config_file %s", file.c_str()) +
      (cl.nodes > 1 ? strformat(" --deepspeed_multinode_launcher standard --num_machines %d "
                                "--num_processes %d --machine_rank <this node's rank> "
                                "--main_process_ip <first node>",
                                cl.nodes, cl.gpus)
                    : strformat(" --num_processes %d", cl.gpus)) +
      " train.py";
  // Megatron-DeepSpeed splits layers with its own tensor parallelism and passes its mpu, not
  // AutoTP's: no Megatron line for an AutoTP file. Nor for a model its pretrain_gpt.py cannot
  // build (megatron_builds).
  if (format == DsConfigFormat::kDeepSpeed && sim::autotp_size(c) == 1 &&
      megatron_builds(problem.model)) {
    // Megatron-DeepSpeed (megatron/arguments.py): the batch split, ZeRO stage, precision and
    // clipping as flags that agree with the file; --no-pipeline-parallel because DeepSpeed's
    // pipeline engine runs ZeRO stage 1 at most; --cpu-optimizer builds DeepSpeedCPUAdam, which
    // optimizer offload requires of a client optimizer.
    std::string m = launcher + " pretrain_gpt.py <model and data flags>" +
                    strformat(
                        " --seq-length %lld --micro-batch-size %lld --global-batch-size %lld"
                        " --zero-stage %d",
                        static_cast<long long>(problem.workload.seq_len), micro,
                        static_cast<long long>(c.train_batch_size), c.zero.stage);
    if (c.precision == sim::Precision::kBf16) m += " --bf16";
    if (c.precision == sim::Precision::kFp16) m += " --fp16";
    m += " --clip-grad " + number(c.gradient_clipping);
    if (ckpt) m += " --checkpoint-activations";
    if (offloads_optimizer(c)) m += " --cpu-optimizer";
    m += " --no-pipeline-parallel --deepspeed --deepspeed_config " + file;
    out.megatron = m;
  }
  if (cl.nodes > 1) {
    // The launcher's hostfile (launcher/runner.py fetch_hostfile): "hostname slots=N" per line.
    out.hostfile = strformat(
        "%d lines, one per node: <hostname> slots=%d (passwordless ssh between "
        "them; run the launcher on the first)",
        cl.nodes, cl.gpus_per_node());
  }
  return out;
}

json launch_commands_json(const LaunchCommands& l) {
  json j = json::object();
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  };
  put("deepspeed", l.deepspeed);
  put("hf_trainer", l.hf_trainer);
  put("accelerate", l.accelerate);
  put("megatron_deepspeed", l.megatron);
  put("hostfile", l.hostfile);
  return j;
}

std::vector<std::string> launch_lines(const Problem& problem, const sim::DsConfig& c,
                                      const std::string& file, DsConfigFormat format) {
  const LaunchCommands l = launch_commands(problem, c, file, format);
  std::vector<std::string> out;
  if (!l.deepspeed.empty()) {
    out.push_back("launch a plain DeepSpeed script (deepspeed.initialize(args=...)): " +
                  l.deepspeed);
  }
  out.push_back(
      "launch a Hugging Face Trainer script (it refuses a file whose batch keys, clipping or "
      "precision differ from its flags): " +
      l.hf_trainer);
  // Accelerate's prepare refuses a torch optimizer beside the file's optimizer block and wants
  // accelerate.utils.DummyOptim, whose lr and weight_decay fill those "auto"s; no one fills an
  // "auto" betas or eps for it (accelerator.py _prepare_deepspeed, then
  // deepspeed_config_process raises on the "auto"s left).
  std::string own_loop = strformat(
      "your own loop batches its DataLoader by %lld and passes "
      "accelerate.utils.DummyOptim(model.parameters()) to accelerator.prepare, since the file "
      "has an optimizer block",
      static_cast<long long>(c.micro_batch));
  if (format == DsConfigFormat::kHf) {
    own_loop += ", and needs the file written with --out-format deepspeed: only the Trainer "
                "fills the \"auto\" betas and eps";
  }
  out.push_back("launch with Accelerate: " + l.accelerate +
                " (a Trainer script takes the Trainer flags above; " + own_loop + ")");
  if (!l.megatron.empty()) out.push_back("launch Megatron-DeepSpeed: " + l.megatron);
  if (!l.hostfile.empty()) out.push_back("hostfile: " + l.hostfile);
  const bool offload = offloads_optimizer(c);
  std::string opt =
      format == DsConfigFormat::kHf
          ? "optimizer: the file's AdamW block takes lr, betas, eps and weight decay from the "
            "Trainer's flags (\"auto\"); DeepSpeed builds it"
          : strformat(
                "optimizer: the file's AdamW block has the Trainer's defaults (lr %s, betas "
                "%s/%s, eps %s, weight decay %s) -- set yours in optimizer.params (the Trainer "
                "must be given the same, or write the file with --out-format hf)",
                number(kTrainerLearningRate).c_str(), number(kTrainerAdamBeta1).c_str(),
                number(kTrainerAdamBeta2).c_str(), number(kTrainerAdamEpsilon).c_str(),
                number(kTrainerWeightDecay).c_str());
  if (offload) {
    opt +=
        "; with optimizer offload DeepSpeed builds DeepSpeedCPUAdam from it and refuses a plain "
        "torch optimizer passed by the script (Megatron-DeepSpeed: --cpu-optimizer), and "
        "compiles its cpu_adam op at first use (needs a C++ toolchain, or DS_BUILD_CPU_ADAM=1 "
        "at install)";
  } else {
    opt += "; an optimizer the script passes to deepspeed.initialize replaces it";
  }
  out.push_back(opt);
  if (offload) out.push_back(cpu_adam_threads_line(problem.cluster));
  return out;
}

}  // namespace zplan::planner
