// Tensor views: shape bookkeeping, reshape and row slices, and their error cases.
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <vector>

namespace tokenmill {
namespace {

TEST(Tensor, ShapeQueries) {
  std::vector<float> data(24);
  const Tensor t(data.data(), DType::F32, {2, 3, 4});
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_EQ(t.dim(-3), 2);
  EXPECT_EQ(t.rows(), 6);
  EXPECT_EQ(t.cols(), 4);
  EXPECT_EQ(t.shape_string(), "[2, 3, 4] f32");
  EXPECT_EQ(t.as<float>(), data.data());
}

TEST(Tensor, ScalarAndEmptyTensors) {
  float x = 1;
  const Tensor scalar(&x, DType::F32, {});
  EXPECT_EQ(scalar.rank, 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.rows(), 1);
  EXPECT_EQ(scalar.cols(), 1);
  EXPECT_EQ(scalar.shape_string(), "[] f32");
  const Tensor empty(nullptr, DType::BF16, {0, 8});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.nbytes(), 0u);
  EXPECT_EQ(empty.shape_string(), "[0, 8] bf16");
  EXPECT_EQ(empty.rows(), 0);
  const Tensor no_columns(nullptr, DType::F32, {3, 0});  // rows() must not divide by zero
  EXPECT_EQ(no_columns.rows(), 3);
  EXPECT_EQ(no_columns.cols(), 0);
}

TEST(Tensor, RejectsBadShapes) {
  EXPECT_THROW(Tensor(nullptr, DType::F32, {1, 2, 3, 4, 5}), Error);
  EXPECT_THROW(Tensor(nullptr, DType::F32, {4, -1}), Error);
  EXPECT_THROW(Tensor(nullptr, DType::F32, {1ll << 40, 1ll << 40}), Error);
}

TEST(Tensor, ReshapeKeepsMemoryAndCount) {
  std::vector<uint16_t> data(12);
  const Tensor t(data.data(), DType::F16, {3, 4});
  const Tensor r = t.reshaped({2, 2, 3});
  EXPECT_EQ(r.data, t.data);
  EXPECT_EQ(r.dtype, DType::F16);
  EXPECT_EQ(r.shape_string(), "[2, 2, 3] f16");
  EXPECT_THROW(t.reshaped({5, 2}), Error);
}

TEST(Tensor, SliceRowsOffsetsByWholeRows) {
  std::vector<uint16_t> data(5 * 2 * 3);
  const Tensor t(data.data(), DType::BF16, {5, 2, 3});
  const Tensor s = t.slice_rows(1, 3);
  EXPECT_EQ(s.dim(0), 3);
  EXPECT_EQ(s.dim(1), 2);
  EXPECT_EQ(s.as<uint16_t>(), data.data() + 6);
  EXPECT_EQ(t.slice_rows(5, 0).numel(), 0);
  EXPECT_THROW(t.slice_rows(4, 2), Error);
  EXPECT_THROW(t.slice_rows(-1, 1), Error);
  EXPECT_THROW(t.slice_rows(0, -1), Error);
  float x = 0;
  EXPECT_THROW(Tensor(&x, DType::F32, {}).slice_rows(0, 1), Error);
}

}  // namespace
}  // namespace tokenmill
