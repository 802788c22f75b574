// ExecutorRank, continued: the tasks that move data -- host copies, the optimizer step, gathers and
// NVMe swaps (rank.cc has the state and dispatch, rank_compute.cc and
// rank_reduce.cc compute and gradient reduction).
// "ref §x" = reference/deepspeed_internals.md.
#include <algorithm>
#include <cassert>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "executor/rank.h"
#include "executor/rank_internal.h"
#include "base/input_error.h"
#include "kernels/cpu_threads.h"
#include "sim/memory_model.h"

namespace zplan::executor {

// --- Host copies ------------------------------------------------------------------------------

namespace {

// The part [lo, hi) of this rank's partition (stages 1-2) that bucket b's tensors cover.
std::pair<int64_t, int64_t> own_range(const ExecutorLayout& layout, int b) {
  const int64_t pb = layout.partition_begin(), pe = pb + layout.partition();
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int id : layout.buckets()[static_cast<size_t>(b)].params) {
    const ParamSlot& s = layout.params()[static_cast<size_t>(id)];
    lo = std::min(lo, std::max(pb, s.flat_offset));
    hi = std::max(hi, std::min(pe, s.flat_offset + s.numel));
  }
  if (lo >= hi) return {0, 0};
  return {lo - pb, hi - pb};
}

int64_t part_lo(const ExecutorLayout& layout, int b) {
  int64_t lo = INT64_MAX;
  for (int id : layout.buckets()[static_cast<size_t>(b)].params) {
    lo = std::min(lo, layout.params()[static_cast<size_t>(id)].part_offset);
  }
  return lo;
}

}  // namespace

void ExecutorRank::h2d(TaskId id, const sim::Task& t) {
  const float avg = 1.0f / static_cast<float>(layout_.dp());  // over the partition group
  if (t.micro_step < 0) {
    if (stage_ <= 2) {
      // The new 16-bit partition back to the device (ref §5.1).
      dev_.copy(params_.data() + layout_.partition_begin(), host_params16_.data(),
                static_cast<size_t>(layout_.partition()));
      if (stage_ == 1) {
        for (Buffer& g : full_grads_) g.reset();  // step() frees the gradients (item 7)
      }
      return;
    }
    // Stage 3: fp16_partitioned_groups_flat[g].copy_(fp32 partition).
    const SubGroupSlots& g = layout_.sub_groups()[static_cast<size_t>(t.index)];
    const float* src = nullptr;
    if (swap_) {
      std::lock_guard<std::mutex> lock(swap_mu_);
      src = swap_buffers_[static_cast<size_t>(swap_sets_.at(t.index).first_buffer)].data();
    } else {
      src = master_g_[static_cast<size_t>(t.index)].data();
    }
    dev_.copy(params_.data() + g.begin, src, static_cast<size_t>(g.size));
    if (swap_) {
      std::lock_guard<std::mutex> lock(swap_mu_);
      if (--swap_sets_.at(t.index).users == 0) {
        SwapSet set = swap_sets_.at(t.index);
        for (int i = 0; i < 4; ++i)
          swap_buffer_busy_[static_cast<size_t>(set.first_buffer + i)] = false;
        swap_sets_.erase(t.index);
        swap_cv_.notify_all();
      }
    }
    return;
  }
  if (t.layer >= 0) {
    // offload_param: the module's partition from host memory before its gather (ref §5.2).
    int64_t elems = 0;
    const auto& ids = layout_.module_params(t.layer, t.index);
    for (int pid : ids) {
      const ParamSlot& s = layout_.params()[static_cast<size_t>(pid)];
      if (!s.persistent) elems += s.part_numel;
    }
    Buffer part(&mem_, Tier::kGpu, Category::kGatheredParams, static_cast<size_t>(elems));
    int64_t at = 0;
    for (int pid : ids) {
      const ParamSlot& s = layout_.params()[static_cast<size_t>(pid)];
      if (s.persistent) continue;
      dev_.copy(part.data() + at, params_.data() + s.part_offset,
                static_cast<size_t>(s.part_numel));
      at += s.part_numel;
    }
    std::lock_guard<std::mutex> lock(gathered_mu_);
    fetched_[id] = std::move(part);
    return;
  }
  // The accumulation round trip of a middle micro-step: the accumulated host slice to the device,
  // where this micro-step's slice is added.
  const int b = t.index;
  const Buffer& reduced = bucket_tmp_[static_cast<size_t>(b)];
  if (stage_ <= 2) {
    auto [lo, hi] = own_range(layout_, b);
    Buffer dev(&mem_, Tier::kGpu, Category::kBuckets, static_cast<size_t>(hi - lo));
    dev_.copy(dev.data(), host_accum_.data() + lo, dev.size());
    // Scatter this micro-step's slice onto it, as a partition-indexed view.
    float* base = dev.data() - lo;
    scatter_own(b, reduced_bucket(b), base, avg, !first_);
    bucket_dev_[static_cast<size_t>(b)] = std::move(dev);
    return;
  }
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
  const int64_t lo = part_lo(layout_, b);
  Buffer dev(&mem_, Tier::kGpu, Category::kBuckets, static_cast<size_t>(bk.part_elems));
  dev_.copy(dev.data(), partition_acc_.data() + lo, dev.size());
  dev_.add_scaled(dev.data(), reduced.data(), dev.size(), avg);
  bucket_dev_[static_cast<size_t>(b)] = std::move(dev);
}

