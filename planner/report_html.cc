#include "planner/report_html.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"
#include "base/units.h"
#include "planner/text.h"

namespace zplan::planner {

namespace {

constexpr int kGpu = static_cast<int>(sim::Tier::kGpu);
constexpr int kNvme = static_cast<int>(sim::Tier::kNvme);

// Layout (pixels).
constexpr double kPlotWidth = 1240;
constexpr double kScatterHeight = 460;
constexpr double kLeft = 80, kRight = 30, kTop = 20, kBottom = 50;
constexpr size_t kTopBars = 10;  // memory breakdown bars
constexpr double kBarHeight = 22;
constexpr double kLaneHeight = 22;
constexpr double kMinTaskPx = 0.6;  // narrower tasks are merged with their neighbours

const char* const kStageColor[4] = {"#8f8f8f", "#4e79a7", "#59a14f", "#f28e2b"};
const char* const kCategoryColor[sim::kNumCategories] = {"#4e79a7", "#a0cbe8", "#f28e2b", "#ffbe7d",
                                                         "#59a14f", "#8cd17d", "#b6992d", "#e15759",
                                                         "#ff9d9a", "#79706e", "#bab0ac"};
const char* const kKindColor[sim::kNumTaskKinds] = {
    "#4e79a7", "#e15759", "#ff9d9a", "#59a14f", "#edc948", "#b07aa1", "#9c755f", "#bab0ac",
    "#76b7b2", "#f28e2b", "#ffbe7d", "#8cd17d", "#b6992d", "#499894", "#86bcb6"};

std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// A "nice" tick step (1, 2 or 5 x 10^k) giving about `n` ticks up to `max`.
double tick_step(double max, int n) {
  if (max <= 0) return 1;
  double raw = max / n;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

std::string tick_label(double v) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 1e6) return strformat("%gM", v / 1e6);
  if (std::fabs(v) >= 1e3) return strformat("%gk", v / 1e3);
  return strformat("%g", v);
}

std::string time_label(double s) {
  if (s == 0) return "0";
  if (s >= 1) return strformat("%g s", s);
  if (s >= 1e-3) return strformat("%g ms", s * 1e3);
  return strformat("%g us", s * 1e6);
}

std::string knob_summary(const Candidate& c) {
  std::string s = short_description(c);
  if (c.stage() > 0) {
    s += ", overlap_comm " + format_knob_value(Knob::kOverlapComm, c[Knob::kOverlapComm]);
    s += ", reduce_bucket " + format_knob_value(Knob::kReduceBucket, c[Knob::kReduceBucket]);
  }
  if (c.stage() == 3) {
    s += ", prefetch " + format_knob_value(Knob::kPrefetchBucket, c[Knob::kPrefetchBucket]);
    s += ", persistence " +
         format_knob_value(Knob::kPersistenceThreshold, c[Knob::kPersistenceThreshold]);
    s += ", max_live " + format_knob_value(Knob::kMaxLive, c[Knob::kMaxLive]);
  }
  return s;
}

// A marker for stage (color) and offload level (shape: circle none, square CPU, triangle NVMe).
std::string marker(double x, double y, double r, const Candidate& c, bool filled,
                   const std::string& extra) {
  const char* color = kStageColor[c.stage()];
  std::string fill = filled ? color : "none";
  std::string style = strformat(
      "fill=\"%s\" stroke=\"%s\" stroke-width=\"1.2\" fill-opacity=\"0.75\"", fill.c_str(), color);
  switch (c.offload_level()) {
    case 0:
      return strformat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" %s>", x, y, r, style.c_str()) +
             extra + "</circle>";
    case 1:
      return strformat("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" %s>", x - r,
                       y - r, 2 * r, 2 * r, style.c_str()) +
             extra + "</rect>";
    default:
      return strformat("<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" %s>", x, y - 1.2 * r,
                       x - 1.1 * r, y + 0.9 * r, x + 1.1 * r, y + 0.9 * r, style.c_str()) +
             extra + "</polygon>";
  }
}

