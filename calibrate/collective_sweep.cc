#include "calibrate/collective_sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "base/units.h"
#include "base/input_error.h"

namespace zplan::calibrate {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The standard error of the median of `blocks`, relative to it: 1.2533 sd / sqrt(k) (the median
// of k normal samples is sqrt(pi/2) times as variable as their mean). 0 for fewer than 2 blocks.
double relative_standard_error(const std::vector<double>& blocks) {
  const size_t k = blocks.size();
  if (k < 2) return 0;
  double mean = 0;
  for (double b : blocks) mean += b / double(k);
  double var = 0;
  for (double b : blocks) var += (b - mean) * (b - mean) / double(k - 1);
  const double m = median(blocks);
  return m > 0 ? 1.2533 * std::sqrt(var / double(k)) / m : 0;
}

// nccl-tests' time column: fewer decimals as the number grows (src/common.cu).
std::string time_text(double us) {
  char buf[32];
  if (us >= 10000.0) {
    std::snprintf(buf, sizeof buf, "%9.0f", us);
  } else if (us >= 100.0) {
    std::snprintf(buf, sizeof buf, "%9.1f", us);
  } else {
    std::snprintf(buf, sizeof buf, "%9.2f", us);
  }
  return buf;
}

}  // namespace

double bus_factor(hardware::Collective op, int ranks) {
  const double n = ranks;
  switch (op) {
    case hardware::Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case hardware::Collective::kAllGather:
    case hardware::Collective::kReduceScatter:
      return (n - 1) / n;
  }
  return 1.0;
}

CollectiveSize collective_size(hardware::Collective op, double bytes, int ranks, int type_bytes) {
  CollectiveSize s;
  if (op == hardware::Collective::kAllReduce) {
    s.count = static_cast<int64_t>(bytes / type_bytes);
    s.bytes = double(s.count) * type_bytes;
  } else {
    s.count = static_cast<int64_t>(bytes / (double(type_bytes) * ranks));
    s.bytes = double(s.count) * type_bytes * ranks;
  }
  return s;
}

std::vector<double> geometric_sizes(double min_bytes, double max_bytes, double factor) {
  std::vector<double> sizes;
  for (double b = min_bytes; b <= max_bytes * (1 + 1e-12); b *= factor) sizes.push_back(b);
  return sizes;
}

SweepSettings sweep_settings(const ProbeOptions& o, bool gpu) {
  SweepSettings s;
  switch (o.sweep) {
    case Sweep::kTiny:
      s.min_bytes = 8;
      s.max_bytes = 64 * 1024;
      s.factor = 4;
      s.warmup_iters = 1;
      s.repeats = 1;
      s.target_block_s = 2e-4;
      s.max_iters = 20;
      break;
    case Sweep::kQuick:
      break;  // the defaults of SweepSettings
    case Sweep::kFull:
      s.max_bytes = gpu ? 8 * kGiB : 1 * kGiB;
      s.repeats = 7;
      s.target_block_s = 0.02;
      s.max_iters = 10000;
      break;
  }
  if (o.min_bytes > 0) s.min_bytes = o.min_bytes;
  if (o.max_bytes > 0) s.max_bytes = o.max_bytes;
  if (o.step_factor > 0) s.factor = o.step_factor;
  if (!(s.min_bytes >= 1) || !std::isfinite(s.min_bytes)) {
    throw InputError("--min-bytes", "must be at least 1 byte");
  }
  if (!(s.max_bytes >= s.min_bytes) || !(s.max_bytes <= 64 * kGiB)) {
    throw InputError("--max-bytes", "must be at least --min-bytes and at most 64 GiB");
  }
  if (!(s.factor > 1) || !(s.factor <= 1024)) {
    throw InputError("--step-factor", "must be above 1 (and at most 1024)");
  }
  return s;
}

CollectiveMeasurement sweep_collective(CollectiveBench& bench, kernels::Comm& group,
                                       hardware::Collective op, const SweepSettings& settings,
                                       Progress& progress) {
  CollectiveMeasurement m;
  m.backend = bench.backend();
  m.op = op;
  m.ranks = bench.ranks();
  m.nodes = bench.nodes();
  m.redop = op == hardware::Collective::kAllGather ? "none" : "sum";
  const int n = bench.ranks();
  bench.reserve(settings.max_bytes);
  double last_bytes = 0;
  for (double requested :
       geometric_sizes(settings.min_bytes, settings.max_bytes, settings.factor)) {
    CollectiveSize size = collective_size(op, requested, n);
    if (size.count == 0 || size.bytes <= last_bytes) continue;  // nccl-tests skips these too
    last_bytes = size.bytes;

    // Warm-up: the first operation alone estimates the time per operation; the rest of the
    // warm-up runs only when one operation is shorter than a block.
    double first = group.max(bench.run(op, size.count, 1, false));
    double per_op = first;
    if (settings.warmup_iters > 1 && first < settings.target_block_s) {
      int w = settings.warmup_iters - 1;
      per_op = group.max(bench.run(op, size.count, w, false)) / w;
    }
    int iters = static_cast<int>(std::ceil(settings.target_block_s / std::max(per_op, 1e-9)));
    iters = std::clamp(iters, 1, settings.max_iters);

    // Out of place, then in place, as nccl-tests times them.
    double times[2];
    std::vector<double> blocks;
    for (int in_place = 0; in_place < 2; ++in_place) {
      blocks.clear();
      for (int r = 0; r < settings.repeats; ++r) {
        group.barrier();
        double t = bench.run(op, size.count, iters, in_place == 1) / iters;
        blocks.push_back(group.sum(t) / group.size());  // nccl-tests -a 1: average over ranks
      }
      times[in_place] = median(blocks);
    }
    CollectiveRow row;
    row.bytes = size.bytes;
    row.count = size.count;
    row.oop_time_s = times[0];
    row.time_s = times[1];
    row.algbw_bytes_per_s = row.bytes / row.time_s;
    row.busbw_bytes_per_s = row.algbw_bytes_per_s * bus_factor(op, n);
    row.rel_error = relative_standard_error(blocks);
    row.iters = iters;
    m.rows.push_back(row);
  }
  char line[160];
  std::snprintf(line, sizeof line, "%s %s: %zu sizes, %.0f B to %.0f B", m.backend.c_str(),
                hardware::collective_name(op), m.rows.size(),
                m.rows.empty() ? 0.0 : m.rows.front().bytes,
                m.rows.empty() ? 0.0 : m.rows.back().bytes);
  progress.note(line);
  return m;
}

void print_collective_table(std::ostream& out, const CollectiveMeasurement& m,
                            const RegimeFit* fit) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "# %s (%s): %d ranks on %d node%s, %s %s, out of place\n",
                hardware::collective_name(m.op), m.backend.c_str(), m.ranks, m.nodes,
                m.nodes == 1 ? "" : "s", m.type.c_str(), m.redop.c_str());
  out << buf;
  out << "# time: per operation, mean over ranks, median of the timed blocks (nccl-tests "
         "conventions); the profile keeps the in-place times\n";
  out << "#\n";
  out << "#                                                  out-of-place                in-place"
         "\n";
  out << "#       size         count      type   redop      time   algbw   busbw      time   algbw"
         "   busbw\n";
  out << "#        (B)    (elements)                        (us)  (GB/s)  (GB/s)      (us)  (GB/s)"
         "  (GB/s)\n";
  const double factor_n = bus_factor(m.op, m.ranks);
  double busbw_sum = 0;
  for (const CollectiveRow& r : m.rows) {
    const double oop_algbw = r.oop_time_s > 0 ? r.bytes / r.oop_time_s : 0;
    std::snprintf(buf, sizeof buf, "%12.0f  %12lld  %8s  %6s %s  %6.2f  %6.2f %s  %6.2f  %6.2f\n",
                  r.bytes, static_cast<long long>(r.count), m.type.c_str(), m.redop.c_str(),
                  time_text(r.oop_time_s * 1e6).c_str(), oop_algbw / 1e9,
                  oop_algbw * factor_n / 1e9, time_text(r.time_s * 1e6).c_str(),
                  r.algbw_bytes_per_s / 1e9, r.busbw_bytes_per_s / 1e9);
    out << buf;
    busbw_sum += 0.5 * (oop_algbw * factor_n + r.busbw_bytes_per_s) / 1e9;
  }
  std::snprintf(buf, sizeof buf, "# Avg bus bandwidth    : %g\n",
                m.rows.empty() ? 0.0 : busbw_sum / double(m.rows.size()));
  out << buf;
  if (fit == nullptr || fit->regimes.empty()) {
    out << "#\n";
    return;
  }
  std::snprintf(buf, sizeof buf,
                "# fit t = alpha + beta * S (weighted least squares, 1/t^2): %zu regime%s\n",
                fit->regimes.size(), fit->regimes.size() == 1 ? "" : "s");
  out << buf;
  const double factor = bus_factor(m.op, m.ranks);
  for (const auto& g : fit->regimes) {
    double algbw = 1.0 / g.beta_s_per_byte;
    std::snprintf(buf, sizeof buf,
                  "#   S <= %.0f B: alpha %.2f us, beta %.6g us/MB (algbw %.3g GB/s, busbw "
                  "%.3g GB/s)\n",
                  g.max_bytes, g.alpha_s * 1e6, g.beta_s_per_byte * 1e12, algbw / 1e9,
                  algbw * factor / 1e9);
    out << buf;
  }
  std::snprintf(buf, sizeof buf, "# fit error: max %.1f %%, median %.1f %% over %zu sizes\n#\n",
                100 * fit->max_rel_error, 100 * fit->median_rel_error, m.rows.size());
  out << buf;
}

}  // namespace zplan::calibrate