void ExecutorRank::d2h(const sim::Task& t) {
  const float avg = 1.0f / static_cast<float>(layout_.dp());  // over the partition group
  const int b = t.index;
  Buffer& reduced = bucket_tmp_[static_cast<size_t>(b)];
  Buffer& dev = bucket_dev_[static_cast<size_t>(b)];
  if (stage_ <= 2) {
    auto [lo, hi] = own_range(layout_, b);
    if (boundary_) {
      // async_inplace_copy_grad_to_fp32_buffer_from_gpu (ref §5.1), plus what earlier
      // micro-steps accumulated on the host.
      scatter_own(b, reduced_bucket(b), host_grads32_.data(), avg, false);
      if (gas_ > 1) {
        dev_.add_scaled(host_grads32_.data() + lo, host_accum_.data() + lo,
                        static_cast<size_t>(hi - lo), 1.0f);
      }
    } else {
      dev_.copy(host_accum_.data() + lo, dev.data(), static_cast<size_t>(hi - lo));
    }
    dev.reset();
    done_with_reduced(b);
    return;
  }
  // Stage 3 (ref §5.2).
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
  const int64_t lo = part_lo(layout_, b);
  const size_t n = static_cast<size_t>(bk.part_elems);
  if (!boundary_) {
    if (first_) {
      unpack_slices(b, reduced.data(), partition_acc_.data(), avg, false);
    } else {
      dev_.copy(partition_acc_.data() + lo, dev.data(), n);
    }
  } else {
    // The fp32 gradients of the boundary: into the sub-groups' host buffers, or staged for NVMe
    // in a swap buffer (swap_out_gradients uses the swapper's pinned buffers).
    float* out = swap_ ? stage_for_nvme(b) : nullptr;
    for (int id : bk.params) {
      const ParamSlot& s = layout_.params()[static_cast<size_t>(id)];
      const float* src = reduced.data() + (s.part_offset - lo);
      float* dst;
      if (swap_) {
        dst = out + (s.part_offset - lo);
      } else {
        const SubGroupSlots& g = layout_.sub_groups()[static_cast<size_t>(s.sub_group)];
        dst = host_grads32_g_[static_cast<size_t>(s.sub_group)].data() + (s.part_offset - g.begin);
      }
      dev_.scale_copy(dst, src, static_cast<size_t>(s.part_numel), avg);
      if (gas_ > 1) {
        dev_.add_scaled(dst, partition_acc_.data() + s.part_offset,
                        static_cast<size_t>(s.part_numel), 1.0f);
      }
    }
  }
  reduced.reset();
  dev.reset();
}

