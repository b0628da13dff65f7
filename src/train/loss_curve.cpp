#include "train/loss_curve.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"

namespace tokenmill {

namespace {

constexpr double kWidth = 640, kHeight = 360, kLeft = 56, kRight = 16, kTop = 16, kBottom = 40;

// The spacing of the step ticks: 1, 2 or 5 times a power of ten, at most 6 intervals.
int64_t step_tick(int64_t max_step) {
  for (int64_t power = 1;; power *= 10)
    for (const int64_t m : {1, 2, 5})
      if (max_step <= 6 * m * power) return m * power;
}

}  // namespace

std::string loss_curve_svg(const std::vector<LossPoint>& train, const std::vector<LossPoint>& val) {
  int64_t max_step = 1;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto* series : {&train, &val})
    for (const LossPoint& p : *series) {
      if (!std::isfinite(p.loss)) continue;
      max_step = std::max(max_step, p.step);
      lo = std::min(lo, p.loss);
      hi = std::max(hi, p.loss);
    }
  if (!(lo <= hi)) lo = 0.0, hi = 1.0;
  if (hi - lo < 1e-9) hi = lo + 1.0;
  const auto x = [&](int64_t step) {
    return kLeft + (kWidth - kLeft - kRight) * static_cast<double>(step) / static_cast<double>(max_step);
  };
  const auto y = [&](double loss) { return kTop + (kHeight - kTop - kBottom) * (hi - loss) / (hi - lo); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kWidth, kHeight);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", kLeft, kTop,
                     kHeight - kBottom);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", kLeft,
                     kHeight - kBottom, kWidth - kRight);
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4.0;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:.2f}</text>\n", kLeft - 4,
                       y(v) + 4, v);
  }
  const int64_t tick = step_tick(max_step);
  for (int64_t step = 0; step <= max_step; step += tick) {
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"black\"/>\n",
                       x(step), kHeight - kBottom, kHeight - kBottom + 4);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x(step),
                       kHeight - kBottom + 15, step);
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">step</text>\n",
                     (kLeft + kWidth - kRight) / 2, kHeight - 6);
  std::string points;
  for (const LossPoint& p : train)
    if (std::isfinite(p.loss)) points += fmt::format("{:.1f},{:.1f} ", x(p.step), y(p.loss));
  svg += fmt::format("<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                     points);
  for (const LossPoint& p : val)
    if (std::isfinite(p.loss))
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#d62728\"/>\n", x(p.step),
                         y(p.loss));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#1f77b4\">train loss</text>\n", kLeft + 8, kTop + 12);
  svg +=
      fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#d62728\">validation loss</text>\n", kLeft + 8, kTop + 26);
  return svg + "</svg>\n";
}

LossCurves read_loss_curves(const std::filesystem::path& metrics) {
  LossCurves curves;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const auto step = j["step"].get<int64_t>();
    if (j.contains("loss") && j["loss"].is_number()) curves.train.push_back({step, j["loss"].get<double>()});
    if (j.contains("val_loss") && j["val_loss"].is_number())
      curves.val.push_back({step, j["val_loss"].get<double>()});
  }
  return curves;
}

void write_loss_curve(const std::filesystem::path& path, const std::vector<LossPoint>& train,
                      const std::vector<LossPoint>& val) {
  const std::string svg = loss_curve_svg(train, val);
  AtomicFile file(path);
  file.write(svg.data(), svg.size());
  file.commit();
}

}  // namespace tokenmill
