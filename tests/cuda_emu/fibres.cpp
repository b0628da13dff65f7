#include "cuda_emu/fibres.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "cuda_emu/sanitizers.h"

#ifdef CUDA_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CUDA_EMU_TSAN
#include <sanitizer/tsan_interface.h>
// ThreadSanitizer's dynamic annotations (exported by its runtime).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace cuda_emu {

namespace ctx = boost::context;

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "cuda-emu: %s\n", what);
  std::abort();
}

// Announces a switch to the stack [bottom, bottom + size) (AddressSanitizer: before the
// switch; `fake_stack` null when the current fibre ends).
void start_switch(void** fake_stack, const void* bottom, size_t size) {
#ifdef CUDA_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}

// After the switch: the stack switched from (AddressSanitizer).
void finish_switch(void* fake_stack, const void** from_bottom, size_t* from_size) {
#ifdef CUDA_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, from_bottom, from_size);
#else
  (void)fake_stack, (void)from_bottom, (void)from_size;
#endif
}

void ignore_begin() {
#ifdef CUDA_EMU_TSAN
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
}

void ignore_end() {
#ifdef CUDA_EMU_TSAN
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#endif
}

// ThreadSanitizer: a switch orders nothing (GPU threads are concurrent), except a fibre's
// last, after which the scheduler destroys what the fibre used. This file is compiled
// without ThreadSanitizer's instrumentation (tests/cuda_emu/CMakeLists.txt): instrumented,
// the switch would enter a call on one fibre's shadow stack and leave it on another's.
void tsan_switch(void* to, bool last = false) {
#ifdef CUDA_EMU_TSAN
  __tsan_switch_to_fiber(to, last ? 0 : __tsan_switch_to_fiber_no_sync);
#else
  (void)to, (void)last;
#endif
}

// Boost.Context's stack allocator interface over one stack taken from a pool.
struct PooledStack {
  StackPool* pool;
  ctx::stack_context stack;
  ctx::stack_context allocate() { return stack; }
  void deallocate(ctx::stack_context& s) noexcept { pool->give_back(s); }
};

}  // namespace

StackPool::StackPool(size_t stack_bytes) : bytes_(stack_bytes) {}

StackPool::~StackPool() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (void* m : mappings_) munmap(m, bytes_ + page);
}

ctx::stack_context StackPool::take() {
  if (free_.empty()) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* m = mmap(nullptr, bytes_ + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) die("cannot map a GPU thread's stack");
    if (mprotect(m, page, PROT_NONE) != 0) die("cannot protect a GPU thread's stack guard page");
    mappings_.push_back(m);
    ctx::stack_context s;
    s.size = bytes_;
    s.sp = static_cast<char*>(m) + page + bytes_;  // stacks grow down from sp
    free_.push_back(s);
  }
  ctx::stack_context s = free_.back();
  free_.pop_back();
  unpoison(static_cast<char*>(s.sp) - s.size, s.size);  // a fibre that ended left its frames' poison
  return s;
}

void StackPool::give_back(const ctx::stack_context& stack) noexcept { free_.push_back(stack); }

Fibre::Fibre(StackPool& stacks, std::function<void()> body) : body_(std::move(body)), stack_(stacks.take()) {
#ifdef CUDA_EMU_TSAN
  tsan_fibre_ = __tsan_create_fiber(0);
  tsan_scheduler_ = __tsan_get_current_fiber();
#endif
  context_ = ctx::fiber(std::allocator_arg, PooledStack{&stacks, stack_}, [this](ctx::fiber&& scheduler) {
    scheduler_ = std::move(scheduler);
    finish_switch(nullptr, &scheduler_stack_bottom_, &scheduler_stack_size_);
    body_();
    tsan_switch(tsan_scheduler_, /*last=*/true);
    start_switch(nullptr, scheduler_stack_bottom_, scheduler_stack_size_);
    return std::move(scheduler_);
  });
}

Fibre::~Fibre() {
  if (context_) die("a GPU thread's fibre was destroyed before it ended");
#ifdef CUDA_EMU_TSAN
  if (tsan_fibre_ != nullptr) __tsan_destroy_fiber(tsan_fibre_);
#endif
}

void Fibre::resume() {
  void* fake_stack = nullptr;
  tsan_switch(tsan_fibre_);
  start_switch(&fake_stack, static_cast<char*>(stack_.sp) - stack_.size, stack_.size);
  context_ = std::move(context_).resume();
  finish_switch(fake_stack, nullptr, nullptr);
}

void Fibre::suspend() {
  void* fake_stack = nullptr;
  tsan_switch(tsan_scheduler_);
  start_switch(&fake_stack, scheduler_stack_bottom_, scheduler_stack_size_);
  scheduler_ = std::move(scheduler_).resume();
  finish_switch(fake_stack, nullptr, nullptr);
}

Fibre::Untracked::Untracked() { ignore_begin(); }
Fibre::Untracked::~Untracked() { ignore_end(); }

void Fibre::release(const void* address) {
#ifdef CUDA_EMU_TSAN
  __tsan_release(const_cast<void*>(address));
#else
  (void)address;
#endif
}

void Fibre::acquire(const void* address) {
#ifdef CUDA_EMU_TSAN
  __tsan_acquire(const_cast<void*>(address));
#else
  (void)address;
#endif
}

}  // namespace cuda_emu