// --- The optimizer step -----------------------------------------------------------------------

Buffer ExecutorRank::update_scratch(size_t n) {
  const double bytes = config_.optimizer.gpu_step_transient_bytes() * static_cast<double>(n);
  if (bytes <= 0) return Buffer();
  return Buffer(&mem_, Tier::kGpu, Category::kOptimizerStates,
                static_cast<size_t>(bytes / sizeof(float)));
}

void ExecutorRank::optimizer_gpu(const sim::Task& t) {
  const kernels::AdamHyper& hp = options_.adam;
  if (stage_ == 0) {
    // FP16_Optimizer in fp32: Adam on the model's own tensors, then zero_grad (ref §2.3).
    Buffer scratch = update_scratch(static_cast<size_t>(layout_.psi()));
    for (size_t id = 0; id < layout_.params().size(); ++id) {
      const ParamSlot& s = layout_.params()[id];
      dev_.adam(hp, adam_step_, params_.data() + s.flat_offset, full_grads_[id].data(),
                exp_avg_.data() + s.flat_offset, exp_avg_sq_.data() + s.flat_offset, s.numel);
      full_grads_[id].reset();
    }
    return;
  }
  if (stage_ <= 2) {
    const size_t P = static_cast<size_t>(layout_.partition());
    if (!step_prepared_) {
      // Flatten the partition's gradients and cast to fp32 (ref §2.1 item 8); in the master's
      // dtype already, the flat copy is the master gradient (sim::master_grads_alias_grads).
      step_prepared_ = true;
      step_flat_ = Buffer(&mem_, Tier::kGpu, Category::kGrads, P);
      dev_.copy(step_flat_.data(), partition_acc_.data(), P);
      if (sim::master_grads_alias_grads(config_)) return;
      step_grad32_ = Buffer(&mem_, Tier::kGpu, Category::kGrads32, P);
      dev_.copy(step_grad32_.data(), step_flat_.data(), P);
      step_flat_.reset();
      return;
    }
    step_prepared_ = false;
    const float* grad = step_grad32_.empty() ? step_flat_.data() : step_grad32_.data();
    Buffer scratch = update_scratch(P);
    dev_.adam(hp, adam_step_, master_.data(), grad, exp_avg_.data(), exp_avg_sq_.data(),
              static_cast<int64_t>(P));
    dev_.copy(params_.data() + layout_.partition_begin(), master_.data(), P);
    step_flat_.reset();
    step_grad32_.reset();
    partition_acc_.reset();
    if (stage_ == 1) {
      for (Buffer& g : full_grads_) g.reset();
    }
    return;
  }
  // Stage 3, per sub-group (item 11): flatten + fp32 copy, then Adam. Without offload in fp32
  // the flat copy is the master gradient and the parameters' partition is the master
  // (sim::master_grads_alias_grads, sim::stage3_master_is_params).
  const size_t g = static_cast<size_t>(t.index);
  const SubGroupSlots& sg = layout_.sub_groups()[g];
  const size_t S = static_cast<size_t>(sg.size);
  if (!step_prepared_) {
    step_prepared_ = true;
    step_flat_ = Buffer(&mem_, Tier::kGpu, Category::kGrads, S);
    dev_.copy(step_flat_.data(), partition_acc_.data() + sg.begin, S);
    if (sim::master_grads_alias_grads(config_)) return;
    step_grad32_ = Buffer(&mem_, Tier::kGpu, Category::kGrads32, S);
    dev_.copy(step_grad32_.data(), step_flat_.data(), S);
    return;
  }
  step_prepared_ = false;
  const float* grad = step_grad32_.empty() ? step_flat_.data() : step_grad32_.data();
  float* master = master_g_[g].empty() ? params_.data() + sg.begin : master_g_[g].data();
  Buffer scratch = update_scratch(S);
  dev_.adam(hp, adam_step_, master, grad, exp_avg_g_[g].data(), exp_avg_sq_g_[g].data(),
            static_cast<int64_t>(S));
  if (!master_g_[g].empty()) dev_.copy(params_.data() + sg.begin, master_g_[g].data(), S);
  step_flat_.reset();
  step_grad32_.reset();
}

