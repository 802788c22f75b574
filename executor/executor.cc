// execute_steps(): the graph interpreter (one worker thread per resource), the step loop, and
// what is measured.
#include "executor/executor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>
#include <sched.h>

#include "base/text.h"
#include "base/units.h"
#include "executor/rank.h"
#include "base/input_error.h"
#include "sim/memory_model.h"
#include "sim/step_builder.h"

namespace zplan::executor {

namespace {

using Clock = std::chrono::steady_clock;

sim::SimTime since(Clock::time_point epoch, Clock::time_point t) {
  auto d = std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch);
  return sim::SimTime(sim::SimDuration(std::max<int64_t>(0, d.count())));
}

// Work on another resource that occupies the rank's cores (everything but NVMe I/O, which the
// drive does while the thread sleeps in the kernel).
bool is_side_work(const sim::Task& t) {
  return t.resource != sim::Resource::kCompute && t.kind != sim::TaskKind::kNvmeRead &&
         t.kind != sim::TaskKind::kNvmeWrite;
}

// Under a real-time policy (the process runs with chrt, so that other processes on the machine
// cannot take its cores), threads of equal priority do not preempt each other: a collective that
// becomes ready would wait for the compute thread's time slice. Side-work threads therefore run one
// priority above the compute stream, so that they take the core as soon as they have work -- the
// same "compute waits while side work runs" the device's gate gives (comm_compute_slowdown = 1).
// Nothing changes under the normal policy, where wakeups preempt anyway.
void raise_side_priority(int resource) {
  int policy = 0;
  sched_param param{};
  if (pthread_getschedparam(pthread_self(), &policy, &param) != 0) return;
  if (policy != SCHED_FIFO && policy != SCHED_RR) return;
  if (resource == static_cast<int>(sim::Resource::kCompute)) return;
  param.sched_priority = std::min(param.sched_priority + 1, sched_get_priority_max(policy));
  pthread_setschedparam(pthread_self(), policy, &param);
}

// Runs step graphs: one thread per resource walks its program order, starting each task once
// its dependencies have ended (sim/step_graph.h). Threads live as long as the runner.
class GraphRunner {
 public:
  GraphRunner(ExecutorRank* rank, ExecutorDevice* device) : rank_(rank), device_(device) {
    for (int r = 0; r < sim::kNumResources; ++r) threads_.emplace_back([this, r] { work(r); });
  }

  ~GraphRunner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // Runs `graph` and fills timing (since `epoch`) of every task. Rethrows the first exception a
  // task threw (after every worker has stopped).
  // `extra` are dependencies (before, after) the executor adds to the graph's (ExecutorRank::
  // extra_dependencies).
  void run(const sim::StepGraph& graph, Clock::time_point epoch,
           std::vector<sim::TaskTiming>* timing,
           const std::vector<std::pair<sim::TaskId, sim::TaskId>>& extra) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      graph_ = &graph;
      epoch_ = epoch;
      timing_ = timing;
      timing->assign(graph.tasks().size(), sim::TaskTiming{});
      deps_left_.assign(graph.in_degree().begin(), graph.in_degree().end());
      extra_after_.assign(graph.tasks().size(), {});
      for (const auto& [before, after] : extra) {
        extra_after_[before].push_back(after);
        ++deps_left_[after];
      }
      ended_ = 0;
      idle_ = 0;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return idle_ == sim::kNumResources; });
    graph_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work(int r) {
    raise_side_priority(r);
    uint64_t seen = 0;
    for (;;) {
      const sim::StepGraph* graph;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
        graph = graph_;
      }
      for (sim::TaskId id : graph->resource_order()[static_cast<size_t>(r)]) {
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] { return deps_left_[id] == 0 || error_ != nullptr; });
          if (error_) break;
        }
        const sim::Task& t = graph->tasks()[id];
        const bool side = is_side_work(t);
        if (side) device_->begin_side_work();
        const Clock::time_point start = Clock::now();
        try {
          rank_->run(id, t);
        } catch (...) {
          if (side) device_->end_side_work();
          std::lock_guard<std::mutex> lock(mu_);
          if (!error_) error_ = std::current_exception();
          cv_.notify_all();
          break;
        }
        const Clock::time_point end = Clock::now();
        if (side) device_->end_side_work();
        std::lock_guard<std::mutex> lock(mu_);
        (*timing_)[id].start = since(epoch_, start);
        (*timing_)[id].end = since(epoch_, end);
        ++ended_;
        const sim::DagGraph& g = graph->dag();
        bool woke = false;
        for (auto [it, last] =
                 boost::out_edges(static_cast<sim::DagGraph::vertex_descriptor>(id), g);
             it != last; ++it) {
          if (--deps_left_[boost::target(*it, g)] == 0) woke = true;
        }
        for (sim::TaskId after : extra_after_[id]) {
          if (--deps_left_[after] == 0) woke = true;
        }
        if (woke) cv_.notify_all();
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (++idle_ == sim::kNumResources) done_cv_.notify_all();
    }
  }

  ExecutorRank* rank_;
  ExecutorDevice* device_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  bool quit_ = false;
  uint64_t generation_ = 0;
  const sim::StepGraph* graph_ = nullptr;
  Clock::time_point epoch_;
  std::vector<sim::TaskTiming>* timing_ = nullptr;
  std::vector<uint32_t> deps_left_;
  std::vector<std::vector<sim::TaskId>> extra_after_;
  size_t ended_ = 0;
  int idle_ = 0;
  std::exception_ptr error_;
};

