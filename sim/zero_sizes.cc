// ZeroSizes: what DeepSpeed 0.19 partitions, gathers and groups for a model at a data-parallel
// degree -- the partition of each rank, stage 3's persistent parameters, module fetches, reuse and
// sub-groups -- from which the memory model (memory_model.cc) and the step builder price a step.
// The sections of reference/deepspeed_internals.md ("ref §x") give the code lines and arithmetic.
#include "sim/memory_model.h"  // declares zero_sizes and ZeroSizesCache

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/input_error.h"

namespace zplan::sim {

namespace {

// Calls fn(param numel, trainable) for every parameter tensor, a tied tensor once (where it is
// owned).
template <typename Fn>
void for_each_param(const models::Model& model, Fn fn) {
  for (const models::Layer& layer : model.layers()) {
    for (const models::Module& m : layer.modules) {
      if (!m.tied_to.empty()) continue;
      for (const models::Param& prm : m.params) fn(static_cast<double>(prm.numel), prm.trainable);
    }
  }
}

bool is_persistent(double numel, const SizesInputs& in) {
  return numel <= static_cast<double>(in.param_persistence_threshold);
}

bool contains(const std::vector<std::string>& list, const std::string& x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}

}  // namespace

bool moe_block_is_leaf(const models::ModelShape& shape, int64_t block,
                       const LeafModuleConfig& leaf) {
  if (!shape.moe()) return false;
  // _do_set_z3_leaf_modules: a class entry matches __class__.__name__ or module.qualname.
  if (contains(leaf.classes, shape.moe_block_class) ||
      contains(leaf.classes, shape.moe_block_class_name())) {
    return true;
  }
  // set_z3_leaf_modules_by_name / _by_suffix over model.named_modules() of a *ForCausalLM.
  const std::string name = "model.layers." + std::to_string(block) + "." + shape.moe_block_name;
  if (contains(leaf.names, name)) return true;
  for (const std::string& suffix : leaf.name_suffixes) {
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

namespace {

// The MoE blocks of the model, and how many of them `leaf` leaves no ZeRO-3 leaf.
struct LeafCount {
  int64_t moe_blocks = 0;
  int64_t not_leaves = 0;
};

LeafCount count_leaves(const models::Model& model, const LeafModuleConfig& leaf) {
  LeafCount c;
  int64_t block = 0;
  for (const models::Layer& layer : model.layers()) {
    if (layer.kind != models::LayerKind::kBlock) continue;
    if (layer.moe_block) {
      ++c.moe_blocks;
      if (!moe_block_is_leaf(model.shape(), block, leaf)) ++c.not_leaves;
    }
    ++block;
  }
  return c;
}

}  // namespace

std::string missing_moe_leaf_class(const models::Model& model, const ZeroConfig& zero) {
  if (zero.stage != 3 || !model.shape().moe()) return "";
  return count_leaves(model, zero.leaf_module).not_leaves > 0
             ? model.shape().moe_block_class_name()
             : "";
}

std::string moe_leaf_note(const models::Model& model, const ZeroConfig& zero,
                          const std::string& file) {
  // The 3D layout keeps the experts in one module (ModelShape::fused_experts): without a leaf
  // ZeRO-3 gathers the router, the experts' tensors and any shared expert module by module, the
  // same on every rank whichever experts its tokens reach, so there is nothing to warn of.
  if (zero.stage != 3 || !model.shape().moe() || model.shape().fused_experts) return "";
  // Blocks made leaves by name or suffix may be only some of them: say how many are not.
  const LeafCount c = count_leaves(model, zero.leaf_module);
  const int64_t moe_blocks = c.moe_blocks, not_leaves = c.not_leaves;
  if (not_leaves == 0) return "";
  const std::string cls = model.shape().moe_block_class_name();
  const std::string where = file.empty() ? std::string("zero_optimization.leaf_module")
                                         : json_location(file, "/zero_optimization/leaf_module");
  const std::string which =
      not_leaves == moe_blocks
          ? " does not make " + cls + " a ZeRO-3 leaf"
          : " leaves " + std::to_string(not_leaves) + " of the " + std::to_string(moe_blocks) +
                " " + cls + " blocks no ZeRO-3 leaf";
  return where + which +
         ": stage 3 gathers and hooks each expert's Linears one by one there (the "
         "prediction prices that); with the modeling code's loop over the experts a micro-batch "
         "reaches (transformers 4.5x and later), ranks whose tokens reach different experts "
         "issue different all-gathers and training hangs. List \"" + cls +
         "\" in zero_optimization.leaf_module.classes (DeepSpeed >= 0.18), or call "
         "deepspeed.utils.set_z3_leaf_modules(model, [" + cls + "]) before deepspeed.initialize";
}

ZeroSizes zero_sizes(const models::Model& model, int dp, const DsConfig& config) {
  return zero_sizes(model, sizes_inputs(dp, config));
}

ZeroSizes zero_sizes(const models::Model& model, const SizesInputs& in) {
  const int dp = in.dp;
  ZeroSizes s;
  s.dp = dp;
  s.param_bytes = precision_bytes(in.precision);
  s.grad_accum_bytes = precision_bytes(in.grad_accum_dtype);
  s.bucket = static_cast<double>(in.reduce_bucket_size);
  // Frozen parameters (requires_grad false, models/finetune.h) never enter the optimizer:
  // DeepSpeed builds its partitions from the trainable parameters of the optimizer's groups
  // (stage_1_and_2.py DeepSpeedZeroOptimizer.__init__: bit16_groups takes the params with
  // requires_grad; stage3.py _get_trainable_parameter_groups feeds
  // _create_fp16_partitions_with_defragmentation and the sub-groups), so the partition, the
  // sub-groups and the largest gradient below count trainable tensors only. Stage 3 still
  // partitions and gathers every parameter (DeepSpeedZeRoOffload converts all of the module's
  // parameters), frozen ones included: param_partition.
  std::vector<double> partitions;  // stage 3: per trainable tensor, in parameter order
  std::vector<double> numels;      // stage 3: the same tensors' full element counts
  for_each_param(model, [&](double n, bool trainable) {
    s.psi += n;
    // Stage 3 pads every tensor to a multiple of dp (partition_parameters.py), ref §2.2 item 1.
    s.param_partition += std::ceil(n / dp);
    if (!trainable) return;
    s.train_psi += n;
    numels.push_back(n);
    s.largest_param = std::max(s.largest_param, n);
    partitions.push_back(std::ceil(n / dp));
  });
  if (in.stage == 0) {
    s.partition = s.train_psi;
  } else if (in.stage <= 2) {
    // One flat buffer per group padded to a multiple of 2 * dp (nccl_start_alignment_factor),
    // ref §2.1 item 1.
    double align = 2.0 * dp;
    s.partition = std::ceil(s.train_psi / align) * align / dp;
  } else {
    for (double part : partitions) s.partition += part;
  }
  if (in.stage != 3) s.param_partition = s.partition;
  s.cpu_partition = in.offload_optimizer != OffloadDevice::kNone ? s.partition : 0;
  if (in.stage != 3) return s;

  // Persistent parameters (parameter_offload.py: mark_persistent_parameters), ref §2.2 item 9.
  // A leaf MoE block is fetched whole by the hook on the block (fetch_sub_module gathers
  // iter_params(module, recurse=z3_leaf_module(module)), partitioned_param_coordinator.py),
  // persistent parameters aside: its elements go to the block's first module.
  double model_cap = static_cast<double>(in.model_persistence_threshold);
  std::vector<double> fetch_sizes;  // non-persistent elements of each module fetch, trace order
  int64_t block = 0;
  for (const models::Layer& layer : model.layers()) {
    s.module_fetch.emplace_back(layer.modules.size(), 0.0);
    s.module_fetch_tensors.emplace_back(layer.modules.size(), 0);
    const bool leaf = layer.moe_block && moe_block_is_leaf(model.shape(), block, in.leaf_module);
    if (layer.kind == models::LayerKind::kBlock) ++block;
    int leaf_first = -1;  // the leaf block's first module, where its fetch is counted
    for (size_t mi = 0; mi < layer.modules.size(); ++mi) {
      const models::Module& m = layer.modules[mi];
      size_t into = mi;
      if (leaf && m.moe_block) {
        if (leaf_first < 0) leaf_first = static_cast<int>(mi);
        into = static_cast<size_t>(leaf_first);
      }
      for (const models::Param& prm : m.params) {
        double n = static_cast<double>(prm.numel);
        bool owned = m.tied_to.empty();
        if (is_persistent(n, in) && (!owned || s.persistent + n <= model_cap)) {
          if (owned) s.persistent += n;
        } else {
          s.module_fetch.back()[into] += n;
          s.module_fetch_tensors.back()[into] += 1;
        }
      }
    }
    for (double fetch : s.module_fetch.back()) {
      s.largest_fetch = std::max(s.largest_fetch, fetch);
      fetch_sizes.push_back(fetch);
    }
  }
  s.non_persistent = s.psi - s.persistent;
  // A module's forward and backward uses are 2 * (elements fetched after it in forward) apart;
  // within max_reuse_distance it is not released between them (partitioned_param_coordinator.py
  // __params_to_release), ref §2.2 item 8.
  double after = 0;
  for (size_t i = fetch_sizes.size(); i-- > 0;) {
    if (2 * after < static_cast<double>(in.max_reuse_distance)) s.reuse_retained += fetch_sizes[i];
    after += fetch_sizes[i];
  }
  // Sub-groups of at least sub_group_size partition elements, closed at the last tensor
  // (stage3.py _create_fp16_sub_groups), ref §2.2 item 2.
  std::vector<double> groups;
  std::vector<double> group_numels;  // full elements of each sub-group's tensors
  double sub = static_cast<double>(in.sub_group_size);
  if (sub >= s.partition) {
    groups.push_back(s.partition);
    group_numels.push_back(s.train_psi);
  } else {
    double acc = 0, acc_numel = 0;
    for (size_t i = 0; i < partitions.size(); ++i) {
      acc += partitions[i];
      acc_numel += numels[i];
      if (acc >= sub || i + 1 == partitions.size()) {
        groups.push_back(acc);
        group_numels.push_back(acc_numel);
        acc = 0;
        acc_numel = 0;
      }
    }
  }
  s.sub_groups = static_cast<int>(groups.size());
  s.sub_group_sizes = groups;
  const auto largest_group = std::max_element(groups.begin(), groups.end());  // first maximum
  s.max_sub_group = *largest_group;
  s.largest_sub_group_numel = group_numels[largest_group - groups.begin()];
  // Partial offload: the last `ratio` of the sub-groups go to the CPU (_create_fp32_partitions:
  // sub-group i is on the CPU iff i >= int((1 - ratio) * count)), ref §2.2 "Partial offload".
  if (in.offload_optimizer != OffloadDevice::kNone) {
    int first_cpu = static_cast<int>((1 - in.offload_ratio) * s.sub_groups);
    s.cpu_partition = 0;
    for (int i = first_cpu; i < s.sub_groups; ++i) s.cpu_partition += groups[i];
  }
  return s;
}

const ZeroSizes& ZeroSizesCache::get(const models::Model& model, int dp, const DsConfig& config) {
  const SizesInputs inputs = sizes_inputs(dp, config);
  Fingerprinter h;
  h.add(model.name());
  h.add(model.num_params());
  h.add(model.trainable_params());
  h.add(static_cast<int64_t>(model.layers().size()));
  const GraphFingerprint f = fingerprint(inputs);
  h.add(f.lo);
  h.add(f.hi);
  const GraphFingerprint key = h.finish();
  auto it = sizes_.find(key);
  if (it != sizes_.end()) return it->second;
  if (sizes_.size() >= 1024) sizes_.clear();
  return sizes_.emplace(key, zero_sizes(model, inputs)).first->second;
}

}  // namespace zplan::sim
