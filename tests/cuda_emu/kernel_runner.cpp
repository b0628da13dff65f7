#include "cuda_emu/kernel_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda_emu/fibres.h"
#include "cuda_emu/kernel_context.h"
#include "cuda_emu/sanitizers.h"

namespace cuda_emu {

namespace {

constexpr int kWarpSize = 32;
// Shared memory starts as NaN in every float format (f32, f16 and bf16 alike): a read of
// what no thread of the block wrote shows up in the results.
constexpr unsigned char kUninitialisedByte = 0xff;

// Unwinds a GPU thread's kernel frames when its block has faulted.
struct KernelAbort {};

enum class Wait { kNone, kBarrier, kWarp, kExited };
enum class WarpOp { kShuffle, kVote };

struct GpuThread {
  ThreadContext context;
  std::unique_ptr<Fibre> fibre;
  Wait wait = Wait::kNone;
  int lane = 0;
  int warp = 0;
  // The warp operation it waits at.
  WarpOp op = WarpOp::kShuffle;
  const char* what = "";
  unsigned mask = 0;
  uint64_t offered = 0;
  int source = 0;
  uint64_t received = 0;
};

struct Warp {
  unsigned arrived = 0;  // lanes waiting at a warp operation
  unsigned exited = 0;   // lanes that have returned from the kernel
  unsigned present = 0;  // lanes the block has (the last warp may be partial)
  char sync_tag = 0;     // ThreadSanitizer's address for this warp's exchanges
};

std::string hex(unsigned mask) { return fmt::format("0x{:08x}", mask); }

// The threads of one block at a time, as fibres of the calling OS thread.
class BlockRunner {
 public:
  BlockRunner()
      : stacks_(kGpuThreadStackBytes), static_arena_(kStaticSharedLimit), dynamic_arena_(kOptInSharedLimit) {}

  // Runs block `index` of `grid`; false after a fault, described in `fault`.
  bool run(const Grid& grid, uint3 index, std::string& fault);

  void barrier();
  uint64_t exchange(WarpOp op, unsigned mask, uint64_t offered, int source, const char* what);
  void* static_shared(const void* site, size_t bytes, size_t alignment);
  void* dynamic_shared() { return dynamic_arena_.data(); }
  [[noreturn]] void fail(const std::string& message);

 private:
  void prepare_shared_memory(size_t dynamic_bytes);
  void thread_main(GpuThread& t);
  void complete_warp_operation(Warp& warp, int warp_index, unsigned mask);
  void check_not_aborted() const {
    if (aborted_) throw KernelAbort{};
  }
  std::string describe_deadlock() const;

