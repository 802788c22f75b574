#include "calibrate/calibrate.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>

#include <unistd.h>

#include "base/units.h"
#include "calibrate/collective_sweep.h"
#include "calibrate/fake_backend.h"
#include "calibrate/gpu_info.h"
#include "calibrate/registry.h"
#include "hardware/cost_model.h"
#include "kernels/config.h"
#include "base/atomic_file.h"
#include "base/input_error.h"

extern char** environ;

namespace zplan::calibrate {

namespace {

// Environment variables that change what is measured (nccl-tests -J records them all) -- less
// the ones Open MPI's launcher sets for its own bookkeeping on every rank (job ids, URIs, session
// directories, transport keys).
constexpr const char* kEnvPrefixes[] = {
    "NCCL_", "CUDA_VISIBLE_DEVICES", "OMP_", "OPENBLAS_", "OMPI_MCA_", "UCX_"};
constexpr const char* kLauncherPrefixes[] = {"OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_MCA_pmix",
                                             "OMPI_MCA_initial_wdir", "OMPI_MCA_shmem_"};

nlohmann::json relevant_environment() {
  nlohmann::json env = nlohmann::json::object();
  auto starts = [](const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    bool wanted = false;
    for (const char* prefix : kEnvPrefixes) wanted = wanted || starts(kv, prefix);
    for (const char* prefix : kLauncherPrefixes) wanted = wanted && !starts(kv, prefix);
    if (wanted) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// Resident memory of this process now (/proc/self/statm, second field, in pages).
double resident_bytes() {
  std::ifstream in("/proc/self/statm");
  double size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * double(sysconf(_SC_PAGESIZE));
}

// This process's command line (/proc/self/cmdline), words quoted where a shell would need it.
std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string line;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    std::string word = all.substr(start, end - start);
    bool plain = !word.empty() && word.find_first_not_of(
                                      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789-_./=,:+@%") == std::string::npos;
    if (!line.empty()) line += ' ';
    line += plain ? word : "'" + word + "'";
    start = end + 1;
  }
  return line;
}

std::string default_name(const CalibrateOptions& o, const kernels::Comm& g) {
  if (!o.name.empty()) return o.name;
  if (!o.out.empty()) {
    std::string base =
        o.out.substr(o.out.rfind('/') == std::string::npos ? 0 : o.out.rfind('/') + 1);
    if (base.size() > 5 && base.substr(base.size() - 5) == ".json") {
      base.resize(base.size() - 5);
    }
    if (!base.empty()) return base;
  }
  return "calibrated-" + g.hosts().front();
}

std::string op_name(const GemmRow& r) {
  return std::string(r.trans_a ? "T" : "N") + (r.trans_b ? "T" : "N");
}

nlohmann::json rate_json(const RateRow& r) {
  return {{"probe", r.probe},   {"size", r.size}, {"threads", r.threads},
          {"time_s", r.time_s}, {"rate", r.rate}, {"node_rate", r.node_rate}};
}

nlohmann::json gemm_json(const GemmRow& r) {
  return {{"dtype", r.dtype}, {"m", r.m},         {"n", r.n},
          {"k", r.k},         {"op", op_name(r)}, {"time_s", r.time_s}};
}

bool is_adam(const RateRow& r) { return r.probe == "adam"; }

void print_rates(std::ostream& out, const std::vector<RateRow>& rates) {
  char buf[256];
  out << "#   probe                      size          threads   time (us)    per rank   per node"
         "  unit\n";
  for (const RateRow& r : rates) {
    const double scale = is_adam(r) ? 1e6 : 1e9;
    std::snprintf(buf, sizeof buf, "    %-18s %12.0f %-6s  %4d %12.1f %11.2f %10.2f  %s\n",
                  r.probe.c_str(), r.size, is_adam(r) ? "params" : "B", r.threads, r.time_s * 1e6,
                  r.rate / scale, r.node_rate / scale, is_adam(r) ? "Mparams/s" : "GB/s");
    out << buf;
  }
}

// hardware::load_profile, with errors naming --base instead of --hw.
hardware::Profile load_base(const std::string& spec) {
  if (!path_exists(spec)) {
    std::string name = spec;
    if (name.size() > 5 && name.substr(name.size() - 5) == ".json") name.resize(name.size() - 5);
    std::vector<std::string> stock = hardware::stock_profile_names();
    if (std::find(stock.begin(), stock.end(), name) == stock.end()) {
      std::string list;
      for (const std::string& n : stock) list += (list.empty() ? "" : ", ") + n;
      throw InputError(
          "--base",
          "no file '" + spec + "' and no stock profile of that name; stock profiles: " + list);
    }
  }
  return hardware::load_profile(spec);
}

}  // namespace

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Calibration calibrate(const CalibrateOptions& o, kernels::Comm& g, Progress& progress) {
  const double resident = resident_bytes();  // first, before measuring allocates
  Calibration c;
  std::vector<std::string> names = parse_backend_list(o.backends);
  if (names == std::vector<std::string>{"auto"}) names = auto_backends(g);
  const bool fake = std::find(names.begin(), names.end(), "fake") != names.end();
  // The fake node's, so that a fake run's profile is the same every time.
  const double process_bytes = fake ? default_fake_spec().process_bytes : resident;
  if (fake && names.size() > 1) {
    throw InputError("--backend", "'fake' cannot be combined with other backends");
  }
  const bool host = fake || std::find(names.begin(), names.end(), "host") != names.end();
  const bool cuda = std::find(names.begin(), names.end(), "cuda") != names.end();
  // Fail before measuring: every backend checks that it can run here, then the base.
  std::vector<std::unique_ptr<Backend>> backends;
  for (const std::string& n : names) backends.push_back(make_backend(n));
  for (auto& b : backends) b->check(g, o.probe);
  std::optional<hardware::Profile> base;
  std::string base_label = "built from the measurements (cpu)";
  if (!o.base.empty()) {
    base = load_base(o.base);
    base_label = o.base + " (" + base->file + ")";
  } else if (!host && !cuda) {
    throw InputError("--base", "is needed: backends " + o.backends +
                                   " measure no node (add host to --backend, or pass --base "
                                   "<profile>)");
  }
  c.backends = names;

  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ",") + n;
  char line[200];
  std::snprintf(line, sizeof line, "backends %s, sweep %s, %d rank(s) on %d node(s)", list.c_str(),
                sweep_name(o.probe.sweep), g.size(), g.nodes());
  progress.note(line);
  for (auto& b : backends) {
    b->measure(g, o.probe, progress, &c.measurements);
    c.measurements.backends.push_back(b->name());
  }

