#include "sim/knobs.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/input_error.h"

namespace zplan::sim {

namespace {

enum class Type { kInteger, kSize, kOffload, kOnOff };

struct KnobInfo {
  const char* name;
  const char* flag;
  Type type;
  int64_t min;  // smallest accepted value
  int64_t max;  // largest accepted value
};

constexpr int64_t kMaxElements = 1'000'000'000'000'000;  // 1e15: past any real model

// Indexed by Knob. Minimums follow what DeepSpeed (and zplan's validate_ds_config) accept:
// bucket sizes must be positive (a ds_config may give reduce_bucket_size 0, which DeepSpeed
// runs, but the planner does not search it); a sub-group size of 0 (one sub-group per
// parameter), a prefetch bucket, live-parameter cap or persistence threshold of 0 are real
// settings.
constexpr KnobInfo kKnobs[kNumKnobs] = {
    {"stage", "--stage", Type::kInteger, 0, 3},
    {"offload_optimizer", "--offload-optimizer", Type::kOffload, 0, 2},
    {"offload_param", "--offload-param", Type::kOffload, 0, 2},
    {"micro_batch", "--micro-batch", Type::kInteger, 1, 1'000'000},
    // 0 none, 1 full, 2 full with cpu_checkpointing (checkpoints in host memory).
    {"checkpointing", "--checkpointing", Type::kOnOff, 0, 2},
    {"overlap_comm", "--overlap-comm", Type::kOnOff, 0, 1},
    {"reduce_bucket_size", "--reduce-bucket", Type::kSize, 1, kMaxElements},
    {"allgather_bucket_size", "--allgather-bucket", Type::kSize, 1, kMaxElements},
    {"stage3_prefetch_bucket_size", "--prefetch-bucket", Type::kSize, 0, kMaxElements},
    {"stage3_max_live_parameters", "--max-live", Type::kSize, 0, kMaxElements},
    {"stage3_param_persistence_threshold", "--persistence-threshold", Type::kSize, 0, kMaxElements},
    {"sub_group_size", "--sub-group-size", Type::kSize, 0, kMaxElements},
};

const KnobInfo& info(Knob k) { return kKnobs[index(k)]; }

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

// An element count as people write it: "5e8" when a one- or two-digit mantissa says it
// exactly, else the integer.
std::string format_size(int64_t v) {
  if (v >= 1000) {
    int64_t m = v;
    int e = 0;
    while (m % 10 == 0) {
      m /= 10;
      ++e;
    }
    if (m < 100 && e >= 3) return std::to_string(m) + "e" + std::to_string(e);
  }
  return std::to_string(v);
}

// A whole number written as an integer or in scientific notation ("5e8", "2.5e7").
int64_t parse_number(const KnobInfo& k, const std::string& text, const std::string& where) {
  if (text.empty()) throw InputError(where, "empty value in the list");
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    throw InputError(where, "'" + text + "' is not a number");
  }
  if (std::floor(v) != v) throw InputError(where, "'" + text + "' is not a whole number");
  if (v < static_cast<double>(k.min) || v > static_cast<double>(k.max)) {
    throw InputError(
        where, "'" + text + "' is out of range (" + std::to_string(k.min) + " to " +
                   (k.type == Type::kSize ? format_size(k.max) : std::to_string(k.max)) + ")");
  }
  return static_cast<int64_t>(v);
}

int64_t parse_word(const KnobInfo& k, const std::string& text, const std::string& where) {
  std::string w = ascii_lower(text);
  if (k.type == Type::kOffload) {
    if (w == "none") return 0;
    if (w == "cpu") return 1;
    if (w == "nvme") return 2;
    throw InputError(where, "'" + text + "' is not an offload device (none, cpu or nvme)");
  }
  const bool ckpt = std::string_view(k.name) == "checkpointing";
  if (w == "false" || w == "off" || w == "0" || (ckpt && w == "none")) return 0;
  if (w == "true" || w == "on" || w == "1" || (ckpt && w == "full")) return 1;
  if (ckpt && w == "cpu") return 2;
  throw InputError(where, "'" + text + "' is not " +
                              (ckpt ? std::string("none, full or cpu") : std::string("true or false")));
}

void add_value(KnobValues* out, int64_t v, const std::string& where) {
  if (std::find(out->begin(), out->end(), v) != out->end()) return;
  if (out->size() >= kMaxKnobValues) {
    throw InputError(where, "the list has more than " + std::to_string(kMaxKnobValues) +
                                " values; narrow the range");
  }
  out->push_back(v);
}

// "A-B", "A-B:S" (integers) or "A-B*F" / "A-BxF" (sizes). Returns false if `item` is no range.
bool parse_range(const KnobInfo& k, const std::string& item, const std::string& where,
                 KnobValues* out) {
  // The '-' that separates the ends: not the first character (no negative numbers here) and not
  // right after an exponent's 'e' ("1e-3" is no range; such values fail as non-whole anyway).
  size_t dash = std::string::npos;
  for (size_t i = 1; i < item.size(); ++i) {
    if (item[i] == '-' && item[i - 1] != 'e' && item[i - 1] != 'E') {
      dash = i;
      break;
    }
  }
  if (dash == std::string::npos) return false;
  if (k.type == Type::kOffload || k.type == Type::kOnOff) {
    throw InputError(where, "'" + item + "': ranges are for numbers; list the values");
  }
  std::string from_text = trim(item.substr(0, dash));
  std::string rest = trim(item.substr(dash + 1));
  std::string to_text = rest, step_text;
  char step_kind = 0;
  size_t sep = rest.find_first_of(":*x");
  if (sep != std::string::npos) {
    step_kind = rest[sep] == ':' ? '+' : '*';
    to_text = trim(rest.substr(0, sep));
    step_text = trim(rest.substr(sep + 1));
  }
  const int64_t from = parse_number(k, from_text, where);
  const int64_t to = parse_number(k, to_text, where);
  if (from > to) {
    throw InputError(where,
                     "range '" + item + "' runs backwards (" + from_text + " > " + to_text + ")");
  }
  if (k.type == Type::kInteger) {
    if (step_kind == '*') throw InputError(where, "'" + item + "': use A-B:STEP for integers");
    int64_t step = 1;
    if (step_kind == '+') {
      KnobInfo any = {k.name, k.flag, Type::kInteger, -kMaxElements, kMaxElements};
      step = parse_number(any, step_text, where);
      if (step < 1) {
        throw InputError(where,
                         "'" + item + "': the step must be a positive integer, got " + step_text);
      }
    }
    for (int64_t v = from; v <= to; v += step) add_value(out, v, where);
    return true;
  }
  // Sizes: geometric, doubling unless a factor is given.
  if (step_kind == '+') throw InputError(where, "'" + item + "': use A-B*FACTOR for sizes");
  double factor = 2;
  if (step_kind == '*') {
    char* end = nullptr;
    factor = std::strtod(step_text.c_str(), &end);
    if (step_text.empty() || *end != '\0' || !(factor > 1) || !std::isfinite(factor)) {
      throw InputError(where, "'" + item + "': the factor must be a number > 1");
    }
  }
  if (from == 0) throw InputError(where, "'" + item + "': a geometric range cannot start at 0");
  for (double v = static_cast<double>(from); v <= static_cast<double>(to) * (1 + 1e-12);
       v *= factor) {
    add_value(out, std::llround(v), where);
  }
  return true;
}

}  // namespace

