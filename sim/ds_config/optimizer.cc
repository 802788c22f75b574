// The ds_config's "optimizer" block, read as DeepSpeed 0.19.5 builds an optimizer from it
// (deepspeed/runtime/engine.py: _do_sanity_check, _configure_basic_optimizer,
// _do_optimizer_sanity_check; runtime/config.py: the DeepSpeed optimizer names; runtime/zero/
// utils.py: ZERO_SUPPORTED_OPTIMIZERS). The result is an OptimizerConfig (zero_config.h): the
// number of fp32 states and the CPU optimizer, which the memory model and the step builder use.
// What DeepSpeed refuses is refused with its reason; what zplan cannot model is refused as "not
// modelled: <feature>". The block itself stays in DsConfig::other and is written back as it was.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim::internal {

namespace {

using nlohmann::json;

bool truthy(const json* v) { return v != nullptr && python_truthy(*v); }

// The member `key` of a JSON object, or nullptr.
const json* member_of(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// The names DeepSpeed builds itself (config.py DEEPSPEED_OPTIMIZERS): matched after lower-casing.
constexpr std::string_view kDeepSpeedNames[] = {
    "adagrad", "adam",    "adamw",   "lamb",  "onebitadam", "zerooneadam",
    "onebitlamb", "muadam", "muadamw", "musgd", "lion",       "muon"};
// The optimizer classes of torch.optim (torch 2.x), which DeepSpeed reaches with
// getattr(torch.optim, type) for any other name, case-sensitively.
constexpr std::string_view kTorchClasses[] = {
    "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW",  "Adamax",     "ASGD", "LBFGS",
    "Muon",     "NAdam",     "RAdam",   "RMSprop", "Rprop", "SGD", "SparseAdam"};
// torch.optim's submodules: getattr finds them too, and calling one raises TypeError.
constexpr std::string_view kTorchModules[] = {
    "adadelta", "adafactor", "adagrad", "adam",      "adamax",      "adamw",     "asgd",
    "lbfgs",    "nadam",     "radam",   "rmsprop",   "rprop",       "sgd",       "sparse_adam",
    "optimizer", "lr_scheduler", "swa_utils"};

template <size_t N>
bool contains(const std::string_view (&list)[N], std::string_view name) {
  for (std::string_view n : list) {
    if (n == name) return true;
  }
  return false;
}

// A numeric optimizer parameter (torch's own default when absent); anything else fails in the
// optimizer's constructor.
double number_param(const JsonReader& params, const char* key, double fallback) {
  if (!params.has(key) || params.json()[key].is_null()) return fallback;
  return params.number(key);
}

// What the built optimizer keeps and where it steps, for the DeepSpeed and torch.optim names zplan
// models; nullopt for the names it does not.
struct Built {
  std::string name;
  int states = 0;
  CpuOptimizer cpu = CpuOptimizer::kNone;
  std::string cpu_name;
  bool zero_supported = false;  // in ZERO_SUPPORTED_OPTIMIZERS (zero/utils.py)
};

// Under optimizer offload without an optimizer block the script's optimizer steps on the host
// (engine.py _configure_optimizer). With zero_force_ds_cpu_optimizer (get_scalar_param, tested as
// Python does; default true) it is DeepSpeedCPUAdam, as planned: Accelerate, and so the Hugging
// Face Trainer, replaces a client torch optimizer by one (accelerator.py _prepare_deepspeed), and
// DeepSpeed raises ZeRORuntimeException for any other. Set false, the script's optimizer runs as
// it is (xtuner's ZeRO-3 offload config, scripts that keep torch.optim.AdamW on the host): a note.
// DeepSpeed's docs put DeepSpeedCPUAdam at 5.1-6.5x PyTorch's CPU Adam with AVX-512 (training.md
// "CPU-Adam", reference/nccl_hardware.md).
std::optional<std::string> client_optimizer_offload_note(const JsonReader& top) {
  const json* force = member_of(top.json(), "zero_force_ds_cpu_optimizer");
  if (force == nullptr || python_truthy(*force)) return std::nullopt;
  return top.location("zero_force_ds_cpu_optimizer") +
         ": false with optimizer offload and no \"optimizer\" block, so the script's own "
         "optimizer steps on the host as it is; zplan prices DeepSpeedCPUAdam, and a "
         "torch.optim optimizer on CPU tensors is several times slower than it";
}

}  // namespace

OptimizerConfig read_optimizer(const JsonReader& top, const DsConfig& c,
                               std::vector<std::string>* notes) {
  std::optional<JsonReader> block = top_block(top, "optimizer", Null::kRejected);
  // get_optimizer_name: no block, or no "type", leaves the optimizer to the script.
  const bool from_script =
      !block || !block->has("type") || block->json()["type"].is_null();
  if (from_script) {
    if (notes != nullptr && c.zero.stage > 0 &&
        c.zero.offload_optimizer.device != OffloadDevice::kNone) {
      if (std::optional<std::string> n = client_optimizer_offload_note(top)) notes->push_back(*n);
    }
    return {};
  }
  const json& type_value = block->json()["type"];
  if (!type_value.is_string()) {
    block->fail("type", "must be an optimizer name, got " + describe_json_value(type_value));
  }
  const std::string written = type_value.get<std::string>();
  const std::string lower = ascii_lower(written);
  const bool deepspeed_name = contains(kDeepSpeedNames, lower);
  const std::string name = deepspeed_name ? lower : written;
  const int stage = c.zero.stage;
  const bool zero = stage > 0;
  const bool offload = c.zero.offload_optimizer.device != OffloadDevice::kNone;
  auto fail = [&](const std::string& problem) -> void { block->fail("type", problem); };

  // _do_sanity_check (engine init): a name neither DeepSpeed's nor torch.optim's.
  if (!deepspeed_name && !contains(kTorchClasses, name) && !contains(kTorchModules, name)) {
    fail(json_quoted(written) + " is not a supported DeepSpeed Optimizer (DeepSpeed asserts it: "
         "not one of its own names nor a torch.optim class; names are matched as torch.optim "
         "spells them, e.g. \"SGD\", \"RMSprop\")");
  }
  // _configure_basic_optimizer.
  // No "params" (or null) is torch's defaults; child() refuses anything but an object.
  static const json kNoParams = json::object();
  const JsonReader params = block->has("params") && !block->json()["params"].is_null()
                                ? block->child("params")
                                : JsonReader(kNoParams, top.file(), block->pointer() + "/params");
  if (params.has("max_grad_norm") && notes != nullptr) {
    // DeepSpeed raises ValueError for it, but only when it builds the optimizer from this block;
    // Megatron-DeepSpeed, whose example configs carry it, passes its own optimizer, and the block
    // is never read. The optimizer's states are the same either way, so this is a note.
    notes->push_back(params.location("max_grad_norm") +
                     ": DeepSpeed raises ValueError (\"'max_grad_norm' is not supported as an "
                     "optimizer parameter\") when it builds the optimizer from this block; a "
                     "script that passes its own optimizer, as Megatron-DeepSpeed does, never "
                     "reads it; use gradient_clipping");
  }
  auto param = [&](const char* key) { return member_of(params.json(), key); };
  Built b;
  GpuStep gpu_step = GpuStep::kFused;
  bool weight_decay_pass = false;
  if (name == "adam" || name == "adamw") {
    // torch_adam builds torch.optim.Adam(W); else FusedAdam, or DeepSpeedCPUAdam with offload.
    if (truthy(param("torch_adam"))) {
      const bool adam = name == "adam" && !truthy(param("adam_w_mode")) &&
                        param("adam_w_mode") != nullptr;
      b = {adam ? "torch.optim.Adam" : "torch.optim.AdamW", 2, CpuOptimizer::kNone, "", true};
      // The rest of params go to its constructor (engine.py _configure_basic_optimizer): fused
      // true is torch's one-kernel update; otherwise it takes the foreach path on the GPU.
      // weight_decay defaults to 0.01 for AdamW and 0 for Adam, whose L2 form adds the
      // parameters into the gradient instead of scaling them (counted as the same one pass).
      // "auto" is the Trainer's --weight_decay, 0 unless given.
      if (!truthy(param("fused"))) {
        gpu_step = GpuStep::kForeach;
        weight_decay_pass = !params.is_auto("weight_decay") &&
                            number_param(params, "weight_decay", adam ? 0.0 : 0.01) != 0;
      }
    } else {
      b = {"FusedAdam", 2, CpuOptimizer::kAdam, "DeepSpeedCPUAdam", true};
    }
  } else if (name == "adagrad") {
    // torch.optim.Adagrad keeps "sum"; DeepSpeedCPUAdagrad its exp_avg_sq.
    b = {"torch.optim.Adagrad", 1, CpuOptimizer::kAdagrad, "DeepSpeedCPUAdagrad", true};
  } else if (name == "lion") {
    b = {"FusedLion", 1, CpuOptimizer::kLion, "DeepSpeedCPULion", true};
  } else if (name == "lamb") {
    b = {"FusedLamb", 2, CpuOptimizer::kNone, "", false};
  } else if (name == "onebitadam" || name == "zerooneadam" || name == "onebitlamb") {
    const char* what = name == "onebitadam"    ? "1bit-Adam"
                       : name == "zerooneadam" ? "0/1 Adam"
                                               : "1bit-Lamb";
    if (zero) {
      fail(std::string(what) + " is not compatible with ZeRO (DeepSpeed asserts it), and the "
           "file's ZeRO stage is " + std::to_string(stage));
    }
    fail(std::string("not modelled: ") + what +
         " (its compressed, error-compensated gradient communication)");
  } else if (name == "muadam" || name == "muadamw") {
    b = {name == "muadam" ? "mup.MuAdam" : "mup.MuAdamW", 2, CpuOptimizer::kNone, "", false};
  } else if (name == "musgd") {
    b = {"mup.MuSGD", truthy(param("momentum")) ? 1 : 0, CpuOptimizer::kNone, "", false};
  } else if (name == "muon") {
    fail("not modelled: Muon (MuonWithAuxAdam: a momentum buffer and Newton-Schulz "
         "orthogonalization of whole gradient matrices for the 2-D weights, Adam for the rest)");
  } else if (contains(kTorchModules, name)) {
    fail("torch.optim." + name + " is a module, not an optimizer class: DeepSpeed builds "
         "getattr(torch.optim, type)(...) and fails (TypeError); torch.optim names its classes "
         "\"SGD\", \"RMSprop\", \"Adamax\", ...");
  } else if (name == "SGD") {
    // torch.optim.SGD keeps a momentum_buffer only with momentum != 0 (default 0).
    b = {"torch.optim.SGD", number_param(params, "momentum", 0) != 0 ? 1 : 0, CpuOptimizer::kNone,
         "", false};
  } else if (name == "RMSprop") {
    // square_avg, plus momentum_buffer with momentum != 0 and grad_avg when centered.
    const int states = 1 + (number_param(params, "momentum", 0) != 0 ? 1 : 0) +
                       (truthy(param("centered")) ? 1 : 0);
    b = {"torch.optim.RMSprop", states, CpuOptimizer::kNone, "", false};
  } else if (name == "Adamax" || name == "NAdam" || name == "RAdam" || name == "Adadelta" ||
             name == "Rprop") {
    // Two full-size states each: exp_avg/exp_inf, exp_avg/exp_avg_sq, square_avg/acc_delta,
    // prev/step_size.
    b = {"torch.optim." + name, 2, CpuOptimizer::kNone, "", false};
  } else if (name == "ASGD") {
    b = {"torch.optim.ASGD", 1, CpuOptimizer::kNone, "", false};  // "ax"
  } else {
    // LBFGS, SparseAdam, Adafactor, Muon: history, sparse or factored states.
    fail("not modelled: torch.optim." + name +
         " (its states are not full-size tensors per parameter)");
  }
  // _do_optimizer_sanity_check: with ZeRO, a class outside ZERO_SUPPORTED_OPTIMIZERS needs
  // zero_allow_untested_optimizer (a plain key: Python's truth value).
  if (zero && !b.zero_supported &&
      !truthy(member_of(top.json(), "zero_allow_untested_optimizer"))) {
    fail("You are using an untested ZeRO Optimizer (" + b.name +
         "). Please add <\"zero_allow_untested_optimizer\": true> in the configuration file to "
         "use it (DeepSpeed asserts it at ZeRO stage " + std::to_string(stage) + ")");
  }
  if (offload && b.cpu == CpuOptimizer::kNone) {
    fail("not modelled: " + b.name +
         " stepping on the CPU under optimizer offload (DeepSpeed builds it there instead of one "
         "of its CPU optimizers; zplan times DeepSpeedCPUAdam, DeepSpeedCPULion and "
         "DeepSpeedCPUAdagrad, which Adam/AdamW without torch_adam, Lion and Adagrad build)");
  }
  OptimizerConfig out{b.name, b.cpu_name, b.states, b.cpu, /*from_file=*/true};
  out.gpu_step = gpu_step;
  out.weight_decay_pass = weight_decay_pass;
  // fp32_optimizer_states: _configure_basic_optimizer pops it only for DeepSpeedCPUAdam (None,
  // absent or null, keeps its default True; any other value is tested for truth in cpu_adam.py);
  // FusedAdam and torch.optim get it as a keyword they do not take.
  if (const json* fp32_states = param("fp32_optimizer_states")) {
    if (b.cpu != CpuOptimizer::kAdam || !offload) {
      params.fail("fp32_optimizer_states",
                  "is a DeepSpeedCPUAdam parameter, and this block builds " +
                      (offload && b.cpu == CpuOptimizer::kAdam ? b.cpu_name : b.name) +
                      ", which fails on it (TypeError: unexpected keyword argument); "
                      "DeepSpeedCPUAdam is built under optimizer offload");
    }
    out.cpu_fp32_states = fp32_states->is_null() || python_truthy(*fp32_states);
  }
  return out;
}

}  // namespace zplan::sim::internal
