#include "calibrate/profile_builder.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"
#include "calibrate/collective_sweep.h"
#include "calibrate/gpu_info.h"
#include "hardware/cost_model.h"
#include "base/input_error.h"

namespace zplan::calibrate {

namespace {

using hardware::Collective;

// A NIC rate for profiles whose network is unused (nics_per_node 0): the loader wants a positive
// number; 12.5 GB/s is 100 Gb/s Ethernet, a common cluster NIC.
constexpr double kUnusedNicBytesPerS = 12.5e9;
// Shared-memory MPI without a measured all_reduce: a per-step latency typical of Open MPI's
// shared-memory transport (vader BTL) [est]; the copy rate stands for its bandwidth.
constexpr double kEstShmLatencyS = 1e-6;

std::string date_of(const nlohmann::json& provenance) {
  if (provenance.contains("date") && provenance["date"].is_string()) {
    return provenance["date"].get<std::string>().substr(0, 10);
  }
  return "";
}

class Recorder {
 public:
  Recorder(nlohmann::json* sources, std::vector<std::string>* measured, std::string date)
      : sources_(sources), measured_(measured), date_(std::move(date)) {}
  void measured(const std::string& pointer, const std::string& how) {
    (*sources_)[pointer] = "measured by zplan calibrate " + date_ + ": " + how;
    if (std::find(measured_->begin(), measured_->end(), pointer) == measured_->end()) {
      measured_->push_back(pointer);
    }
  }
  void estimated(const std::string& pointer, const std::string& why) {
    (*sources_)[pointer] = "[est] " + why;
  }