  StackPool stacks_;
  std::vector<unsigned char> static_arena_;
  std::vector<unsigned char> dynamic_arena_;
  const Grid* grid_ = nullptr;
  BlockCoordinates coordinates_;
  std::vector<GpuThread> threads_;
  std::vector<Warp> warps_;
  std::vector<std::pair<const void*, void*>> static_sites_;
  size_t static_used_ = 0;
  int count_ = 0;
  int at_barrier_ = 0;
  int exited_ = 0;
  bool aborted_ = false;
  std::string fault_;
  char block_start_tag_ = 0, block_done_tag_ = 0, barrier_tag_ = 0;
};

// The block runner and GPU thread the calling OS thread is running.
thread_local BlockRunner* current_runner = nullptr;
thread_local GpuThread* current_gpu_thread = nullptr;

BlockRunner& runner(const char* what) {
  if (current_runner == nullptr) fault_outside_kernel(what);
  return *current_runner;
}

void BlockRunner::prepare_shared_memory(size_t dynamic_bytes) {
  poison(static_arena_.data(), static_arena_.size());
  poison(dynamic_arena_.data(), dynamic_arena_.size());
  unpoison(dynamic_arena_.data(), dynamic_bytes);
  std::memset(dynamic_arena_.data(), kUninitialisedByte, dynamic_bytes);
  static_sites_.clear();
  static_used_ = 0;
}

bool BlockRunner::run(const Grid& grid, uint3 index, std::string& fault) {
  grid_ = &grid;
  coordinates_ = BlockCoordinates{index, grid.block, grid.grid};
  count_ = static_cast<int>(grid.block.x * grid.block.y * grid.block.z);
  at_barrier_ = exited_ = 0;
  aborted_ = false;
  fault_.clear();
  prepare_shared_memory(grid.dynamic_shared_bytes);
  if (threads_.size() < static_cast<size_t>(count_)) threads_.resize(static_cast<size_t>(count_));
  warps_.assign(static_cast<size_t>((count_ + kWarpSize - 1) / kWarpSize), Warp{});
  for (int i = 0; i < count_; ++i) {
    GpuThread& t = threads_[static_cast<size_t>(i)];
    const auto u = static_cast<unsigned>(i);
    t.context = ThreadContext{
        uint3{u % grid.block.x, u / grid.block.x % grid.block.y, u / (grid.block.x * grid.block.y)},
        &coordinates_};
    t.wait = Wait::kNone;
    t.lane = i % kWarpSize;
    t.warp = i / kWarpSize;
    warps_[static_cast<size_t>(t.warp)].present |= 1u << t.lane;
    t.fibre = std::make_unique<Fibre>(stacks_, [this, &t] { thread_main(t); });
  }
  current_runner = this;
  Fibre::release(&block_start_tag_);
  for (;;) {
    bool ran = false, all_done = true;
    for (int i = 0; i < count_; ++i) {
      GpuThread& t = threads_[static_cast<size_t>(i)];
      if (t.fibre->finished()) continue;
      all_done = false;
      if (t.wait != Wait::kNone) continue;
      {
        const Fibre::Untracked bookkeeping;
        current_gpu_thread = &t;
        current_thread = &t.context;
      }
      t.fibre->resume();
      ran = true;
    }
    if (all_done) break;
    if (!ran) {  // every live thread waits for one that never comes: end them all
      const Fibre::Untracked bookkeeping;
      if (!aborted_) fault_ = describe_deadlock();
      aborted_ = true;
      for (int i = 0; i < count_; ++i) threads_[static_cast<size_t>(i)].wait = Wait::kNone;
    }
  }
  current_gpu_thread = nullptr;
  current_thread = nullptr;
  current_runner = nullptr;
  Fibre::acquire(&block_done_tag_);
  for (int i = 0; i < count_; ++i) threads_[static_cast<size_t>(i)].fibre.reset();
  if (aborted_) fault = fault_;
  return !aborted_;
}

void BlockRunner::thread_main(GpuThread& t) {
  Fibre::acquire(&block_start_tag_);
  bool aborted = false;
  {
    const Fibre::Untracked bookkeeping;
    aborted = aborted_;
  }
  try {
    if (!aborted) grid_->thread_body();
  } catch (const KernelAbort&) {
  } catch (const std::exception& e) {
    const Fibre::Untracked bookkeeping;
    if (!aborted_) fault_ = fmt::format("thread {} threw: {}", t.context.thread_idx.x, e.what());
    aborted_ = true;
  }
  Fibre::release(&block_done_tag_);
  const Fibre::Untracked bookkeeping;
  t.wait = Wait::kExited;
  warps_[static_cast<size_t>(t.warp)].exited |= 1u << t.lane;
  ++exited_;
}

void BlockRunner::fail(const std::string& message) {
  {
    const Fibre::Untracked bookkeeping;
    if (!aborted_) {
      const GpuThread& t = *current_gpu_thread;
      fault_ = fmt::format("thread ({},{},{}): {}", t.context.thread_idx.x, t.context.thread_idx.y,
                           t.context.thread_idx.z, message);
    }
    aborted_ = true;
  }
  throw KernelAbort{};
}

void BlockRunner::barrier() {
  GpuThread& me = *current_gpu_thread;
  Fibre::release(&barrier_tag_);
  bool wait = false;
  {
    const Fibre::Untracked bookkeeping;
    check_not_aborted();
    if (exited_ > 0)
      fail(fmt::format("__syncthreads reached after {} of the block's {} threads exited: they never arrive",
                       exited_, count_));
    me.wait = Wait::kBarrier;
    if (++at_barrier_ == count_) {
      at_barrier_ = 0;
      for (int i = 0; i < count_; ++i) threads_[static_cast<size_t>(i)].wait = Wait::kNone;
    }
    wait = me.wait == Wait::kBarrier;
  }
  if (wait) me.fibre->suspend();
  {
    const Fibre::Untracked bookkeeping;
    check_not_aborted();
  }
  Fibre::acquire(&barrier_tag_);
}

uint64_t BlockRunner::exchange(WarpOp op, unsigned mask, uint64_t offered, int source, const char* what) {
  GpuThread& me = *current_gpu_thread;
  Warp& warp = warps_[static_cast<size_t>(me.warp)];
  Fibre::release(&warp.sync_tag);
  bool wait = false;
  {
    const Fibre::Untracked bookkeeping;
    check_not_aborted();
    if ((mask >> me.lane & 1u) == 0)
      fail(fmt::format("{}: lane {} calls it with mask {}, which does not hold the calling lane", what,
                       me.lane, hex(mask)));
    if ((mask & ~warp.present) != 0)
      fail(fmt::format("{}: mask {} names lanes {} that warp {} does not have (the block has {} threads)",
                       what, hex(mask), hex(mask & ~warp.present), me.warp, count_));
    if ((mask & warp.exited) != 0)
      fail(fmt::format("{}: mask {} names lanes {} of warp {} that have exited", what, hex(mask),
                       hex(mask & warp.exited), me.warp));
    if (op == WarpOp::kShuffle && (source < 0 || source >= kWarpSize || (mask >> source & 1u) == 0))
      fail(fmt::format("{}: lane {} reads lane {}, which is not in mask {}", what, me.lane, source,
                       hex(mask)));
    me.op = op;
    me.what = what;
    me.mask = mask;
    me.offered = offered;
    me.source = source;
    me.wait = Wait::kWarp;
    warp.arrived |= 1u << me.lane;
    if ((warp.arrived & mask) == mask) complete_warp_operation(warp, me.warp, mask);
    wait = me.wait == Wait::kWarp;
  }
  if (wait) me.fibre->suspend();
  {
    const Fibre::Untracked bookkeeping;
    check_not_aborted();
  }
  Fibre::acquire(&warp.sync_tag);
  return me.received;
}

void BlockRunner::complete_warp_operation(Warp& warp, int warp_index, unsigned mask) {
  GpuThread* lanes = &threads_[static_cast<size_t>(warp_index * kWarpSize)];
  const GpuThread& me = *current_gpu_thread;
  uint64_t ballot = 0;
  for (int l = 0; l < kWarpSize; ++l) {
    if ((mask >> l & 1u) == 0) continue;
    const GpuThread& t = lanes[l];
    if (t.mask != mask || t.op != me.op || std::strcmp(t.what, me.what) != 0)
      fail(fmt::format(
          "lanes of warp {} meet at different warp operations: lane {} at {} with mask {}, lane {} at "
          "{} with mask {}",
          warp_index, me.lane, me.what, hex(mask), l, t.what, hex(t.mask)));
    if (t.offered != 0) ballot |= uint64_t{1} << l;
  }
  for (int l = 0; l < kWarpSize; ++l) {
    if ((mask >> l & 1u) == 0) continue;
    GpuThread& t = lanes[l];
    t.received = t.op == WarpOp::kVote ? ballot : lanes[t.source].offered;
    t.wait = Wait::kNone;
  }
  warp.arrived &= ~mask;
}

void* BlockRunner::static_shared(const void* site, size_t bytes, size_t alignment) {
  const Fibre::Untracked bookkeeping;
  check_not_aborted();
  for (const auto& [known, memory] : static_sites_)
    if (known == site) return memory;
  const size_t offset = (static_used_ + alignment - 1) / alignment * alignment;
  if (offset + bytes > kStaticSharedLimit)
    fail(fmt::format("the block's static __shared__ variables need {} bytes, more than the {} a block has",
                     offset + bytes, kStaticSharedLimit));
  void* memory = static_arena_.data() + offset;
  unpoison(memory, bytes);
  std::memset(memory, kUninitialisedByte, bytes);
  static_used_ = offset + bytes;
  static_sites_.emplace_back(site, memory);
  return memory;
}

std::string BlockRunner::describe_deadlock() const {
  int at_warp = 0;
  std::string warps;
  for (size_t w = 0; w < warps_.size(); ++w) {
    const Warp& warp = warps_[w];
    if (warp.arrived == 0) continue;
    at_warp += __builtin_popcount(warp.arrived);
    const GpuThread& first = threads_[w * kWarpSize + static_cast<size_t>(__builtin_ctz(warp.arrived))];
    if (warps.size() < 400)
      warps += fmt::format("; warp {}: lanes {} at {} with mask {}, lanes {} exited", w, hex(warp.arrived),
                           first.what, hex(first.mask), hex(warp.exited));
  }
  return fmt::format(
      "deadlock: of the block's {} threads, {} wait at __syncthreads, {} at a warp operation, {} exited: a "
      "barrier "
      "or warp operation that part of the block never reaches{}",
      count_, at_barrier_, at_warp, exited_, warps);
}

// The OS threads that run a grid's blocks: the caller and kWorkers - 1 helpers.
class Workers {
 public:
  explicit Workers(int helpers) {
    for (int i = 0; i < helpers; ++i) threads_.emplace_back([this] { serve(); });
  }
  int count() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs `job` on every worker (the caller too) and returns when all have returned.
  void run(const std::function<void()>& job) {
    if (threads_.empty()) {
      job();
      return;
    }
    {
      const std::lock_guard lock(mutex_);
      job_ = &job;
      ++generation_;
      running_ = static_cast<int>(threads_.size());
    }
    wake_.notify_all();
    job();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
    job_ = nullptr;
  }