std::string scatter(const ReportInput& in) {
  const SearchResult& s = *in.search;
  const Problem& p = *in.problem;
  const double cap = p.cluster.profile.gpu.memory_bytes / kGiB;
  const double usable = cap * (1 - p.headroom);
  double max_mem = cap, max_tps = 0;
  size_t shown = 0;
  for (size_t i = 0; i < s.evals.size(); ++i) {
    const Evaluation& e = s.evals[i];
    if (!e.simulated) continue;
    ++shown;
    max_mem = std::max(max_mem, e.peak_bytes[kGpu] / kGiB);
    max_tps = std::max(max_tps, e.tokens_per_s);
  }
  std::string o;
  o += "<section><h2>Throughput against peak GPU memory</h2>";
  if (shown == 0) {
    o += "<p class=\"note\">No configuration was simulated: every one was ruled out by the "
         "analytic memory bound.</p></section>";
    return o;
  }
  max_mem *= 1.05;
  max_tps *= 1.08;
  const double w = kPlotWidth, h = kScatterHeight;
  const double pw = w - kLeft - kRight, ph = h - kTop - kBottom;
  auto X = [&](double gib_v) { return kLeft + pw * gib_v / max_mem; };
  auto Y = [&](double tps) { return kTop + ph * (1 - tps / max_tps); };
  o += strformat("<svg class=\"plot\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">", w,
                 h, w, h);
  // Axes and grid.
  double xs = tick_step(max_mem, 10), ys = tick_step(max_tps, 6);
  for (double v = 0; v <= max_mem + 1e-9; v += xs) {
    o += strformat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", X(v),
                   kTop, X(v), kTop + ph);
    o += strformat("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"middle\">%s</text>",
                   X(v), kTop + ph + 16, tick_label(v).c_str());
  }
  for (double v = 0; v <= max_tps + 1e-9; v += ys) {
    o += strformat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", kLeft,
                   Y(v), kLeft + pw, Y(v));
    o += strformat("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s</text>",
                   kLeft - 6, Y(v) + 4, tick_label(v).c_str());
  }
  o += strformat("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"frame\"/>",
                 kLeft, kTop, pw, ph);
  o += strformat(
      "<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" text-anchor=\"middle\">peak GPU memory "
      "per GPU (GiB)</text>",
      kLeft + pw / 2, h - 8);
  o += strformat(
      "<text x=\"16\" y=\"%.1f\" class=\"axis\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 16 %.1f)\">tokens/s</text>",
      kTop + ph / 2, kTop + ph / 2);
  // Capacity lines.
  o += strformat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"cap\"/>", X(cap),
                 kTop, X(cap), kTop + ph);
  o += strformat(
      "<text x=\"%.1f\" y=\"%.1f\" class=\"caplabel\" text-anchor=\"end\">capacity %.1f "
      "GiB</text>",
      X(cap) - 4, kTop + 14, cap);
  o += strformat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"usable\"/>",
                 X(usable), kTop, X(usable), kTop + ph);
  o += strformat(
      "<text x=\"%.1f\" y=\"%.1f\" class=\"caplabel\" text-anchor=\"end\">usable (%.0f%% "
      "headroom)</text>",
      X(usable) - 4, kTop + 30, 100 * p.headroom);
  // Points: misses first (underneath), then fitting ones.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < s.evals.size(); ++i) {
      const Evaluation& e = s.evals[i];
      if (!e.simulated || e.fits() != (pass == 1)) continue;
      const Candidate& c = s.candidates[i];
      std::string title =
          "<title>" +
          esc(strformat("%s\n%s tokens/s, GPU peak %.1f GiB%s", knob_summary(c).c_str(),
                        si(e.tokens_per_s).c_str(), e.peak_bytes[kGpu] / kGiB,
                        e.fits() ? "" : " (does not fit)")) +
          "</title>";
      o += marker(X(e.peak_bytes[kGpu] / kGiB), Y(e.tokens_per_s), 4, c, e.fits(), title);
    }
  }
  // The Pareto front.
  if (!s.pareto.empty()) {
    std::string pts;
    for (size_t i : s.pareto) {
      pts += strformat("%.1f,%.1f ", X(s.evals[i].peak_bytes[kGpu] / kGiB),
                       Y(s.evals[i].tokens_per_s));
    }
    o += "<polyline points=\"" + pts + "\" class=\"pareto\"/>";
    for (size_t i : s.pareto) {
      o += strformat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"7\" class=\"paretopt\"/>",
                     X(s.evals[i].peak_bytes[kGpu] / kGiB), Y(s.evals[i].tokens_per_s));
    }
  }
  if (in.chosen && s.evals[*in.chosen].simulated) {
    const Evaluation& e = s.evals[*in.chosen];
    double x = X(e.peak_bytes[kGpu] / kGiB), y = Y(e.tokens_per_s);
    o += strformat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"11\" class=\"chosen\"/>", x, y);
    o += strformat("<text x=\"%.1f\" y=\"%.1f\" class=\"chosenlabel\" text-anchor=\"%s\">%s</text>",
                   x + (x > kLeft + pw * 0.7 ? -16 : 16), y - 12,
                   x > kLeft + pw * 0.7 ? "end" : "start",
                   in.plan != nullptr ? "recommended" : "fastest");
  }
  o += "</svg>";
  // Legend.
  o += "<div class=\"legend\">";
  for (int st = 0; st < 4; ++st) {
    o += strformat("<span><i style=\"background:%s\"></i>ZeRO-%d</span>", kStageColor[st], st);
  }
  o += "<span>&#9679; no offload</span><span>&#9632; CPU offload</span>"
       "<span>&#9650; NVMe offload</span><span>hollow: does not fit</span>"
       "<span><i style=\"background:#d62728\"></i>Pareto front</span></div>";
  o += strformat(
      "<p class=\"note\">%zu simulated configurations shown; %zu ruled out by the analytic "
      "memory bound before simulation are not plotted. Hover a point for its settings.</p>",
      shown, s.stats.pruned);
  o += "</section>";
  return o;
}