bool writable_dir(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         access(path.c_str(), W_OK) == 0;
}

// /proc/meminfo's MemAvailable in bytes, or 0 if it cannot be read.
double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

}  // namespace

void check_executor_fits(const models::Model& model, const hardware::Cluster& cluster,
                         const sim::DsConfig& config, const sim::Workload& workload,
                         const std::string& swap_dir, bool device_memory_is_host) {
  if (!swap_dir.empty() && !writable_dir(swap_dir)) {
    throw InputError("--swap-dir", swap_dir + " is not a writable directory");
  }
  const double available = available_memory_bytes();
  if (available <= 0) return;  // not Linux: nothing to compare with
  const sim::MemoryReport m = sim::analyze_memory(model, cluster, config, workload);
  const int nodes = std::max(1, cluster.nodes);
  const double device = device_memory_is_host ? m[sim::Tier::kGpu].peak_bytes : 0.0;
  const double needed = device * cluster.gpus + m.host_peak_bytes * nodes;
  if (needed > available) {
    throw InputError(
        "--model " + model.name(),
        strformat("needs about %.1f GiB of memory for %d ranks (%.1f GiB of device memory each, "
                  "%.1f GiB of host memory), but %.1f GiB is available; try a smaller model or "
                  "micro-batch",
                  needed / kGiB, cluster.gpus, device / kGiB, m.host_peak_bytes * nodes / kGiB,
                  available / kGiB));
  }
}

void check_executor_supports(const sim::DsConfig& c, const hardware::Cluster& cluster) {
  (void)cluster;
  auto refuse = [](const std::string& what) {
    throw InputError("executor", what + " is not executed by the reference executor");
  };
  if (c.precision != sim::Precision::kFp32) {
    refuse(std::string(sim::precision_name(c.precision)) +
           " training (use fp32: a ds_config without fp16/bf16, or --precision fp32)");
  }
  if (c.grad_accum_dtype != sim::Precision::kFp32) refuse("a 16-bit grad_accum_dtype");
  if (c.activation_checkpointing.enabled) refuse("activation checkpointing");
  const sim::ZeroConfig& z = c.zero;
  if (z.stage >= 1 && !z.contiguous_gradients) refuse("contiguous_gradients = false");
  if (z.stage >= 1 && z.stage <= 2 && !z.use_multi_rank_bucket_allreduce && z.reduce_scatter) {
    refuse("use_multi_rank_bucket_allreduce = false");
  }
  if (z.stage == 3 && !z.reduce_scatter) refuse("stage 3 with reduce_scatter = false");
  if (z.offload_param.device == sim::OffloadDevice::kNvme) refuse("offload_param = nvme");
  if (z.offload_optimizer.ratio < 1) refuse("partial optimizer offload (ratio < 1)");
  if (z.stage == 0 && z.offload_optimizer.device != sim::OffloadDevice::kNone) {
    refuse("optimizer offload with stage 0");
  }
  // ZeRO++'s quantized collectives would need real int8/int4 block quantization
  // (csrc/quantization/) to train the same weights; they are refused, not imitated in fp32.
  if (z.stage == 3 && z.quantized_weights) refuse("quantized weights (zero_quantized_weights)");
  if (z.stage == 3 && z.quantized_gradients) {
    refuse("quantized gradients (zero_quantized_gradients)");
  }
  if ((z.hpz() || z.mics()) && z.offload_param.device != sim::OffloadDevice::kNone) {
    refuse("hpZ or MiCS with offload_param");
  }
}