void ExecutorRank::optimizer_cpu(const sim::Task& t) {
  const kernels::AdamHyper& hp = options_.adam;
  // The rank's share of the profile's cores, as offload_cpu_adam_time_s prices it, on the CPUs
  // the rank may run on.
  const int threads = kernels::rank_threads(cluster_.profile.node.cpu_cores,
                                            cluster_.gpus_per_node(), kernels::usable_cpus());
  if (stage_ <= 2) {
    // DeepSpeedCPUAdam over the partition, writing the 16-bit copy (ref §5.1).
    const int64_t P = layout_.partition();
    kernels::adam_step(hp, adam_step_, master_.data(), host_grads32_.data(), exp_avg_.data(),
                       exp_avg_sq_.data(), P, threads);
    std::memcpy(host_params16_.data(), master_.data(), static_cast<size_t>(P) * sizeof(float));
    return;
  }
  const size_t g = static_cast<size_t>(t.index);
  const int64_t S = layout_.sub_groups()[g].size;
  if (swap_) {
    int first;
    {
      std::lock_guard<std::mutex> lock(swap_mu_);
      first = swap_sets_.at(t.index).first_buffer;
    }
    float* p = swap_buffers_[static_cast<size_t>(first)].data();
    float* m = swap_buffers_[static_cast<size_t>(first) + 1].data();
    float* v = swap_buffers_[static_cast<size_t>(first) + 2].data();
    // The gradient buffer was read from an aligned offset: the data starts `shift` floats in.
    const size_t shift = static_cast<size_t>(4 * layout_.sub_groups()[g].begin % kSwapAlign) / 4;
    const float* gr = swap_buffers_[static_cast<size_t>(first) + 3].data() + shift;
    kernels::adam_step(hp, adam_step_, p, gr, m, v, S, threads);
    std::lock_guard<std::mutex> lock(swap_mu_);
    --swap_sets_.at(t.index).users;
    return;
  }
  kernels::adam_step(hp, adam_step_, master_g_[g].data(), host_grads32_g_[g].data(),
                     exp_avg_g_[g].data(), exp_avg_sq_g_[g].data(), S, threads);
  if (config_.zero.offload_param.device != OffloadDevice::kNone) {
    // The host partition is the 16-bit copy: updated on the CPU.
    std::memcpy(params_.data() + layout_.sub_groups()[g].begin, master_g_[g].data(),
                static_cast<size_t>(S) * sizeof(float));
  }
}

// --- Gathers ----------------------------------------------------------------------------------

void ExecutorRank::all_gather(TaskId id, const sim::Task& t) {
  if (stage_ <= 2) {
    // all_gather_dp_groups: every rank's new partition into the flat parameters, in place.
    const size_t P = static_cast<size_t>(layout_.partition());
    comm_of(t).all_gather(channel(t), params_.data() + static_cast<size_t>(rank_) * P, P,
                          params_.data());
    return;
  }
  if (t.micro_step < 0) {
    gather_persistent(t);
  } else {
    gather_module(id, t);
  }
}

