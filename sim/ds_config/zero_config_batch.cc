// The batch keys of a ds_config.json, as DeepSpeed 0.19 resolves them (deepspeed/runtime/
// config.py: _set_batch_related_parameters and _batch_assertion; reference/deepspeed_internals.md
// §1.3), with the Hugging Face Trainer's "auto" and zplan's batch flags.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config.h"
#include "sim/ds_config/zero_config_internal.h"

namespace zplan::sim::internal {

std::optional<int64_t> product(int64_t a, int64_t b, int64_t c) {
  int64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) {
    return std::nullopt;
  }
  return abc;
}

namespace {

// What the Hugging Face Trainer fills "auto" batch keys with when the command line does not say:
// TrainingArguments' defaults per_device_train_batch_size = 8, gradient_accumulation_steps = 1
// (reference §1.6).
constexpr int64_t kTrainerMicroBatch = 8;
constexpr int64_t kTrainerGradientAccumulation = 1;

BatchValue read_batch_key(const JsonReader& top, const char* key, const char* flag,
                          const std::optional<int64_t>& from_flag,
                          std::optional<int64_t> trainer_default) {
  const BatchValue given = batch_flag(key, flag, from_flag);
  if (top.is_auto(key)) {
    if (from_flag) return given;
    if (!trainer_default) return {std::nullopt, ""};
    return {trainer_default, " (\"auto\": the Hugging Face Trainer's default)", true};
  }
  std::optional<int64_t> v = top.optional_integer(key);
  if (!v) return given;
  if (*v <= 0) top.fail(key, "must be a positive integer, got " + std::to_string(*v));
  if (from_flag && *from_flag != *v) {
    top.fail(key, "is " + std::to_string(*v) + " in the file, but " + flag + " says " +
                      std::to_string(*from_flag));
  }
  return {v, ""};
}

}  // namespace

BatchValue batch_flag(const char* key, const char* flag, const std::optional<int64_t>& from_flag) {
  if (from_flag && *from_flag <= 0) {
    throw InputError(flag, "must be a positive integer, got " + std::to_string(*from_flag));
  }
  // check_config's bound on micro-batch and accumulation, named by the flag.
  if (from_flag && *from_flag > kMaxBatchCount && std::string_view(key) != kTrainKey) {
    throw InputError(flag, std::to_string(*from_flag) + " is more than the " +
                               std::to_string(kMaxBatchCount) + " zplan accepts");
  }
  if (!from_flag) return {};
  return {from_flag, std::string(" (") + flag + ")"};
}

void read_batch(const JsonReader& top, const ParseContext& context, DsConfig& c) {
  const int64_t dp = context.dp_world_size;
  BatchValue micro =
      read_batch_key(top, kMicroKey, "--micro-batch", context.micro_batch, kTrainerMicroBatch);
  BatchValue gas = read_batch_key(top, kGasKey, "--gas", context.gradient_accumulation_steps,
                                  kTrainerGradientAccumulation);
  BatchValue train =
      read_batch_key(top, kTrainKey, "--global-batch", context.train_batch_size, std::nullopt);
  // A train_batch_size that is given (--global-batch, or a number in the file) leaves the "auto"
  // keys nothing to default: they are derived from it by DeepSpeed's rule below, as the user
  // means (--global-batch 128 --micro-batch 4 on 8 GPUs is accumulation 4, not the Trainer's 1).
  if (train.value) {
    if (micro.trainer_default) micro = {};
    if (gas.trainer_default) gas = {};
  }
  // The Trainer's default decides the whole job's batch, and a user who runs with
  // --per_device_train_batch_size N gets another: say which was assumed.
  if (context.notes != nullptr) {
    if (micro.trainer_default) {
      context.notes->push_back(
          top.location(kMicroKey) + " is \"auto\": taken as the Hugging Face Trainer's default, " +
          std::to_string(kTrainerMicroBatch) +
          " (per_device_train_batch_size); give --micro-batch for the one you run with");
    }
    if (gas.trainer_default) {
      context.notes->push_back(top.location(kGasKey) +
                               " is \"auto\": taken as the Hugging Face Trainer's default, " +
                               std::to_string(kTrainerGradientAccumulation) +
                               " (gradient_accumulation_steps); give --gas for the one you run with");
    }
  }
  if (!train.value && top.is_auto(kTrainKey)) {
    // The Trainer computes it from its own arguments: world size x micro-batch x accumulation.
    train.value = product(micro.value.value_or(kTrainerMicroBatch),
                          gas.value.value_or(kTrainerGradientAccumulation), dp);
    if (!train.value) top.fail(kTrainKey, "is too large");
    train.source = " (\"auto\": micro-batch x accumulation x GPUs)";
  }
  resolve_batch(micro, gas, train, dp,
                [&](const char* key) {
                  return key != nullptr && top.json().contains(key) ? top.location(key)
                                                                    : top.location();
                },
                c);
}

