// Bad calls are a tokenmill::Error that names the type: rows that are not whole blocks,
// activation formats passed as weights, dtype values with no implementation.
#include <gtest/gtest.h>

#include <vector>

#include "quant_test_util.h"
#include "support/expect_error.h"

namespace tokenmill::quant {
namespace {

using tokenmill::testing::expect_error;

std::vector<float> floats(256, 1.0f);
std::vector<unsigned char> bytes(4096, 0);

TEST(QuantErrors, RowNotAWholeNumberOfBlocks) {
  expect_error([] { dequantize_row(DType::Q4_0, bytes.data(), floats.data(), 33); }, {"q4_0", "33", "32"});
  expect_error([] { quantize_row(DType::Q4_K, floats.data(), bytes.data(), 128); }, {"q4_k", "128", "256"});
  expect_error([] { vec_dot_row(DType::Q6_K, bytes.data(), bytes.data(), 32); }, {"q6_k", "32"});
  expect_error([] { quantize_row(DType::Q8_1, floats.data(), bytes.data(), 31); }, {"q8_1", "31"});
  expect_error([] { dequantize_row(DType::F16, bytes.data(), floats.data(), -2); }, {"f16", "-2"});
}

TEST(QuantErrors, EmptyRowsAreFine) {
  dequantize_row(DType::Q5_K, bytes.data(), floats.data(), 0);
  quantize_row(DType::Q5_0, floats.data(), bytes.data(), 0);
  EXPECT_EQ(vec_dot_row(DType::Q8_0, bytes.data(), bytes.data(), 0), 0.0f);
}

TEST(QuantErrors, ActivationFormatAsWeight) {
  expect_error([] { vec_dot_row(DType::Q8_K, bytes.data(), bytes.data(), 256); }, {"q8_k", "activation"});
  expect_error([] { vec_dot_row(DType::Q8_1, bytes.data(), bytes.data(), 32); }, {"q8_1", "activation"});
}

TEST(QuantErrors, UnknownDTypeValue) {
  const auto bogus = static_cast<DType>(200);
  expect_error([&] { dequantize_row(bogus, bytes.data(), floats.data(), 32); },
               {"dequantize_row", "no implementation"});
  expect_error([&] { quantize_row(bogus, floats.data(), bytes.data(), 32); },
               {"quantize_row", "no implementation"});
  expect_error([&] { vec_dot_row(bogus, bytes.data(), bytes.data(), 32); },
               {"vec_dot_row", "no implementation"});
}

}  // namespace
}  // namespace tokenmill::quant