std::string memory_bars(const ReportInput& in) {
  const SearchResult& s = *in.search;
  const Problem& p = *in.problem;
  // The chosen config, then the best of each distinct (family, micro-batch, checkpointing) in
  // rank order: configs differing only in bucket sizes would repeat one bar.
  std::vector<size_t> rows;
  std::vector<std::string> seen;
  auto add = [&](size_t i) {
    std::string d = short_description(s.candidates[i]);
    if (std::find(seen.begin(), seen.end(), d) != seen.end()) return;
    seen.push_back(d);
    rows.push_back(i);
  };
  if (in.chosen) add(*in.chosen);
  for (size_t i : s.order) {
    if (rows.size() >= kTopBars) break;
    add(i);
  }
  if (rows.empty()) return "";
  const double cap = p.cluster.profile.gpu.memory_bytes / kGiB;
  double max_mem = cap;
  for (size_t i : rows) max_mem = std::max(max_mem, s.evals[i].peak_bytes[kGpu] / kGiB);
  max_mem *= 1.03;
  const double label_w = 560, bar_w = kPlotWidth - label_w - 200;
  const double h = kTop + rows.size() * (kBarHeight + 8) + 40;
  std::string o = "<section><h2>GPU memory of the top configurations</h2>";
  o += strformat("<svg class=\"plot\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">",
                 kPlotWidth, h, kPlotWidth, h);
  auto X = [&](double g) { return label_w + bar_w * g / max_mem; };
  double y = kTop;
  for (size_t r = 0; r < rows.size(); ++r) {
    const size_t i = rows[r];
    const Evaluation& e = s.evals[i];
    const bool is_chosen = in.chosen && *in.chosen == i;
    std::string label = short_description(s.candidates[i]);
    o += strformat("<text x=\"%.1f\" y=\"%.1f\" class=\"barlabel%s\" text-anchor=\"end\">%s</text>",
                   label_w - 8, y + kBarHeight * 0.7, is_chosen ? " bold" : "", esc(label).c_str());
    double x = label_w;
    const sim::MemoryBreakdown& b = e.at_peak[kGpu];
    for (int c = 0; c < sim::kNumCategories; ++c) {
      double g = b.bytes[c] / kGiB;
      if (g <= 0) continue;
      double wpx = bar_w * g / max_mem;
      o += strformat(
          "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
          "<title>%s: %.2f GiB</title></rect>",
          x, y, wpx, kBarHeight, kCategoryColor[c], esc(category_words(c, p.precision)).c_str(), g);
      x += wpx;
    }
    std::string right = strformat("%.1f GiB", e.peak_bytes[kGpu] / kGiB);
    if (!e.fits()) {
      right += " (does not fit)";
    } else if (e.simulated) {
      right += strformat(", %s tok/s", si(e.tokens_per_s).c_str());
    }
    if (is_chosen) right += in.plan != nullptr ? " \u2190 recommended" : " \u2190 fastest";
    o += strformat("<text x=\"%.1f\" y=\"%.1f\" class=\"tick%s\">%s</text>", x + 6,
                   y + kBarHeight * 0.7, is_chosen ? " bold" : "", esc(right).c_str());
    y += kBarHeight + 8;
  }
  o += strformat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"cap\"/>", X(cap),
                 kTop - 6, X(cap), y);
  o += strformat(
      "<text x=\"%.1f\" y=\"%.1f\" class=\"caplabel\" text-anchor=\"middle\">capacity "
      "%.1f GiB</text>",
      X(cap), y + 16, cap);
  o += "</svg><div class=\"legend\">";
  for (int c = 0; c < sim::kNumCategories; ++c) {
    o += strformat("<span><i style=\"background:%s\"></i>%s</span>", kCategoryColor[c],
                   esc(category_words(c, p.precision)).c_str());
  }
  o += "</div><p class=\"note\">The breakdown at each configuration's GPU peak (the larger of "
       "the analytic bound and the simulated schedule): first the configuration shown in "
       "detail, then the best of each other (family, micro-batch, checkpointing) in rank "
       "order.</p></section>";
  return o;
}

