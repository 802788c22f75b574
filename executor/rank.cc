// ExecutorRank: its state, the dispatch of tasks and the results (the task actions are in
// rank_compute.cc, rank_reduce.cc and rank_transfers.cc). "ref §x" =
// reference/deepspeed_internals.md.
#include "executor/rank.h"

#include <algorithm>
#include <cassert>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "executor/data.h"
#include "executor/rank_internal.h"
#include "base/input_error.h"
#include "sim/memory_model.h"

namespace zplan::executor {

namespace {

Tier pin_tier(bool pin) { return pin ? Tier::kPinnedHost : Tier::kHost; }

bool is_compute(TaskKind k) {
  return k == TaskKind::kForward || k == TaskKind::kBackward || k == TaskKind::kRecompute;
}

}  // namespace

ExecutorRank::ExecutorRank(const models::Model& model, const hardware::Cluster& cluster,
                           const sim::DsConfig& config, const sim::Workload& workload,
                           const sim::StepBuilder& builder, ExecutorDevice& device,
                           MemoryTracker& tracker, const ExecuteOptions& options)
    : model_(model),
      cluster_(cluster),
      config_(config),
      workload_(workload),
      builder_(builder),
      dev_(device),
      mem_(tracker),
      options_(options),
      zgroups_(sim::zero_groups(config.zero, cluster)),
      layout_(model, config, builder, zgroups_.partition.ranks,
              sim::group_rank(zgroups_, sim::CommGroupId::kPartition, device.comm().rank())),
      acts_(sim::plan_activations(model, config, workload)),
      comm_(device.comm()),
      dp_(cluster.gpus),
      rank_(device.comm().rank()),
      stage_(config.zero.stage),
      gas_(static_cast<int>(config.gradient_accumulation_steps)),
      mlp_(model.shape().family == models::Family::kMlp) {
  tokens_ = config.micro_batch * workload.seq_len;
  if (config.zero.hpz() || config.zero.mics()) {
    // Every rank makes every group, in the same order (dist.new_group is collective too).
    for (int g = 1; g < sim::kNumCommGroups; ++g) {
      const auto id = static_cast<sim::CommGroupId>(g);
      group_comms_[static_cast<size_t>(g)] = comm_.split(sim::group_color(zgroups_, id, rank_));
    }
  }
  init_state();
}

kernels::Comm& ExecutorRank::group_comm(sim::CommGroupId id) {
  kernels::Comm* c = group_comms_[static_cast<size_t>(id)].get();
  return c != nullptr ? *c : comm_;  // without hpZ and MiCS every group used is the world
}

ExecutorRank::~ExecutorRank() = default;

bool ExecutorRank::offload() const {
  return config_.zero.offload_optimizer.device != OffloadDevice::kNone;
}

// --- State ------------------------------------------------------------------------------------

void ExecutorRank::init_state() {
  const sim::ZeroConfig& z = config_.zero;
  const auto& params = layout_.params();
  const int64_t P = layout_.partition();
  full_grads_.resize(params.size());
  fresh_grads_.resize(params.size());
  persistent_full_.resize(params.size());
  bucket_tmp_.resize(stage_ == 0
                         ? static_cast<size_t>(std::ceil(static_cast<double>(layout_.psi()) /
                                                         sim::kStage0AllreduceElems))
                         : layout_.buckets().size());
  bucket_dev_.resize(layout_.buckets().size());
  bucket_stage_.resize(layout_.buckets().size());
  act_.resize(model_.layers().size());
  act_blob_.resize(model_.layers().size());
  if (!mlp_) {
    // Operands big enough for every GEMM and attention product of the model.
    size_t a = 1, b = 1, w = 1;
    const int64_t s = workload_.seq_len;
    for (const models::Layer& layer : model_.layers()) {
      for (const models::ComputeOp& op : layer.ops) {
        if (op.kind == models::OpKind::kGemm) {
          a = std::max(a, static_cast<size_t>(tokens_ * std::max(op.n, op.k)));
          b = std::max(b, static_cast<size_t>(tokens_ * std::max(op.n, op.k)));
          w = std::max(w, static_cast<size_t>(op.n * op.k));
        } else if (op.kind == models::OpKind::kAttention) {
          a = std::max(a, static_cast<size_t>(s * op.head_dim));
          b = std::max(b, static_cast<size_t>(s * s));
          w = std::max(w, static_cast<size_t>(s * op.head_dim));
        } else {
          // A memory-bound op's forward and backward passes (rank_compute.cc) each sweep
          // scratch_b_; an eager chain's backward may move more than twice its forward
          // (Hugging Face's RMSNorm: 84 against 36 bytes an element).
          const double bytes = std::max(op.bytes_per_token, op.backward_bytes());
          b = std::max(b, static_cast<size_t>(bytes * double(tokens_) / 2) + 1);
        }
      }
    }
    scratch_a_ = to_device(a, nullptr, 0.01f);
    scratch_b_ = to_device(b, nullptr, 0.01f);
    scratch_w_ = to_device(w, nullptr, 0.01f);
  }

  // Initial weights: a function of (seed, tensor, element), so every rank and every stage
  // starts from the same model.
  const int64_t hidden = model_.shape().hidden;
  auto init_value = [&](int id, int64_t i) {
    const bool square = params[static_cast<size_t>(id)].numel == hidden * hidden;
    return initial_weight(options_.seed, id, i, mlp_, square, hidden);
  };

  if (stage_ <= 2) {
    params_ =
        Buffer(&mem_, Tier::kGpu, Category::kParams16, static_cast<size_t>(layout_.flat_size()));
    // Made on the host, then copied: the device's memory may not be the host's.
    std::vector<float> init(params_.size(), 0.0f);
    for (size_t id = 0; id < params.size(); ++id) {
      float* p = init.data() + params[id].flat_offset;
      for (int64_t i = 0; i < params[id].numel; ++i) p[i] = init_value(static_cast<int>(id), i);
    }
    dev_.copy(params_.data(), init.data(), init.size());
  }
  if (stage_ == 0) {
    exp_avg_ = Buffer(&mem_, Tier::kGpu, Category::kOptimizerStates, static_cast<size_t>(P));
    exp_avg_sq_ = Buffer(&mem_, Tier::kGpu, Category::kOptimizerStates, static_cast<size_t>(P));
    dev_.zero(exp_avg_.data(), exp_avg_.size());
    dev_.zero(exp_avg_sq_.data(), exp_avg_sq_.size());
    return;
  }
  if (stage_ <= 2) {
    const int64_t pb = layout_.partition_begin();
    if (!offload()) {
      master_ = Buffer(&mem_, Tier::kGpu, Category::kMaster32, static_cast<size_t>(P));
      exp_avg_ = Buffer(&mem_, Tier::kGpu, Category::kOptimizerStates, static_cast<size_t>(P));
      exp_avg_sq_ = Buffer(&mem_, Tier::kGpu, Category::kOptimizerStates, static_cast<size_t>(P));
    } else {
      // ZeRO-Offload's host buffers (ref §2.1 "with offload_optimizer.device=cpu").
      const Tier pinned = pin_tier(z.offload_optimizer.pin_memory);
      master_ = Buffer(&mem_, pinned, Category::kMaster32, static_cast<size_t>(P));
      host_grads32_ = Buffer(&mem_, pinned, Category::kGrads32, static_cast<size_t>(P));
      host_params16_ = Buffer(&mem_, pinned, Category::kParams16, static_cast<size_t>(P));
      host_temp_grad_ =
          Buffer(&mem_, pinned, Category::kBuckets, static_cast<size_t>(layout_.largest_param()));
      if (gas_ > 1) host_accum_ = Buffer(&mem_, pinned, Category::kGrads, static_cast<size_t>(P));
      exp_avg_ = Buffer(&mem_, Tier::kHost, Category::kOptimizerStates, static_cast<size_t>(P));
      exp_avg_sq_ = Buffer(&mem_, Tier::kHost, Category::kOptimizerStates, static_cast<size_t>(P));
      dev_.zero(host_grads32_.data(), host_grads32_.size());
      if (!host_accum_.empty()) dev_.zero(host_accum_.data(), host_accum_.size());
    }
    dev_.copy(master_.data(), params_.data() + pb, static_cast<size_t>(P));
    dev_.zero(exp_avg_.data(), exp_avg_.size());
    dev_.zero(exp_avg_sq_.data(), exp_avg_sq_.size());
    ipg_ = std::make_unique<Ipg>();
    ipg_->count = z.overlap_comm ? 2 : 1;
  } else {
    // Stage 3 (ref §2.2).
    const Tier param_tier = z.offload_param.device == OffloadDevice::kNone
                                ? Tier::kGpu
                                : pin_tier(z.offload_param.pin_memory);
    params_ = Buffer(&mem_, param_tier, Category::kParams16, static_cast<size_t>(P));
    std::vector<float> init(params_.size(), 0.0f);
    for (size_t id = 0; id < params.size(); ++id) {
      const ParamSlot& s = params[id];
      float* part = init.data() + s.part_offset;
      for (int64_t i = 0; i < s.part_numel; ++i) {
        int64_t e = layout_.rank() * s.part_numel + i;
        part[i] = e < s.numel ? init_value(static_cast<int>(id), e) : 0.0f;
      }
      if (s.persistent) {
        persistent_full_[id] =
            Buffer(&mem_, Tier::kGpu, Category::kGatheredParams, static_cast<size_t>(s.numel));
        std::vector<float> full(static_cast<size_t>(s.numel));
        for (int64_t e = 0; e < s.numel; ++e) full[e] = init_value(static_cast<int>(id), e);
        dev_.copy(persistent_full_[id].data(), full.data(), full.size());
      }
    }
    dev_.copy(params_.data(), init.data(), init.size());
    if (z.hpz()) {
      // hpZ's secondary partition: of each non-persistent parameter, its padded size over the hpZ
      // group (partition_parameters.py _partition_param_sec). DeepSpeed allocates it at the
      // first release and keeps the tensor; the memory model counts it for the whole step.
      const int64_t per_part = layout_.dp() / zgroups_.secondary.ranks;
      secondary_offset_.assign(params.size(), -1);
      secondary_valid_.assign(params.size(), false);
      int64_t total = 0;
      for (size_t id = 0; id < params.size(); ++id) {
        if (params[id].persistent) continue;
        secondary_offset_[id] = total;
        total += params[id].part_numel * per_part;
      }
      secondary_ = Buffer(&mem_, Tier::kGpu, Category::kParams16, static_cast<size_t>(total));
    }
    const auto& groups = layout_.sub_groups();
    const int first_cpu =
        offload()
            ? static_cast<int>((1 - z.offload_optimizer.ratio) * static_cast<double>(groups.size()))
            : static_cast<int>(groups.size());
    const bool nvme = z.offload_optimizer.device == OffloadDevice::kNvme;
    master_g_.resize(groups.size());
    exp_avg_g_.resize(groups.size());
    exp_avg_sq_g_.resize(groups.size());
    host_grads32_g_.resize(groups.size());
    if (nvme) {
      std::string dir = options_.swap_dir;
      swap_ =
          std::make_unique<SwapFile>(dir, rank_, &mem_, static_cast<size_t>(config_.aio.block_size),
                                     static_cast<int>(config_.aio.queue_depth));
      swap_state_offset_.resize(groups.size());
      swap_state_bytes_.resize(groups.size());
    }
    int64_t max_group = 0;
    for (const SubGroupSlots& g : groups) max_group = std::max(max_group, g.size);
    if (nvme) {
      // buffer_count pinned buffers of the largest sub-group (optimizer_utils.py), the gradient
      // one with room for aligned reads of an unaligned range.
      const int64_t count = z.offload_optimizer.buffer_count;
      if (count < 4) {
        throw InputError("offload_optimizer.buffer_count",
                         "must be at least 4 (fp32 params, m, v, gradients)");
      }
      for (int64_t i = 0; i < count; ++i) {
        size_t floats = swap_aligned(static_cast<size_t>(4 * max_group)) / 4 + 2 * kSwapAlign / 4;
        swap_buffers_.emplace_back(&mem_, Tier::kPinnedHost, Category::kSwapBuffers, floats);
      }
      swap_buffer_busy_.assign(swap_buffers_.size(), false);
      bounce_.reset(static_cast<char*>(std::aligned_alloc(kSwapAlign, kSwapAlign)));
    }
    std::vector<float> master_init;
    for (size_t g = 0; g < groups.size(); ++g) {
      const size_t S = static_cast<size_t>(groups[g].size);
      Tier master_tier = Tier::kGpu, state_tier = Tier::kGpu;
      if (static_cast<int>(g) >= first_cpu) {
        master_tier = Tier::kHost;  // a clone, not pinned (stage3.py _create_fp32_partitions)
        state_tier = Tier::kHost;
      }
      if (nvme && static_cast<int>(g) >= first_cpu) {
        // fp32 params, m and v on NVMe (ref §5.2): written once here.
        size_t bytes = 4 * S;
        swap_state_bytes_[g] = swap_aligned(bytes);
        swap_state_offset_[g] = swap_->reserve(bytes, Category::kMaster32);
        swap_->reserve(bytes, Category::kOptimizerStates);
        swap_->reserve(bytes, Category::kOptimizerStates);
        float* buf = swap_buffers_[0].data();
        std::memset(buf, 0, swap_state_bytes_[g]);
        dev_.copy(buf, params_.data() + groups[g].begin, S);
        swap_->write(swap_state_offset_[g], buf, swap_state_bytes_[g]);
        std::memset(buf, 0, swap_state_bytes_[g]);
        swap_->write(swap_state_offset_[g] + swap_state_bytes_[g], buf, swap_state_bytes_[g]);
        swap_->write(swap_state_offset_[g] + 2 * swap_state_bytes_[g], buf, swap_state_bytes_[g]);
        continue;
      }
      // Without offload in the parameters' dtype, the parameters' partition is the master
      // (sim::stage3_master_is_params): no buffer of its own.
      if (!sim::stage3_master_is_params(config_)) {
        master_g_[g] = Buffer(&mem_, master_tier, Category::kMaster32, S);
        dev_.copy(master_g_[g].data(), params_.data() + groups[g].begin, S);
      }
      exp_avg_g_[g] = Buffer(&mem_, state_tier, Category::kOptimizerStates, S);
      exp_avg_sq_g_[g] = Buffer(&mem_, state_tier, Category::kOptimizerStates, S);
      dev_.zero(exp_avg_g_[g].data(), S);
      dev_.zero(exp_avg_sq_g_[g].data(), S);
      if (static_cast<int>(g) >= first_cpu) {
        host_grads32_g_[g] =
            Buffer(&mem_, pin_tier(z.offload_optimizer.pin_memory), Category::kGrads32, S);
      }
    }
    if (nvme) {
      // The fp32 gradient partition, in partition order (written per bucket at the boundary).
      swap_grad_offset_.assign(1, swap_->reserve(static_cast<size_t>(4 * P), Category::kGrads32));
    }
    // grad_partitions_flat_buffer (item 6), pinned on the host with optimizer offload.
    const Tier grad_tier = offload() ? pin_tier(z.offload_optimizer.pin_memory) : Tier::kGpu;
    partition_acc_ = Buffer(&mem_, grad_tier, Category::kGrads, static_cast<size_t>(P));
    dev_.zero(partition_acc_.data(), partition_acc_.size());
    ipg_ = std::make_unique<Ipg>();
    ipg_->count = 1;  // one IPG buffer regardless of overlap_comm (item 5)
  }
  ipg_->dev = &dev_;
  ipg_->mem = &mem_;
  ipg_->layout = &layout_;
  ipg_->capacity = static_cast<size_t>(builder_.sizes().bucket);
  ipg_->big.resize(layout_.buckets().size());
  if (stage_ == 3) ipg_->allocate();
}

void ExecutorRank::init_data(int step, int ms) {
  if (!mlp_) return;
  // The global batch of optimizer step `step` is rows [step G, (step + 1) G); micro-step ms of
  // rank r takes the micro_batch rows at (ms dp + r) micro_batch -- the same rows for every
  // stage and offload mode, so that they train the same model.
  const int64_t h = model_.shape().hidden;
  const int64_t mb = config_.micro_batch;
  const int64_t global = mb * gas_ * dp_;
  const int64_t first_row = step * global + (static_cast<int64_t>(ms) * dp_ + rank_) * mb;
  input_host_.resize(static_cast<size_t>(tokens_ * h));
  target_host_.resize(input_host_.size());
  const int64_t seq = workload_.seq_len;
  for (int64_t t = 0; t < tokens_; ++t) {
    const uint64_t row = static_cast<uint64_t>(first_row * seq + t);
    for (int64_t c = 0; c < h; ++c) {
      input_host_[static_cast<size_t>(t * h + c)] = mlp_input(options_.seed, row, c);
      target_host_[static_cast<size_t>(t * h + c)] = mlp_target(options_.seed, row, c);
    }
  }
  if (input_.size() != input_host_.size()) {
    input_ = to_device(input_host_.size(), nullptr);
    target_ = to_device(target_host_.size(), nullptr);
  }
  dev_.copy(input_.data(), input_host_.data(), input_host_.size());
  dev_.copy(target_.data(), target_host_.data(), target_host_.size());
}

UntrackedBuffer ExecutorRank::to_device(size_t count, const float* host, float value) {
  UntrackedBuffer b(&dev_.raw_memory(), Tier::kGpu, count);
  if (host != nullptr) {
    dev_.copy(b.data(), host, count);
  } else {
    std::vector<float> fill(count, value);
    dev_.copy(b.data(), fill.data(), count);
  }
  return b;
}

void ExecutorRank::begin_micro_step(int step, int ms, const sim::StepGraph& graph) {
  graph_ = &graph;
  step_ = step;
  ms_ = ms;
  first_ = ms == 0;
  boundary_ = ms < 0 || ms + 1 == gas_;
  adam_step_ = step + 1;
  fail_now_ = options_.fail_rank == rank_ && step == options_.warmup_steps && ms == 0;
  const size_t n = graph.tasks().size();
  preds_.assign(n, {});
  const sim::DagGraph& g = graph.dag();
  for (size_t v = 0; v < n; ++v) {
    for (auto [it, end] = boost::out_edges(static_cast<sim::DagGraph::vertex_descriptor>(v), g);
         it != end; ++it) {
      preds_[boost::target(*it, g)].push_back(static_cast<TaskId>(v));
    }
  }
  extra_deps_.clear();
  if (!secondary_.empty()) {
    // hpZ: each secondary gather after the compute task that released its module in this graph.
    std::map<std::pair<int, int>, TaskId> released_by;  // module (layer, index) -> compute task
    for (TaskId id = 0; id < n; ++id) {
      const sim::Task& t = graph.tasks()[id];
      if (is_compute(t.kind) && releases_gathered(t)) {
        const TaskId gather = predecessor(id, TaskKind::kAllGather);
        if (gather != sim::kNoTask) {
          released_by[{graph.tasks()[gather].layer, graph.tasks()[gather].index}] = id;
        }
      } else if (t.kind == TaskKind::kAllGather && t.group == sim::CommGroupId::kSecondary) {
        auto it = released_by.find({t.layer, t.index});
        if (it != released_by.end()) extra_deps_.emplace_back(it->second, id);
      }
    }
  }
  if (ms >= 0) init_data(step, ms);
  if (ms < 0 && !secondary_valid_.empty()) {
    // stage3.py step() -> invalidate_secondary_tensor: the secondary partitions are stale once
    // the parameters change.
    std::lock_guard<std::mutex> lock(gathered_mu_);
    secondary_valid_.assign(secondary_valid_.size(), false);
  }
}

void ExecutorRank::end_micro_step() {
  assert(partition_new_.empty());
  std::lock_guard<std::mutex> lock(gathered_mu_);
  assert(gathered_.empty() && fetched_.empty());
  gathered_.clear();
  fetched_.clear();
  graph_ = nullptr;
}

TaskId ExecutorRank::predecessor(TaskId id, TaskKind kind) const {
  for (TaskId p : preds_[id]) {
    if (graph_->tasks()[p].kind == kind) return p;
  }
  return sim::kNoTask;
}

std::pair<double, double> ExecutorRank::take_loss() {
  std::pair<double, double> out{loss_sq_, loss_n_};
  loss_sq_ = loss_n_ = 0;
  return out;
}

std::string ExecutorRank::swap_description() const {
  return swap_ ? swap_->description() : std::string();
}

// --- Dispatch ---------------------------------------------------------------------------------

void ExecutorRank::run(TaskId id, const sim::Task& t) {
  switch (t.kind) {
    case TaskKind::kForward:
      forward(id, t);
      break;
    case TaskKind::kBackward:
      if (fail_now_) {
        std::fprintf(stderr, "zplan: rank %d: failing on purpose (--fail-rank %d)\n", rank_, rank_);
        std::fflush(stderr);
        _exit(70);  // a rank that died: the internal-error code, not "does not fit"
      }
      backward(id, t);
      break;
    case TaskKind::kRecompute:
      throw InputError("executor", "activation checkpointing is not executed");
    case TaskKind::kBucketCopy:
      bucket_copy(t);
      break;
    case TaskKind::kAllReduce:
    case TaskKind::kReduce:
      all_reduce(t);
      break;
    case TaskKind::kReduceScatter:
      reduce_scatter(t);
      break;
    case TaskKind::kGradAccumulate:
      grad_accumulate(t);
      break;
    case TaskKind::kH2D:
      h2d(id, t);
      break;
    case TaskKind::kD2H:
      d2h(t);
      break;
    case TaskKind::kOptimizerGpu:
      optimizer_gpu(t);
      break;
    case TaskKind::kOptimizerCpu:
      optimizer_cpu(t);
      break;
    case TaskKind::kAllGather:
      all_gather(id, t);
      break;
    case TaskKind::kNvmeRead:
      nvme_read(id, t);
      break;
    case TaskKind::kNvmeWrite:
      nvme_write(t);
      break;
  }
  if (stage_ == 3 && is_compute(t.kind)) release_gathered(id, t);
}

// --- Results ----------------------------------------------------------------------------------

std::vector<float> ExecutorRank::full_weights() {
  const auto& params = layout_.params();
  std::vector<float> out(static_cast<size_t>(layout_.psi()));
  if (stage_ <= 2) {
    dev_.copy(out.data(), params_.data(), out.size());
    return out;
  }
  // Every partition group (the world, or each MiCS shard) holds the whole model.
  const size_t P = static_cast<size_t>(layout_.partition());
  std::vector<float> all(P * static_cast<size_t>(layout_.dp()));
  std::vector<float> mine(P);
  dev_.copy(mine.data(), params_.data(), P);
  group_comm(sim::CommGroupId::kPartition).all_gather(kControlChannel, mine.data(), P, all.data());
  for (const ParamSlot& s : params) {
    for (int r = 0; r < layout_.dp(); ++r) {
      const int64_t first = static_cast<int64_t>(r) * s.part_numel;
      const int64_t len = std::clamp<int64_t>(s.numel - first, 0, s.part_numel);
      if (len <= 0) continue;
      std::memcpy(out.data() + s.flat_offset + first,
                  all.data() + static_cast<size_t>(r) * P + s.part_offset,
                  static_cast<size_t>(len) * sizeof(float));
    }
  }
  return out;
}

}  // namespace zplan::executor