void ExecutorRank::gather_module(TaskId id, const sim::Task& t) {
  // fetch_sub_module -> all_gather_coalesced: a flat buffer of every rank's pieces, then each
  // parameter assembled from it (the torch.cat copy), then the flat buffer dropped (item 8).
  std::vector<int> ids;
  const Pieces pc = pieces(t);
  int64_t block = 0;
  for (int pid : layout_.module_params(t.layer, t.index)) {
    const ParamSlot& s = layout_.params()[static_cast<size_t>(pid)];
    if (s.persistent) continue;
    ids.push_back(pid);
    block += pc.piece(s);
  }
  if (config_.zero.mics()) return gather_mics(id, t, ids);
  Buffer fetched;
  TaskId h2d_task = predecessor(id, TaskKind::kH2D);
  if (h2d_task != sim::kNoTask) {
    std::lock_guard<std::mutex> lock(gathered_mu_);
    fetched = std::move(fetched_.at(h2d_task));
    fetched_.erase(h2d_task);
  }
  if (t.group == sim::CommGroupId::kSecondary) {
    // hpZ: the module was released before in this optimizer step, which made its secondary
    // partition (extra_dependencies orders this gather after that release).
    std::lock_guard<std::mutex> lock(gathered_mu_);
    for (int pid : ids) {
      if (!secondary_valid_[static_cast<size_t>(pid)]) {
        throw std::logic_error("executor: an hpZ secondary gather before its module's release");
      }
    }
  }
  Buffer flat =
      gather_flat(channel(t), pc, ids, block, fetched.empty() ? nullptr : fetched.data());
  std::vector<Buffer> full;
  int64_t at = 0;
  for (int pid : ids) {
    const ParamSlot& s = layout_.params()[static_cast<size_t>(pid)];
    Buffer p(&mem_, Tier::kGpu, Category::kGatheredParams, static_cast<size_t>(s.numel));
    unflatten_param(pc, flat, block, at, pid, p.data());
    at += pc.piece(s);
    full.push_back(std::move(p));
  }
  flat.reset();
  fetched.reset();
  std::lock_guard<std::mutex> lock(gathered_mu_);
  gathered_[id] = std::move(full);
}

void ExecutorRank::gather_mics(TaskId id, const sim::Task& t, const std::vector<int>& ids) {
  // Each parameter's output is its own buffer of shard x partition elements (the parameter is
  // its first numel), which the gathers write into: no flat buffer, no torch.cat.
  const auto& params = layout_.params();
  const int n = layout_.dp(), me = layout_.rank();
  std::vector<Buffer> full;
  if (t.group == sim::CommGroupId::kShardIntra) {
    // _hierarchical_all_gather_params, second hop: the node's ranks exchange, for each node j of
    // the shard, their piece of node j's chunk (already placed by the first hop), on the
    // intra-node group, asynchronously in DeepSpeed.
    kernels::Comm& intra = comm_of(t);
    const int g = intra.size(), local = intra.rank(), k = n / g;
    TaskId first = predecessor(id, TaskKind::kAllGather);
    {
      std::lock_guard<std::mutex> lock(gathered_mu_);
      full = std::move(gathered_.at(first));
      gathered_.erase(first);
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t part = params[static_cast<size_t>(ids[i])].part_numel;
      for (int j = 0; j < k; ++j) {
        float* chunk = full[i].data() + static_cast<size_t>(j) * g * part;
        intra.all_gather(channel(t), chunk + static_cast<size_t>(local) * part,
                         static_cast<size_t>(part), chunk);
      }
    }
  } else {
    for (int pid : ids) {
      const int64_t part = params[static_cast<size_t>(pid)].part_numel;
      Buffer out(&mem_, Tier::kGpu, Category::kGatheredParams, static_cast<size_t>(part * n));
      if (t.group != sim::CommGroupId::kShardInter) {
        // _flat_all_gather_with_coalescing_manager: all_gather over the shard group.
        float* mine = out.data() + static_cast<size_t>(me) * part;
        dev_.copy(mine, params_.data() + params[static_cast<size_t>(pid)].part_offset,
                  static_cast<size_t>(part));
        comm_of(t).all_gather(channel(t), mine, static_cast<size_t>(part), out.data());
      } else {
        // _hierarchical_all_gather_params, first hop: the shard's ranks of this local index
        // (one per node) gather into the output at local_rank x (their size), synchronously;
        // that is cloned and each node's piece copied to its place, chunk (node, local_rank).
        kernels::Comm& inter = comm_of(t);
        const int k = inter.size(), g = n / k;
        const int local = group_comm(sim::CommGroupId::kShardIntra).rank();
        float* inter_out = out.data() + static_cast<size_t>(local) * k * part;
        dev_.copy(inter_out + static_cast<size_t>(inter.rank()) * part,
                  params_.data() + params[static_cast<size_t>(pid)].part_offset,
                  static_cast<size_t>(part));
        inter.all_gather(channel(t), inter_out + static_cast<size_t>(inter.rank()) * part,
                         static_cast<size_t>(part), inter_out);
        Buffer clone(&mem_, Tier::kGpu, Category::kGatheredParams, static_cast<size_t>(k * part));
        dev_.copy(clone.data(), inter_out, clone.size());
        for (int j = 0; j < k; ++j) {
          dev_.copy(out.data() + static_cast<size_t>(j * g + local) * part,
                    clone.data() + static_cast<size_t>(j) * part, static_cast<size_t>(part));
        }
      }
      full.push_back(std::move(out));
    }
  }
  std::lock_guard<std::mutex> lock(gathered_mu_);
  gathered_[id] = std::move(full);
}

