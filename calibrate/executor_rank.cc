// ExecutorRank: the state and the task actions. "ref §x" = reference/deepspeed_internals.md.
#include "calibrate/executor_rank.h"

#include <algorithm>
#include <cassert>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "models/input_error.h"
#include "sim/memory_model.h"

namespace zplan::calibrate {

using sim::Category;
using sim::OffloadDevice;
using sim::Resource;
using sim::TaskId;
using sim::TaskKind;
using sim::Tier;

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A deterministic value in [-1, 1) for (stream a, element b).
float uniform(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t h = splitmix(seed ^ splitmix(a * 0x632BE59BD9B4E019ULL + b));
  return static_cast<float>(static_cast<double>(h >> 40) * (2.0 / 16777216.0) - 1.0);
}

Tier pin_tier(bool pin) { return pin ? Tier::kPinnedHost : Tier::kHost; }

bool is_compute(TaskKind k) {
  return k == TaskKind::kForward || k == TaskKind::kBackward || k == TaskKind::kRecompute;
}

}  // namespace

// The IPG (independent partition gradient) buffers of stages 1-3: `count` buffers of the bucket
// size, bucket k in buffer k % count (ref §2.1 item 4, §2.2 item 5). A gradient whose buffer still
// holds an earlier bucket that has not been copied out waits in `pending` (it stays allocated,
// as autograd's gradient does until DeepSpeed's hook can copy it) until release() of that bucket.
struct ExecutorRank::Ipg {
  ExecutorDevice* dev = nullptr;
  MemoryTracker* mem = nullptr;
  const ExecutorLayout* layout = nullptr;
  int count = 1;
  size_t capacity = 0;
  std::vector<Buffer> bufs;
  std::vector<int> owner;
  struct Pending {
    int param;
    Buffer grad;
  };
  std::vector<std::vector<Pending>> pending;
  // A gradient larger than a whole bucket is its own bucket and never enters an IPG buffer
  // (DeepSpeed's "extra large param", reduced from param.grad): kept here, by bucket.
  std::vector<Buffer> big;
  std::mutex mu;
  std::condition_variable cv;

  bool is_big(int bucket) const {
    return layout->buckets()[static_cast<size_t>(bucket)].elems > static_cast<int64_t>(capacity);
  }

