#include "calibrate/fit.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace zplan::calibrate {

namespace {

// Shapes whose FLOPs are closer than this ratio become one point of the efficiency curve.
constexpr double kGemmMergeRatio = 1.10;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double round_significant(double v, int digits) {
  if (!(v > 0)) return v;
  // Multiply or divide by an exact power of ten, never by its (inexact) inverse: 6.71e7 stays
  // 67100000, not 67099999.99999999.
  const int e = static_cast<int>(std::floor(std::log10(v))) - (digits - 1);
  const double p = std::pow(10.0, std::abs(e));
  return e >= 0 ? std::round(v / p) * p : std::round(v * p) / p;
}

struct Segment {
  AlphaBeta fit;
  double error = 0;
};

Segment fit_segment(const std::vector<Sample>& s, size_t begin, size_t end) {
  Segment seg;
  seg.fit = fit_alpha_beta(s, begin, end);
  seg.error = weighted_error(s, begin, end, seg.fit);
  return seg;
}

}  // namespace

AlphaBeta fit_alpha_beta(const std::vector<Sample>& s, size_t begin, size_t end) {
  assert(begin < end && end <= s.size());
  // Weighted means, then the centered sums (two passes: sizes span 10^9 and times 10^6, so the
  // one-pass normal equations lose every digit to cancellation).
  double sw = 0, ss = 0, st = 0;
  for (size_t i = begin; i < end; ++i) {
    double w = 1.0 / (s[i].seconds * s[i].seconds);
    sw += w;
    ss += w * s[i].bytes;
    st += w * s[i].seconds;
  }
  const double s_mean = ss / sw;
  const double t_mean = st / sw;
  double sxx = 0, sxy = 0;
  for (size_t i = begin; i < end; ++i) {
    double w = 1.0 / (s[i].seconds * s[i].seconds);
    double dx = s[i].bytes - s_mean;
    sxx += w * dx * dx;
    sxy += w * dx * (s[i].seconds - t_mean);
  }
  AlphaBeta f;
  if (sxx > 0) {
    f.beta_s_per_byte = sxy / sxx;
    f.alpha_s = t_mean - f.beta_s_per_byte * s_mean;
  } else {  // one size only
    f.beta_s_per_byte = kMinBetaSPerByte;
    f.alpha_s = t_mean - kMinBetaSPerByte * s_mean;
  }
  if (f.beta_s_per_byte < kMinBetaSPerByte) {
    // Flat (latency-bound): the best alpha for the smallest allowed beta.
    f.beta_s_per_byte = kMinBetaSPerByte;
    f.alpha_s = t_mean - kMinBetaSPerByte * s_mean;
  }
  if (f.alpha_s < 0) {
    // Bandwidth-bound through the origin: minimize sum w (beta s - t)^2.
    double sst = 0, sss = 0;
    for (size_t i = begin; i < end; ++i) {
      double w = 1.0 / (s[i].seconds * s[i].seconds);
      sst += w * s[i].bytes * s[i].seconds;
      sss += w * s[i].bytes * s[i].bytes;
    }
    f.alpha_s = 0;
    f.beta_s_per_byte = std::max(kMinBetaSPerByte, sss > 0 ? sst / sss : kMinBetaSPerByte);
  }
  return f;
}

double weighted_error(const std::vector<Sample>& s, size_t begin, size_t end,
                      const AlphaBeta& fit) {
  double e = 0;
  for (size_t i = begin; i < end; ++i) {
    double r = (fit.at(s[i].bytes) - s[i].seconds) / s[i].seconds;
    e += r * r;
  }
  return e;
}

double RegimeFit::at(double bytes) const {
  assert(!regimes.empty());
  for (const auto& g : regimes) {
    if (bytes <= g.max_bytes) return g.alpha_s + g.beta_s_per_byte * bytes;
  }
  const auto& g = regimes.back();
  return g.alpha_s + g.beta_s_per_byte * bytes;
}