const char* knob_name(Knob k) { return info(k).name; }
const char* knob_flag(Knob k) { return info(k).flag; }

std::optional<Knob> find_knob(std::string_view name) {
  std::string n = ascii_lower(std::string(name));
  while (!n.empty() && n[0] == '-') n.erase(0, 1);
  for (char& c : n) {
    if (c == '-') c = '_';
  }
  for (int i = 0; i < kNumKnobs; ++i) {
    std::string flag = std::string(kKnobs[i].flag).substr(2);
    for (char& c : flag) {
      if (c == '-') c = '_';
    }
    if (n == kKnobs[i].name || n == flag) return static_cast<Knob>(i);
  }
  // DeepSpeed's batch key and the keys without their stage3_ prefix.
  if (n == "train_micro_batch_size_per_gpu") return Knob::kMicroBatch;
  if (n == "activation_checkpointing") return Knob::kCheckpointing;
  if (n == "prefetch_bucket_size") return Knob::kPrefetchBucket;
  if (n == "max_live_parameters") return Knob::kMaxLive;
  if (n == "param_persistence_threshold") return Knob::kPersistenceThreshold;
  return std::nullopt;
}

std::string knob_names() {
  std::string s;
  for (int i = 0; i < kNumKnobs; ++i) {
    if (i > 0) s += ", ";
    s += kKnobs[i].name;
  }
  return s;
}