std::string one_timeline(const MicroStepTimeline& m, int gas, double capacity_bytes) {
  // Lanes: the resources that ran something, in Resource order.
  std::vector<int> lanes;
  for (int r = 0; r < sim::kNumResources; ++r) {
    for (const TimelineTask& t : m.tasks) {
      if (static_cast<int>(t.resource) == r) {
        lanes.push_back(r);
        break;
      }
    }
  }
  const double label_w = 150, w = kPlotWidth - label_w - 20;
  const double mem_h = 90;
  const double lanes_h = lanes.size() * (kLaneHeight + 4);
  const double h = 26 + lanes_h + 24 + mem_h + 24;
  const double dur = std::max(m.duration_s, 1e-12);
  auto X = [&](double t) { return label_w + w * t / dur; };
  std::string title;
  if (!m.with_optimizer) {
    title = gas > 2 ? strformat("micro-step 1 of %d (micro-steps 2 to %d look alike)", gas, gas - 1)
                    : strformat("micro-step 1 of %d", gas);
  } else {
    title = gas == 1 ? std::string("the only micro-step")
                     : strformat("micro-step %d of %d", m.micro_step + 1, gas);
    title += strformat(", then the optimizer step (%s)",
                       time_label(m.duration_s - m.optimizer_start_s).c_str());
  }
  std::string o =
      strformat("<h3>%s: %s</h3>", esc(title).c_str(), time_label(m.duration_s).c_str());
  o += strformat("<svg class=\"plot\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">",
                 kPlotWidth, h, kPlotWidth, h);
  // Time axis on top.
  double ts = tick_step(dur, 10);
  for (double v = 0; v <= dur + 1e-12; v += ts) {
    o += strformat("<line x1=\"%.1f\" y1=\"18\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", X(v),
                   X(v), 26 + lanes_h);
    o += strformat("<text x=\"%.1f\" y=\"12\" class=\"tick\" text-anchor=\"middle\">%s</text>",
                   X(v), time_label(v).c_str());
  }
  double y = 26;
  for (int r : lanes) {
    o += strformat("<text x=\"%.1f\" y=\"%.1f\" class=\"barlabel\" text-anchor=\"end\">%s</text>",
                   label_w - 8, y + kLaneHeight * 0.7,
                   esc(sim::resource_name(static_cast<sim::Resource>(r))).c_str());
    o += strformat("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"lane\"/>",
                   label_w, y, w, kLaneHeight);
    // Tasks of this lane in time order; neighbours of one kind closer than a pixel fraction are
    // drawn as one rectangle.
    std::vector<const TimelineTask*> ts_lane;
    for (const TimelineTask& t : m.tasks) {
      if (static_cast<int>(t.resource) == r && t.end_s > t.start_s) ts_lane.push_back(&t);
    }
    std::stable_sort(
        ts_lane.begin(), ts_lane.end(),
        [](const TimelineTask* a, const TimelineTask* b) { return a->start_s < b->start_s; });
    size_t k = 0;
    while (k < ts_lane.size()) {
      const TimelineTask* first = ts_lane[k];
      double start = first->start_s, end = first->end_s;
      size_t count = 1;
      while (k + count < ts_lane.size()) {
        const TimelineTask* nx = ts_lane[k + count];
        if (nx->kind != first->kind || X(nx->start_s) - X(end) > kMinTaskPx) break;
        end = std::max(end, nx->end_s);
        ++count;
      }
      double x0 = X(start), wpx = std::max(kMinTaskPx, X(end) - x0);
      std::string tip =
          strformat("%s%s: %s to %s (%s)", sim::task_kind_name(first->kind),
                    count > 1 ? strformat(" x%zu", count).c_str() : "", time_label(start).c_str(),
                    time_label(end).c_str(), time_label(end - start).c_str());
      o += strformat("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">", x0,
                     y + 1, wpx, kLaneHeight - 2, kKindColor[static_cast<int>(first->kind)]);
      if (wpx >= 3) o += "<title>" + esc(tip) + "</title>";
      o += "</rect>";
      k += count;
    }
    y += kLaneHeight + 4;
  }
  if (m.with_optimizer) {
    o += strformat("<line x1=\"%.1f\" y1=\"18\" x2=\"%.1f\" y2=\"%.1f\" class=\"divider\"/>",
                   X(m.optimizer_start_s), X(m.optimizer_start_s), y);
    o += strformat(
        "<text x=\"%.1f\" y=\"%.1f\" class=\"caplabel\" text-anchor=\"%s\">optimizer "
        "step</text>",
        X(m.optimizer_start_s) + (m.optimizer_start_s > 0.8 * dur ? -4 : 4), y + 12,
        m.optimizer_start_s > 0.8 * dur ? "end" : "start");
  }
  // GPU memory over the micro-step.
  y += 20;
  double max_b = capacity_bytes;
  for (const auto& [t, b] : m.gpu_bytes) max_b = std::max(max_b, b);
  auto MY = [&](double b) { return y + mem_h * (1 - b / max_b); };
  o += strformat(
      "<text x=\"%.1f\" y=\"%.1f\" class=\"barlabel\" text-anchor=\"end\">GPU memory</text>",
      label_w - 8, y + mem_h / 2);
  o += strformat("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"lane\"/>",
                 label_w, y, w, mem_h);
  o += strformat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"cap\"/>", label_w,
                 MY(capacity_bytes), label_w + w, MY(capacity_bytes));
  o += strformat(
      "<text x=\"%.1f\" y=\"%.1f\" class=\"caplabel\" text-anchor=\"end\">%.1f GiB "
      "capacity</text>",
      label_w + w - 4, MY(capacity_bytes) + 12, capacity_bytes / kGiB);
  if (!m.gpu_bytes.empty()) {
    std::string pts = strformat("%.1f,%.1f ", label_w, MY(m.gpu_bytes.front().second));
    double prev = m.gpu_bytes.front().second, peak = 0;
    double last_x = -1;
    for (const auto& [t, b] : m.gpu_bytes) {
      double x = X(t);
      peak = std::max(peak, b);
      // A step line; samples closer than half a pixel are thinned (the peak is kept below).
      if (x - last_x >= 0.5) {
        pts += strformat("%.1f,%.1f %.1f,%.1f ", x, MY(prev), x, MY(b));
        last_x = x;
      }
      prev = b;
    }
    pts += strformat("%.1f,%.1f", label_w + w, MY(prev));
    o += "<polyline points=\"" + pts + "\" class=\"memline\"/>";
    o += strformat("<text x=\"%.1f\" y=\"%.1f\" class=\"tick\">simulated peak %.1f GiB</text>",
                   label_w + 6, y + 12, peak / kGiB);
  }
  o += "</svg>";
  return o;
}