void ExecutorRank::gather_persistent(const sim::Task& t) {
  // _post_step: the persistent parameters are gathered again from the updated partitions.
  std::vector<int> ids;
  const Pieces pc = pieces(t);
  int64_t block = 0;
  for (size_t id = 0; id < layout_.params().size(); ++id) {
    if (!layout_.params()[id].persistent) continue;
    ids.push_back(static_cast<int>(id));
    block += layout_.params()[id].part_numel;
  }
  const Buffer flat = gather_flat(channel(t), pc, ids, block, nullptr);
  int64_t at = 0;
  for (int pid : ids) {
    unflatten_param(pc, flat, block, at, pid, persistent_full_[static_cast<size_t>(pid)].data());
    at += layout_.params()[static_cast<size_t>(pid)].part_numel;
  }
}

ExecutorRank::Pieces ExecutorRank::pieces(const sim::Task& t) {
  Pieces pc;
  pc.comm = &comm_of(t);
  pc.n = pc.comm->size();
  pc.me = pc.comm->rank();
  // hpZ: partition_parameters.py _partition_param_sec, a piece of the padded tensor
  // (part_numel x partition ranks) over the hpZ group.
  pc.secondary = t.group == sim::CommGroupId::kSecondary;
  if (pc.secondary) pc.per_part = layout_.dp() / pc.n;
  return pc;
}

Buffer ExecutorRank::gather_flat(int channel, const Pieces& pc, const std::vector<int>& ids,
                                 int64_t block, const float* local) {
  Buffer flat(&mem_, Tier::kGpu, Category::kGatheredParams,
              static_cast<size_t>(block) * static_cast<size_t>(pc.n));
  float* mine = flat.data() + static_cast<size_t>(pc.me) * static_cast<size_t>(block);
  int64_t at = 0;
  for (int pid : ids) {
    const ParamSlot& s = layout_.params()[static_cast<size_t>(pid)];
    const float* src = local != nullptr ? local + at
                       : pc.secondary
                           ? secondary_.data() + secondary_offset_[static_cast<size_t>(pid)]
                           : params_.data() + s.part_offset;
    dev_.copy(mine + at, src, static_cast<size_t>(pc.piece(s)));
    at += pc.piece(s);
  }
  pc.comm->all_gather(channel, mine, static_cast<size_t>(block), flat.data());
  return flat;
}

