// loss.svg: the x axis carries step numbers, and a resumed run draws its whole history (the
// steps before the resume come back from metrics.jsonl).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "support/temp_dir.h"
#include "train/loss_curve.h"
#include "train/tiny_run.h"
#include "train/trainer.h"

namespace tokenmill {
namespace {

using testing::TempDir;

// The number of points of the train loss line.
size_t train_points(const std::string& svg) {
  const size_t at = svg.find("<polyline");
  if (at == std::string::npos) return 0;
  const size_t begin = svg.find("points=\"", at) + 8;
  const std::string points = svg.substr(begin, svg.find('"', begin) - begin);
  size_t n = 0;
  for (const char c : points) n += c == ',' ? 1 : 0;
  return n;
}

TEST(LossCurve, TheXAxisIsLabelledWithSteps) {
  std::vector<LossPoint> train;
  for (int64_t step = 1; step <= 200; ++step) train.push_back({step, 5.0 - 0.01 * static_cast<double>(step)});
  const std::string svg = loss_curve_svg(train, {{0, 5.1}, {200, 3.2}});
  for (const char* label :
       {">0</text>", ">50</text>", ">100</text>", ">150</text>", ">200</text>", ">step</text>"})
    EXPECT_NE(svg.find(label), std::string::npos) << label << "\n" << svg;
  EXPECT_EQ(train_points(svg), 200u);
  const std::string short_run = loss_curve_svg({{1, 2.0}, {2, 1.5}, {3, 1.2}}, {});
  for (const char* label : {">1</text>", ">2</text>", ">3</text>"})
    EXPECT_NE(short_run.find(label), std::string::npos) << label << "\n" << short_run;
}

TEST(LossCurve, AResumedRunDrawsTheWholeRun) {
  const TempDir dir;
  TrainOptions options = testing::tiny_run_options(dir);
  options.scratch_config = scratch_llama_config(512, 1, 16, 2, 1, 32, 32, 2);
  options.run_dir = dir.path() / "run";
  auto backend = make_cpu_backend();
  std::atomic<bool> stop{false};
  TrainObserver observer;
  observer.on_step = [&](const StepReport& r) { stop = r.step == 3; };
  train(options, *backend, observer, &stop);
  options.resume = true;
  train(options, *backend, {});
  const std::string svg = dir.read("run/loss.svg");
  EXPECT_EQ(train_points(svg), 6u) << svg;
  size_t dots = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) ++dots;
  EXPECT_EQ(dots, 3u);  // validation at steps 0, 3 and 6
  const LossCurves curves = read_loss_curves(options.run_dir / "metrics.jsonl");
  ASSERT_EQ(curves.train.size(), 6u);
  EXPECT_EQ(curves.train.front().step, 1);
  EXPECT_EQ(curves.val.size(), 3u);
}

}  // namespace
}  // namespace tokenmill
