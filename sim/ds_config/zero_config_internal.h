// Pieces shared by the parts of the ds_config reader and writer: zero_config.cc (the top level and
// the entry points), shared_blocks.cc (fp16/bf16, data_types, activation_checkpointing, aio),
// zero_config_batch.cc (the batch keys),
// top_level_keys.cc (the keys kept whole in DsConfig::other), zero_optimization.cc and
// zero_optimization_checks.cc (the zero_optimization block and its offload blocks), and
// block_reader.cc (the readers below). Not part of zplan::sim's interface; include it from those
// files only.
#ifndef ZPLAN_SIM_ZERO_CONFIG_INTERNAL_H_
#define ZPLAN_SIM_ZERO_CONFIG_INTERNAL_H_

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/input_error.h"
#include "base/json_reader.h"
#include "sim/ds_config/zero_config.h"

namespace zplan::sim::internal {

// Names a value of a config in errors: "file: /json/pointer". A value that came from a deprecated
// key (cpu_offload -> offload_optimizer) is redirected to where the file wrote it. For configs
// built in code the "file" is the caller's label and the pointer is the key in the JSON that
// ds_config_to_json writes.
class Locator {
 public:
  explicit Locator(std::string file) : file_(std::move(file)) {}

  // Errors about `pointer` or anything below it name `actual` instead.
  void redirect(const std::string& pointer, const std::string& actual);
  std::string at(const std::string& pointer) const;
  [[noreturn]] void fail(const std::string& pointer, const std::string& problem) const;
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::map<std::string, std::string> redirects_;
};

// The problems found in one ds_config, so that a file is reported whole (DeepSpeed's pydantic
// validation lists every bad field of a block at once). The reader runs in small named steps; a
// step that throws InputError is recorded here and reading goes on with the next step, which sees
// the defaults where the failed step would have written.
class Errors {
 public:
  // More than this many problems are summarised in one closing line.
  static constexpr size_t kMaxLines = 20;

  // Runs `step`, recording the InputError it throws, if any.
  template <typename Step>
  void step(Step&& step) {
    try {
      step();
    } catch (const InputError& e) {
      add(e);
    }
  }
  void add(const InputError& e);
  bool empty() const { return errors_.empty(); }
  // Throws the problems found so far: the only one unchanged, several as one InputError whose
  // message has a line per problem (the first one's where: problem, then one "where: problem"
  // line each, at most kMaxLines in all).
  void throw_if_any() const;

 private:
  std::vector<InputError> errors_;
};

// What a block does with the string "auto". DeepSpeedConfigModel.__init__ (pydantic, in
// deepspeed/runtime/config_utils.py) drops "auto" members of the model it builds, so they mean
// the default: zero_optimization, fp16, bf16, and the nested offload_param and
// offload_optimizer, whose validation pydantic 2 runs through that same overridden __init__
// (checked with DeepSpeed 0.19.5's classes under pydantic 2.13: tools/ds-config-check). The
// plain-dict blocks (aio, activation_checkpointing, data_types) hand the string on: there "auto"
// is a type error.
enum class AutoRule { kMeansDefault, kIsAnError };
enum class Null { kRejected, kMeansDefault };  // pydantic Optional[...] fields take null

// Typed, located reads of one block's members under an AutoRule.
class BlockReader {
 public:
  BlockReader(const JsonReader& reader, AutoRule auto_rule)
      : reader_(reader), auto_rule_(auto_rule) {}

  const JsonReader& reader() const { return reader_; }
  // The member exists and is not a dropped "auto" (null counts: pydantic records it as set).
  bool given(std::string_view key) const;
  // Typed members: nullopt when absent, a dropped "auto", or a null the field takes.
  std::optional<bool> boolean(std::string_view key, Null null = Null::kRejected) const;
  std::optional<int64_t> integer(std::string_view key, Null null = Null::kRejected) const;
  std::optional<double> number(std::string_view key, Null null = Null::kRejected) const;
  std::optional<std::string> string(std::string_view key, Null null = Null::kRejected) const;
  // An object member (or nullopt as above); throws when it is something else.
  const nlohmann::json* object(std::string_view key, Null null = Null::kRejected) const;

 private:
  // True when `key` holds a value to read; false when it is absent or means the default.
  bool has_value(std::string_view key, Null null, const char* expected) const;