void ExecutorRank::unflatten_param(const Pieces& pc, const Buffer& flat, int64_t block,
                                   int64_t at, int pid, float* out) {
  const ParamSlot& s = layout_.params()[static_cast<size_t>(pid)];
  const int64_t piece = pc.piece(s);
  for (int r = 0; r < pc.n; ++r) {
    const int64_t first = static_cast<int64_t>(r) * piece;
    const int64_t len = std::clamp<int64_t>(s.numel - first, 0, piece);
    if (len > 0) {
      dev_.copy(out + first, flat.data() + static_cast<size_t>(r) * block + at,
                static_cast<size_t>(len));
    }
  }
}

void ExecutorRank::fill_secondary(int pid, const float* full) {
  {
    std::lock_guard<std::mutex> lock(gathered_mu_);
    if (secondary_valid_[static_cast<size_t>(pid)]) return;  // made earlier in this step
  }
  const ParamSlot& s = layout_.params()[static_cast<size_t>(pid)];
  kernels::Comm& hpz = group_comm(sim::CommGroupId::kSecondary);
  const int64_t piece = s.part_numel * (layout_.dp() / hpz.size());
  const int64_t first = piece * hpz.rank();
  const int64_t len = std::clamp<int64_t>(s.numel - first, 0, piece);
  float* dst = secondary_.data() + secondary_offset_[static_cast<size_t>(pid)];
  if (len > 0) dev_.copy(dst, full + first, static_cast<size_t>(len));
  if (len < piece) dev_.zero(dst + len, static_cast<size_t>(piece - len));
  std::lock_guard<std::mutex> lock(gathered_mu_);
  secondary_valid_[static_cast<size_t>(pid)] = true;
}

void ExecutorRank::nvme_read(TaskId id, const sim::Task& t) {
  (void)id;
  if (t.micro_step >= 0) {
    throw InputError("executor", "offload_param = nvme is not executed");
  }
  // Swap in sub-group g: fp32 params, m, v, and its fp32 gradients (ref §5.2), into a free set
  // of four swap buffers (waiting for one, as DeepSpeed's swapper does).
  const int g = t.index;
  const SubGroupSlots& sg = layout_.sub_groups()[static_cast<size_t>(g)];
  int first = -1;
  {
    std::unique_lock<std::mutex> lock(swap_mu_);
    swap_cv_.wait(lock, [&] {
      for (size_t i = 0; i + 3 < swap_buffer_busy_.size(); i += 4) {
        if (!swap_buffer_busy_[i]) {
          first = static_cast<int>(i);
          return true;
        }
      }
      return false;
    });
    for (int i = 0; i < 4; ++i) swap_buffer_busy_[static_cast<size_t>(first + i)] = true;
    const bool params_on_gpu = config_.zero.offload_param.device == OffloadDevice::kNone;
    swap_sets_[g] = SwapSet{first, 2 + (params_on_gpu ? 1 : 0)};
  }
  const size_t bytes = swap_state_bytes_[static_cast<size_t>(g)];
  const uint64_t base = swap_state_offset_[static_cast<size_t>(g)];
  for (int i = 0; i < 3; ++i) {
    swap_->read(base + static_cast<uint64_t>(i) * bytes,
                swap_buffers_[static_cast<size_t>(first + i)].data(), bytes);
  }
  const uint64_t lo = static_cast<uint64_t>(4 * sg.begin) / kSwapAlign * kSwapAlign;
  const uint64_t hi = swap_aligned(static_cast<size_t>(4 * (sg.begin + sg.size)));
  swap_->read(swap_grad_offset_[0] + lo, swap_buffers_[static_cast<size_t>(first + 3)].data(),
              static_cast<size_t>(hi - lo));
}