std::string timeline_section(const ReportInput& in) {
  if (in.timeline == nullptr || in.timeline->shown.empty()) return "";
  const StepTimeline& t = *in.timeline;
  std::string o = "<section><h2>Timeline of one rank</h2>";
  o += strformat(
      "<p class=\"note\">Optimizer step %s = %d micro-step%s. Each lane is one resource "
      "of the rank (CUDA streams, copy engines, CPU optimizer threads, NVMe queues); "
      "colors are task kinds. Hover a task for its times.</p>",
      time_label(t.step_time_s).c_str(), t.gas, t.gas == 1 ? "" : "s");
  for (const MicroStepTimeline& m : t.shown) {
    o += one_timeline(m, t.gas, in.problem->cluster.profile.gpu.memory_bytes);
  }
  // Legend of the kinds that appear.
  std::vector<bool> used(sim::kNumTaskKinds, false);
  for (const MicroStepTimeline& m : t.shown) {
    for (const TimelineTask& task : m.tasks) used[static_cast<int>(task.kind)] = true;
  }
  o += "<div class=\"legend\">";
  for (int k = 0; k < sim::kNumTaskKinds; ++k) {
    if (!used[k]) continue;
    o += strformat("<span><i style=\"background:%s\"></i>%s</span>", kKindColor[k],
                   esc(sim::task_kind_name(static_cast<sim::TaskKind>(k))).c_str());
  }
  o += "</div></section>";
  return o;
}

