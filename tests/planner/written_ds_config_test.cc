// Every ds_config.json the planner would write, for a broad set of plans, checked against
// DeepSpeed 0.19's and the Hugging Face Trainer's rules as written here -- independently of
// zplan's own reader -- with the source of each rule beside it (deepspeedai/DeepSpeed v0.19.5,
// huggingface/transformers src/transformers/integrations/deepspeed.py). The launch lines printed
// with each file are checked against the file the same way.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "base/text.h"
#include "models/finetune.h"
#include "planner/launch.h"
#include "planner/search_space.h"
#include "tests/planner/planner_test_util.h"

namespace zplan::planner {
namespace {

using nlohmann::json;
using testing::knobs;
using testing::problem;

// --- DeepSpeed's rules ---

// Top-level keys zplan may write, each one DeepSpeedConfig reads (runtime/config.py
// _initialize_params; runtime/constants.py names them).
const std::set<std::string> kTopKeys = {"train_batch_size",
                                        "train_micro_batch_size_per_gpu",
                                        "gradient_accumulation_steps",
                                        "gradient_clipping",
                                        "fp16",
                                        "bf16",
                                        "zero_optimization",
                                        "optimizer",
                                        "aio",
                                        "activation_checkpointing",
                                        "data_types"};
// runtime/precision_config.py: DeepSpeedFP16Config, DeepSpeedBF16Config (extra="forbid").
const std::set<std::string> kFp16Keys = {"enabled",
                                         "auto_cast",
                                         "loss_scale",
                                         "initial_scale_power",
                                         "loss_scale_window",
                                         "hysteresis",
                                         "consecutive_hysteresis",
                                         "min_loss_scale",
                                         "fp16_master_weights_and_grads"};
const std::set<std::string> kBf16Keys = {"enabled", "immediate_grad_update", "check_grad_overflow",
                                         "bf16_master_weights_and_grads", "bf16_optimizer_states"};
// runtime/zero/config.py DeepSpeedZeroConfig: the keys each stage's code reads
// (zero/stage_1_and_2.py, zero/stage3.py, zero/parameter_offload.py); zplan writes no others.
const std::set<std::string> kZeroAnyStage = {"stage",        "contiguous_gradients",
                                             "reduce_bucket_size", "overlap_comm",
                                             "reduce_scatter",     "offload_optimizer"};
const std::set<std::string> kZeroStage12 = {"use_multi_rank_bucket_allreduce",
                                            "allgather_bucket_size", "round_robin_gradients"};
const std::set<std::string> kZeroStage3 = {"offload_param",
                                           "sub_group_size",
                                           "stage3_prefetch_bucket_size",
                                           "stage3_param_persistence_threshold",
                                           "stage3_model_persistence_threshold",
                                           "stage3_max_live_parameters",
                                           "stage3_max_reuse_distance",
                                           "stage3_gather_16bit_weights_on_model_save"};
// runtime/zero/offload_config.py (extra="forbid").
const std::set<std::string> kOffloadParamKeys = {"device",      "nvme_path",  "buffer_count",
                                                 "buffer_size", "max_in_cpu", "pin_memory"};
const std::set<std::string> kOffloadOptimizerKeys = {
    "device",         "nvme_path", "buffer_count", "pin_memory",    "pipeline_read",
    "pipeline_write", "fast_init", "ratio",        "super_offload", "cpuadam_cores_perc"};
// runtime/swap_tensor/constants.py (get_aio_config reads these).
const std::set<std::string> kAioInts = {"block_size", "queue_depth", "intra_op_parallelism"};
const std::set<std::string> kAioBools = {"single_submit", "overlap_events", "use_gds"};
// runtime/config.py DEEPSPEED_OPTIMIZERS (compared lower-cased).
const std::set<std::string> kOptimizers = {"adam",        "adamw",      "lamb",    "onebitadam",
                                           "zerooneadam", "onebitlamb", "adagrad", "lion",
                                           "muadam",      "muadamw",    "musgd",   "muon"};

bool is_count(const json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; }

void check_keys(const json& block, const std::set<std::string>& allowed, const char* where) {
  REQUIRE(block.is_object());
  for (const auto& [key, value] : block.items()) {
    INFO(where << "/" << key);
    CHECK(allowed.count(key) == 1);
  }
}

struct Expected {
  int world = 1;
  int nodes = 1;
  int gpus_per_node = 1;
  int64_t largest_param = 0;  // elements
  int64_t seq_len = 0;
  sim::Precision precision = sim::Precision::kBf16;
  Candidate candidate;
};

void check_deepspeed_rules(const json& j, const Expected& e, DsConfigFormat format) {
  for (const auto& [key, value] : j.items()) {
    INFO("top-level key " << key);
    CHECK(kTopKeys.count(key) == 1);
  }
  // config.py _batch_assertion: all three positive, train = micro x gas x data-parallel world.
  const json& train = j.at("train_batch_size");
  const json& micro = j.at("train_micro_batch_size_per_gpu");
  const json& gas = j.at("gradient_accumulation_steps");
  REQUIRE(train.is_number_integer());
  REQUIRE(micro.is_number_integer());
  REQUIRE(gas.is_number_integer());
  CHECK(micro.get<int64_t>() > 0);
  CHECK(gas.get<int64_t>() > 0);
  CHECK(train.get<int64_t>() == micro.get<int64_t>() * gas.get<int64_t>() * e.world);
  CHECK(micro.get<int64_t>() == e.candidate[Knob::kMicroBatch]);
  // runtime/constants.py GRADIENT_CLIPPING: a number, 0 turns it off.
  CHECK(j.at("gradient_clipping").is_number());
  CHECK(j.at("gradient_clipping").get<double>() >= 0);

  // precision_config.py; config.py asserts "bf16 and fp16 modes cannot be simultaneously enabled".
  const bool fp16 = j.contains("fp16") && j["fp16"].value("enabled", false);
  const bool bf16 = j.contains("bf16") && j["bf16"].value("enabled", false);
  if (j.contains("fp16")) check_keys(j["fp16"], kFp16Keys, "fp16");
  if (j.contains("bf16")) check_keys(j["bf16"], kBf16Keys, "bf16");
  CHECK_FALSE((fp16 && bf16));
  CHECK(fp16 == (e.precision == sim::Precision::kFp16));
  CHECK(bf16 == (e.precision == sim::Precision::kBf16));

  // zero/config.py DeepSpeedZeroConfig.
  const json& z = j.at("zero_optimization");
  REQUIRE(z.is_object());
  const int stage = z.at("stage").get<int>();
  CHECK(stage == e.candidate.stage());
  for (const auto& [key, value] : z.items()) {
    INFO("zero_optimization/" << key << " at stage " << stage);
    if (key == "stage") continue;
    const bool any = kZeroAnyStage.count(key) == 1 && stage >= 1;
    const bool s12 = kZeroStage12.count(key) == 1 && (stage == 1 || stage == 2);
    const bool s3 = kZeroStage3.count(key) == 1 && stage == 3;
    CHECK((any || s12 || s3));
    // Field(ge=0) sizes; the rest booleans or the offload blocks.
    if (key.find("size") != std::string::npos || key.find("stage3_max") == 0 ||
        key.find("threshold") != std::string::npos) {
      CHECK(is_count(value));
    }
  }
  if (stage >= 1) CHECK(z.at("overlap_comm").is_boolean());
  // Without it the Trainer's save_model cannot write consolidated 16-bit weights at stage 3
  // (engine.py save_16bit_model; stage3_gather_16bit_weights_on_model_save).
  if (stage == 3) CHECK(z.at("stage3_gather_16bit_weights_on_model_save") == true);

  if (z.contains("offload_param")) {
    const json& o = z["offload_param"];
    check_keys(o, kOffloadParamKeys, "offload_param");
    CHECK(stage == 3);  // DeepSpeedZeroOffloadParamConfig: "valid only with stage 3"
    const std::string device = o.at("device");
    CHECK((device == "cpu" || device == "nvme"));
    CHECK(is_count(o.at("buffer_count")));
    CHECK(o.at("buffer_count").get<int64_t>() >= 1);  // get_buffer needs a free buffer
    CHECK(is_count(o.at("buffer_size")));
    CHECK(is_count(o.at("max_in_cpu")));
    CHECK(o.at("pin_memory").is_boolean());
    if (device == "nvme") {
      // partitioned_param_swapper.py _configure_aio joins nvme_path into the swap folder.
      CHECK(o.at("nvme_path").is_string());
      CHECK_FALSE(o.at("nvme_path").get<std::string>().empty());
      // partition_parameters.py _partition_param: a tensor's per-rank slice is
      // _aligned_size(param) // world = ceil(numel / world); if it is swappable
      // (partitioned_param_swapper.py swappable_tensor: slice bytes >= max(MIN_AIO_BYTES = 1 MiB,
      // aio block_size)) get_buffer asserts "More elements {numel} than buffer size".
      const int64_t slice = (e.largest_param + e.world - 1) / e.world;
      const int64_t element = e.precision == sim::Precision::kFp32 ? 4 : 2;
      const int64_t block = j.contains("aio") ? j["aio"].value("block_size", 1 << 20) : 1 << 20;
      if (slice * element >= std::max<int64_t>(1 << 20, block)) {
        CHECK(o.at("buffer_size").get<int64_t>() >= slice);
      }
    }
  }
  if (z.contains("offload_optimizer")) {
    const json& o = z["offload_optimizer"];
    check_keys(o, kOffloadOptimizerKeys, "offload_optimizer");
    CHECK(stage >= 1);  // the ZeRO optimizers offload; stage 0 has none
    const std::string device = o.at("device");
    CHECK((device == "cpu" || device == "nvme"));
    const double ratio = o.at("ratio").get<double>();
    CHECK((ratio >= 0 && ratio <= 1));  // Field(ge=0.0, le=1.0)
    if (ratio < 1) CHECK(stage == 3);   // zero/config.py offload_ratio_check
    if (device == "nvme") {
      // stage_1_and_2.py never swaps (it would offload to CPU memory); stage3.py
      // _configure_tensor_swapping joins nvme_path.
      CHECK(stage == 3);
      CHECK_FALSE(o.at("nvme_path").get<std::string>().empty());
      // partitioned_optimizer_swapper.py swap_in_optimizer_state allocates num_tensors (fp32
      // param, exp_avg, exp_avg_sq) + 1 (gradient) buffers at once; zplan writes no pipelining
      // (the pipelined swapper holds a second set for the sub-group it prefetches).
      CHECK(o.at("pipeline_read") == false);
      CHECK(o.at("pipeline_write") == false);
      CHECK(o.at("buffer_count").get<int64_t>() >= 4);
    }
  }
  // The optimizer the prediction assumes (Adam states in fp32): DeepSpeed builds it from the
  // block (engine.py _configure_basic_optimizer), which rejects max_grad_norm among its params.
  const json& opt = j.at("optimizer");
  std::string type = opt.at("type");
  std::transform(type.begin(), type.end(), type.begin(), ::tolower);
  CHECK(kOptimizers.count(type) == 1);
  CHECK(type == "adamw");
  const json& params = opt.at("params");
  CHECK_FALSE(params.contains("max_grad_norm"));
  for (const char* key : {"lr", "betas", "eps", "weight_decay"}) {
    INFO("optimizer/params/" << key);
    if (format == DsConfigFormat::kHf) {
      CHECK(params.at(key) == "auto");  // filled by the Trainer (trainer_config_process)
    } else if (std::string(key) == "betas") {
      CHECK((params.at(key).is_array() && params.at(key).size() == 2));
    } else {
      CHECK(params.at(key).is_number());  // FusedAdam / DeepSpeedCPUAdam take numbers
    }
  }
  if (j.contains("aio")) {
    const json& a = j["aio"];
    for (const std::string& k : kAioInts) {
      CHECK(a.at(k).is_number_integer());
      CHECK(a.at(k).get<int64_t>() > 0);
    }
    for (const std::string& k : kAioBools) CHECK(a.at(k).is_boolean());
  }
  // activation_checkpointing/config.py: written when the model checkpoints.
  CHECK(j.contains("activation_checkpointing") == (e.candidate[Knob::kCheckpointing] != 0));
}

// --- The Hugging Face Trainer's rules, run on the flags the printed launch line gives. ---

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The value after `flag` in `w`, or "" if the flag is absent; "true" for a switch.
std::string flag_value(const std::vector<std::string>& w, const std::string& flag, bool is_switch) {
  auto it = std::find(w.begin(), w.end(), flag);
  if (it == w.end()) return "";
  if (is_switch) return "true";
  REQUIRE(it + 1 != w.end());
  return *(it + 1);
}

// The DeepSpeed launcher's processes (launcher/runner.py): --num_gpus per node x --num_nodes.
int launched_world(const std::vector<std::string>& w) {
  REQUIRE(w.at(0) == "deepspeed");
  const std::string nodes = flag_value(w, "--num_nodes", false);
  return std::stoi(flag_value(w, "--num_gpus", false)) * (nodes.empty() ? 1 : std::stoi(nodes));
}

void check_trainer_rules(const json& j, const Expected& e, const LaunchCommands& l) {
  const std::vector<std::string> w = words(l.hf_trainer);
  // TrainingArguments defaults (transformers training_args.py), overridden by the flags.
  auto number = [&](const char* flag, double fallback) {
    const std::string v = flag_value(w, flag, false);
    return v.empty() ? fallback : std::stod(v);
  };
  const double per_device = number("--per_device_train_batch_size", 8);
  const double gas = number("--gradient_accumulation_steps", 1);
  const double max_grad_norm = number("--max_grad_norm", 1.0);
  const bool fp16 = !flag_value(w, "--fp16", true).empty();
  const bool bf16 = !flag_value(w, "--bf16", true).empty();
  const int world = launched_world(w);
  CHECK(world == e.world);
  CHECK(flag_value(w, "--deepspeed", false) == "ds.json");
  // HfTrainerDeepSpeedConfig.trainer_config_process: fill_match appends a mismatch (and
  // trainer_config_finalize raises) when a value is not "auto" and differs.
  auto match = [&](const json& ds_value, const json& hf_value, const char* what) {
    INFO(what << ": ds " << ds_value.dump() << " vs hf " << hf_value.dump());
    if (ds_value.is_null() || ds_value == "auto") return;
    CHECK(ds_value == hf_value);
  };
  match(j["train_micro_batch_size_per_gpu"], per_device, "per_device_train_batch_size");
  match(j["gradient_accumulation_steps"], gas, "gradient_accumulation_steps");
  match(j["train_batch_size"], world * per_device * gas, "train_batch_size (calculated)");
  match(j["gradient_clipping"], max_grad_norm, "max_grad_norm");
  const json& params = j["optimizer"]["params"];
  match(params["lr"], kTrainerLearningRate, "learning_rate");
  match(params["betas"], json::array({kTrainerAdamBeta1, kTrainerAdamBeta2}), "adam betas");
  match(params["eps"], kTrainerAdamEpsilon, "adam_epsilon");
  match(params["weight_decay"], kTrainerWeightDecay, "weight_decay");
  match(j.contains("fp16") ? j["fp16"].value("enabled", json()) : json(), fp16, "fp16");
  match(j.contains("bf16") ? j["bf16"].value("enabled", json()) : json(), bf16, "bf16");
  // "deepspeed's default mode is fp16 unless there is a config that says differently": bf16 if
  // bf16.enabled, fp32 if fp16.enabled is false, else fp16.
  const bool says_bf16 = j.contains("bf16") && j["bf16"].value("enabled", false);
  const bool says_no_fp16 =
      j.contains("fp16") && j["fp16"].contains("enabled") && j["fp16"]["enabled"] == false;
  const sim::Precision trainer_dtype = says_bf16      ? sim::Precision::kBf16
                                       : says_no_fp16 ? sim::Precision::kFp32
                                                      : sim::Precision::kFp16;
  CHECK(trainer_dtype == e.precision);
  CHECK(!flag_value(w, "--gradient_checkpointing", true).empty() ==
        (e.candidate[Knob::kCheckpointing] != 0));
}

void check_launchers(const json& j, const Expected& e, const LaunchCommands& l,
                     DsConfigFormat format) {
  if (format == DsConfigFormat::kDeepSpeed) {
    // deepspeed.initialize(args=...) reads args.deepspeed_config; add_config_arguments makes
    // --deepspeed a switch.
    const std::vector<std::string> w = words(l.deepspeed);
    CHECK(launched_world(w) == e.world);
    CHECK(flag_value(w, "--deepspeed_config", false) == "ds.json");
    CHECK(!flag_value(w, "--deepspeed", true).empty());
    // Megatron-DeepSpeed: the batch split and stage as flags that agree with the file.
    const std::vector<std::string> m = words(l.megatron);
    CHECK(launched_world(m) == e.world);
    CHECK(std::stoll(flag_value(m, "--micro-batch-size", false)) ==
          j["train_micro_batch_size_per_gpu"].get<int64_t>());
    CHECK(std::stoll(flag_value(m, "--global-batch-size", false)) ==
          j["train_batch_size"].get<int64_t>());
    CHECK(std::stoll(flag_value(m, "--seq-length", false)) == e.seq_len);
    CHECK(std::stoi(flag_value(m, "--zero-stage", false)) == e.candidate.stage());
    CHECK(!flag_value(m, "--bf16", true).empty() == (e.precision == sim::Precision::kBf16));
    CHECK(!flag_value(m, "--fp16", true).empty() == (e.precision == sim::Precision::kFp16));
    CHECK(std::stod(flag_value(m, "--clip-grad", false)) == j["gradient_clipping"].get<double>());
    // A client optimizer under ZeRO-Offload must be DeepSpeedCPUAdam (engine.py
    // _configure_optimizer, zero_force_ds_cpu_optimizer).
    CHECK(!flag_value(m, "--cpu-optimizer", true).empty() ==
          (e.candidate[Knob::kOffloadOptimizer] != 0));
    CHECK(flag_value(m, "--deepspeed_config", false) == "ds.json");
  } else {
    CHECK(l.deepspeed.empty());  // a plain script cannot read "auto"
    CHECK(l.megatron.empty());
  }
  CHECK(l.accelerate.find("--deepspeed_config_file ds.json") != std::string::npos);
  CHECK(l.accelerate.find(strformat("--num_processes %d", e.world)) != std::string::npos);
  if (e.nodes > 1) {
    const std::vector<std::string> w = words(l.hf_trainer);
    CHECK(flag_value(w, "--hostfile", false) == "hostfile");
    CHECK(std::stoi(flag_value(w, "--num_nodes", false)) == e.nodes);
    CHECK(std::stoi(flag_value(w, "--num_gpus", false)) == e.gpus_per_node);
    CHECK(l.hostfile.find(strformat("slots=%d", e.gpus_per_node)) != std::string::npos);
    CHECK(l.accelerate.find(strformat("--num_machines %d", e.nodes)) != std::string::npos);
    // Run once per node with --machine_rank: the standard launcher, not pdsh from one node.
    CHECK(flag_value(words(l.accelerate), "--deepspeed_multinode_launcher", false) ==
          "standard");
  } else {
    CHECK(l.hostfile.empty());
  }
}

struct Plan {
  const char* model;
  const char* hw;
  int gpus;
  sim::Precision precision;
  std::vector<std::pair<Knob, const char*>> lists;
};

TEST_CASE("every written ds_config follows DeepSpeed's and the Trainer's rules", "[planner]") {
  const std::vector<Plan> plans = {
      // Stages 0-3 with every offload, bf16, one node.
      {"6.7b",
       "a100-40g",
       8,
       sim::Precision::kBf16,
       {{Knob::kStage, "0,1,2,3"},
        {Knob::kOffloadOptimizer, "none,cpu,nvme"},
        {Knob::kOffloadParam, "none,cpu,nvme"},
        {Knob::kMicroBatch, "1,2"}}},
      // fp16 on one V100, bucket variants.
      {"1.3b",
       "v100",
       1,
       sim::Precision::kFp16,
       {{Knob::kMicroBatch, "1"}, {Knob::kReduceBucket, "5e7,5e8"}}},
      // fp32, two nodes, stage-3 knob variants.
      {"13b",
       "a100",
       16,
       sim::Precision::kFp32,
       {{Knob::kMicroBatch, "1"},
        {Knob::kCheckpointing, "none,full"},
        {Knob::kPrefetchBucket, "1e7,5e7"},
        {Knob::kSubGroupSize, "1e8,1e9"}}},
      // The NVMe cases: slices of 525,336,576 and 131,334,144 elements.
      {"llama3-8b",
       "a100-40g",
       1,
       sim::Precision::kBf16,
       {{Knob::kStage, "3"}, {Knob::kOffloadParam, "nvme"}, {Knob::kMicroBatch, "1"}}},
      {"llama3-70b",
       "a100",
       8,
       sim::Precision::kBf16,
       {{Knob::kStage, "3"}, {Knob::kOffloadParam, "nvme"}, {Knob::kMicroBatch, "1"}}},
  };
  int files = 0;
  std::set<std::string> seen;  // stage/offload/precision/format combinations covered
  for (const Plan& plan : plans) {
    Problem p = problem(plan.model, plan.hw, plan.gpus);
    p.precision = plan.precision;
    KnobRequest k;
    for (const auto& [knob, text] : plan.lists) k.set_from_text(knob, text);
    const SearchSpace space = resolve_search_space(p, k, {});
    const sim::DsConfig base = base_config(p, space.batch);
    Expected e;
    e.world = p.cluster.gpus;
    e.nodes = p.cluster.nodes;
    e.gpus_per_node = p.cluster.gpus_per_node();
    e.largest_param = p.model.largest_param_numel();
    e.seq_len = p.workload.seq_len;
    e.precision = plan.precision;
    for (const Candidate& c : enumerate_candidates(p, space)) {
      e.candidate = c;
      const sim::DsConfig planned = to_ds_config(c, base, p);
      for (DsConfigFormat format : {DsConfigFormat::kDeepSpeed, DsConfigFormat::kHf}) {
        INFO(plan.model << " on " << plan.gpus << " x " << plan.hw << ": " << short_description(c)
                        << ", " << ds_config_format_name(format));
        const sim::DsConfig written = runnable_config(planned, format);
        REQUIRE_NOTHROW(sim::validate_ds_config(written, p.cluster.gpus, "written"));
        const json j = sim::ds_config_to_json(written);
        INFO(j.dump(2));
        check_deepspeed_rules(j, e, format);
        const LaunchCommands l = launch_commands(p, planned, "ds.json", format);
        check_trainer_rules(j, e, l);
        check_launchers(j, e, l, format);
        ++files;
        seen.insert(family_name(c) + " " + sim::precision_name(plan.precision) + " " +
                    ds_config_format_name(format));
      }
    }
  }
  // Every family of stage x optimizer offload x parameter offload that is valid, in both forms.
  CHECK(files > 200);
  CHECK(seen.size() >= 2 * 12);
}

TEST_CASE("the issue's NVMe cases get swap buffers that hold the largest slice", "[planner]") {
  // llama3-8b on one GPU: the embedding, 128256 x 4096 = 525,336,576 elements, whole; llama3-70b
  // on 8: 128256 x 8192 / 8 = 131,334,144. Both are multiples of the 512-element bf16 I/O
  // alignment (1024 bytes x intra_op_parallelism 1 / 2 bytes), so buffer_size is the slice.
  struct Case {
    const char* model;
    const char* hw;
    int gpus;
    int64_t buffer_size;
  };
  for (const Case& c :
       {Case{"llama3-8b", "a100-40g", 1, 525'336'576}, Case{"llama3-70b", "a100", 8, 131'334'144},
        Case{"llama2-7b", "a100", 8, 100'000'000}}) {  // 16M-element slices
    INFO(c.model);
    Problem p = problem(c.model, c.hw, c.gpus);
    const SearchSpace space = resolve_search_space(
        p, knobs({{Knob::kStage, "3"}, {Knob::kOffloadParam, "nvme"}, {Knob::kMicroBatch, "1"}}),
        {});
    const std::vector<Candidate> cands = enumerate_candidates(p, space);
    REQUIRE_FALSE(cands.empty());
    const sim::DsConfig d = to_ds_config(cands[0], base_config(p, space.batch), p);
    CHECK(d.zero.offload_param.buffer_size == c.buffer_size);
  }
}

TEST_CASE("the launch lines quote a config path the shell would split, and say what Accelerate "
          "needs of an own loop",
          "[planner]") {
  Problem p = problem("1.3b", "a100", 8);
  const SearchSpace space = resolve_search_space(p, KnobRequest{}, {});
  const sim::DsConfig c = base_config(p, space.batch);
  const LaunchCommands l = launch_commands(p, c, "my runs/ds $1'x.json", DsConfigFormat::kDeepSpeed);
  CHECK(l.deepspeed.find("--deepspeed_config 'my runs/ds $1'\\''x.json'") != std::string::npos);
  CHECK(l.hf_trainer.find("--deepspeed 'my runs/ds $1'\\''x.json' ") != std::string::npos);
  CHECK(l.accelerate.find("--deepspeed_config_file 'my runs/ds $1'\\''x.json' ") !=
        std::string::npos);
  // A plain path stays as it is.
  CHECK(launch_commands(p, c, "out/ds_z3.json", DsConfigFormat::kDeepSpeed)
            .deepspeed.find("--deepspeed_config out/ds_z3.json") != std::string::npos);
  // The written file has an optimizer block: Accelerate's prepare wants DummyOptim, and with
  // the Trainer's "auto" betas/eps nobody fills them for an own loop.
  auto accelerate_line = [&](DsConfigFormat format) {
    for (const std::string& line : launch_lines(p, c, "ds.json", format)) {
      if (line.rfind("launch with Accelerate: ", 0) == 0) return line;
    }
    return std::string();
  };
  CHECK(accelerate_line(DsConfigFormat::kDeepSpeed).find("DummyOptim") != std::string::npos);
  CHECK(accelerate_line(DsConfigFormat::kDeepSpeed).find("--out-format deepspeed") ==
        std::string::npos);
  CHECK(accelerate_line(DsConfigFormat::kHf).find("--out-format deepspeed") != std::string::npos);
}

TEST_CASE("no Megatron-DeepSpeed line for a model its pretrain_gpt.py cannot build", "[planner]") {
  auto megatron = [](const Problem& p) {
    const SearchSpace space = resolve_search_space(p, KnobRequest{}, {});
    return launch_commands(p, base_config(p, space.batch), "ds.json", DsConfigFormat::kDeepSpeed)
        .megatron;
  };
  Problem dense = problem("1.3b", "a100", 8);
  CHECK(!megatron(dense).empty());
  // PEFT's LoRA: Megatron-DeepSpeed trains every weight.
  models::FineTune lora;
  lora.lora_rank = 16;
  lora.lora_targets = {"all-linear"};
  Problem adapted = dense;
  adapted.model = models::apply_finetune(dense.model, lora);
  CHECK(megatron(adapted).empty());
  // Qwen v1's remote code (QWenLMHeadModel), and a Hugging Face mixture of experts.
  Problem qwen = problem(std::string(ZPLAN_SOURCE_DIR) + "/tests/models/data/Qwen-7B.json", "a100", 8);
  CHECK(megatron(qwen).empty());
  Problem mixtral =
      problem(std::string(ZPLAN_SOURCE_DIR) + "/examples/hf/Mixtral-8x7B-v0.1.json", "a100", 8);
  CHECK(megatron(mixtral).empty());
  // The launch lines say nothing of Megatron-DeepSpeed then.
  for (const std::string& line : launch_lines(qwen, base_config(qwen, resolve_search_space(
                                                                         qwen, KnobRequest{}, {})
                                                                         .batch),
                                              "ds.json", DsConfigFormat::kDeepSpeed)) {
    CHECK(line.find("Megatron") == std::string::npos);
  }
}

TEST_CASE("an offload plan says how many threads each rank's CPU Adam gets and how to launch it",
          "[planner]") {
  // The launcher decides DeepSpeedCPUAdam's OpenMP pool (docs/cost_model.md, "CPU Adam threads
  // under oversubscription"): the line names what the prediction assumed and the share of cores
  // --bind_cores_to_rank or OMP_NUM_THREADS gives each rank. a100: 128 cores, 8 ranks.
  Problem p = problem("1.3b", "a100", 8);
  const SearchSpace space = resolve_search_space(p, KnobRequest{}, {});
  sim::DsConfig c = base_config(p, space.batch);
  auto thread_line = [&](const sim::DsConfig& config) {
    std::string found;
    for (const std::string& l : launch_lines(p, config, "ds.json", DsConfigFormat::kDeepSpeed)) {
      if (l.rfind("CPU Adam threads: ", 0) == 0) found = l;
    }
    return found;
  };
  c.zero.stage = 2;
  CHECK(thread_line(c).empty());  // nothing on the CPU
  c.zero.offload_optimizer.device = sim::OffloadDevice::kCpu;
  std::string l = thread_line(c);
  INFO(l);
  CHECK(l.find("leaves OMP_NUM_THREADS unset") != std::string::npos);
  CHECK(l.find("keeps 0.78 of its fair share of 16 cores") != std::string::npos);
  CHECK(l.find("--bind_cores_to_rank gives each rank its own 16 cores") != std::string::npos);
  CHECK(l.find("(1.28x;") != std::string::npos);
  CHECK(l.find("export OMP_NUM_THREADS=16") != std::string::npos);
  // A profile that sets the launch (torchrun's 1) is what the prediction assumed instead.
  p.cluster.profile.framework.omp_num_threads = 1;
  l = thread_line(c);
  CHECK(l.find("assumes OMP_NUM_THREADS=1 in every rank") != std::string::npos);
  // One rank has every core and nothing to share.
  Problem one = problem("1.3b", "a100", 1);
  const std::vector<std::string> lines =
      launch_lines(one, c, "ds.json", DsConfigFormat::kDeepSpeed);
  CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& s) {
    return s.find("gives the node's one rank all 128 cores") != std::string::npos &&
           s.find("bind_cores_to_rank") == std::string::npos;
  }));
}

}  // namespace
}  // namespace zplan::planner
