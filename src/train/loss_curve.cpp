#include "train/loss_curve.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/atomic_file.h"

namespace tokenmill {

namespace {

constexpr double kWidth = 640, kHeight = 360, kLeft = 56, kRight = 16, kTop = 16, kBottom = 40;

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
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">step (last {})</text>\n",
                     (kLeft + kWidth - kRight) / 2, kHeight - 12, max_step);
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

void write_loss_curve(const std::filesystem::path& path, const std::vector<LossPoint>& train,
                      const std::vector<LossPoint>& val) {
  const std::string svg = loss_curve_svg(train, val);
  AtomicFile file(path);
  file.write(svg.data(), svg.size());
  file.commit();
}

}  // namespace tokenmill
