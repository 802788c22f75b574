#include "executor/layout.h"

#include <cassert>
#include <cmath>
#include <map>

#include "sim/step_builder_internal.h"

namespace zplan::executor {

ExecutorLayout::ExecutorLayout(const models::Model& model, const sim::DsConfig& config,
                               const sim::StepBuilder& builder, int dp, int rank)
    : dp_(dp), rank_(rank), stage_(config.zero.stage) {
  const sim::ZeroConfig& z = config.zero;
  const sim::ZeroSizes& sizes = builder.sizes();
  const auto& layers = model.layers();

  // Owned tensors in model order (tied modules point at their owner's tensors by name).
  std::map<std::string, int> by_name;
  module_params_.resize(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    module_params_[l].resize(layers[l].modules.size());
    for (size_t m = 0; m < layers[l].modules.size(); ++m) {
      const models::Module& mod = layers[l].modules[m];
      if (!mod.tied_to.empty()) continue;
      for (const models::Param& prm : mod.params) {
        ParamSlot s;
        s.name = prm.name;
        s.layer = static_cast<int>(l);
        s.module = static_cast<int>(m);
        s.numel = prm.numel;
        s.flat_offset = psi_;
        psi_ += prm.numel;
        largest_param_ = std::max(largest_param_, prm.numel);
        by_name[prm.name] = static_cast<int>(params_.size());
        module_params_[l][m].push_back(static_cast<int>(params_.size()));
        params_.push_back(s);
      }
    }
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    for (size_t m = 0; m < layers[l].modules.size(); ++m) {
      const models::Module& mod = layers[l].modules[m];
      if (mod.tied_to.empty()) continue;
      for (const models::Param& prm : mod.params) {
        auto it = by_name.find(prm.name);
        assert(it != by_name.end() && "a tied parameter names no owned tensor");
        module_params_[l][m].push_back(it->second);
      }
    }
  }
  assert(static_cast<double>(psi_) == sizes.psi);

  if (stage_ == 0) {
    flat_size_ = partition_ = psi_;
  } else if (stage_ <= 2) {
    const int64_t align = 2LL * dp;
    flat_size_ = (psi_ + align - 1) / align * align;
    partition_ = flat_size_ / dp;
  } else {
    // Stage 3: pieces of ceil(numel / dp); persistence as mark_persistent_parameters decides it.
    const double cap = static_cast<double>(z.model_persistence_threshold);
    for (ParamSlot& s : params_) {
      s.part_numel = (s.numel + dp - 1) / dp;
      s.part_offset = partition_;
      partition_ += s.part_numel;
      const bool small = s.numel <= z.param_persistence_threshold;
      if (small && static_cast<double>(persistent_ + s.numel) <= cap) {
        s.persistent = true;
        persistent_ += s.numel;
      }
    }
    flat_size_ = partition_ * dp;
    // Sub-groups: whole tensors until at least sub_group_size partition elements.
    const int64_t sub = z.sub_group_size;
    SubGroupSlots cur;
    if (sub >= partition_) {
      cur.end_param = static_cast<int>(params_.size());
      cur.size = partition_;
      sub_groups_.push_back(cur);
    } else {
      for (size_t i = 0; i < params_.size(); ++i) {
        params_[i].sub_group = static_cast<int>(sub_groups_.size());
        cur.size += params_[i].part_numel;
        if (cur.size >= sub || i + 1 == params_.size()) {
          cur.end_param = static_cast<int>(i) + 1;
          sub_groups_.push_back(cur);
          cur = SubGroupSlots();
          cur.first_param = static_cast<int>(i) + 1;
          cur.begin = params_[i].part_offset + params_[i].part_numel;
        }
      }
    }
    assert(static_cast<double>(persistent_) == sizes.persistent);
    assert(sub_groups_.size() == sizes.sub_group_sizes.size());
    for (size_t g = 0; g < sub_groups_.size(); ++g) {
      assert(static_cast<double>(sub_groups_[g].size) == sizes.sub_group_sizes[g]);
    }
  }
  assert(static_cast<double>(partition_) == sizes.partition);

  // Gradients per piece, as plan_pieces assigns them: a module's parameters belong to the piece
  // of the first op that uses the module (else the layer's first piece); modules and their
  // parameters in reverse order; tied modules produce none.
  const std::vector<sim::Piece>& pieces = builder.pieces();
  piece_grads_.resize(pieces.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const models::Layer& layer = layers[l];
    int first_piece = -1;
    std::vector<int> owner(layer.modules.size(), -1);
    for (size_t p = 0; p < pieces.size(); ++p) {
      if (pieces[p].layer != static_cast<int>(l)) continue;
      if (first_piece < 0) first_piece = static_cast<int>(p);
      for (int oi = pieces[p].first_op; oi < pieces[p].end_op; ++oi) {
        int m = layer.ops[static_cast<size_t>(oi)].module;
        if (m >= 0 && owner[static_cast<size_t>(m)] < 0) owner[static_cast<size_t>(m)] = static_cast<int>(p);
      }
    }
    for (size_t m = layer.modules.size(); m-- > 0;) {
      if (!layer.modules[m].tied_to.empty()) continue;
      int piece = owner[m] >= 0 ? owner[m] : first_piece;
      const std::vector<int>& ids = module_params_[l][m];
      for (size_t k = ids.size(); k-- > 0;) piece_grads_[static_cast<size_t>(piece)].push_back(ids[k]);
    }
  }
  for (size_t p = 0; p < pieces.size(); ++p) {
    assert(pieces[p].grads.size() == piece_grads_[p].size());
    for (size_t i = 0; i < pieces[p].grads.size(); ++i) {
      assert(pieces[p].grads[i] == static_cast<double>(params_[static_cast<size_t>(piece_grads_[p][i])].numel));
    }
  }

  // Buckets: the builder's Bucketer over the gradients in backward order; the "producer" handed
  // to it is the gradient's position in that order, so a bucket is the run of gradients from its
  // first filler that adds up to its size.
  if (stage_ >= 1) {
    std::vector<int> order;
    for (size_t p = pieces.size(); p-- > 0;) {
      for (int id : piece_grads_[p]) order.push_back(id);
    }
    sim::Bucketer bucketer(sizes.bucket);
    std::vector<sim::PendingBucket> closed;
    auto on_full = [&](const sim::PendingBucket& b) { closed.push_back(b); };
    for (size_t i = 0; i < order.size(); ++i) {
      bucketer.add(static_cast<double>(params_[static_cast<size_t>(order[i])].numel),
                   static_cast<sim::TaskId>(i), on_full);
    }
    bucketer.flush(on_full);
    buckets_.resize(closed.size());
    for (const sim::PendingBucket& b : closed) {
      BucketSlots& slots = buckets_[static_cast<size_t>(b.index)];
      double left = b.elems;
      for (size_t i = b.first_filler; left > 0; ++i) {
        ParamSlot& s = params_[static_cast<size_t>(order[i])];
        s.bucket = b.index;
        s.bucket_offset = slots.elems;
        slots.params.push_back(order[i]);
        slots.elems += s.numel;
        slots.part_elems += s.part_numel;
        left -= static_cast<double>(s.numel);
      }
      assert(left == 0);
    }
  }
}

}  // namespace zplan::executor
