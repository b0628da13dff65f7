// TensorStore: copies of host tensors one by one or in one block, and which addresses it owns.
#include "core/tensor_store.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace tokenmill {
namespace {

std::vector<float> iota_floats(size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<float> values(const Tensor& t) { return {t.as<const float>(), t.as<const float>() + t.numel()}; }

uintptr_t address(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data); }

TEST(TensorStore, CopiesOfFillOneBlockInOrderAligned) {
  std::vector<float> a = iota_floats(3, 1.0f), b = iota_floats(40, 100.0f);
  const std::vector<Tensor> hosts = {Tensor(a.data(), DType::F32, {3}),
                                     Tensor(b.data(), DType::F32, {4, 10})};
  TensorStore store;
  const std::vector<Tensor> copies = store.copies_of(hosts);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(values(copies[0]), a);
  EXPECT_EQ(values(copies[1]), b);
  EXPECT_EQ(copies[1].shape_string(), "[4, 10] f32");
  EXPECT_NE(copies[0].data, hosts[0].data);
  // One block: the second copy follows the first at the arena's alignment (12 bytes -> 64).
  EXPECT_EQ(address(copies[1]) - address(copies[0]), Arena::kAlignment);
  EXPECT_EQ(address(copies[0]) % Arena::kAlignment, 0u);
  EXPECT_EQ(store.bytes(), Arena::kAlignment + Arena::footprint(40 * sizeof(float)));
}

TEST(TensorStore, CopiesOfNothingOrEmptyTensorsAllocateNothing) {
  TensorStore store;
  EXPECT_TRUE(store.copies_of({}).empty());
  std::vector<float> none;
  const std::vector<Tensor> copies = store.copies_of({Tensor(none.data(), DType::F32, {0, 5})});
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].numel(), 0);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(TensorStore, OwnsItsBlocksAndNothingElse) {
  std::vector<float> a = iota_floats(16, 0.0f);
  TensorStore store;
  const Tensor copy = store.copy_of(Tensor(a.data(), DType::F32, {16}));
  const Tensor block = store.copies_of({Tensor(a.data(), DType::F32, {16})}).front();
  for (const Tensor& t : {copy, block}) {
    EXPECT_TRUE(store.owns(t.data));
    EXPECT_TRUE(store.owns(static_cast<const char*>(t.data) + t.nbytes() - 1));
    EXPECT_FALSE(store.owns(static_cast<const char*>(t.data) - 1));
  }
  EXPECT_FALSE(store.owns(a.data()));
  EXPECT_FALSE(TensorStore().owns(a.data()));
}

}  // namespace
}  // namespace tokenmill