void resolve_batch(BatchValue micro, BatchValue gas, BatchValue train, int64_t dp,
                   const std::function<std::string(const char* key)>& where, DsConfig& c) {
  const bool t = train.value.has_value(), m = micro.value.has_value(), g = gas.value.has_value();
  if (!t && !m) {
    throw InputError(where(nullptr),
                     "gives neither train_batch_size nor "
                     "train_micro_batch_size_per_gpu (nor --global-batch or "
                     "--micro-batch); DeepSpeed needs one of them");
  }
  // DeepSpeed derives a missing key by integer division; _batch_assertion then checks it. A
  // division that does not come out even is the usual mistake: say that, not the failed product.
  auto must_divide = [&](int64_t by, const std::string& what) {
    if (*train.value % by != 0) {
      throw InputError(where(kTrainKey), "train_batch_size " + std::to_string(*train.value) +
                                             train.source + " is not a multiple of " + what);
    }
  };
  const std::string gpus = std::to_string(dp) + " data-parallel GPUs";
  std::string derived;
  if (t && m && !g) {
    if (std::optional<int64_t> mdp = product(*micro.value, dp, 1)) {
      must_divide(*mdp, "train_micro_batch_size_per_gpu " + std::to_string(*micro.value) +
                            micro.source + " x " + gpus + " = " + std::to_string(*mdp));
    }
    gas.value = *train.value / *micro.value / dp;
    derived = " (gradient_accumulation_steps derived as train / micro / GPUs)";
  } else if (t && g && !m) {
    if (std::optional<int64_t> gdp = product(*gas.value, dp, 1)) {
      must_divide(*gdp, "gradient_accumulation_steps " + std::to_string(*gas.value) + gas.source +
                            " x " + gpus + " = " + std::to_string(*gdp));
    }
    micro.value = *train.value / dp / *gas.value;
    derived = " (train_micro_batch_size_per_gpu derived as train / GPUs / accumulation)";
  } else if (m && !t) {
    if (!g) gas.value = 1;
    train.value = product(*micro.value, *gas.value, dp);
    if (!train.value) {
      throw InputError(where(kMicroKey), "train_micro_batch_size_per_gpu " +
                                             std::to_string(*micro.value) + micro.source +
                                             " x gradient_accumulation_steps " +
                                             std::to_string(*gas.value) + gas.source + " x " +
                                             gpus + " is too large a batch");
    }
  } else if (t && !m && !g) {
    must_divide(dp, "the " + gpus);
    gas.value = 1;
    micro.value = *train.value / dp;
    derived = " (train_micro_batch_size_per_gpu derived as train / GPUs)";
  }
  c.train_batch_size = *train.value;
  c.micro_batch = *micro.value;
  c.gradient_accumulation_steps = *gas.value;
  std::optional<int64_t> p = product(c.micro_batch, c.gradient_accumulation_steps, dp);
  if (c.micro_batch <= 0 || c.gradient_accumulation_steps <= 0 || p != c.train_batch_size) {
    throw InputError(
        where(kTrainKey),
        "train_batch_size " + std::to_string(c.train_batch_size) + train.source +
            " must equal train_micro_batch_size_per_gpu " + std::to_string(c.micro_batch) +
            micro.source + " x gradient_accumulation_steps " +
            std::to_string(c.gradient_accumulation_steps) + gas.source + " x " +
            std::to_string(dp) + " data-parallel GPUs" +
            (p ? " = " + std::to_string(*p) : std::string(", which is too large")) + derived);
  }
}

}  // namespace zplan::sim::internal
