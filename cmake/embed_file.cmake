# Turns a file into C++: a byte array and its size, for assets compiled into the binary.
#
#   cmake -DINPUT=<file> -DOUTPUT=<file.cpp> -DNAME=<identifier> -P embed_file.cmake
#
# writes <file.cpp> defining, in namespace tokenmill::embedded,
#   extern const unsigned char NAME[];     // the file's bytes (no terminating NUL)
#   extern const std::size_t NAME_size;
cmake_minimum_required(VERSION 3.25)

foreach(var INPUT OUTPUT NAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_file.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
if(hex_length EQUAL 0)
  message(FATAL_ERROR "embed_file.cmake: ${INPUT} is empty; there is nothing to embed")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" bytes "${bytes}")

file(CONFIGURE OUTPUT "${OUTPUT}" @ONLY CONTENT
"// Generated from @INPUT@ by cmake/embed_file.cmake; do not edit.
#include <cstddef>

namespace tokenmill::embedded {

extern const unsigned char @NAME@[];
extern const std::size_t @NAME@_size;

const unsigned char @NAME@[] = {
@bytes@
};
const std::size_t @NAME@_size = sizeof @NAME@;

}  // namespace tokenmill::embedded
")
