// Fitting measured tables to the cost model's forms.
//
// Collectives: t = alpha + beta * S per size regime, by weighted least squares with weights
// 1/t^2 (reference/nccl_hardware.md §7.5: sizes span 10^9, so ordinary least squares is ruled by
// the largest points and gives a meaningless alpha; weighting by 1/t^2 minimizes the *relative*
// error). A protocol switch (NCCL's LL -> LL128 -> Simple, MPI's eager -> rendezvous) shows up as
// a kink; the fit splits the sizes into at most 3 contiguous regimes where that lowers the
// weighted error by more than the extra parameters are worth (BIC with a noise floor).
//
// GEMMs: efficiency = achieved FLOP/s / peak per measured shape, as points of a profile's
// gemm_efficiency curve (reference §7.3).
//
// Units: bytes and seconds; beta in seconds per byte.
#ifndef ZPLAN_CALIBRATE_FIT_H_
#define ZPLAN_CALIBRATE_FIT_H_

#include <vector>

#include "calibrate/measurements.h"
#include "hardware/profile.h"

namespace zplan::calibrate {

struct Sample {
  double bytes = 0;
  double seconds = 0;
  double rel_error = 0;  // standard error of `seconds` relative to it; 0 = unknown
};

struct AlphaBeta {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
  double at(double bytes) const { return alpha_s + beta_s_per_byte * bytes; }
};

// The smallest beta a fit returns (a profile's beta must be positive): 1e-15 s/B = 1 PB/s, far
// above any link, so a flat (latency-bound) regime costs nothing per byte in practice.
inline constexpr double kMinBetaSPerByte = 1e-15;

// Weighted least squares (w = 1/t^2) of samples[begin, end), with alpha >= 0 and beta >=
// kMinBetaSPerByte: when the unconstrained optimum breaks a bound, the best fit on that bound.
// One sample: alpha = its time, beta = kMinBetaSPerByte. REQUIRES: begin < end, times > 0.
AlphaBeta fit_alpha_beta(const std::vector<Sample>& samples, size_t begin, size_t end);

// Sum of squared relative errors (the weighted error the fit minimizes) of `fit` on the range.
double weighted_error(const std::vector<Sample>& samples, size_t begin, size_t end,
                      const AlphaBeta& fit);

struct FitSettings {
  int max_regimes = 3;
  int min_points_per_regime = 4;
  // Relative noise below which a better fit is not believed: timing noise of a quiet machine is
  // ~0.5 % (nccl-tests' -I cv% column on idle nodes); splitting to fit less than that fits noise.
  double noise_floor = 0.005;
  // Weight of the parameter penalty. Plain BIC (1) assumes the breakpoints are given; choosing
  // them from the data (the best of ~n splits) lets noise alone lower the error by a third about
  // one time in three, so zplan doubles the penalty: an extra regime must more than halve the
  // error of ~20 sizes.
  double penalty = 2;
};

struct RegimeFit {
  std::vector<hardware::CollectiveTable::Regime> regimes;  // by increasing max_bytes
  double max_rel_error = 0;                                // over the samples, |fit - t| / t
  double median_rel_error = 0;
  // The fitted time: the first regime whose max_bytes >= bytes, else the last.
  double at(double bytes) const;
};

// Fits 1..max_regimes contiguous regimes to `samples` (sorted by increasing bytes, times > 0)
// and keeps the count with the lowest Bayesian information criterion, E = sum of squared
// relative errors, k regimes (2 parameters each plus k-1 breakpoints):
//   E / s^2 + penalty (3k - 1) ln n     when the samples know their noise: s^2 = the mean of their
//                                       rel_error^2 (at least floor^2), the known-variance form;
//   n ln(max(E/n, floor^2)) + penalty (3k - 1) ln n     otherwise (variance estimated from E).
// The first form lets real structure far above the timing noise split even when a few lines
// cannot follow it closely (MPI's curves bend: cache sizes, eager/rendezvous); the second
// needs no noise estimate.
// Each regime has at least min_points_per_regime samples; its max_bytes is its largest sample's
// (the last regime's, the largest measured size). REQUIRES: samples not empty.
RegimeFit fit_regimes(const std::vector<Sample>& samples, const FitSettings& settings = {});

// The samples of a measured table: (S, time) per row.
std::vector<Sample> samples_of(const CollectiveMeasurement& m);

// A gemm_efficiency curve from measured GEMMs. Each shape's efficiency is
//   e = F / (peak * (t - launch))
// so that hardware::gemm_time_s (F / (peak e) + launch) gives back the measured time; e is
// clamped to (0, 1]. Shapes whose FLOPs lie within 10 % of each other are merged (geometric mean
// of F, mean of e), because the curve is a function of F alone and must strictly increase in F;
// F is rounded to 3 significant digits and e to 4.
// `peak_flops_per_s` <= 0: the best measured F / (t - launch) (the "maximum achievable matmul" of
// reference §4.4), so that the best shape has efficiency 1.
struct GemmCurve {
  double peak_flops_per_s = 0;
  std::vector<hardware::GemmEfficiencyPoint> points;  // by strictly increasing flops
};
GemmCurve fit_gemm_curve(const std::vector<GemmRow>& rows, double peak_flops_per_s,
                         double launch_s);

// Max and median of |predicted - measured| / measured.
struct FitError {
  double max_rel = 0;
  double median_rel = 0;
};
FitError relative_errors(const std::vector<double>& predicted, const std::vector<double>& measured);

}  // namespace zplan::calibrate

#endif  // ZPLAN_CALIBRATE_FIT_H_
