// loss.svg: the training loss per step (a line) and the validation loss (dots) on one plot,
// the x axis labelled with steps (ticks at round numbers), plain SVG text (no dependencies),
// written atomically. A resumed run draws its whole history: read_loss_curves() takes the
// points back from its metrics.jsonl.
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

struct LossCurves {
  std::vector<LossPoint> train, val;
};
// The points of a run's metrics.jsonl: its "loss" lines (train) and "val_loss" lines
// (validation), in file order; none when the file is missing. Lines that are not JSON objects
// are skipped.
LossCurves read_loss_curves(const std::filesystem::path& metrics);

}  // namespace tokenmill