ExecutionResult execute_steps(const models::Model& model, const hardware::Cluster& cluster,
                              const sim::DsConfig& config, const sim::Workload& workload,
                              ExecutorDevice& device, const ExecuteOptions& options_in) {
  kernels::Comm& comm = device.comm();
  if (cluster.gpus != comm.size()) {
    throw InputError("--ranks", "the cluster has " + std::to_string(cluster.gpus) +
                                    " devices but " + std::to_string(comm.size()) + " ranks run");
  }
  check_executor_supports(config, cluster);
  ExecuteOptions options = options_in;
  if (options.swap_dir.empty()) {
    const std::string& nvme = config.zero.offload_optimizer.nvme_path;
    const char* tmp = std::getenv("TMPDIR");
    options.swap_dir = writable_dir(nvme) ? nvme : (writable_dir(tmp ? tmp : "") ? tmp : "/tmp");
  }
  sim::StepBuilder builder(model, cluster, config, workload);
  MemoryTracker tracker(&device.raw_memory());
  ExecutorRank rank(model, cluster, config, workload, builder, device, tracker, options);
  const int gas = static_cast<int>(config.gradient_accumulation_steps);
  // The micro-steps' graphs, then the optimizer step's (its baseline memory is the simulator's
  // business: the executor allocates for real).
  std::vector<sim::StepGraph> graphs(static_cast<size_t>(gas) + 1);
  for (int ms = 0; ms < gas; ++ms) builder.build(ms, &graphs[static_cast<size_t>(ms)]);
  builder.build_optimizer_step(builder.persistent(), &graphs.back());

  ExecutionResult result;
  result.device = device.name();
  result.comm = comm.name();
  result.pinned = tracker.pinned_note();
  result.swap = rank.swap_description();
  const int total = options.warmup_steps + options.steps;
  // Per measured step and micro-step: rank 0's timings and memory samples.
  std::vector<std::vector<sim::EngineResult>> recorded(static_cast<size_t>(options.steps));
  std::vector<double> local_step_s;
  std::vector<double> waits;
  {
    GraphRunner runner(&rank, &device);
    for (int s = 0; s < total; ++s) {
      const bool measured = s >= options.warmup_steps;
      if (s == options.warmup_steps) tracker.reset_peaks();
      comm.barrier(kControlChannel);
      device.take_compute_wait_s();
      const Clock::time_point t0 = Clock::now();
      for (int i = 0; i <= gas; ++i) {
        const int ms = i < gas ? i : -1;
        const sim::StepGraph& graph = graphs[static_cast<size_t>(i)];
        sim::EngineResult er;
        const Clock::time_point epoch = Clock::now();
        if (measured) tracker.start_samples(epoch);
        rank.begin_micro_step(s, ms, graph);
        runner.run(graph, epoch, &er.timing, rank.extra_dependencies());
        rank.end_micro_step();
        const Clock::time_point end = Clock::now();
        if (measured) {
          tracker.stop_samples();
          er.samples = tracker.take_samples();
          er.end = since(epoch, end);
          recorded[static_cast<size_t>(s - options.warmup_steps)].push_back(std::move(er));
        }
      }
      const double step_s = std::chrono::duration<double>(Clock::now() - t0).count();
      auto [sq, n] = rank.take_loss();
      std::vector<double> loss{sq, n};
      comm.sum(kControlChannel, &loss);
      result.loss.push_back(loss[1] > 0 ? loss[0] / loss[1] : 0);
      if (measured) {
        local_step_s.push_back(step_s);
        waits.push_back(device.take_compute_wait_s());
      }
    }
  }
  // The step takes as long as its slowest rank.
  result.step_s = local_step_s;
  comm.max(kControlChannel, &result.step_s);
  std::vector<size_t> order(result.step_s.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return result.step_s[a] < result.step_s[b]; });
  result.median_step = static_cast<int>(order[order.size() / 2]);
  result.step_time_s = result.step_s[static_cast<size_t>(result.median_step)];
  result.micro_steps = std::move(recorded[static_cast<size_t>(result.median_step)]);
  for (const sim::EngineResult& er : result.micro_steps) {
    result.micro_step_s.push_back(sim::to_seconds(er.end));
  }
  result.compute_wait_s = waits[static_cast<size_t>(result.median_step)];
  const auto peak = tracker.peak();
  result.at_peak = tracker.at_peak();
  std::vector<double> peaks(peak.begin(), peak.end());
  comm.max(kControlChannel, &peaks);
  for (int t = 0; t < sim::kNumTiers; ++t)
    result.peak_bytes[static_cast<size_t>(t)] = peaks[static_cast<size_t>(t)];
  if (options.keep_weights) result.weights = rank.full_weights();
  return result;
}

}  // namespace zplan::executor