RegimeFit fit_regimes(const std::vector<Sample>& s, const FitSettings& settings) {
  assert(!s.empty());
  const size_t n = s.size();
  const size_t m = static_cast<size_t>(std::max(1, settings.min_points_per_regime));
  const double floor2 = settings.noise_floor * settings.noise_floor;
  double noise2 = 0;
  size_t known = 0;
  for (const Sample& x : s) {
    if (x.rel_error > 0) {
      noise2 += x.rel_error * x.rel_error;
      ++known;
    }
  }
  const bool noise_known = known * 2 >= n;  // most sizes had several timed blocks
  noise2 = std::max(known > 0 ? noise2 / double(known) : 0.0, floor2);
  auto score = [&](double error, int k) {
    const double penalty = settings.penalty * (3.0 * k - 1.0) * std::log(double(n));
    if (noise_known) return error / noise2 + penalty;
    return double(n) * std::log(std::max(error / double(n), floor2)) + penalty;
  };

  // Best breakpoints for k = 1, 2, 3 by exhaustive search: n is at most a few dozen sizes.
  std::vector<size_t> best_cuts;  // indices where a new regime starts
  Segment whole = fit_segment(s, 0, n);
  double best_score = score(whole.error, 1);
  if (settings.max_regimes >= 2) {
    for (size_t i = m; i + m <= n; ++i) {
      double e = fit_segment(s, 0, i).error + fit_segment(s, i, n).error;
      double sc = score(e, 2);
      if (sc < best_score) {
        best_score = sc;
        best_cuts = {i};
      }
    }
  }
  if (settings.max_regimes >= 3) {
    for (size_t i = m; i + 2 * m <= n; ++i) {
      double e1 = fit_segment(s, 0, i).error;
      for (size_t j = i + m; j + m <= n; ++j) {
        double e = e1 + fit_segment(s, i, j).error + fit_segment(s, j, n).error;
        double sc = score(e, 3);
        if (sc < best_score) {
          best_score = sc;
          best_cuts = {i, j};
        }
      }
    }
  }

  RegimeFit out;
  std::vector<size_t> bounds = {0};
  bounds.insert(bounds.end(), best_cuts.begin(), best_cuts.end());
  bounds.push_back(n);
  for (size_t r = 0; r + 1 < bounds.size(); ++r) {
    AlphaBeta f = fit_alpha_beta(s, bounds[r], bounds[r + 1]);
    hardware::CollectiveTable::Regime g;
    g.max_bytes = s[bounds[r + 1] - 1].bytes;
    g.alpha_s = f.alpha_s;
    g.beta_s_per_byte = f.beta_s_per_byte;
    out.regimes.push_back(g);
  }
  std::vector<double> predicted, measured;
  for (const Sample& x : s) {
    predicted.push_back(out.at(x.bytes));
    measured.push_back(x.seconds);
  }
  FitError err = relative_errors(predicted, measured);
  out.max_rel_error = err.max_rel;
  out.median_rel_error = err.median_rel;
  return out;
}

std::vector<Sample> samples_of(const CollectiveMeasurement& m) {
  std::vector<Sample> s;
  for (const CollectiveRow& r : m.rows) {
    if (r.time_s > 0 && r.bytes > 0) s.push_back({r.bytes, r.time_s, r.rel_error});
  }
  return s;
}

GemmCurve fit_gemm_curve(const std::vector<GemmRow>& rows, double peak_flops_per_s,
                         double launch_s) {
  struct Point {
    double flops;
    double rate;  // F / (t - launch)
  };
  std::vector<Point> pts;
  for (const GemmRow& r : rows) {
    double compute_s = r.time_s - launch_s;
    if (!(r.flops() > 0) || !(compute_s > 0)) continue;
    pts.push_back({r.flops(), r.flops() / compute_s});
  }
  GemmCurve c;
  if (pts.empty()) return c;
  c.peak_flops_per_s = peak_flops_per_s;
  if (!(c.peak_flops_per_s > 0)) {
    for (const Point& p : pts) c.peak_flops_per_s = std::max(c.peak_flops_per_s, p.rate);
  }
  std::sort(pts.begin(), pts.end(),
            [](const Point& a, const Point& b) { return a.flops < b.flops; });
  size_t i = 0;
  while (i < pts.size()) {
    size_t j = i;
    double log_f = 0, e = 0;
    while (j < pts.size() && pts[j].flops < pts[i].flops * kGemmMergeRatio) {
      log_f += std::log(pts[j].flops);
      e += std::min(1.0, pts[j].rate / c.peak_flops_per_s);
      ++j;
    }
    double count = double(j - i);
    // Rounded for the file's readers: F to 3 significant digits (points are >= 10 % apart), e to
    // 4 (a 0.01 % change of a time).
    double flops = round_significant(std::exp(log_f / count), 3);
    double eff = std::clamp(round_significant(e / count, 4), 1e-6, 1.0);
    if (c.points.empty() || flops > c.points.back().flops) c.points.push_back({flops, eff});
    i = j;
  }
  return c;
}

FitError relative_errors(const std::vector<double>& predicted,
                         const std::vector<double>& measured) {
  assert(predicted.size() == measured.size());
  std::vector<double> rel;
  for (size_t i = 0; i < predicted.size(); ++i) {
    if (measured[i] > 0) rel.push_back(std::fabs(predicted[i] - measured[i]) / measured[i]);
  }
  FitError e;
  for (double r : rel) e.max_rel = std::max(e.max_rel, r);
  e.median_rel = median(rel);
  return e;
}

}  // namespace zplan::calibrate
