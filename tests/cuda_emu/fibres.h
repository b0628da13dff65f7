// The GPU threads of one emulated block as fibres (Boost.Context) on one OS thread: a
// fibre runs until it blocks (at a barrier or a warp exchange) or ends, then the block's
// scheduler resumes the next. Switches are announced to AddressSanitizer (which must know
// which stack is live) and to ThreadSanitizer (which then sees each GPU thread as a thread
// of its own, ordered only by the barriers and exchanges the emulation reports to it).
#pragma once

#include <boost/context/fiber.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace cuda_emu {

// Fixed-size stacks with a guard page below each, mapped once and reused (most of a stack's
// pages are never touched, so the mapping costs address space, not memory).
class StackPool {
 public:
  explicit StackPool(size_t stack_bytes);
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  boost::context::stack_context take();
  void give_back(const boost::context::stack_context& stack) noexcept;

 private:
  size_t bytes_;
  std::vector<void*> mappings_;
  std::vector<boost::context::stack_context> free_;
};

// A fibre: `body` runs on its own stack the first time the scheduler resumes it.
class Fibre {
 public:
  Fibre() = default;
  Fibre(StackPool& stacks, std::function<void()> body);
  ~Fibre();
  Fibre(const Fibre&) = delete;
  Fibre& operator=(const Fibre&) = delete;

  // From the scheduler: runs the fibre until it suspends or ends.
  void resume();
  // From inside the fibre: back to the scheduler, until resumed.
  void suspend();
  bool finished() const { return !context_; }

  // While one lives, ThreadSanitizer ignores this GPU thread's memory accesses: for the
  // emulation's own bookkeeping, which the scheduler and the GPU threads share without the
  // ordering a kernel's data needs.
  class Untracked {
   public:
    Untracked();
    ~Untracked();
    Untracked(const Untracked&) = delete;
    Untracked& operator=(const Untracked&) = delete;
  };

  // ThreadSanitizer's happens-before edges, at an address the caller chooses (no-ops in
  // builds without it): release before the other side's acquire.
  static void release(const void* address);
  static void acquire(const void* address);

 private:
  boost::context::fiber context_;    // the fibre, while suspended
  boost::context::fiber scheduler_;  // the scheduler, while the fibre runs
  std::function<void()> body_;
  boost::context::stack_context stack_{};
  const void* scheduler_stack_bottom_ = nullptr;
  size_t scheduler_stack_size_ = 0;
  void* tsan_fibre_ = nullptr;
  void* tsan_scheduler_ = nullptr;
};

}  // namespace cuda_emu
