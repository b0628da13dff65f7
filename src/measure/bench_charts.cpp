#include "measure/bench_charts.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "measure/bench_report.h"

namespace tokenmill {

namespace {

constexpr double kWidth = 640, kHeight = 420;
constexpr double kLeft = 90, kRight = 30, kTop = 50, kBottom = 60;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;

std::string escape(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

const char* phase_color(const std::string& phase) {
  return phase == "prefill" ? "#1f77b4" : phase == "decode" ? "#d62728" : "#2ca02c";
}

// SVG text built element by element; every element is closed where it is opened.
class Svg {
 public:
  explicit Svg(const std::string& title) {
    text_ = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
        kWidth, kHeight);
    label(kWidth / 2, 24, title, "middle", 15);
    line(kLeft, kTop + kPlotHeight, kLeft + kPlotWidth, kTop + kPlotHeight, "black");
    line(kLeft, kTop, kLeft, kTop + kPlotHeight, "black");
  }
  void line(double x1, double y1, double x2, double y2, const char* color, const char* extra = "") {
    text_ += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"{}/>\n",
                         x1, y1, x2, y2, color, extra);
  }
  void polyline(const std::vector<std::pair<double, double>>& points, const char* color) {
    std::string coords;
    for (const auto& [x, y] : points) coords += fmt::format("{:.1f},{:.1f} ", x, y);
    text_ += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", coords,
                         color);
  }
  void dot(double x, double y, const char* color) {
    text_ += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\"/>\n", x, y, color);
  }
  void label(double x, double y, const std::string& text, const char* anchor = "start", int size = 12) {
    text_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" font-size=\"{}\">{}</text>\n", x,
                         y, anchor, size, escape(text));
  }
  void axis_titles(const std::string& x_title, const std::string& y_title) {
    label(kLeft + kPlotWidth / 2, kHeight - 15, x_title, "middle");
    text_ += fmt::format(
        "<text x=\"18\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
        "{0:.1f})\">{1}</text>\n",
        kTop + kPlotHeight / 2, escape(y_title));
  }
  std::string finish() { return text_ + "</svg>\n"; }

 private:
  std::string text_;
};

// Maps [lo, hi] (log10 when `log`) onto [out_lo, out_hi].
struct Scale {
  double lo, hi, out_lo, out_hi;
  bool log;
  double operator()(double v) const {
    const double t =
        log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return out_lo + t * (out_hi - out_lo);
  }
};

double decade_below(double v) { return std::pow(10.0, std::floor(std::log10(v))); }
double decade_above(double v) { return std::pow(10.0, std::ceil(std::log10(v))); }

}  // namespace

std::string throughput_svg(const BenchRun& run) {
  Svg svg("Throughput vs batch size: " + run.model.name);
  std::set<int64_t> batches;
  double top = 0;
  for (const PhaseMeasurement& p : run.phases) {
    batches.insert(p.batch);
    top = std::max(top, p.tokens_per_s());
  }
  top = top > 0 ? top * 1.15 : 1;
  // Batch sizes evenly spaced, in order.
  const std::vector<int64_t> columns(batches.begin(), batches.end());
  const auto x_of = [&](int64_t batch) {
    const auto i = static_cast<double>(std::find(columns.begin(), columns.end(), batch) - columns.begin());
    return kLeft + kPlotWidth * (i + 0.5) / static_cast<double>(columns.size());
  };
  const Scale y{0, top, kTop + kPlotHeight, kTop, false};
  for (int tick = 0; tick <= 5; ++tick) {
    const double v = top * tick / 5;
    svg.line(kLeft - 4, y(v), kLeft + kPlotWidth, y(v), "#dddddd");
    svg.label(kLeft - 8, y(v) + 4, si(v), "end");
  }
  for (const int64_t b : columns) svg.label(x_of(b), kTop + kPlotHeight + 18, std::to_string(b), "middle");
  std::set<std::string> phases;
  for (const PhaseMeasurement& p : run.phases) phases.insert(p.phase);
  double legend_y = kTop + 10;
  for (const std::string& phase : phases) {
    std::vector<std::pair<double, double>> points;
    for (const PhaseMeasurement& p : run.phases)
      if (p.phase == phase) points.emplace_back(x_of(p.batch), y(p.tokens_per_s()));
    std::sort(points.begin(), points.end());
    if (points.size() > 1) svg.polyline(points, phase_color(phase));
    for (const auto& [px, py] : points) svg.dot(px, py, phase_color(phase));
    svg.dot(kLeft + kPlotWidth - 110, legend_y - 4, phase_color(phase));
    svg.label(kLeft + kPlotWidth - 100, legend_y, phase);
    legend_y += 18;
  }
  svg.axis_titles("batch size (sequences)", "tokens/s");
  return svg.finish();
}

std::string roofline_svg(const BenchRun& run) {
  const Ceilings& c = run.ceilings;
  const double ridge = ridge_point(c);
  double x_lo = ridge, x_hi = ridge, y_lo = c.peak_flops;
  std::vector<std::pair<PhaseMeasurement, PhaseMetrics>> points;
  for (const PhaseMeasurement& p : run.phases) {
    const PhaseMetrics m = phase_metrics(p, c);
    points.emplace_back(p, m);
    x_lo = std::min(x_lo, m.intensity);
    x_hi = std::max(x_hi, m.intensity);
    y_lo = std::min(y_lo, m.achieved_flops);
  }
  x_lo = decade_below(x_lo / 2);
  x_hi = decade_above(x_hi * 2);
  y_lo = decade_below(std::min(y_lo / 2, c.read_bandwidth * x_lo));
  const double y_hi = decade_above(c.peak_flops * 2);
  const Scale x{x_lo, x_hi, kLeft, kLeft + kPlotWidth, true};
  const Scale y{y_lo, y_hi, kTop + kPlotHeight, kTop, true};

  Svg svg("Roofline: " + run.model.name);
  for (double v = x_lo; v <= x_hi * 1.001; v *= 10) {
    svg.line(x(v), kTop, x(v), kTop + kPlotHeight + 4, "#dddddd");
    svg.label(x(v), kTop + kPlotHeight + 18, si(v), "middle");
  }
  for (double v = y_lo; v <= y_hi * 1.001; v *= 10) {
    svg.line(kLeft - 4, y(v), kLeft + kPlotWidth, y(v), "#dddddd");
    svg.label(kLeft - 8, y(v) + 4, si(v), "end");
  }
  svg.polyline(
      {{x(x_lo), y(c.read_bandwidth * x_lo)}, {x(ridge), y(c.peak_flops)}, {x(x_hi), y(c.peak_flops)}},
      "black");
  svg.label(x(x_hi) - 4, y(c.peak_flops) - 6, "f32 GEMM peak " + si(c.peak_flops) + "FLOP/s", "end");
  svg.label(x(x_lo) + 6, y(c.read_bandwidth * x_lo) - 8, "read " + si(c.read_bandwidth) + "B/s");
  for (const auto& [p, m] : points) {
    const double px = x(m.intensity), py = y(m.achieved_flops);
    svg.dot(px, py, phase_color(p.phase));
    // The label on the side with more room.
    const bool right_half = px > kLeft + kPlotWidth / 2;
    svg.label(right_half ? px - 8 : px + 8, py + 16,
              fmt::format("{} (batch {}): {:.0f} % of roof", p.phase, p.batch, 100 * m.roofline_fraction),
              right_half ? "end" : "start");
  }
  svg.axis_titles("arithmetic intensity (FLOP/byte)", "FLOP/s");
  return svg.finish();
}

}  // namespace tokenmill