  const JsonReader& reader_;
  AutoRule auto_rule_;
};

// Records a problem for every member not in `known` (keys holding a dropped "auto" are skipped
// when `auto_rule` drops them, as pydantic never sees those). `block` names the DeepSpeed class.
void reject_unknown_keys(const JsonReader& reader, std::span<const std::string_view> known,
                         AutoRule auto_rule, std::string_view block, Errors& errors);

// "; did you mean \"k\"?" for the member of `known` nearest to `key` (a near miss only), else "".
std::string did_you_mean(std::string_view key, std::span<const std::string_view> known);

// A value as DeepSpeed's `if` reads what dict.get or get_scalar_param returns from a plain-dict
// block: Python's truth value (null, false, 0, "", [] and {} are false; anything else, the
// string "false" included, is true).
bool python_truthy(const nlohmann::json& value);

// `text` as a JSON string literal ("x", with escapes), for messages.
std::string json_quoted(std::string_view text);

// A top-level block that must be an object when present. nullopt when absent (or null, if
// DeepSpeed takes null as absent there).
std::optional<JsonReader> top_block(const JsonReader& top, const char* key, Null null);

// Every top-level key DeepSpeed 0.19.5 reads (top_level_keys.cc).
std::span<const std::string_view> deepspeed_top_keys();
// One line in `notes` (when given) for each top-level key of `document` that DeepSpeed 0.19.5
// never reads (a misspelt block is the usual one), with the nearest key it does read.
void note_unknown_top_keys(const nlohmann::json& document, const std::string& file,
                           std::vector<std::string>* notes);
// The top-level keys kept whole in DsConfig::other (top_level_keys.cc).
// The checks on them: what DeepSpeed validates or zplan refuses there. `top` is the whole file
// when reading, DsConfig::other when validating a config built in code.
void check_unmodeled_top_keys(const JsonReader& top, Errors& errors);
// A top-level pydantic block (`class_name`, a DeepSpeedConfigModel with `keys`) whose boolean
// `flag` switches on a feature zplan does not model: unknown keys are recorded, and an enabled
// flag throws InputError(`problem`) at it. Absent: nothing; null: an error (the class takes a
// dict).
void reject_pydantic_switch(const JsonReader& top, const char* block,
                            std::span<const std::string_view> keys, std::string_view class_name,
                            const char* flag, const std::string& problem, Errors& errors);
// The top-level blocks that change the training job (training_features.cc): an enabled hybrid
// engine, torch autocast, progressive layer drop, random-LTD, curriculum learning, dynamic
// batching, or a pipeline block, each recorded as "not modelled" (or DeepSpeed's own refusal).
void reject_unmodeled_training_features(const JsonReader& top, Errors& errors);
// The "optimizer" block as DeepSpeed builds an optimizer from it (optimizer.cc), for the stage and
// offload of `c` (read before it): throws InputError with DeepSpeed's reason for what it refuses,
// or "not modelled: ..." for what zplan cannot model. No block, or no "type": the default
// OptimizerConfig (the script's optimizer, assumed AdamW).
// A block DeepSpeed reads only when it builds the optimizer (max_grad_norm among the params)
// gets a line in `notes`, if given.
OptimizerConfig read_optimizer(const JsonReader& top, const DsConfig& c,
                               std::vector<std::string>* notes);
// The file's "sequence_parallel_size" (1 without it), checked to divide the `world` GPUs.
int read_sequence_parallel(const JsonReader& top, int world);
// The file's tensor_parallel.autotp_size (1 when absent, 0 or 1), checked to divide the `world`
// GPUs.
int read_autotp_size(const JsonReader& top, int world);
// communication_data_type other than the training precision: refused (a cross-field check,
// after the precision is read).
void reject_other_communication_dtype(const JsonReader& top, const DsConfig& c);

// The batch keys (zero_config_batch.cc).
inline constexpr const char* kTrainKey = "train_batch_size";
inline constexpr const char* kMicroKey = "train_micro_batch_size_per_gpu";
inline constexpr const char* kGasKey = "gradient_accumulation_steps";
// a x b x c, or nullopt if it overflows int64.
std::optional<int64_t> product(int64_t a, int64_t b, int64_t c);
// One batch key as far as it is known: its value and where a value not written in a file came
// from (" (--micro-batch)"), for messages.
struct BatchValue {
  std::optional<int64_t> value;
  std::string source;
  bool trainer_default = false;  // "auto" without a flag, filled with the Trainer's default
};
// The batch key `key` as its flag gives it (nothing when `from_flag` is empty). Throws
// InputError naming `flag` for a value that is not positive, or (but for train_batch_size) more
// than kMaxBatchCount.
BatchValue batch_flag(const char* key, const char* flag, const std::optional<int64_t>& from_flag);
// Resolves train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps from
// the file, "auto" and the flags in `context` as DeepSpeed does, into `c`.
void read_batch(const JsonReader& top, const ParseContext& context, DsConfig& c);
// DeepSpeed's resolution of the three batch keys (_set_batch_related_parameters and
// _batch_assertion) into `c`: a missing one derived from the others, and all checked against
// `dp` GPUs. Errors name where(key), or where(nullptr) for the config as a whole.
void resolve_batch(BatchValue micro, BatchValue gas, BatchValue train, int64_t dp,
                   const std::function<std::string(const char* key)>& where, DsConfig& c);

// zero_optimization (zero_optimization.cc reads it, zero_optimization_checks.cc checks it).
// The JSON pointer prefix of its keys in messages.
inline const std::string kZ = "/zero_optimization/";
// True iff `object` is an object whose `key` is the boolean true.
bool json_true(const nlohmann::json& object, const char* key);
// True iff `z` is stage 3 with stage3_allgather_sequential true and no MiCS shard: the engine
// then gathers one parameter at a time (stage3_prefetch_bucket_size 1, engine.py).
bool allgathers_sequentially(const ZeroConfig& z);
// Reads what it can, recording each problem in `errors`.
ZeroConfig read_zero_optimization(const JsonReader& top, const ParseContext& context,
                                  Locator& locator, Errors& errors);
nlohmann::json zero_optimization_to_json(const ZeroConfig& zero);
// zero_optimization's nested blocks (zero_nested_blocks.cc). read_offload_optimizer moves the
// accepted keys zplan does not model into `passthrough`.
OffloadParamConfig read_offload_param(const JsonReader& r, Errors& errors);
OffloadOptimizerConfig read_offload_optimizer(const JsonReader& r, int stage,
                                              nlohmann::json& passthrough, Errors& errors);
LeafModuleConfig read_leaf_module(const JsonReader& r, Errors& errors);
nlohmann::json leaf_module_to_json(const LeafModuleConfig& leaf);
nlohmann::json offload_param_to_json(const OffloadParamConfig& param);
nlohmann::json offload_optimizer_to_json(const OffloadOptimizerConfig& optimizer,
                                         const nlohmann::json& extras);
// An integer Field(ge=0) of `b`, if given: negative values are rejected where they are read.
void read_count(const BlockReader& b, std::string_view key, int64_t& out);
// The stage is 0-3 (the first of check_zero_optimization's checks).
void check_stage(int stage, const Locator& locator);
// The invariants of a resolved ZeroConfig (ranges, stage rules of the offload blocks).
void check_zero_optimization(const ZeroConfig& zero, const Locator& locator);
// For configs built in code: ZeroConfig::other holds only keys DeepSpeed accepts and zplan does
// not model (checked before writing it out).
void check_zero_other(const ZeroConfig& zero, const Locator& locator);
bool uses_nvme(const ZeroConfig& zero);
// Throws for a file's stage-3 feature that would change memory or traffic but that zplan does not
// model (ZenFlow, SuperOffload, int8-stored frozen weights), rather than predicting plain ZeRO-3.
void reject_unmodeled_zero_features(const ZeroConfig& zero, const Locator& locator);
// ZeRO++ (hpZ, qwZ, qgZ) and MiCS against the data-parallel world: what DeepSpeed 0.19 asserts
// or raises at engine set-up, and the combinations zplan does not model. The checks that need
// the node size (hpZ or a hierarchical MiCS gather across nodes) are the simulator's
// (sim/zeropp_mics.h).
void check_zeropp_mics(const ZeroConfig& zero, int dp_world_size, const Locator& locator);

// --- shared_blocks.cc: the top-level blocks DsConfig models in part (fp16, bf16, data_types,
// activation_checkpointing, aio); what it does not model of them stays in DsConfig::other. ---

// One such block and the member keys DsConfig models.
struct SharedBlock {
  const char* name;
  std::span<const std::string_view> modeled;
};
std::span<const SharedBlock> shared_blocks();

// The 16-bit master flags the fp16 and bf16 blocks set (true), each with the block that set it
// for messages. The engine passes them whether or not their block is enabled.
struct MasterFlags {
  std::optional<JsonReader> fp16_master;  // fp16.fp16_master_weights_and_grads
  std::optional<JsonReader> bf16_master;  // bf16.bf16_master_weights_and_grads
  bool bf16_states = false;               // bf16.bf16_optimizer_states
};

// Reads fp16 or bf16 (`name` is the key the file uses) and returns whether it is enabled; the
// block's master flags go to `flags` when given.
bool read_precision_block(const JsonReader& top, const char* name, bool fp16,
                          const ParseContext& context, int stage, DsConfig& c, Errors& errors,
                          MasterFlags* flags = nullptr);
// fp16, bf16 (or bfloat16) and data_types into c.precision and c.grad_accum_dtype, and the
// blocks' master flags into `flags`.
void read_precision(const JsonReader& top, const ParseContext& context, DsConfig& c,
                    Errors& errors, MasterFlags* flags);
// The 16-bit master weights and optimizer states `flags` ask for, into c.optimizer (after
// read_optimizer and the zero_optimization block).
void read_master_precision(const MasterFlags& flags, std::vector<std::string>* notes,
                           DsConfig& c);
void read_activation_checkpointing(const JsonReader& top, const ParseContext& context,
                                   DsConfig& c);
void read_aio(const JsonReader& top, DsConfig& c);
bool aio_is_default(const AioConfig& a);

}  // namespace zplan::sim::internal

#endif  // ZPLAN_SIM_ZERO_CONFIG_INTERNAL_H_