std::string summary_section(const ReportInput& in) {
  const SearchResult& s = *in.search;
  const Problem& p = *in.problem;
  std::string o = "<section class=\"card\">";
  if (!in.chosen) {
    o += "<h2>Nothing fits</h2>";
    if (in.plan != nullptr && in.plan->closest) {
      size_t c = *in.plan->closest;
      o += "<p>Nearest: <b>" + esc(short_description(s.candidates[c])) + "</b> &mdash; " +
           esc(shortfall(p, s.evals[c])) + "</p>";
      o += "<p>What would fit:</p><ul>";
      for (const std::string& line : in.plan->what_would_fit) o += "<li>" + esc(line) + "</li>";
      o += "</ul>";
    }
    return o + "</section>";
  }
  const size_t i = *in.chosen;
  const Candidate& c = s.candidates[i];
  const Evaluation& e = s.evals[i];
  const auto& prof = p.cluster.profile;
  o += strformat("<h2>%s: %s</h2>", in.plan ? "Recommended" : "Fastest that fits",
                 esc(family_name(c)).c_str());
  o += "<p class=\"knobs\">" + esc(knob_summary(c)) + "</p>";
  o += "<div class=\"metrics\">";
  auto metric = [&](const std::string& v, const std::string& label) {
    o += "<div><b>" + esc(v) + "</b><span>" + esc(label) + "</span></div>";
  };
  metric(strformat("%.2f s", e.step_time_s), "step time");
  metric(si(e.tokens_per_s), "tokens/s");
  metric(strformat("%.1f", e.tflops_per_gpu), "TFLOP/s per GPU");
  metric(strformat("%.1f%%", 100 * e.mfu), "MFU");
  metric(strformat("%.1f / %.1f GiB", e.peak_bytes[kGpu] / kGiB, prof.gpu.memory_bytes / kGiB),
         "GPU peak / capacity");
  metric(strformat("%.0f / %.0f GiB", e.host_peak_bytes / kGiB, prof.node.host_memory_bytes / kGiB),
         "host per node");
  if (e.peak_bytes[kNvme] > 0) {
    metric(strformat("%.0f / %.0f GiB", e.peak_bytes[kNvme] / kGiB,
                     prof.node.nvme_capacity_bytes / kGiB),
           "NVMe per node");
  }
  o += "</div>";
  if (in.plan != nullptr) {
    o += "<p><b>Why it wins:</b> " + esc(in.plan->why) + "</p>";
    for (const std::string& n : in.plan->notes) o += "<p>" + esc(n) + "</p>";
    if (!in.plan->alternatives.empty()) {
      o += "<table><tr><th>alternative</th><th>tokens/s</th><th>GPU peak</th><th>why it "
           "loses</th></tr>";
      for (const Alternative& a : in.plan->alternatives) {
        const Evaluation& ea = s.evals[a.index];
        o += "<tr><td>" + esc(short_description(s.candidates[a.index])) + "</td><td>" +
             (ea.simulated ? esc(si(ea.tokens_per_s)) : "&ndash;") + "</td><td>" +
             esc(gib(ea.peak_bytes[kGpu])) + "</td><td>" + esc(a.why) + "</td></tr>";
      }
      o += "</table>";
    }
    if (!in.plan->needs.empty()) {
      o += "<p><b>Outside ds_config.json:</b></p><ul>";
      for (const std::string& n : in.plan->needs) o += "<li>" + esc(n) + "</li>";
      o += "</ul>";
    }
  } else {
    o += "<p><b>What binds it:</b> " + esc(what_binds(e)) + "</p>";
  }
  return o + "</section>";
}