KnobValues parse_knob_values(Knob knob, const std::string& text, const std::string& where) {
  const KnobInfo& k = info(knob);
  if (trim(text).empty()) throw InputError(where, "empty list; give at least one value");
  KnobValues out;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string item =
        trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) throw InputError(where, "empty item in the list '" + text + "'");
    if (!parse_range(k, item, where, &out)) {
      int64_t v = (k.type == Type::kOffload || k.type == Type::kOnOff)
                      ? parse_word(k, item, where)
                      : parse_number(k, item, where);
      add_value(&out, v, where);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int64_t parse_knob_value(Knob knob, const std::string& text, const std::string& where) {
  const KnobInfo& k = info(knob);
  const std::string item = trim(text);
  return k.type == Type::kOffload || k.type == Type::kOnOff ? parse_word(k, item, where)
                                                            : parse_number(k, item, where);
}

const char* stage_ignores(Knob k, int64_t stage) {
  switch (k) {
    case Knob::kReduceBucket:
      return stage == 0 ? "ZeRO stage 0 does not read it (it all-reduces in fixed 5e8-element "
                          "pieces)"
                        : nullptr;
    case Knob::kOverlapComm:
      return stage == 0 ? "ZeRO stage 0 does not read it" : nullptr;
    case Knob::kAllgatherBucket:
      return stage == 1 || stage == 2 ? nullptr : "only ZeRO stages 1 and 2 read it";
    case Knob::kPrefetchBucket:
    case Knob::kMaxLive:
    case Knob::kPersistenceThreshold:
    case Knob::kSubGroupSize:
      return stage == 3 ? nullptr : "only ZeRO stage 3 reads it";
    default:
      return nullptr;
  }
}

std::string format_knob_value(Knob knob, int64_t v) {
  const KnobInfo& k = info(knob);
  switch (k.type) {
    case Type::kOffload:
      return v == 0 ? "none" : v == 1 ? "cpu" : "nvme";
    case Type::kOnOff:
      if (knob == Knob::kCheckpointing) return v == 2 ? "cpu" : v ? "full" : "none";
      return v ? "true" : "false";
    case Type::kInteger:
      return std::to_string(v);
    case Type::kSize:
      return format_size(v);
  }
  return std::to_string(v);
}

std::string format_knob_values(Knob k, const KnobValues& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += ",";
    s += format_knob_value(k, values[i]);
  }
  return s;
}

void KnobRequest::set(Knob k, KnobValues values) { values_[index(k)] = std::move(values); }

std::string KnobRequest::source(Knob k) const {
  return sources_[index(k)].empty() ? knob_flag(k) : sources_[index(k)];
}

void KnobRequest::set_from_text(Knob k, const std::string& text) {
  set(k, parse_knob_values(k, text, knob_flag(k)));
}

void KnobRequest::set_from_assignment(const std::string& assignment, const std::string& where) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos) {
    throw InputError(where,
                     "'" + assignment + "' is not NAME=VALUES (e.g. reduce_bucket_size=5e7,5e8)");
  }
  std::string name = trim(assignment.substr(0, eq));
  std::optional<Knob> k = find_knob(name);
  if (!k) {
    throw InputError(where, "unknown knob '" + name + "'; knobs: " + knob_names());
  }
  if (given(*k)) {
    throw InputError(where, std::string("knob '") + knob_name(*k) + "' is given twice (" +
                                knob_flag(*k) + " and --knob set the same thing)");
  }
  set(*k, parse_knob_values(*k, assignment.substr(eq + 1), where + " " + name));
  sources_[index(*k)] = where + " " + name;
}

}  // namespace zplan::sim
