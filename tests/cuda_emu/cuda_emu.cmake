# The CUDA emulation's build glue (TOKENMILL_CUDA=EMULATE, the cuda-emu preset): the CUDA
# backend's .cu and .cuh files, rewritten by rewrite_for_emulation.py into C++ under the
# build tree, compiled by the C++ compiler with cuda_emu.h force-included, and linked with
# the emulated runtime and cuBLASLt (tokenmill_cuda_emu) instead of NVIDIA's libraries.

set(tokenmill_cuda_emu_dir ${CMAKE_CURRENT_LIST_DIR})
set(tokenmill_cuda_emu_generated ${CMAKE_BINARY_DIR}/cuda_emu_sources)

# tokenmill_emulated_cuda_sources(OUT_VAR TARGET source...): the rewritten C++ of each .cu
# source (in the calling directory) for TARGET, and of every .cuh header there, which must
# shadow the originals on TARGET's include path (tokenmill_cuda_emu_generated, first).
function(tokenmill_emulated_cuda_sources out_var target)
  file(RELATIVE_PATH rel_dir ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  file(GLOB headers RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cuh)
  set(generated "")
  foreach(file IN LISTS headers ARGN)
    set(in ${CMAKE_CURRENT_SOURCE_DIR}/${file})
    if(file MATCHES "\\.cu$")
      set(out ${tokenmill_cuda_emu_generated}/${rel_dir}/${file}.cpp)
    else()
      set(out ${tokenmill_cuda_emu_generated}/${rel_dir}/${file})
    endif()
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${Python3_EXECUTABLE} ${tokenmill_cuda_emu_dir}/rewrite_for_emulation.py ${in} ${out}
      DEPENDS ${in} ${tokenmill_cuda_emu_dir}/rewrite_for_emulation.py
      COMMENT "cuda-emu: rewriting ${rel_dir}/${file}")
    list(APPEND generated ${out})
  endforeach()
  # Each kernel file sees the emulation's prelude first. GCC and clang contract no a*b+c
  # into an FMA (nvcc does, unless -fmad=false): the emulated arithmetic is the unfused one.
  set_source_files_properties(${generated} TARGET_DIRECTORY ${target} PROPERTIES
    GENERATED TRUE
    COMPILE_OPTIONS "-include;cuda_emu/cuda_emu.h;-ffp-contract=off;-Wno-unknown-pragmas")
  # The target may live in another directory, which sees the outputs but not their rules.
  add_custom_target(${target}_emulated_sources DEPENDS ${generated})
  add_dependencies(${target} ${target}_emulated_sources)
  set(${out_var} ${generated} PARENT_SCOPE)
endfunction()

find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_subdirectory(${tokenmill_cuda_emu_dir} ${CMAKE_BINARY_DIR}/cuda_emu)