 private:
  nlohmann::json* sources_;
  std::vector<std::string>* measured_;
  std::string date_;
};

// The host numbers every profile takes from a host measurement, CPU device or not.
void apply_host(const HostMeasurements& h, hardware::Profile* p, Recorder& rec) {
  hardware::NodeSpec& n = p->node;
  const std::string ranks = std::to_string(h.ranks_per_node) + " rank" +
                            (h.ranks_per_node == 1 ? "" : "s") + " per node at once";
  n.cpu_vendor = h.cpu_vendor;
  rec.measured("/node/cpu_vendor", "/proc/cpuinfo vendor_id of " + h.cpu_model);
  n.cpu_cores = h.cpu_cores;
  rec.measured("/node/cpu_cores",
               "online CPUs (sysconf _SC_NPROCESSORS_ONLN), or ranks x threads per rank when the "
               "launcher bound the ranks to fewer (sched_getaffinity)");
  n.host_memory_bytes = h.memory_bytes;
  rec.measured("/node/host_memory_gib", "physical memory (sysconf _SC_PHYS_PAGES)");
  // What the node's ranks reach together with in-place kernels -- zplan's memory kernel, and Adam,
  // which moves 28 B per parameter. Adam's own rate counts too: the cost model takes
  // min(threads x rate per core, DRAM share / 28 B) (docs/cost_model.md §5), and the measured
  // rate per core already includes its memory traffic, so the DRAM bound must not undercut it.
  const double adam_bw = h.adam_params_per_s_per_rank * 28 * h.ranks_per_node;
  n.host_memory_bw_bytes_per_s = std::max(h.inplace_bytes_per_s_node, adam_bw);
  rec.measured("/node/host_memory_gbps",
               std::string("the larger of the in-place memory kernel's rate (x = s x, 8 B per "
                           "element) and CPU Adam's (28 B per parameter), summed over ") +
                   ranks + ", " + std::to_string(h.threads_per_rank) +
                   " thread(s) each; STREAM triad in provenance.raw");
  n.cpu_adam_params_per_s_per_core = h.adam_params_per_s_per_rank / h.threads_per_rank;
  rec.measured("/node/cpu_adam_mparams_per_s_per_core",
               "zplan's fp32 Adam (kernels/cpu_adam.h, " + h.adam_isa +
                   ") at the largest "
                   "size, per rank with " +
                   ranks + ", divided by its " + std::to_string(h.threads_per_rank) + " thread(s)");
  if (h.nvme_read_bytes_per_s_node > 0) {
    const std::string how = "O_DIRECT sequential " + std::string("%s") + " at " + h.nvme_path +
                            ", 1 MiB blocks, queue depth 8 (DeepSpeed aio defaults), " +
                            h.nvme_engine + ", one file per rank, " + ranks;
    auto with = [&](const char* what) {
      std::string s = how;
      s.replace(s.find("%s"), 2, what);
      return s;
    };
    // A disk measured slower than a profile can hold (a busy or network disk: an fdatasync that
    // waited seconds behind other writers) is written as the slowest a profile holds, and says so.
    auto at_least_floor = [&](double measured, std::string how_measured) {
      if (measured >= hardware::kMinBandwidthBytesPerS) return std::make_pair(measured, how_measured);
      return std::make_pair(
          hardware::kMinBandwidthBytesPerS,
          how_measured + strformat("; measured %.3g MB/s, below the 1 MB/s a profile holds, so "
                                   "written as 1 MB/s (a busy or non-local disk)",
                                   measured / 1e6));
    };
    auto [read, read_how] = at_least_floor(h.nvme_read_bytes_per_s_node, with("read"));
    n.nvme_read_bytes_per_s = read;
    rec.measured("/node/nvme_read_gbps", read_how);
    auto [write, write_how] =
        at_least_floor(h.nvme_write_bytes_per_s_node, with("write (fdatasync included)"));
    n.nvme_write_bytes_per_s = write;
    rec.measured("/node/nvme_write_gbps", write_how);
  }
  if (h.nvme_capacity_bytes > 0) {
    n.nvme_capacity_bytes = h.nvme_capacity_bytes;
    rec.measured("/node/nvme_capacity_gib", "free space at " + h.nvme_path + " (statvfs)");
  }
}

// A cpu device: the rank's compute and its "host copies" are the host's.
void apply_cpu_device(const HostMeasurements& h, const GemmCurve& curve, hardware::Profile* p,
                      Recorder& rec) {
  hardware::GpuSpec& g = p->gpu;
  hardware::NodeSpec& n = p->node;
  const std::string per_rank = "per rank, " + std::to_string(h.ranks_per_node) +
                               " rank(s) per node at once, " + std::to_string(h.threads_per_rank) +
                               " thread(s) each";
  if (!curve.points.empty()) {
    g.peak_fp32_flops_per_s = curve.peak_flops_per_s;
    g.peak_flops_per_s = curve.peak_flops_per_s;
    g.gemm_efficiency = curve.points;
    const std::string how =
        "best fp32 GEMM rate of the sgemm sweep (" + h.gemm_library + "), " + per_rank;
    rec.measured("/gpu/peak_fp32_tflops", how);
    rec.measured("/gpu/peak_tflops", how + "; a CPU has no faster 16-bit rate");
    rec.measured("/gpu/gemm_efficiency",
                 "sgemm sweep of " + std::to_string(h.gemms.size()) +
                     " MLP/transformer shapes: F / (peak (t - call overhead)), " + per_rank);
    g.kernel_launch_s = h.gemm_call_s;
    rec.measured("/gpu/kernel_launch_us", "time of a 1x1x1 sgemm call");
  }
  g.hbm_bw_bytes_per_s = h.inplace_bytes_per_s_per_rank;
  g.hbm_efficiency = 1;
  rec.measured("/gpu/hbm_gbps",
               "the executor's memory-bound kernel x = s x in place (read + write = 8 B per "
               "element), caches flushed, " +
                   per_rank);
  rec.measured("/gpu/hbm_efficiency", "1: hbm_gbps is itself the achieved rate");
  auto copy_how = [&](const char* dir, const char* kind) {
    return std::string("memcpy ") + dir + " between a rank's device buffer and " + kind +
           " host memory, caches flushed before each copy, " + per_rank;
  };
  const std::string pinned_kind =
      h.pinned_note == "mlock" ? "mlock'ed" : "pre-faulted (" + h.pinned_note + ")";
  n.h2d_pinned_bytes_per_s = h.h2d_pinned_bytes_per_s;
  rec.measured("/node/h2d_pinned_gbps", copy_how("host to device", pinned_kind.c_str()));
  n.d2h_pinned_bytes_per_s = h.d2h_pinned_bytes_per_s;
  rec.measured("/node/d2h_pinned_gbps", copy_how("device to host", pinned_kind.c_str()));
  n.h2d_pageable_bytes_per_s = h.h2d_pageable_bytes_per_s;
  rec.measured("/node/h2d_pageable_gbps", copy_how("host to device", "malloc'ed"));
  n.d2h_pageable_bytes_per_s = h.d2h_pageable_bytes_per_s;
  rec.measured("/node/d2h_pageable_gbps", copy_how("device to host", "malloc'ed"));
  n.pcie_uplink_bytes_per_s = std::max(h.h2d_pinned_bytes_per_s, h.d2h_pinned_bytes_per_s);
  rec.measured("/node/pcie_uplink_gbps",
               "no PCIe between a CPU rank and its host memory: the pinned copy rate, one rank "
               "per \"switch\"");
}

void apply_device(const DeviceMeasurements& d, const GemmCurve& curve, hardware::Profile* p,
                  Recorder& rec, std::vector<std::string>* notes) {
  hardware::GpuSpec& g = p->gpu;
  hardware::NodeSpec& n = p->node;
  g.name = d.name;
  rec.measured("/gpu/name", "cudaGetDeviceProperties");
  if (auto arch = arch_for_compute_capability(d.cc_major, d.cc_minor)) {
    g.arch = *arch;
    rec.measured("/gpu/arch", "compute capability " + std::to_string(d.cc_major) + "." +
                                  std::to_string(d.cc_minor));
  }
  g.memory_bytes = d.memory_bytes;
  rec.measured("/gpu/memory_gib", "cudaDeviceProp::totalGlobalMem");
  if (d.devices_per_node > 0 && d.devices_per_node != n.gpus_per_node) {
    n.gpus_per_node = d.devices_per_node;
    rec.measured("/node/gpus_per_node", "cudaGetDeviceCount");
  }
  if (!curve.points.empty()) {
    g.gemm_efficiency = curve.points;
    rec.measured("/gpu/gemm_efficiency",
                 "cublasGemmEx bf16 (CUBLAS_COMPUTE_32F) sweep over transformer shapes, events, "
                 "against the base's peak_tflops");
  }
  if (g.hbm_bw_bytes_per_s > 0 && d.d2d_bytes_per_s > 0) {
    double eff = d.d2d_bytes_per_s / g.hbm_bw_bytes_per_s;
    if (eff > 1) {
      notes->push_back("device-to-device copies reach " +
                       strformat("%.0f", d.d2d_bytes_per_s / 1e9) +
                       " GB/s, above the base's hbm_gbps: hbm_efficiency capped at 1 (check "
                       "--base)");
    }
    g.hbm_efficiency = std::clamp(eff, 1e-3, 1.0);
    rec.measured("/gpu/hbm_efficiency",
                 "cudaMemcpy device to device, 2 x size per copy (bandwidthTest), over the "
                 "base's hbm_gbps");
  }
  n.h2d_pinned_bytes_per_s = d.h2d_pinned_bytes_per_s;
  rec.measured("/node/h2d_pinned_gbps", "cudaMemcpyAsync from cudaHostAlloc memory, events");
  n.d2h_pinned_bytes_per_s = d.d2h_pinned_bytes_per_s;
  rec.measured("/node/d2h_pinned_gbps", "cudaMemcpyAsync to cudaHostAlloc memory, events");
  n.h2d_pageable_bytes_per_s = d.h2d_pageable_bytes_per_s;
  rec.measured("/node/h2d_pageable_gbps", "cudaMemcpy from malloc'ed memory, host timer");
  n.d2h_pageable_bytes_per_s = d.d2h_pageable_bytes_per_s;
  rec.measured("/node/d2h_pageable_gbps", "cudaMemcpy to malloc'ed memory, host timer");
}

void apply_collectives(const Measurements& m, const std::vector<RegimeFit>& fits,
                       hardware::Profile* p, Recorder& rec) {
  bool intra_latency_measured = false;
  for (size_t i = 0; i < m.collectives.size(); ++i) {
    const CollectiveMeasurement& c = m.collectives[i];
    if (c.rows.empty() || c.ranks < 2) continue;
    hardware::CollectiveTable t;
    t.op = c.op;
    t.ranks = c.ranks;
    t.nodes = c.nodes;
    for (const CollectiveRow& r : c.rows) t.points.push_back({r.bytes, r.time_s});
    t.regimes = fits[i].regimes;
    auto same = [&](const hardware::CollectiveTable& x) {
      return x.op == t.op && x.ranks == t.ranks && x.nodes == t.nodes;
    };
    p->collectives.erase(std::remove_if(p->collectives.begin(), p->collectives.end(), same),
                         p->collectives.end());
    p->collectives.push_back(t);
    rec.measured("/collectives", c.backend + " " +
                                     "sweeps timed as nccl-tests does, alpha-beta "
                                     "regimes by weighted least squares (docs/calibration.md)");

    // The node's own numbers, from a group that fills one node.
    const bool full_node = c.nodes == 1 && c.ranks == p->node.gpus_per_node;
    const auto& first = fits[i].regimes.front();
    const auto& last = fits[i].regimes.back();
    const double busbw = bus_factor(c.op, c.ranks) / last.beta_s_per_byte;
    if (p->node.intra_link == hardware::IntraLink::kSharedMemory && c.nodes == 1 &&
        c.op == Collective::kAllReduce) {
      // Ring: t = 2(n-1) alpha_step + S / algbw (docs/cost_model.md §2.5).
      p->node.intra_busbw_bytes_per_s = busbw;
      p->node.intra_latency_s = first.alpha_s / (2.0 * (c.ranks - 1));
      rec.measured("/node/intra_busbw_gbps", c.backend + " all_reduce on " +
                                                 std::to_string(c.ranks) +
                                                 " ranks: busbw of the largest sizes' fitted beta");
      rec.measured("/node/intra_latency_us",
                   c.backend + " all_reduce on " + std::to_string(c.ranks) +
                       " ranks: the smallest sizes' fitted alpha over 2(n-1) ring steps");
    } else if (p->node.intra_link != hardware::IntraLink::kSharedMemory && full_node &&
               c.op == Collective::kAllGather) {
      p->node.intra_busbw_bytes_per_s = busbw;
      rec.measured("/node/intra_busbw_gbps",
                   c.backend +
                       " all_gather on a full node: busbw of the largest sizes' fitted "
                       "beta (ring; all_reduce may use NVLS)");
    }
    if (c.nodes == 1 && c.op == Collective::kAllReduce) intra_latency_measured = true;
  }
  // The network after the intra-node tier, whose per-step latency it needs: from the all_gather
  // across all the nodes, a ring that crosses every node boundary once per direction, so that its
  // busbw is the link's rate (nccl-tests' busbw). Not from the all_reduce: MPI runs it on few
  // ranks by recursive halving and doubling, which moves less over the link than the ring the
  // cost model prices (two namespace nodes on a 0.125 GB/s link, docs/validation.md: all_reduce
  // busbw 0.19 GB/s, all_gather 0.10 GB/s).
  for (size_t i = 0; i < m.collectives.size(); ++i) {
    const CollectiveMeasurement& c = m.collectives[i];
    if (c.rows.empty() || c.nodes < 2 || c.op != Collective::kAllGather ||
        p->network.nics_per_node != 0) {
      continue;
    }
    // A CPU cluster: one "NIC" per node standing for whatever links the nodes.
    const auto& first = fits[i].regimes.front();
    const auto& last = fits[i].regimes.back();
    p->network.nics_per_node = 1;
    p->network.nic_bw_bytes_per_s = bus_factor(c.op, c.ranks) / last.beta_s_per_byte;
    // The ring model's latency (hardware/cost_model.cc alpha_beta_ring): n-1 steps, k-1 of them
    // across nodes; the intra-node steps cost the intra-node tier's latency when this run
    // measured it, and the rest of the fitted alpha is the inter-node steps'. Floored at an even
    // share of alpha per step, should the intra-node steps explain all of it.
    const double steps = c.ranks - 1.0, inter = c.nodes - 1.0;
    const double intra_part =
        intra_latency_measured ? (steps - inter) * p->node.intra_latency_s : 0.0;
    p->network.latency_s =
        std::max(first.alpha_s - intra_part, first.alpha_s * inter / steps) / inter;
    rec.measured("/network/nics_per_node", "1: the nodes' link, as one NIC");
    rec.measured("/network/nic_gbps", c.backend + " all_gather on " + std::to_string(c.ranks) +
                                          " ranks across " + std::to_string(c.nodes) +
                                          " nodes (a ring): busbw of the largest sizes' fitted "
                                          "beta");
    rec.measured("/network/latency_us",
                 c.backend + " all_gather across nodes: the smallest sizes' fitted alpha, less " +
                     (intra_latency_measured ? "the intra-node steps' measured latency, "
                                             : std::string()) +
                     "over the k-1 inter-node ring steps");
  }
}

}  // namespace

hardware::Profile cpu_base_profile(const HostMeasurements& h, int nodes, double process_bytes,
                                   const GemmCurve& curve, nlohmann::json* sources) {
  hardware::Profile p;
  std::vector<std::string> unused;
  Recorder rec(sources, &unused, "");
  p.description = std::to_string(h.ranks_per_node) + " CPU rank(s) per node on " +
                  std::to_string(nodes) + " node(s) of " + h.cpu_model + ", " +
                  std::to_string(h.threads_per_rank) +
                  " thread(s) per rank; built from the measurements of zplan calibrate";
  hardware::GpuSpec& g = p.gpu;
  g.name = h.cpu_model + " (1 of " + std::to_string(h.ranks_per_node) + " rank" +
           (h.ranks_per_node == 1 ? "" : "s") + ", " + std::to_string(h.threads_per_rank) +
           " thread" + (h.threads_per_rank == 1 ? "" : "s") + ")";
  g.arch = hardware::Arch::kCpu;
  g.memory_bytes = h.memory_bytes / h.ranks_per_node;
  rec.estimated("/gpu/memory_gib", "the node's memory split evenly between its ranks");
  rec.estimated("/gpu/name", "the CPU model and the rank's share of it");
  rec.estimated("/gpu/arch", "a CPU-only run: arch \"cpu\"");
  double median_eff = 1;
  if (!curve.points.empty()) {
    std::vector<double> e;
    for (const auto& pt : curve.points) e.push_back(pt.efficiency);
    std::sort(e.begin(), e.end());
    median_eff = e[e.size() / 2];
  }
  g.attention_efficiency = median_eff;
  rec.estimated("/gpu/attention_efficiency",
                "no fused attention kernel on a CPU: the median efficiency of the sgemm sweep");
  g.comm_compute_slowdown = 1;
  rec.estimated("/gpu/comm_compute_slowdown",
                "1: a CPU rank's MPI collectives run on the cores that compute (MPI progresses "
                "inside its calls), so nothing overlaps (docs/cost_model.md §9)");
  g.framework_efficiency = 1;
  rec.estimated("/gpu/framework_efficiency",
                "1: zplan's executor calls its kernels back to back (no Python framework)");
  // The framework terms charge a cpu device nothing (hardware/framework.h); the fitted
  // constants are kept so that the written profile carries no "framework" section.
  p.framework = hardware::fitted_framework();
  // Placeholders until apply_cpu_device fills them from the measurements.
  g.peak_flops_per_s = g.peak_fp32_flops_per_s = 1e9;
  g.gemm_efficiency = {{1, 1.0}};
  g.hbm_bw_bytes_per_s = 1e9;
  g.hbm_efficiency = 1;

  hardware::NodeSpec& n = p.node;
  n.gpus_per_node = h.ranks_per_node;
  rec.estimated("/node/gpus_per_node", "the calibration's MPI ranks per node");
  n.intra_link = hardware::IntraLink::kSharedMemory;
  rec.estimated("/node/intra_link", "CPU ranks talk through shared memory (MPI)");
  n.intra_busbw_bytes_per_s = std::max(h.h2d_pinned_bytes_per_s, 1e6);
  rec.estimated("/node/intra_busbw_gbps",
                "no MPI all_reduce measured: shared-memory MPI moves data with memcpy, so the "
                "copy rate");
  n.intra_latency_s = kEstShmLatencyS;
  rec.estimated("/node/intra_latency_us",
                "no MPI all_reduce measured: ~1 us per step of Open MPI's shared-memory "
                "transport");
  n.gpus_per_pcie_switch = 1;
  rec.estimated("/node/gpus_per_pcie_switch", "no PCIe between CPU ranks and host memory");
  n.nvme_capacity_bytes = 1;
  n.nvme_read_bytes_per_s = n.nvme_write_bytes_per_s = 1;

  p.network.nics_per_node = 0;
  p.network.nic_bw_bytes_per_s = kUnusedNicBytesPerS;
  p.network.latency_s = 0;
  rec.estimated("/network/nics_per_node", "0 until a multi-node collective is measured");
  rec.estimated("/network/nic_gbps", "unused while nics_per_node is 0 (100 Gb/s Ethernet)");
  rec.estimated("/network/latency_us", "unused while nics_per_node is 0");

  p.runtime.cuda_context_bytes = 0;
  p.runtime.nccl_buffer_bytes = 0;
  p.runtime.allocator_fragmentation = 0;
  p.runtime.host_process_bytes = process_bytes;
  rec.estimated("/runtime/cuda_context_gib", "0: no CUDA");
  rec.estimated("/runtime/nccl_buffer_gib", "0: no NCCL");
  rec.estimated("/runtime/allocator_fragmentation", "0: malloc'ed buffers, no caching allocator");
  rec.estimated("/runtime/host_process_gib",
                "resident memory of a zplan rank before it allocates (/proc/self/statm)");
  return p;
}

BuildResult build_profile(const BuildInputs& in) {
  const Measurements& m = *in.measurements;
  BuildResult out;
  nlohmann::json sources = nlohmann::json::object();
  const std::string date = date_of(in.provenance);

  // GEMM curve: host sgemm on a cpu device (peak = best rate), cuBLAS bf16 against the base's
  // peak on a GPU.
  const bool cpu_device = !in.base.has_value() || in.base->gpu.arch == hardware::Arch::kCpu;
  if (m.device.measured && !cpu_device) {
    std::vector<GemmRow> bf16;
    for (const GemmRow& r : m.device.gemms) {
      if (r.dtype == "bf16") bf16.push_back(r);
    }
    out.gemm_curve = fit_gemm_curve(bf16, in.base->gpu.peak_flops_per_s, 0);
    out.gemm_dtype = "bf16";
  } else if (m.host.measured && !m.host.gemms.empty()) {
    out.gemm_curve = fit_gemm_curve(m.host.gemms, 0, m.host.gemm_call_s);
    out.gemm_dtype = "fp32";
  }

  if (in.base.has_value()) {
    out.profile = *in.base;
    sources = out.profile.sources.is_object() ? out.profile.sources : nlohmann::json::object();
  } else {
    if (!m.host.measured) {
      throw InputError("--base",
                       "is needed: without the host backend there is nothing to build "
                       "a CPU profile from (add host to --backend, or pass --base "
                       "<profile>)");
    }
    out.profile = cpu_base_profile(m.host, in.nodes, in.process_bytes, out.gemm_curve, &sources);
  }
  out.profile.name = in.name;
  Recorder rec(&sources, &out.measured, date);

  if (m.host.measured) {
    apply_host(m.host, &out.profile, rec);
    if (out.profile.gpu.arch == hardware::Arch::kCpu) {
      apply_cpu_device(m.host, out.gemm_curve, &out.profile, rec);
    }
  }
  if (m.device.measured && !cpu_device) {
    apply_device(m.device, out.gemm_curve, &out.profile, rec, &out.notes);
  }
  for (const CollectiveMeasurement& c : m.collectives) {
    std::vector<Sample> s = samples_of(c);
    out.collective_fits.push_back(s.empty() ? RegimeFit{} : fit_regimes(s));
  }
  apply_collectives(m, out.collective_fits, &out.profile, rec);
  out.profile.sources = sources;

  // How well the finished profile reproduces the GEMM sweep (hardware::gemm_time_s).
  const std::vector<GemmRow>& rows = out.gemm_dtype == "bf16" ? m.device.gemms : m.host.gemms;
  std::vector<double> predicted, measured;
  for (const GemmRow& r : rows) {
    if (r.dtype != out.gemm_dtype) continue;
    const int bytes = r.dtype == "fp32" ? 4 : 2;
    predicted.push_back(
        hardware::gemm_time_s(out.profile.gpu, double(r.m), double(r.n), double(r.k), bytes));
    measured.push_back(r.time_s);
  }
  out.gemm_error = relative_errors(predicted, measured);

  nlohmann::json fit = nlohmann::json::array();
  for (size_t i = 0; i < m.collectives.size(); ++i) {
    const CollectiveMeasurement& c = m.collectives[i];
    const RegimeFit& f = out.collective_fits[i];
    fit.push_back(
        {{"table", std::string(hardware::collective_name(c.op)) + " " + std::to_string(c.ranks) +
                       " ranks " + std::to_string(c.nodes) + " node(s)"},
         {"backend", c.backend},
         {"regimes", f.regimes.size()},
         {"max_rel_error", f.max_rel_error},
         {"median_rel_error", f.median_rel_error}});
  }
  if (!out.gemm_dtype.empty()) {
    fit.push_back({{"table", "gemm " + out.gemm_dtype},
                   {"points", out.gemm_curve.points.size()},
                   {"max_rel_error", out.gemm_error.max_rel},
                   {"median_rel_error", out.gemm_error.median_rel}});
  }
  nlohmann::json prov = in.provenance;
  prov["base"] = in.base_label;
  prov["fit"] = fit;
  prov["measured"] = out.measured;
  std::vector<std::string> notes = m.notes;
  notes.insert(notes.end(), out.notes.begin(), out.notes.end());
  if (!notes.empty()) prov["notes"] = notes;
  out.profile.provenance = prov;

  // The loader is the judge: a profile zplan cannot load is never written.
  out.profile =
      hardware::profile_from_json(hardware::profile_to_json(out.profile), "<calibrated profile>");
  return out;
}

}  // namespace zplan::calibrate