  const Measurements& m = c.measurements;
  nlohmann::json prov;
  prov["tool"] = "zplan calibrate";
  prov["zplan_version"] = ZPLAN_VERSION;
  prov["date"] = o.date.empty() ? utc_now() : o.date;
  prov["command"] = o.command_line.empty() ? own_command_line() : o.command_line;
  prov["hosts"] = g.hosts();
  prov["ranks"] = g.size();
  prov["backends"] = names;
  prov["sweep"] = sweep_name(o.probe.sweep);
  if (m.host.measured) {
    prov["cpu"] = {{"model", m.host.cpu_model},
                   {"cores", m.host.cpu_cores},
                   {"memory_gib", m.host.memory_bytes / kGiB},
                   {"ranks_per_node", m.host.ranks_per_node},
                   {"threads_per_rank", m.host.threads_per_rank}};
  }
  if (m.device.measured) {
    prov["devices"] = {{"name", m.device.name},
                       {"compute_capability", std::to_string(m.device.cc_major) + "." +
                                                  std::to_string(m.device.cc_minor)},
                       {"per_node", m.device.devices_per_node}};
  }
  nlohmann::json versions = m.versions;
  if (!g.library().empty()) versions["mpi"] = g.library();
  prov["versions"] = versions;
  prov["build"] = build_features();
  prov["env"] = relevant_environment();
  nlohmann::json raw = nlohmann::json::object();
  if (m.host.measured) {
    nlohmann::json rates = nlohmann::json::array(), gemms = nlohmann::json::array();
    for (const RateRow& r : m.host.rates) rates.push_back(rate_json(r));
    for (const GemmRow& r : m.host.gemms) gemms.push_back(gemm_json(r));
    raw["host"] = {{"rates", rates},
                   {"gemms", gemms},
                   {"gemm_library", m.host.gemm_library},
                   {"gemm_call_s", m.host.gemm_call_s},
                   {"nvme_engine", m.host.nvme_engine},
                   {"pinned", m.host.pinned_note},
                   {"adam_isa", m.host.adam_isa}};
  }
  if (m.device.measured) {
    nlohmann::json rates = nlohmann::json::array(), gemms = nlohmann::json::array();
    for (const RateRow& r : m.device.rates) rates.push_back(rate_json(r));
    for (const GemmRow& r : m.device.gemms) gemms.push_back(gemm_json(r));
    raw["device"] = {{"rates", rates}, {"gemms", gemms}};
  }
  prov["raw"] = raw;
  c.provenance = prov;

