// Which sanitizer the emulation is built under, and AddressSanitizer's poisoning (no-ops
// without it): memory a kernel must not touch (shared memory beyond what a block has).
#pragma once

#include <cstddef>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define CUDA_EMU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define CUDA_EMU_TSAN 1
#endif

#ifdef CUDA_EMU_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace cuda_emu {

inline void poison(const void* memory, size_t bytes) {
#ifdef CUDA_EMU_ASAN
  ASAN_POISON_MEMORY_REGION(memory, bytes);
#else
  (void)memory, (void)bytes;
#endif
}

inline void unpoison(const void* memory, size_t bytes) {
#ifdef CUDA_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(memory, bytes);
#else
  (void)memory, (void)bytes;
#endif
}

}  // namespace cuda_emu