  bool allocated() const { return !bufs.empty(); }
  void allocate() {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < count; ++i)
      bufs.emplace_back(mem, Tier::kGpu, Category::kBuckets, capacity);
    owner.assign(static_cast<size_t>(count), -1);
    pending.clear();
    pending.resize(static_cast<size_t>(count));
  }
  void free() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& waiting : pending) {
      assert(waiting.empty());
      (void)waiting;
    }
    bufs.clear();
  }
  float* data(int bucket) {
    std::lock_guard<std::mutex> lock(mu);
    if (is_big(bucket)) return big[static_cast<size_t>(bucket)].data();
    return bufs[static_cast<size_t>(bucket % count)].data();
  }
  // Stage 1: waits until the bucket's buffer is free (an offload copy may still read the
  // previous bucket) and takes it.
  void claim(int bucket) {
    std::unique_lock<std::mutex> lock(mu);
    const size_t slot = static_cast<size_t>(bucket % count);
    cv.wait(lock, [&] { return owner[slot] < 0 || owner[slot] == bucket; });
    owner[slot] = bucket;
  }
  // Waits until the bucket's buffer holds the bucket and none of its gradients wait: when the
  // buffer's previous bucket is still being copied out (an offload copy on another resource),
  // DeepSpeed synchronizes on that copy before refilling the buffer.
  void wait_ready(int bucket) {
    std::unique_lock<std::mutex> lock(mu);
    if (is_big(bucket)) return;
    const size_t slot = static_cast<size_t>(bucket % count);
    cv.wait(lock, [&] {
      if (owner[slot] != bucket) return false;
      for (const Pending& p : pending[slot]) {
        if (layout->params()[static_cast<size_t>(p.param)].bucket == bucket) return false;
      }
      return true;
    });
  }
  // The gradient hook: into the bucket's buffer, or pending.
  void put(int param, Buffer&& grad) {
    const ParamSlot& s = layout->params()[static_cast<size_t>(param)];
    const size_t slot = static_cast<size_t>(s.bucket % count);
    std::lock_guard<std::mutex> lock(mu);
    if (is_big(s.bucket)) {
      big[static_cast<size_t>(s.bucket)] = std::move(grad);
      return;
    }
    if (owner[slot] < 0 || owner[slot] == s.bucket) {
      owner[slot] = s.bucket;
      dev->copy(bufs[slot].data() + s.bucket_offset, grad.data(), static_cast<size_t>(s.numel));
      grad.reset();
    } else {
      pending[slot].push_back(Pending{param, std::move(grad)});
    }
  }
  // Bucket `bucket` has been copied out of its buffer: the buffer takes the waiting gradients.
  void release(int bucket) {
    const size_t slot = static_cast<size_t>(bucket % count);
    std::lock_guard<std::mutex> lock(mu);
    if (is_big(bucket)) {
      big[static_cast<size_t>(bucket)].reset();
      return;
    }
    owner[slot] = -1;
    // The earliest waiting bucket takes the buffer; later ones keep waiting for it.
    int next = INT_MAX;
    for (const Pending& p : pending[slot]) {
      next = std::min(next, layout->params()[static_cast<size_t>(p.param)].bucket);
    }
    std::vector<Pending> still;
    for (Pending& p : pending[slot]) {
      const ParamSlot& s = layout->params()[static_cast<size_t>(p.param)];
      if (s.bucket != next) {
        still.push_back(std::move(p));
        continue;
      }
      owner[slot] = s.bucket;
      dev->copy(bufs[slot].data() + s.bucket_offset, p.grad.data(), static_cast<size_t>(s.numel));
      p.grad.reset();
    }
    pending[slot] = std::move(still);
    cv.notify_all();
  }
};

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
      layout_(model, config, builder, cluster.gpus, device.comm().rank()),
      acts_(sim::plan_activations(model, config, workload)),
      comm_(device.comm()),
      dp_(cluster.gpus),
      rank_(device.comm().rank()),
      stage_(config.zero.stage),
      gas_(static_cast<int>(config.gradient_accumulation_steps)),
      mlp_(model.shape().family == models::Family::kMlp) {
  tokens_ = config.micro_batch * workload.seq_len;
  init_state();
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
          b = std::max(b, static_cast<size_t>(op.bytes_per_token * double(tokens_) / 2) + 1);
        }
      }
    }
    scratch_a_ = to_device(a, nullptr, 0.01f);
    scratch_b_ = to_device(b, nullptr, 0.01f);
    scratch_w_ = to_device(w, nullptr, 0.01f);
  }

  // Initial weights: a function of (seed, tensor, element), so every rank and every stage
  // starts from the same model.
  auto init_value = [&](int id, int64_t i) {
    const ParamSlot& s = params[static_cast<size_t>(id)];
    const models::Layer& layer = model_.layers()[static_cast<size_t>(s.layer)];
    double fan_in = mlp_ ? static_cast<double>(model_.shape().hidden) : 50.0;
    double scale = 1.0 / std::sqrt(fan_in);
    if (!mlp_ || s.numel != model_.shape().hidden * model_.shape().hidden) scale *= 0.5;
    (void)layer;
    return static_cast<float>(
        scale * uniform(options_.seed, static_cast<uint64_t>(id) + 1, static_cast<uint64_t>(i)));
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
        int64_t e = rank_ * s.part_numel + i;
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
        master_tier = pin_tier(z.offload_optimizer.pin_memory);
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
      master_g_[g] = Buffer(&mem_, master_tier, Category::kMaster32, S);
      dev_.copy(master_g_[g].data(), params_.data() + groups[g].begin, S);
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
      input_host_[static_cast<size_t>(t * h + c)] = uniform(options_.seed, 1'000'000'000 + row, c);
      target_host_[static_cast<size_t>(t * h + c)] =
          0.5f * uniform(options_.seed, 2'000'000'000 + row, c);
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
  if (ms >= 0) init_data(step, ms);
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

// --- Compute ----------------------------------------------------------------------------------

float* ExecutorRank::param_data(int id, TaskId compute_task) {
  const ParamSlot& s = layout_.params()[static_cast<size_t>(id)];
  if (stage_ <= 2) return params_.data() + s.flat_offset;
  if (s.persistent) return persistent_full_[static_cast<size_t>(id)].data();
  TaskId g = predecessor(compute_task, TaskKind::kAllGather);
  assert(g != sim::kNoTask && "a stage-3 compute task without its gather");
  std::lock_guard<std::mutex> lock(gathered_mu_);
  auto it = gathered_.find(g);
  assert(it != gathered_.end());
  const sim::Task& gt = graph_->tasks()[g];
  const auto& ids = layout_.module_params(gt.layer, gt.index);
  size_t k = 0;
  for (int other : ids) {
    if (layout_.params()[static_cast<size_t>(other)].persistent) continue;
    if (other == id) return it->second[k].data();
    ++k;
  }
  assert(false && "parameter not in the gathered module");
  return nullptr;
}

float* ExecutorRank::grad_slot(int id) {
  return stage_ <= 1 ? full_grads_[static_cast<size_t>(id)].data()
                     : fresh_grads_[static_cast<size_t>(id)].data();
}

void ExecutorRank::prepare_grads(int piece) {
  // Stages 0-1 keep full gradients from the first micro-step to the step (later micro-steps add
  // into them); stages 2-3 get a fresh gradient per backward, which the hook empties.
  for (int id : layout_.piece_grads(piece)) {
    const size_t n = static_cast<size_t>(layout_.params()[static_cast<size_t>(id)].numel);
    if (stage_ <= 1) {
      // (The first micro-step's backward overwrites them: no zeroing.)
      if (full_grads_[static_cast<size_t>(id)].empty()) {
        full_grads_[static_cast<size_t>(id)] = Buffer(&mem_, Tier::kGpu, Category::kGrads, n);
      }
    } else {
      fresh_grads_[static_cast<size_t>(id)] = Buffer(&mem_, Tier::kGpu, Category::kGrads, n);
    }
  }
}

void ExecutorRank::hook_grads(int piece) {
  if (stage_ <= 1) return;
  for (int id : layout_.piece_grads(piece)) {
    ipg_->put(id, std::move(fresh_grads_[static_cast<size_t>(id)]));
  }
}

void ExecutorRank::forward(TaskId id, const sim::Task& t) {
  if (mlp_) {
    forward_mlp(id, t.layer);
  } else {
    forward_generic(id, t.index);
  }
}

void ExecutorRank::backward(TaskId id, const sim::Task& t) {
  const bool bucketed = stage_ == 2 || (stage_ == 1 && boundary_);
  if (bucketed && !ipg_->allocated()) ipg_->allocate();  // the first gradient hook (item 4)
  prepare_grads(t.index);
  if (mlp_) {
    backward_mlp(id, t.index, t.layer);
  } else {
    backward_generic(id, t.index);
  }
  hook_grads(t.index);
}

void ExecutorRank::forward_mlp(TaskId id, int layer) {
  // Linear(h, h) + ReLU; the last layer feeds the MSE loss. Each layer keeps its output (the
  // ReLU's result, which the next Linear keeps too; the last one's for the loss).
  const int64_t h = model_.shape().hidden;
  const size_t l = static_cast<size_t>(layer);
  const bool last = l + 1 == model_.layers().size();
  const auto& ids = layout_.module_params(layer, 0);
  const float* w = param_data(ids[0], id);
  const float* b = param_data(ids[1], id);
  const float* x = l == 0 ? input_.data() : act_[l - 1].data();
  act_[l] = Buffer(&mem_, Tier::kGpu, Category::kActivations, static_cast<size_t>(tokens_ * h));
  float* y = act_[l].data();
  dev_.fill_rows(y, b, tokens_, h);
  dev_.gemm(false, true, tokens_, h, h, 1.0f, x, h, w, h, 1.0f, y, h);
  const size_t n = static_cast<size_t>(tokens_ * h);
  if (!last) {
    dev_.relu(y, n);
  } else {
    loss_sq_ += dev_.squared_error(y, target_.data(), n);
    loss_n_ += static_cast<double>(n);
  }
}

void ExecutorRank::backward_mlp(TaskId id, int piece, int layer) {
  const int64_t h = model_.shape().hidden;
  const size_t l = static_cast<size_t>(layer);
  const bool last = l + 1 == model_.layers().size();
  const size_t n = static_cast<size_t>(tokens_ * h);
  Buffer dy;
  if (last) {
    // d mean((y - t)^2) / dy, and DeepSpeed's 1 / gas loss scaling.
    dy = Buffer(&mem_, Tier::kGpu, Category::kActivations, n);
    const float scale = 2.0f / static_cast<float>(n) / static_cast<float>(gas_);
    dev_.mse_grad(dy.data(), act_[l].data(), target_.data(), n, scale);
  } else {
    dy = std::move(grad_flow_);
    dev_.relu_backward(dy.data(), act_[l].data(), n);
  }
  const auto& ids = layout_.module_params(layer, 0);
  const float* w = param_data(ids[0], id);
  const float* x = l == 0 ? input_.data() : act_[l - 1].data();
  const bool accumulate = stage_ <= 1 && !first_;
  // dW = dy^T x, db = column sums of dy, dx = dy W (not for the first layer: its input is data).
  dev_.gemm(true, false, h, h, tokens_, 1.0f, dy.data(), h, x, h, accumulate ? 1.0f : 0.0f,
            grad_slot(ids[0]), h);
  dev_.column_sums(dy.data(), tokens_, h, grad_slot(ids[1]), accumulate);
  if (l > 0) {
    Buffer dx(&mem_, Tier::kGpu, Category::kActivations, n);
    dev_.gemm(false, false, tokens_, h, h, 1.0f, dy.data(), h, w, h, 0.0f, dx.data(), h);
    grad_flow_ = std::move(dx);
  }
  act_[l].reset();
  (void)piece;
}

void ExecutorRank::forward_generic(TaskId id, int piece) {
  // Transformer-shaped models: the piece's GEMMs with their shapes, attention as its two batched
  // products, elementwise ops as memory passes; activations as the activation plan counts them.
  const sim::Piece& pc = builder_.pieces()[static_cast<size_t>(piece)];
  const models::Layer& layer = model_.layers()[static_cast<size_t>(pc.layer)];
  const size_t l = static_cast<size_t>(pc.layer);
  const bool layer_first =
      piece == 0 || builder_.pieces()[static_cast<size_t>(piece) - 1].layer != pc.layer;
  const int64_t T = tokens_;
  Buffer extra;
  if (layer_first) {
    act_blob_[l] = Buffer(&mem_, Tier::kGpu,
                          acts_.checkpointed[l] ? Category::kCheckpoints : Category::kActivations,
                          static_cast<size_t>(acts_.kept[l] / 4));
    extra =
        Buffer(&mem_, Tier::kGpu, Category::kActivations, static_cast<size_t>(acts_.extra[l] / 4));
  }
  for (int oi = pc.first_op; oi < pc.end_op; ++oi) {
    const models::ComputeOp& op = layer.ops[static_cast<size_t>(oi)];
    switch (op.kind) {
      case models::OpKind::kGemm: {
        const float* w = scratch_w_.data();
        if (op.module >= 0) {
          for (int pid : layout_.module_params(pc.layer, op.module)) {
            if (layout_.params()[static_cast<size_t>(pid)].numel == op.n * op.k) {
              w = param_data(pid, id);
              break;
            }
          }
        }
        dev_.gemm(false, true, T, op.n, op.k, 1.0f, scratch_a_.data(), op.k, w, op.k, 0.0f,
                  scratch_b_.data(), op.n);
        break;
      }
      case models::OpKind::kAttention: {
        const int64_t s = workload_.seq_len, d = op.head_dim;
        const int64_t batches = config_.micro_batch * op.heads;
        for (int64_t bh = 0; bh < batches; ++bh) {
          dev_.gemm(false, true, s, s, d, 1.0f, scratch_a_.data(), d, scratch_a_.data(), d, 0.0f,
                    scratch_b_.data(), s);
          dev_.gemm(false, false, s, d, s, 1.0f, scratch_b_.data(), s, scratch_a_.data(), d, 0.0f,
                    scratch_w_.data(), d);
        }
        break;
      }
      case models::OpKind::kMemoryBound:
        dev_.memory_pass(scratch_b_.data(), op.bytes_per_token * static_cast<double>(T) * 2.0);
        break;
    }
  }
}

void ExecutorRank::backward_generic(TaskId id, int piece) {
  const sim::Piece& pc = builder_.pieces()[static_cast<size_t>(piece)];
  const models::Layer& layer = model_.layers()[static_cast<size_t>(pc.layer)];
  const size_t l = static_cast<size_t>(pc.layer);
  const bool layer_first =
      piece == 0 || builder_.pieces()[static_cast<size_t>(piece) - 1].layer != pc.layer;
  const int64_t T = tokens_;
  const bool accumulate = stage_ <= 1 && !first_;
  Buffer workspace(&mem_, Tier::kGpu, Category::kActivations,
                   static_cast<size_t>(acts_.extra[l] / 4));
  std::vector<int> done;
  for (int oi = pc.end_op; oi-- > pc.first_op;) {
    const models::ComputeOp& op = layer.ops[static_cast<size_t>(oi)];
    switch (op.kind) {
      case models::OpKind::kGemm: {
        const float* w = scratch_w_.data();
        float* dw = scratch_w_.data();
        float* db = nullptr;
        if (op.module >= 0) {
          for (int pid : layout_.module_params(pc.layer, op.module)) {
            const ParamSlot& s = layout_.params()[static_cast<size_t>(pid)];
            bool mine =
                std::find(layout_.piece_grads(piece).begin(), layout_.piece_grads(piece).end(),
                          pid) != layout_.piece_grads(piece).end();
            if (s.numel == op.n * op.k) {
              w = param_data(pid, id);
              if (mine) {
                dw = grad_slot(pid);
                done.push_back(pid);
              }
            } else if (s.numel == op.n && mine) {
              db = grad_slot(pid);
              done.push_back(pid);
            }
          }
        }
        dev_.gemm(false, false, T, op.k, op.n, 1.0f, scratch_b_.data(), op.n, w, op.k, 0.0f,
                  scratch_a_.data(), op.k);
        dev_.gemm(true, false, op.n, op.k, T, 1.0f, scratch_b_.data(), op.n, scratch_a_.data(),
                  op.k, accumulate && dw != scratch_w_.data() ? 1.0f : 0.0f, dw, op.k);
        if (db != nullptr) dev_.column_sums(scratch_b_.data(), T, op.n, db, accumulate);
        break;
      }
      case models::OpKind::kAttention: {
        const int64_t s = workload_.seq_len, d = op.head_dim;
        const int64_t batches = config_.micro_batch * op.heads;
        for (int rep = 0; rep < 2; ++rep) {
          for (int64_t bh = 0; bh < batches; ++bh) {
            dev_.gemm(false, true, s, s, d, 1.0f, scratch_a_.data(), d, scratch_a_.data(), d, 0.0f,
                      scratch_b_.data(), s);
            dev_.gemm(false, false, s, d, s, 1.0f, scratch_b_.data(), s, scratch_a_.data(), d, 0.0f,
                      scratch_w_.data(), d);
          }
        }
        break;
      }
      case models::OpKind::kMemoryBound:
        dev_.memory_pass(scratch_b_.data(), 2 * op.bytes_per_token * static_cast<double>(T) * 2.0);
        break;
    }
  }
  // Gradients no GEMM produced (norms, embeddings): a pass that zeroes them (first micro-step).
  for (int pid : layout_.piece_grads(piece)) {
    if (std::find(done.begin(), done.end(), pid) != done.end()) continue;
    if (!accumulate) {
      dev_.zero(grad_slot(pid),
                static_cast<size_t>(layout_.params()[static_cast<size_t>(pid)].numel));
    }
  }
  workspace.reset();
  if (layer_first) act_blob_[l].reset();
}

void ExecutorRank::release_gathered(TaskId id, const sim::Task& t) {
  // The graph says where DeepSpeed's coordinator releases a module (max_reuse_distance): at the
  // end of the use that frees gathered parameters.
  bool releases = false;
  const auto& eff = graph_->effects();
  for (uint32_t i = t.effects_begin; i < t.effects_begin + t.effects_count; ++i) {
    const sim::MemEffect& e = eff[i];
    if (e.at_end && e.tier == Tier::kGpu && e.category == Category::kGatheredParams &&
        e.bytes < 0) {
      releases = true;
    }
  }
  if (!releases) return;
  TaskId g = predecessor(id, TaskKind::kAllGather);
  if (g == sim::kNoTask) return;
  std::lock_guard<std::mutex> lock(gathered_mu_);
  gathered_.erase(g);
}

// --- Gradient reduction (stages 0-2) ----------------------------------------------------------

void ExecutorRank::bucket_copy(const sim::Task& t) {
  const int b = t.index;
  if (stage_ == 0) {
    // buffered_allreduce_fallback: flatten this piece of the gradients (model order).
    const int64_t begin =
        static_cast<int64_t>(b) * static_cast<int64_t>(sim::kStage0AllreduceElems);
    const int64_t end =
        std::min(layout_.psi(), begin + static_cast<int64_t>(sim::kStage0AllreduceElems));
    Buffer flat(&mem_, Tier::kGpu, Category::kBuckets, static_cast<size_t>(end - begin));
    for (size_t id = 0; id < layout_.params().size(); ++id) {
      const ParamSlot& s = layout_.params()[id];
      int64_t lo = std::max(begin, s.flat_offset), hi = std::min(end, s.flat_offset + s.numel);
      if (lo >= hi) continue;
      dev_.copy(flat.data() + (lo - begin), full_grads_[id].data() + (lo - s.flat_offset),
                static_cast<size_t>(hi - lo));
    }
    bucket_tmp_.resize(std::max(bucket_tmp_.size(), static_cast<size_t>(b) + 1));
    bucket_tmp_[static_cast<size_t>(b)] = std::move(flat);
    return;
  }
  // Stage 3: reduce_scatter_coalesced's interleaved copy: rank r's block holds every tensor's
  // piece r, in partition order, so that the block each rank gets back is one contiguous range
  // of its partition (ref §2.2 item 10). It frees the IPG buffer.
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
  int64_t lo = INT64_MAX;
  for (int id : bk.params) lo = std::min(lo, layout_.params()[static_cast<size_t>(id)].part_offset);
  const size_t block = static_cast<size_t>(bk.part_elems);
  Buffer inter(&mem_, Tier::kGpu, Category::kBuckets, block * static_cast<size_t>(dp_));
  const float* src = ipg_->data(b);
  for (int r = 0; r < dp_; ++r) {
    for (int id : bk.params) {
      const ParamSlot& s = layout_.params()[static_cast<size_t>(id)];
      float* dst = inter.data() + static_cast<size_t>(r) * block + (s.part_offset - lo);
      const int64_t first = static_cast<int64_t>(r) * s.part_numel;
      const int64_t len = std::clamp<int64_t>(s.numel - first, 0, s.part_numel);
      if (len > 0) dev_.copy(dst, src + s.bucket_offset + first, static_cast<size_t>(len));
      if (len < s.part_numel) dev_.zero(dst + len, static_cast<size_t>(s.part_numel - len));
    }
  }
  ipg_->release(b);
  bucket_tmp_[static_cast<size_t>(b)] = std::move(inter);
}

void ExecutorRank::scatter_own(int bucket, const float* data, float* partition, float scale,
                               bool add) {
  // This rank's slices of a reduced bucket (stages 1-2): the parts of its tensors inside
  // [pb, pb + P) of the flat buffer.
  const int64_t pb = layout_.partition_begin(), pe = pb + layout_.partition();
  for (int id : layout_.buckets()[static_cast<size_t>(bucket)].params) {
    const ParamSlot& s = layout_.params()[static_cast<size_t>(id)];
    const int64_t lo = std::max(pb, s.flat_offset), hi = std::min(pe, s.flat_offset + s.numel);
    if (lo >= hi) continue;
    const float* src = data + s.bucket_offset + (lo - s.flat_offset);
    float* dst = partition + (lo - pb);
    if (add) {
      dev_.add_scaled(dst, src, static_cast<size_t>(hi - lo), scale);
    } else {
      dev_.scale_copy(dst, src, static_cast<size_t>(hi - lo), scale);
    }
  }
}

void ExecutorRank::all_reduce(const sim::Task& t) {
  const int b = t.index;
  const float avg = 1.0f / static_cast<float>(dp_);
  if (stage_ == 0) {
    // allreduce_and_copy: all-reduce the flat piece, average, copy back into the gradients.
    Buffer& flat = bucket_tmp_[static_cast<size_t>(b)];
    comm_.all_reduce(channel(t), flat.data(), flat.size());
    const int64_t begin =
        static_cast<int64_t>(b) * static_cast<int64_t>(sim::kStage0AllreduceElems);
    const int64_t end = begin + static_cast<int64_t>(flat.size());
    for (size_t id = 0; id < layout_.params().size(); ++id) {
      const ParamSlot& s = layout_.params()[id];
      int64_t lo = std::max(begin, s.flat_offset), hi = std::min(end, s.flat_offset + s.numel);
      if (lo >= hi) continue;
      dev_.scale_copy(full_grads_[id].data() + (lo - s.flat_offset), flat.data() + (lo - begin),
                      static_cast<size_t>(hi - lo), avg);
    }
    flat.reset();
    return;
  }
  // Stages 1-2 (average_tensor with use_multi_rank_bucket_allreduce, ref §4.2): stage 1's hooks
  // run now (its gradients were kept whole), then the bucket is flattened, all-reduced, and this
  // rank keeps its slices.
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
  Buffer flat(&mem_, Tier::kGpu, Category::kBuckets, static_cast<size_t>(bk.elems));
  if (stage_ == 1 && ipg_->is_big(b)) {
    dev_.copy(flat.data(), full_grads_[static_cast<size_t>(bk.params[0])].data(), flat.size());
  } else {
    if (stage_ == 1) {
      ipg_->claim(b);
      for (int id : bk.params) {
        const ParamSlot& s = layout_.params()[static_cast<size_t>(id)];
        dev_.copy(ipg_->data(b) + s.bucket_offset, full_grads_[static_cast<size_t>(id)].data(),
                  static_cast<size_t>(s.numel));
      }
    } else {
      ipg_->wait_ready(b);
    }
    dev_.copy(flat.data(), ipg_->data(b), flat.size());
    if (!offload()) ipg_->release(b);
  }
  comm_.all_reduce(channel(t), flat.data(), flat.size());
  if (offload() && !(stage_ == 1 && ipg_->is_big(b))) {
    // allreduce_and_copy: the reduced bucket back into the IPG buffer, which the offload copies
    // read; the buffer is free again when they are done (ref §5.1).
    dev_.copy(ipg_->data(b), flat.data(), flat.size());
    flat.reset();
  }
  if (!offload()) {
    Buffer& target = reduce_target();
    if (target.empty()) {
      // grads_in_partition, on the first reduction of a backward (item 6); its padding is zero.
      target =
          Buffer(&mem_, Tier::kGpu, Category::kGrads, static_cast<size_t>(layout_.partition()));
      const int64_t pb = layout_.partition_begin();
      const int64_t valid = std::clamp<int64_t>(layout_.psi() - pb, 0, layout_.partition());
      dev_.zero(target.data() + valid, static_cast<size_t>(layout_.partition() - valid));
    }
    scatter_own(b, flat.data(), target.data(), avg, false);
  } else if (!flat.empty()) {
    bucket_tmp_[static_cast<size_t>(b)] = std::move(flat);  // stage 1's extra large tensor
  }
  if (!offload() && b + 1 == static_cast<int>(layout_.buckets().size())) ipg_->free();
}

const float* ExecutorRank::reduced_bucket(int b) {
  // Where an offloaded bucket's reduced gradients are (stages 1-2): its IPG buffer, or the
  // flattened copy of an extra large tensor.
  const Buffer& tmp = bucket_tmp_[static_cast<size_t>(b)];
  return tmp.empty() ? ipg_->data(b) : tmp.data();
}

void ExecutorRank::done_with_reduced(int b) {
  bucket_tmp_[static_cast<size_t>(b)].reset();
  ipg_->release(b);
  // The backward epilogue frees the IPG buffers once the last bucket is out.
  if (b + 1 == static_cast<int>(layout_.buckets().size())) ipg_->free();
}

Buffer& ExecutorRank::reduce_target() {
  // Stage 2's micro-steps after the first reduce into a new partition that grad_accumulate adds
  // to the accumulated one; otherwise the reduction fills the partition the step uses.
  return stage_ == 2 && !first_ ? partition_new_ : partition_acc_;
}

void ExecutorRank::grad_accumulate(const sim::Task& t) {
  assert(stage_ == 2);
  (void)t;
  // independent_gradient_partition_epilogue: all_grad_tensors += the new partition (item 6).
  dev_.axpby(partition_acc_.data(), partition_new_.data(), partition_acc_.size(), 1.0f, 1.0f);
  partition_new_.reset();
}

void ExecutorRank::unpack_slices(int bucket, const float* src, float* dst, float scale, bool add) {
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(bucket)];
  int64_t lo = INT64_MAX;
  for (int id : bk.params) lo = std::min(lo, layout_.params()[static_cast<size_t>(id)].part_offset);
  if (add) {
    dev_.add_scaled(dst + lo, src, static_cast<size_t>(bk.part_elems), scale);
  } else {
    dev_.scale_copy(dst + lo, src, static_cast<size_t>(bk.part_elems), scale);
  }
}

void ExecutorRank::reduce_scatter(const sim::Task& t) {
  const int b = t.index;
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
  Buffer& inter = bucket_tmp_[static_cast<size_t>(b)];
  comm_.reduce_scatter(channel(t), inter.data(), static_cast<size_t>(bk.part_elems));
  if (offload()) return;  // the offload copies take the slices from here
  // partition_grads: the reduced slices into grad_partitions_flat_buffer, averaged -- copied on
  // the first micro-step, added after (a short kernel on the same stream, part of this task).
  unpack_slices(b, inter.data(), partition_acc_.data(), 1.0f / static_cast<float>(dp_), !first_);
  inter.reset();
}

// --- Results ----------------------------------------------------------------------------------

std::vector<float> ExecutorRank::full_weights() {
  const auto& params = layout_.params();
  std::vector<float> out(static_cast<size_t>(layout_.psi()));
  if (stage_ <= 2) {
    dev_.copy(out.data(), params_.data(), out.size());
    return out;
  }
  const size_t P = static_cast<size_t>(layout_.partition());
  std::vector<float> all(P * static_cast<size_t>(dp_));
  std::vector<float> mine(P);
  dev_.copy(mine.data(), params_.data(), P);
  comm_.all_gather(kControlChannel, mine.data(), P, all.data());
  for (const ParamSlot& s : params) {
    for (int r = 0; r < dp_; ++r) {
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

}  // namespace zplan::calibrate
