// Knobs: the ds_config settings the planner searches over (ZeRO stage, offload devices,
// micro-batch, activation checkpointing, bucket and prefetch sizes, overlap_comm) and the
// single-config commands set with one flag each, and the lists of values to try for each, written
// the way the command line writes them: "1,2,3", "1-8", "5e7,2e8,5e8", "none,cpu", "none,full".
// They live here, below the planner and the command line, so that both read a value one way.
//
// Every knob's value is an int64: a stage number, an OffloadDevice (0 none, 1 cpu, 2 nvme), 0/1
// for the on/off knobs, a micro-batch in samples, or a size in elements as DeepSpeed counts them.
// Lists keep the order they were given in, without repeats.
#ifndef ZPLAN_SIM_KNOBS_H_
#define ZPLAN_SIM_KNOBS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zplan::sim {

enum class Knob : uint8_t {
  kStage,
  kOffloadOptimizer,
  kOffloadParam,
  kMicroBatch,
  kCheckpointing,
  kOverlapComm,
  kReduceBucket,          // reduce_bucket_size
  kAllgatherBucket,       // allgather_bucket_size
  kPrefetchBucket,        // stage3_prefetch_bucket_size
  kMaxLive,               // stage3_max_live_parameters
  kPersistenceThreshold,  // stage3_param_persistence_threshold
  kSubGroupSize,          // sub_group_size
};
inline constexpr int kNumKnobs = 12;

inline constexpr int index(Knob k) { return static_cast<int>(k); }

// The knob's name in tables, CSV headers, JSON and `--knob NAME=...`: the ds_config key where
// there is one ("stage", "offload_optimizer", "reduce_bucket_size", "stage3_prefetch_bucket_size",
// ...), else "micro_batch" and "checkpointing".
const char* knob_name(Knob k);
// The command-line flag that sets it ("--stage", "--reduce-bucket", ...).
const char* knob_flag(Knob k);
// A knob by its name, its flag (with or without the dashes), or its short column name; nullopt
// for anything else.
std::optional<Knob> find_knob(std::string_view name);
// Every knob name, comma-separated, for error messages.
std::string knob_names();

using KnobValues = std::vector<int64_t>;

// Parses a list for knob `k`: comma-separated items, each a value or an inclusive range.
//  * stage, micro-batch: integers; "A-B" is every integer from A to B, "A-B:S" steps by S.
//  * sizes (elements): 5e8, 500000000, 2e8; "A-B" doubles from A while <= B, "A-Bx F" (written
//    "A-B*F") multiplies by F.
//  * offload devices: none, cpu, nvme. checkpointing: none, full (or off/on, false/true), cpu (full
//    checkpointing with activation_checkpointing.cpu_checkpointing: checkpoints in host memory).
//    overlap_comm: true, false (or on/off, 1/0).
// Throws InputError(where, ...) with one line for an empty list or item, a value that is not a
// number or is out of range for the knob (stage 0-3, micro-batch >= 1, sizes >= 0 and > 0 where
// DeepSpeed needs it), a range that runs backwards, or a list of more than kMaxKnobValues values.
KnobValues parse_knob_values(Knob k, const std::string& text, const std::string& where);
inline constexpr size_t kMaxKnobValues = 4096;
// One value of knob `k`, read as parse_knob_values reads each item of a list (no list or range),
// with the same errors: for the single-config commands' flags (--reduce-bucket 5e8).
int64_t parse_knob_value(Knob k, const std::string& text, const std::string& where);

// Why ZeRO `stage` does not read knob `k` ("only ZeRO stage 3 reads it"), or nullptr when it
// does. Knobs every stage reads always give nullptr.
const char* stage_ignores(Knob k, int64_t stage);

// A value as people read it: "cpu", "full", "true", "5e8", "37748736".
std::string format_knob_value(Knob k, int64_t value);
// A list joined with commas.
std::string format_knob_values(Knob k, const KnobValues& values);

// What the user asked for: a list per knob, or nothing (the planner's default list).
class KnobRequest {
 public:
  bool given(Knob k) const { return values_[index(k)].has_value(); }
  // How the user wrote knob `k`, for messages: its flag ("--prefetch-bucket"), or "--knob NAME"
  // with the name as written ("--knob stage3_prefetch_bucket_size").
  std::string source(Knob k) const;
  // REQUIRES: given(k).
  const KnobValues& values(Knob k) const { return *values_[index(k)]; }
  // REQUIRES: values is not empty.
  void set(Knob k, KnobValues values);
  // Parses and sets one knob from its flag's text.
  void set_from_text(Knob k, const std::string& text);
  // Parses "NAME=LIST" as `--knob` takes it. Throws InputError naming `where` for a missing '=',
  // an unknown knob (listing the known ones), a knob given twice, or a bad list.
  void set_from_assignment(const std::string& assignment, const std::string& where);

 private:
  std::array<std::optional<KnobValues>, kNumKnobs> values_;
  std::array<std::string, kNumKnobs> sources_;  // empty: the knob's flag
};

}  // namespace zplan::sim

#endif  // ZPLAN_SIM_KNOBS_H_