  if (g.rank() != 0) return c;
  if (!base.has_value() && m.device.measured) {
    std::string stock = stock_profile_for_device(m.device.name, m.device.memory_bytes);
    if (stock.empty()) {
      throw InputError("--base", "is needed: no stock profile matches device '" + m.device.name +
                                     "' (pass --base <profile>)");
    }
    base = load_base(stock);
    base_label = stock + " (stock profile matching " + m.device.name + ")";
  }
  BuildInputs in;
  in.measurements = &c.measurements;
  in.base = base;
  in.base_label = base_label;
  in.name = default_name(o, g);
  in.nodes = fake ? 1 : g.nodes();
  in.process_bytes = process_bytes;
  in.provenance = prov;
  c.built = build_profile(in);
  progress.note("fitted " + std::to_string(c.built->collective_fits.size()) +
                " collective tables; profile '" + c.built->profile.name + "' built");
  return c;
}

void print_report(std::ostream& out, const Calibration& c) {
  const Measurements& m = c.measurements;
  char buf[512];
  std::snprintf(buf, sizeof buf, "# zplan calibrate %s, %s, backends", ZPLAN_VERSION,
                c.provenance.value("date", std::string()).c_str());
  out << buf;
  for (const std::string& b : c.backends) out << ' ' << b;
  out << ", sweep " << c.provenance.value("sweep", std::string()) << "\n#\n";

  if (m.host.measured) {
    const HostMeasurements& h = m.host;
    std::snprintf(buf, sizeof buf,
                  "# host: %s, %d CPUs, %.1f GiB; %d rank(s) per node at once, %d thread(s) per "
                  "rank\n",
                  h.cpu_model.c_str(), h.cpu_cores, h.memory_bytes / kGiB, h.ranks_per_node,
                  h.threads_per_rank);
    out << buf;
    out << "# copies: memcpy, caches flushed; pinned = " << h.pinned_note
        << "; triad: STREAM counting; adam: kernels/cpu_adam.h (" << h.adam_isa << ")\n";
    out << "# nvme: " << h.nvme_path << ", " << h.nvme_engine
        << (h.nvme_o_direct ? ", O_DIRECT" : "") << ", 1 MiB blocks, queue depth 8\n";
    print_rates(out, h.rates);
    out << "#\n";
  }
  if (m.device.measured) {
    out << "# cuda: " << m.device.name << "\n";
    print_rates(out, m.device.rates);
    out << "#\n";
  }
  const BuildResult* built = c.built ? &*c.built : nullptr;
  const std::vector<GemmRow>* gemms = nullptr;
  std::string library;
  if (built != nullptr && built->gemm_dtype == "bf16") {
    gemms = &m.device.gemms;
    library = "cuBLAS";
  } else if (m.host.measured) {
    gemms = &m.host.gemms;
    library = m.host.gemm_library;
  }
  if (gemms != nullptr && !gemms->empty()) {
    out << "# gemm: C[m x n] = A[m x k] B[k x n], " << library << ", per rank";
    if (built != nullptr) {
      std::snprintf(buf, sizeof buf, "; peak %.1f GFLOP/s, call overhead %.2f us",
                    built->profile.gpu.peak_flops_per_s / 1e9,
                    built->profile.gpu.kernel_launch_s * 1e6);
      out << buf;
    }
    out << "\n#   dtype  op       m       n       k      time (us)     GFLOP/s  efficiency  "
           "model (us)\n";
    for (const GemmRow& r : *gemms) {
      double eff = 0, model_us = 0;
      if (built != nullptr) {
        const auto& gpu = built->profile.gpu;
        const int bytes = r.dtype == "fp32" ? 4 : 2;
        eff = r.flops_per_s() / hardware::peak_flops_per_s(gpu, bytes);
        model_us = 1e6 * hardware::gemm_time_s(gpu, double(r.m), double(r.n), double(r.k), bytes);
      }
      std::snprintf(buf, sizeof buf, "    %5s  %2s %7lld %7lld %7lld %14.1f %11.1f %11.3f %11.1f\n",
                    r.dtype.c_str(), op_name(r).c_str(), static_cast<long long>(r.m),
                    static_cast<long long>(r.n), static_cast<long long>(r.k), r.time_s * 1e6,
                    r.flops_per_s() / 1e9, eff, model_us);
      out << buf;
    }
    if (built != nullptr && !built->gemm_dtype.empty()) {
      std::snprintf(buf, sizeof buf,
                    "# gemm_efficiency: %zu points; model vs measured: max %.1f %%, median "
                    "%.1f %%\n",
                    built->gemm_curve.points.size(), 100 * built->gemm_error.max_rel,
                    100 * built->gemm_error.median_rel);
      out << buf;
    }
    out << "#\n";
  }
  for (size_t i = 0; i < m.collectives.size(); ++i) {
    const RegimeFit* fit = built != nullptr && i < built->collective_fits.size()
                               ? &built->collective_fits[i]
                               : nullptr;
    print_collective_table(out, m.collectives[i], fit);
  }
  if (built != nullptr) {
    const hardware::Profile& p = built->profile;
    // A CPU rank's peak is tens of GFLOP/s, which TFLOP/s would print as 0.0.
    const bool giga = p.gpu.peak_flops_per_s < 1e12;
    std::snprintf(buf, sizeof buf,
                  "# profile '%s': %s, %d per node, %.1f %s peak, %zu measured table(s), "
                  "%zu number(s) measured\n",
                  p.name.c_str(), p.gpu.name.c_str(), p.node.gpus_per_node,
                  p.gpu.peak_flops_per_s / (giga ? 1e9 : 1e12), giga ? "GFLOP/s" : "TFLOP/s",
                  p.collectives.size(), built->measured.size());
    out << buf;
    for (const std::string& note : m.notes) out << "# note: " << note << '\n';
    for (const std::string& note : built->notes) out << "# note: " << note << '\n';
  }
}

nlohmann::json report_json(const Calibration& c) {
  nlohmann::json j;
  j["provenance"] = c.provenance;
  nlohmann::json tables = nlohmann::json::array();
  for (size_t i = 0; i < c.measurements.collectives.size(); ++i) {
    const CollectiveMeasurement& m = c.measurements.collectives[i];
    nlohmann::json rows = nlohmann::json::array();
    for (const CollectiveRow& r : m.rows) {
      rows.push_back({{"size_bytes", r.bytes},
                      {"count", r.count},
                      {"time_us", r.time_s * 1e6},
                      {"algbw_gbps", r.algbw_bytes_per_s / 1e9},
                      {"busbw_gbps", r.busbw_bytes_per_s / 1e9},
                      {"iters", r.iters}});
    }
    nlohmann::json t = {{"op", hardware::collective_name(m.op)},
                        {"backend", m.backend},
                        {"ranks", m.ranks},
                        {"nodes", m.nodes},
                        {"type", m.type},
                        {"redop", m.redop},
                        {"rows", rows}};
    if (c.built && i < c.built->collective_fits.size()) {
      const RegimeFit& f = c.built->collective_fits[i];
      t["max_rel_error"] = f.max_rel_error;
      t["median_rel_error"] = f.median_rel_error;
    }
    tables.push_back(t);
  }
  j["collectives"] = tables;
  if (c.built) j["profile"] = hardware::profile_to_json(c.built->profile);
  return j;
}

}  // namespace zplan::calibrate