constexpr const char* kCss = R"css(
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px 32px;color:#222;
background:#fafafa;max-width:1320px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:0 0 10px}h3{font-size:14px;
margin:14px 0 4px;font-weight:600}
p.sub{color:#555;margin:0 0 16px;font-size:13px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:14px 18px;margin:0 0 18px}
.card .knobs{font-family:Menlo,Consolas,monospace;font-size:12.5px;color:#333}
.metrics{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.metrics div{border:1px solid #e3e3e3;border-radius:5px;padding:6px 12px;min-width:120px}
.metrics b{display:block;font-size:18px}.metrics span{font-size:12px;color:#666}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0}
td,th{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
ul{font-size:13px;margin:4px 0 0;padding-left:20px}li{margin:2px 0}
p{font-size:13.5px}p.note{font-size:12px;color:#666;margin:6px 0 0}
pre{font-size:12px;background:#f6f6f6;padding:10px;border-radius:4px;overflow:auto}
svg.plot{display:block;font-size:11px}
.grid{stroke:#eee;stroke-width:1}.frame{fill:none;stroke:#bbb}
.tick{fill:#555;font-size:11px}.axis{fill:#333;font-size:12px}
.cap{stroke:#c0392b;stroke-width:1.5;stroke-dasharray:6 4}
.usable{stroke:#e67e22;stroke-width:1.2;stroke-dasharray:3 3}
.caplabel{fill:#c0392b;font-size:11px}
.pareto{fill:none;stroke:#d62728;stroke-width:2}
.paretopt{fill:none;stroke:#d62728;stroke-width:1.5}
.chosen{fill:none;stroke:#111;stroke-width:2.5}.chosenlabel{font-size:12px;font-weight:600}
.barlabel{fill:#333;font-size:11.5px}.bold{font-weight:700}
.lane{fill:#f7f7f7;stroke:#e5e5e5}.divider{stroke:#c0392b;stroke-width:1.5}
.memline{fill:none;stroke:#1f77b4;stroke-width:1.3}
.legend{font-size:12px;color:#444;margin:6px 0 0}
.legend span{margin-right:14px;white-space:nowrap;display:inline-block}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px;
border-radius:2px}
)css";

}  // namespace

std::string render_report_html(const ReportInput& in) {
  const SearchResult& s = *in.search;
  const Problem& p = *in.problem;
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  o += "<title>" + esc(in.title) + "</title><style>" + kCss + "</style></head><body>\n";
  o += "<h1>" + esc(in.title) + "</h1>";
  o +=
      "<p class=\"sub\">" +
      esc(strformat(
          "%s; global batch %lld samples (%s tokens) = %lld per GPU, seq %lld, %s; "
          "search: %zu configurations generated, %zu pruned by the analytic memory bound, "
          "%zu simulated, %zu fit with %.0f%% headroom",
          sim::precision_name(p.precision), static_cast<long long>(s.space.batch.global_batch),
          si(static_cast<double>(s.space.batch.global_batch * p.workload.seq_len)).c_str(),
          static_cast<long long>(s.space.batch.per_gpu), static_cast<long long>(p.workload.seq_len),
          (std::string("attention ") + sim::attention_name(p.workload.attention)).c_str(), s.stats.generated,
          s.stats.pruned, s.stats.simulated, s.stats.fitting, 100 * p.headroom)) +
      "</p>\n";
  o += summary_section(in) + "\n";
  o += scatter(in) + "\n";
  o += memory_bars(in) + "\n";
  o += timeline_section(in) + "\n";
  if (!in.ds_config_json.empty()) {
    o += "<section><h2>ds_config.json</h2><pre>" + esc(in.ds_config_json) + "</pre></section>\n";
  }
  o += "</body></html>\n";
  return o;
}

}  // namespace zplan::planner