 private:
  void serve() {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      const std::function<void()>* job = job_;
      lock.unlock();
      (*job)();
      lock.lock();
      if (--running_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void()>* job_ = nullptr;
  uint64_t generation_ = 0;
  int running_ = 0;
};

// TOKENMILL_CUDA_EMU_WORKERS OS threads run blocks (default 2: blocks of one grid then run
// at the same time, so ThreadSanitizer sees races between blocks too).
Workers& workers() {
  static Workers* pool = [] {
    int count = 2;
    if (const char* value = std::getenv("TOKENMILL_CUDA_EMU_WORKERS")) count = std::max(1, std::atoi(value));
    return new Workers(count - 1);  // lives as long as the process: helpers never exit
  }();
  return *pool;
}

BlockRunner& this_thread_runner() {
  thread_local std::unique_ptr<BlockRunner> runner;
  if (!runner) runner = std::make_unique<BlockRunner>();
  return *runner;
}

}  // namespace

void fault_outside_kernel(const char* what) {
  std::fprintf(stderr, "cuda-emu: %s used outside a kernel\n", what);
  std::abort();
}

void block_barrier() { runner("__syncthreads").barrier(); }

uint64_t warp_shuffle(unsigned mask, uint64_t bits, int source, const char* what) {
  return runner(what).exchange(WarpOp::kShuffle, mask, bits, source, what);
}

unsigned warp_ballot(unsigned mask, bool predicate, const char* what) {
  return static_cast<unsigned>(runner(what).exchange(WarpOp::kVote, mask, predicate ? 1 : 0, 0, what));
}

void* static_shared_memory(const void* site, size_t bytes, size_t alignment) {
  return runner("__shared__").static_shared(site, bytes, alignment);
}

void* dynamic_shared_memory() { return runner("extern __shared__").dynamic_shared(); }

std::string run_grid(const Grid& grid) {
  const uint64_t blocks = uint64_t{grid.grid.x} * grid.grid.y * grid.grid.z;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::string fault;
  const std::function<void()> job = [&] {
    BlockRunner& runner = this_thread_runner();
    for (uint64_t b = next++; b < blocks && !failed; b = next++) {
      const uint3 index{static_cast<unsigned>(b % grid.grid.x),
                        static_cast<unsigned>(b / grid.grid.x % grid.grid.y),
                        static_cast<unsigned>(b / (uint64_t{grid.grid.x} * grid.grid.y))};
      std::string block_fault;
      if (runner.run(grid, index, block_fault)) continue;
      const std::lock_guard lock(mutex);
      if (fault.empty()) fault = fmt::format("block ({},{},{}), {}", index.x, index.y, index.z, block_fault);
      failed = true;
    }
  };
  if (blocks == 1)
    job();
  else
    workers().run(job);
  return fault;
}

}  // namespace cuda_emu