void ExecutorRank::nvme_write(const sim::Task& t) {
  if (t.micro_step >= 0) {
    // The boundary's fp32 gradients of bucket b, at their partition offsets. The file is written
    // in aligned blocks straight from the staging buffer, which holds [a0, a1); the partial
    // blocks at both ends are read back first (the NVMe write queue is the only writer of this
    // region, so nothing races).
    const int b = t.index;
    const SwapRange r = swap_range(b);
    StageSlot& slot = bucket_stage_[static_cast<size_t>(b)];
    char* bytes = reinterpret_cast<char*>(slot.data);
    const uint64_t file = swap_grad_offset_[0];
    if (r.begin != r.a0) {
      swap_->read(file + r.a0, bounce_.get(), kSwapAlign);
      std::memcpy(bytes, bounce_.get(), static_cast<size_t>(r.begin - r.a0));
    }
    if (r.end != r.a1) {
      const uint64_t last = r.a1 - kSwapAlign;
      swap_->read(file + last, bounce_.get(), kSwapAlign);
      std::memcpy(bytes + (r.end - r.a0), bounce_.get() + (r.end - last),
                  static_cast<size_t>(r.a1 - r.end));
    }
    swap_->write(file + r.a0, bytes, static_cast<size_t>(r.a1 - r.a0));
    slot.fallback.reset();
    if (slot.buffer >= 0) {
      std::lock_guard<std::mutex> lock(swap_mu_);
      swap_buffer_busy_[static_cast<size_t>(slot.buffer)] = false;
      swap_cv_.notify_all();
    }
    slot = StageSlot();
    return;
  }
  if (config_.zero.offload_param.device == OffloadDevice::kNvme) {
    throw InputError("executor", "offload_param = nvme is not executed");
  }
  const int g = t.index;
  int first;
  {
    std::lock_guard<std::mutex> lock(swap_mu_);
    first = swap_sets_.at(g).first_buffer;
  }
  const size_t bytes = swap_state_bytes_[static_cast<size_t>(g)];
  const uint64_t base = swap_state_offset_[static_cast<size_t>(g)];
  for (int i = 0; i < 3; ++i) {
    swap_->write(base + static_cast<uint64_t>(i) * bytes,
                 swap_buffers_[static_cast<size_t>(first + i)].data(), bytes);
  }
  std::lock_guard<std::mutex> lock(swap_mu_);
  if (--swap_sets_.at(g).users == 0) {
    for (int i = 0; i < 4; ++i) swap_buffer_busy_[static_cast<size_t>(first + i)] = false;
    swap_sets_.erase(g);
    swap_cv_.notify_all();
  }
}

ExecutorRank::SwapRange ExecutorRank::swap_range(int b) const {
  const BucketSlots& bk = layout_.buckets()[static_cast<size_t>(b)];
  SwapRange r;
  r.begin = static_cast<uint64_t>(4 * part_lo(layout_, b));
  r.end = r.begin + static_cast<uint64_t>(4 * bk.part_elems);
  r.a0 = r.begin / kSwapAlign * kSwapAlign;
  r.a1 = swap_aligned(static_cast<size_t>(r.end));
  return r;
}

float* ExecutorRank::stage_for_nvme(int b) {
  // A free swap buffer (they are idle in backward), or, for a bucket larger than one, a
  // temporary pinned buffer; returns where the bucket's first element goes.
  const SwapRange r = swap_range(b);
  const size_t need = static_cast<size_t>(r.a1 - r.a0);
  StageSlot& slot = bucket_stage_[static_cast<size_t>(b)];
  if (need <= swap_buffers_[0].bytes()) {
    std::unique_lock<std::mutex> lock(swap_mu_);
    swap_cv_.wait(lock, [&] {
      for (size_t i = 0; i < swap_buffer_busy_.size(); ++i) {
        if (!swap_buffer_busy_[i]) {
          slot.buffer = static_cast<int>(i);
          return true;
        }
      }
      return false;
    });
    swap_buffer_busy_[static_cast<size_t>(slot.buffer)] = true;
    slot.data = swap_buffers_[static_cast<size_t>(slot.buffer)].data();
  } else {
    slot.fallback = Buffer(&mem_, Tier::kPinnedHost, Category::kSwapBuffers, need / 4);
    slot.data = slot.fallback.data();
  }
  return slot.data + (r.begin - r.a0) / 4;
}

}  // namespace zplan::executor
