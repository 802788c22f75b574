#include "cli/describe.h"

#include <cmath>
#include <limits>

#include "base/text.h"
#include "base/units.h"
#include "cli/table.h"
#include "models/finetune.h"
#include "planner/search_space.h"
#include "planner/text.h"
#include "sim/knobs.h"
#include "sim/tensor_parallel.h"

namespace zplan::cli {

namespace {

std::string params_text(double n) {
  if (n >= 1e12) return strformat("%.2f T", n / 1e12);
  if (n >= 1e9) return strformat("%.2f B", n / 1e9);
  if (n >= 1e6) return strformat("%.1f M", n / 1e6);
  if (n >= 1e3) return strformat("%.1f K", n / 1e3);
  return strformat("%.0f", n);
}

std::string category_words(sim::Category c, sim::Precision precision, sim::Precision master) {
  return planner::category_words(static_cast<int>(c), precision, master);
}

}  // namespace

void add_finetune_json(const models::Model& model, nlohmann::json& j) {
  const models::FineTune& ft = model.finetune();
  if (!ft.frozen()) return;
  j["trainable_params"] = model.trainable_params();
  if (ft.lora()) {
    j["lora"] = {{"rank", ft.lora_rank}, {"targets", ft.lora_targets}};
    if (ft.lora_dropout > 0) j["lora"]["dropout"] = ft.lora_dropout;
  } else {
    j["trainable_fraction"] = ft.trainable_fraction;
  }
}

std::string describe_run(const models::Model& model, const hardware::Cluster& cluster) {
  // Mixture of experts: memory holds every expert, a token's FLOPs use the active ones.
  std::string active;
  if (model.active_params() != model.num_params()) {
    active = ", " + params_text(static_cast<double>(model.active_params())) + " active";
  }
  // Fine-tuning: how many of them train, and how.
  if (model.finetune().frozen()) {
    active += ", " + params_text(static_cast<double>(model.trainable_params())) + " trainable: " +
              models::describe_finetune(model.finetune());
  }
  // AutoTP: the whole model's parameters (the planner's model is one GPU's shard).
  return strformat("%s (%s params%s) on %d x %s (%d node%s)", model.name().c_str(),
                   params_text(static_cast<double>(model.whole_params())).c_str(), active.c_str(),
                   cluster.gpus, cluster.profile.gpu.name.c_str(), cluster.nodes,
                   cluster.nodes == 1 ? "" : "s");
}

std::string describe_zero(const sim::DsConfig& c) {
  const auto& z = c.zero;
  std::string s = strformat("ZeRO-%d", z.stage);
  // ZeRO++ and MiCS as the planner names its families: "ZeRO-3 + MiCS (shard 16)".
  const planner::CommVariant comm = planner::CommVariant::of(z);
  if (!comm.plain()) s += " + " + planner::comm_variant_words(comm);
  if (z.stage > 0) {
    s += strformat(", offload optimizer %s", sim::offload_device_name(z.offload_optimizer.device));
    if (z.stage == 3) {
      s += strformat(", params %s", sim::offload_device_name(z.offload_param.device));
    }
  }
  return s;
}

std::string describe_zero_knobs(const sim::DsConfig& c) {
  using sim::Knob;
  const sim::ZeroConfig& z = c.zero;
  std::string s = strformat("stage %d", z.stage);
  auto flag = [&](const char* key, bool v) { s += strformat(", %s %s", key, v ? "true" : "false"); };
  // Sizes as the planner writes them (5e8, 33973862).
  auto size = [&](const char* key, int64_t v) {
    s += strformat(", %s %s", key, sim::format_knob_value(Knob::kReduceBucket, v).c_str());
  };
  if (z.stage == 0) return s;
  const sim::OffloadOptimizerConfig& oo = z.offload_optimizer;
  s += strformat(", offload_optimizer %s", sim::offload_device_name(oo.device));
  if (oo.device != sim::OffloadDevice::kNone) {
    s += strformat(" (pin_memory %s", oo.pin_memory ? "true" : "false");
    if (oo.ratio < 1) s += strformat(", ratio %g", oo.ratio);
    if (oo.device == sim::OffloadDevice::kNvme) {
      s += strformat(", buffer_count %lld, pipeline_read %s, pipeline_write %s",
                     static_cast<long long>(oo.buffer_count), oo.pipeline_read ? "true" : "false",
                     oo.pipeline_write ? "true" : "false");
    }
    s += ")";
  }
  if (z.stage == 3) {
    const sim::OffloadParamConfig& op = z.offload_param;
    s += strformat(", offload_param %s", sim::offload_device_name(op.device));
    if (op.device != sim::OffloadDevice::kNone) {
      s += strformat(" (pin_memory %s", op.pin_memory ? "true" : "false");
      if (op.device == sim::OffloadDevice::kNvme) {
        s += strformat(", buffer_count %lld, buffer_size %s, max_in_cpu %s",
                       static_cast<long long>(op.buffer_count),
                       sim::format_knob_value(Knob::kReduceBucket, op.buffer_size).c_str(),
                       sim::format_knob_value(Knob::kReduceBucket, op.max_in_cpu).c_str());
      }
      s += ")";
    }
  }
  flag("overlap_comm", z.overlap_comm);
  flag("contiguous_gradients", z.contiguous_gradients);
  size("reduce_bucket_size", z.reduce_bucket_size);
  if (z.stage <= 2) {
    flag("reduce_scatter", z.reduce_scatter);
    size("allgather_bucket_size", z.allgather_bucket_size);
    flag("use_multi_rank_bucket_allreduce", z.use_multi_rank_bucket_allreduce);
    flag("round_robin_gradients", z.round_robin_gradients);
    return s;
  }
  size("stage3_prefetch_bucket_size", z.prefetch_bucket_size);
  size("stage3_param_persistence_threshold", z.param_persistence_threshold);
  if (z.model_persistence_threshold != std::numeric_limits<int64_t>::max()) {
    size("stage3_model_persistence_threshold", z.model_persistence_threshold);
  }
  size("stage3_max_live_parameters", z.max_live_parameters);
  size("stage3_max_reuse_distance", z.max_reuse_distance);
  size("sub_group_size", z.sub_group_size);
  // ZeRO++ and MiCS only when on, as ds_config_to_json writes them, so that a plain ZeRO-3 line
  // stays as it was.
  const planner::CommVariant comm = planner::CommVariant::of(z);
  if (comm.hpz > 1) {
    s += strformat(", zero_hpz_partition_size %lld", static_cast<long long>(comm.hpz));
  }
  if (comm.qwz) flag("zero_quantized_weights", true);
  if (comm.qgz) flag("zero_quantized_gradients", true);
  if (comm.mics > 0) s += strformat(", mics_shard_size %lld", static_cast<long long>(comm.mics));
  if (comm.mics_hier) flag("mics_hierarchical_params_gather", true);
  // leaf_module too only when it is not DeepSpeed's default.
  if (!z.leaf_module.is_default()) {
    auto list = [](const std::vector<std::string>& v) {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
      return out + "]";
    };
    // DeepSpeed's three default classes, then what the planner or the file adds.
    const std::vector<std::string> defaults = sim::default_leaf_module_classes();
    const std::vector<std::string>& classes = z.leaf_module.classes;
    if (classes.size() > defaults.size() &&
        std::equal(defaults.begin(), defaults.end(), classes.begin())) {
      s += ", leaf_module classes DeepSpeed's defaults + " +
           list({classes.begin() + static_cast<std::ptrdiff_t>(defaults.size()), classes.end()});
    } else {
      s += ", leaf_module classes " + list(classes);
    }
    if (!z.leaf_module.names.empty()) s += " names " + list(z.leaf_module.names);
    if (!z.leaf_module.name_suffixes.empty()) {
      s += " name_suffixes " + list(z.leaf_module.name_suffixes);
    }
  }
  return s;
}

std::string describe_config(const sim::DsConfig& c, const sim::Workload& w) {
  return describe_zero(c) + ", " + describe_training(c, w);
}

std::string describe_training(const sim::DsConfig& c, const sim::Workload& w) {
  std::string s = strformat(
      "%s, micro-batch %lld x gas %lld = %lld samples, seq %lld", sim::precision_name(c.precision),
      static_cast<long long>(c.micro_batch), static_cast<long long>(c.gradient_accumulation_steps),
      static_cast<long long>(c.train_batch_size), static_cast<long long>(w.seq_len));
  s += c.activation_checkpointing.enabled
           ? (c.activation_checkpointing.cpu_checkpointing ? ", checkpointing full (cpu)"
                                                           : ", checkpointing full")
           : ", checkpointing none";
  s += std::string(", attention ") + sim::attention_name(w.attention);
  const bool cpu_step = c.zero.offload_optimizer.device != sim::OffloadDevice::kNone;
  const bool foreach = !cpu_step && c.optimizer.gpu_step == sim::GpuStep::kForeach;
  if (!c.optimizer.is_adam() || foreach) {
    // The optimizer is not Adam (its states change memory), or its update is torch's foreach
    // path (its passes change the step's time, its denominator the step's memory).
    s += strformat(", optimizer %s (%d fp32 state%s%s)",
                   (cpu_step ? c.optimizer.cpu_name : c.optimizer.name).c_str(),
                   c.optimizer.states, c.optimizer.states == 1 ? "" : "s",
                   foreach ? ", foreach update" : "");
  }
  if (w.fused_loss || !w.loss_upcast) s += std::string(", ") + w.loss_name() + " loss";
  if (!w.zero_init && c.zero.stage == 3) s += ", model built outside zero.Init";
  if (w.sequence_parallel > 1) {
    // The samples above count the data-parallel ranks only: the GPUs / sp (runtime/config.py).
    s += strformat(", Ulysses sequence parallel %d (%lld tokens per GPU)", w.sequence_parallel,
                   static_cast<long long>(w.seq_len / w.sequence_parallel));
  }
  if (w.tensor_parallel > 1) {
    // The samples above are the data-parallel ranks' (each tensor-parallel group shares its
    // samples): micro-batch x gas x the GPUs / tp.
    const long long dp = static_cast<long long>(
        c.train_batch_size / (c.micro_batch * c.gradient_accumulation_steps));
    s += strformat(", AutoTP %d (ZeRO over %lld data-parallel rank%s%s)", w.tensor_parallel, dp,
                   dp == 1 ? "" : "s", w.tp_overlap_comm ? ", tp_overlap_comm" : "");
  }
  return s;
}

nlohmann::json setup_to_json(const Setup& setup) {
  nlohmann::json j;
  j["model"] = {{"name", setup.model.name()}, {"params", setup.model.num_params()}};
  if (setup.model.active_params() != setup.model.num_params()) {
    j["model"]["active_params"] = setup.model.active_params();
  }
  add_finetune_json(setup.model, j["model"]);
  if (setup.shard) j["model"]["params_per_gpu"] = setup.shard->num_params();
  j["cluster"] = {{"hardware", setup.cluster.profile.name},
                  {"gpu", setup.cluster.profile.gpu.name},
                  {"gpus", setup.cluster.gpus},
                  {"nodes", setup.cluster.nodes}};
  j["workload"] = {{"seq_len", setup.workload.seq_len},
                   {"attention", sim::attention_name(setup.workload.attention)},
                   {"loss", setup.workload.loss_name()}};
  if (setup.workload.sequence_parallel > 1) {
    j["workload"]["ulysses_sequence_parallel"] = setup.workload.sequence_parallel;
  }
  if (setup.workload.tensor_parallel > 1) {
    j["workload"]["autotp"] = {
        {"size", setup.workload.tensor_parallel},
        {"data_parallel", sim::data_parallel_ranks(setup.cluster, setup.workload)},
        {"tp_overlap_comm", setup.workload.tp_overlap_comm}};
  }
  if (!setup.workload.zero_init) j["workload"]["zero_init"] = false;
  const bool cpu_optimizer = setup.config.zero.offload_optimizer.device != sim::OffloadDevice::kNone;
  j["optimizer"] = {
      {"class", cpu_optimizer ? setup.config.optimizer.cpu_name : setup.config.optimizer.name},
      {"fp32_states", setup.config.optimizer.states},
      {"from_ds_config", setup.config.optimizer.from_file}};
  if (!cpu_optimizer && setup.config.optimizer.gpu_step == sim::GpuStep::kForeach) {
    j["optimizer"]["gpu_update"] = "foreach";
  }
  j["ds_config"] = sim::ds_config_to_json(setup.config);
  return j;
}

nlohmann::json memory_report_to_json(const sim::MemoryReport& r) {
  nlohmann::json j;
  nlohmann::json phases = nlohmann::json::array();
  for (const sim::PhaseMemory& pm : r.phases) {
    nlohmann::json ph;
    ph["phase"] = sim::phase_name(pm.phase);
    for (int t = 0; t < sim::kNumTiers; ++t) {
      nlohmann::json cats = nlohmann::json::object();
      for (int c = 0; c < sim::kNumCategories; ++c) {
        double b = pm.tiers[t].bytes[c];
        if (b != 0) cats[sim::category_name(static_cast<sim::Category>(c))] = std::llround(b);
      }
      ph[sim::tier_name(static_cast<sim::Tier>(t))] = {
          {"total_bytes", std::llround(pm.tiers[t].total())}, {"bytes", cats}};
    }
    phases.push_back(ph);
  }
  j["phases"] = phases;
  nlohmann::json tiers = nlohmann::json::object();
  for (int t = 0; t < sim::kNumTiers; ++t) {
    const sim::TierSummary& ts = r.tiers[t];
    tiers[sim::tier_name(static_cast<sim::Tier>(t))] = {
        {"peak_bytes", std::llround(ts.peak_bytes)},
        {"peak_phase", sim::phase_name(ts.peak_phase)},
        {"capacity_bytes", std::llround(ts.capacity_bytes)}};
  }
  j["tiers"] = tiers;
  j["host_peak_bytes"] = std::llround(r.host_peak_bytes);
  j["gpu_model_state_bytes"] = std::llround(r.gpu_model_state_bytes);
  const sim::MemoryFit fit = r.fit();
  j["fits"] = fit.fits();
  j["gpu_fits"] = fit.gpu_fits();
  j["host_fits"] = fit.host_fits();
  j["nvme_fits"] = fit.nvme_fits();
  return j;
}

void print_memory_report(std::ostream& out, const sim::MemoryReport& r,
                         const hardware::Cluster& cluster, sim::Precision precision) {
  static const char* const kTitles[sim::kNumTiers] = {"GPU (per GPU)", "pinned host (per node)",
                                                      "host (per node)", "NVMe (per node)"};
  for (int t = 0; t < sim::kNumTiers; ++t) {
    bool any = false;
    for (const auto& pm : r.phases) any = any || pm.tiers[t].total() > 0;
    if (!any) continue;
    Table table({strformat("%s, GiB", kTitles[t]), "forward", "backward", "step"},
                {false, true, true, true});
    for (int c = 0; c < sim::kNumCategories; ++c) {
      bool used = false;
      for (const auto& pm : r.phases) used = used || pm.tiers[t].bytes[c] != 0;
      if (!used) continue;
      std::vector<std::string> row{
          category_words(static_cast<sim::Category>(c), precision, r.master_dtype)};
      for (const auto& pm : r.phases) row.push_back(strformat("%.1f", pm.tiers[t].bytes[c] / kGiB));
      table.add_row(row);
    }
    std::vector<std::string> total{"total"};
    for (const auto& pm : r.phases) total.push_back(strformat("%.1f", pm.tiers[t].total() / kGiB));
    table.add_row(total);
    table.print(out, "  ");
    out << '\n';
  }
  const auto& g = r[sim::Tier::kGpu];
  const auto& h = r[sim::Tier::kHost];
  const auto& n = r[sim::Tier::kNvme];
  const sim::MemoryFit fit = r.fit();
  out << "  GPU:  " << memory_verdict(r, precision) << '\n';
  out << strformat("  host: %.1f of %.1f GiB per node (pinned + pageable)%s\n",
                   r.host_peak_bytes / kGiB, h.capacity_bytes / kGiB,
                   fit.host_fits()
                       ? headroom_remark({{"host", r.host_peak_bytes, h.capacity_bytes}}).c_str()
                       : ": DOES NOT FIT");
  if (n.peak_bytes > 0) {
    out << strformat(
        "  NVMe: %.1f of %.1f GiB per node%s\n", n.peak_bytes / kGiB, n.capacity_bytes / kGiB,
        fit.nvme_fits() ? headroom_remark({{"NVMe", n.peak_bytes, n.capacity_bytes}}).c_str()
                      : ": DOES NOT FIT");
  }
  (void)g;
  (void)cluster;
}

FlopsUnit flops_unit(double peak_flops_per_s) {
  return peak_flops_per_s < 1e12 ? FlopsUnit{"GFLOP/s", 1e3} : FlopsUnit{"TFLOP/s", 1};
}

std::string headroom_remark(std::initializer_list<TierUse> tiers) {
  std::string tight;
  for (const TierUse& t : tiers) {
    if (t.peak > 0 && t.peak <= t.capacity &&
        t.peak > t.capacity * (1 - planner::kDefaultHeadroom)) {
      tight += strformat("%s%s %.1f%% free", tight.empty() ? "" : ", ", t.name,
                         100 * (t.capacity - t.peak) / t.capacity);
    }
  }
  if (tight.empty()) return "";
  return strformat(" (%s: under the %.0f%% headroom that plan and sweep keep, so they rule it out)",
                   tight.c_str(), 100 * planner::kDefaultHeadroom);
}

std::string memory_verdict(const sim::MemoryReport& r, sim::Precision precision) {
  const auto& g = r[sim::Tier::kGpu];
  sim::Category dom = g.at_peak.dominant();
  double share = g.peak_bytes > 0 ? 100.0 * g.at_peak[dom] / g.peak_bytes : 0;
  const sim::MemoryFit fit = r.fit();
  if (fit.gpu_fits()) {
    return strformat("peak %.1f of %.1f GiB at %s (%s %.0f%%): fits, %.1f GiB free%s",
                     g.peak_bytes / kGiB, g.capacity_bytes / kGiB, sim::phase_name(g.peak_phase),
                     category_words(dom, precision, r.master_dtype).c_str(), share, (g.capacity_bytes - g.peak_bytes) / kGiB,
                     headroom_remark({{"GPU", g.peak_bytes, g.capacity_bytes}}).c_str());
  }
  return strformat(
      "peak %.1f of %.1f GiB at %s: DOES NOT FIT, short by %.1f GiB; %s dominate "
      "(%.0f%%)",
      g.peak_bytes / kGiB, g.capacity_bytes / kGiB, sim::phase_name(g.peak_phase),
      fit.over.gpu / kGiB, category_words(dom, precision, r.master_dtype).c_str(), share);
}

}  // namespace zplan::cli
