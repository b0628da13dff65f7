#include "backend/cpu/cpu_gemm.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/grain.h"
#include "backend/cpu/scratch.h"
#include "core/parallel.h"

namespace tokenmill::cpu {

namespace {

thread_local Scratch tl_packed_x;                  // caller: x in token tiles, read by the workers
thread_local std::vector<int64_t> tl_first_panel;  // caller: of each product, in the pass
thread_local Scratch tl_worker_panel;              // worker: one packed weight panel

}  // namespace

void gemm(const GemmKernels& kernels, const MatmulArgs& a) { gemm_shared(kernels, std::span(&a, 1)); }

void gemm_shared(const GemmKernels& kernels, std::span<const MatmulArgs> products) {
  const MatmulArgs& x = products.front();  // x, n and k of them all
  const int64_t tile = kernels.tile_tokens, panel_rows = kernels.panel_rows;
  const int64_t tiles = (x.n + tile - 1) / tile;
  // Product p's panels are [first_panel[p], first_panel[p + 1]) of the pass.
  std::vector<int64_t>& first_panel = tl_first_panel;
  first_panel.assign(1, 0);
  for (const MatmulArgs& a : products)
    first_panel.push_back(first_panel.back() + (a.m + panel_rows - 1) / panel_rows);
  const int64_t panels = first_panel.back();
  float* packed = tl_packed_x.floats(kernels.packed_x_floats(tiles, x.k));
  parallel_for_chunks(tiles, grain_for(tile * x.k, kMinElementwiseWork),
                      [&](int64_t b0, int64_t b1) { kernels.pack_x(x, b0, b1, packed); });
  // Enough tasks for every thread: split the tokens when there are few panels.
  const int64_t want = 4 * static_cast<int64_t>(thread_count());
  int64_t splits = panels >= want ? 1 : (want + panels - 1) / panels;
  if (kernels.max_task_tiles > 0)
    splits = std::max(splits, (tiles + kernels.max_task_tiles - 1) / kernels.max_task_tiles);
  if (splits > tiles) splits = tiles;
  const int64_t tasks = panels * splits;
  const int64_t work_per_task = panel_rows * x.k * (x.n / splits + 1);
  // Tasks differ in cost (a last panel or token range may be partial): hand them out as
  // threads come free. Each output is still summed by one task in one fixed order.
  parallel_for_dynamic(tasks, grain_for(work_per_task, kMinMatmulWork), [&](int64_t i0, int64_t i1) {
    float* panel = tl_worker_panel.floats(kernels.panel_buffer_floats(x.k));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t p = i / splits, s = i % splits;
      const auto product = static_cast<size_t>(std::upper_bound(first_panel.begin(), first_panel.end(), p) -
                                               first_panel.begin() - 1);
      kernels.panel(products[product], packed, p - first_panel[product], tiles * s / splits,
                    tiles * (s + 1) / splits, panel);
    }
  });
}

}  // namespace tokenmill::cpu
