// loss.svg: the training loss per step (a line) and the validation loss (dots) on one plot,
// plain SVG text (no dependencies), written atomically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tokenmill {

struct LossPoint {
  int64_t step = 0;
  double loss = 0.0;
};

std::string loss_curve_svg(const std::vector<LossPoint>& train, const std::vector<LossPoint>& val);
void write_loss_curve(const std::filesystem::path& path, const std::vector<LossPoint>& train,
                      const std::vector<LossPoint>& val);

}  // namespace tokenmill
