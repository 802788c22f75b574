#include "sim/trace_writer.h"

#include <cstdio>

namespace zplan::sim {

namespace {

constexpr int kPid = 1;
// Counter tracks live in their own process so Perfetto groups them under "memory".
constexpr int kMemoryPid = 2;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string micros(double seconds) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e6);
  return buf;
}

std::string size_text(double bytes) {
  char buf[32];
  if (bytes >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  } else if (bytes >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f kB", bytes / 1e3);
  }
  return buf;
}

}  // namespace

TraceWriter::TraceWriter(const models::Model& model) : model_(model) {
  // Track names and order: one thread per resource, sorted as the enum lists them.
  char buf[256];
  for (int r = 0; r < kNumResources; ++r) {
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\","
                  "\"args\":{\"name\":\"%s\"}},\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                  "\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
                  kPid, r, resource_name(static_cast<Resource>(r)), kPid, r, r);
    if (any_) events_ += ",\n";
    events_ += buf;
    any_ = true;
  }
  std::snprintf(buf, sizeof buf,
                ",\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":\"rank 0 "
                "(simulated)\"}},\n{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":"
                "{\"name\":\"memory\"}}",
                kPid, kMemoryPid);
  events_ += buf;
}

std::string TraceWriter::task_name(const Task& t) const {
  std::string name = task_kind_name(t.kind);
  const auto& layers = model_.layers();
  const bool has_layer = t.layer >= 0 && static_cast<size_t>(t.layer) < layers.size();
  switch (t.kind) {
    case TaskKind::kForward:
    case TaskKind::kBackward:
    case TaskKind::kRecompute:
      if (has_layer) name += " " + layers[t.layer].name;
      break;
    case TaskKind::kAllGather:
    case TaskKind::kH2D:
    case TaskKind::kNvmeRead:
      if (has_layer) {
        name += " " + layers[t.layer].name;
        const auto& mods = layers[t.layer].modules;
        if (t.index >= 0 && static_cast<size_t>(t.index) < mods.size()) name += " " + mods[t.index].name;
      } else if (t.micro_step < 0) {
        name += t.index >= 0 ? " sub-group " + std::to_string(t.index) : " parameters";
      } else if (t.index >= 0) {
        name += " bucket " + std::to_string(t.index);
      }
      break;
    case TaskKind::kOptimizerCpu:
    case TaskKind::kOptimizerGpu:
    case TaskKind::kNvmeWrite:
      if (t.index >= 0) name += " sub-group " + std::to_string(t.index);
      break;
    default:
      if (t.index >= 0) name += " bucket " + std::to_string(t.index);
      break;
  }
  if (t.bytes > 0) name += " " + size_text(t.bytes);
  return name;
}

void TraceWriter::add(const StepGraph& graph, const EngineResult& result, double offset_s,
                      double ranks_per_node) {
  const auto& tasks = graph.tasks();
  std::string buf;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    const TaskTiming& tm = result.timing[i];
    buf.clear();
    buf += ",\n{\"ph\":\"X\",\"pid\":" + std::to_string(kPid) +
           ",\"tid\":" + std::to_string(static_cast<int>(t.resource)) + ",\"name\":\"" +
           escape(task_name(t)) + "\",\"cat\":\"" + task_kind_name(t.kind) +
           "\",\"ts\":" + micros(offset_s + to_seconds(tm.start)) +
           ",\"dur\":" + micros(to_seconds(tm.end - tm.start)) + ",\"args\":{\"micro_step\":" +
           std::to_string(t.micro_step);
    if (t.bytes > 0) buf += ",\"bytes\":" + std::to_string(static_cast<long long>(t.bytes));
    if (t.flops > 0) buf += ",\"gflop\":" + micros(t.flops * 1e-15);  // three decimals
    buf += "}}";
    events_ += buf;
  }
  static const char* const kCounter[kNumTiers] = {"GPU memory (GiB)", "pinned host memory (GiB)",
                                                  "host memory (GiB)", "NVMe (GiB)"};
  for (const MemorySample& s : result.samples) {
    for (int tier = 0; tier < kNumTiers; ++tier) {
      double scale = tier == 0 ? 1.0 : ranks_per_node;
      char line[160];
      std::snprintf(line, sizeof line,
                    ",\n{\"ph\":\"C\",\"pid\":%d,\"name\":\"%s\",\"ts\":%s,\"args\":{\"GiB\":%.4f}}",
                    kMemoryPid, kCounter[tier], micros(offset_s + to_seconds(s.at)).c_str(),
                    s.bytes[tier] * scale / (1024.0 * 1024.0 * 1024.0));
      events_ += line;
    }
  }
}

std::string TraceWriter::json() const {
  return "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + events_ + "\n]}\n";
}

}  // namespace zplan::sim
