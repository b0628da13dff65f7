// The emulated cuBLASLt against the cuBLASLt reference's definition, with an independent
// reference here: D = epilogue(alpha * op(A) op(B) + beta * C + bias), column-major layouts
// with leading dimensions, op = N or T, strided batches, f32/f16/bf16 inputs.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

// Element (r, c) of a column-major matrix with leading dimension ld.
size_t at(size_t r, size_t c, size_t ld) { return r + c * ld; }

struct Matrix {
  size_t rows, cols, ld;
  std::vector<float> values;  // ld * cols, column-major
  float get(size_t r, size_t c) const { return values[at(r, c, ld)]; }
};

Matrix random_matrix(size_t rows, size_t cols, size_t ld, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Matrix m{rows, cols, ld, std::vector<float>(ld * cols)};
  for (float& v : m.values) v = u(rng);
  return m;
}

// What one stored value of `type` reads back as.
float rounded(float v, cudaDataType_t type) {
  if (type == CUDA_R_16F) return __half2float(__float2half_rn(v));
  if (type == CUDA_R_16BF) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

size_t bytes_of(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

// A device copy of `m` stored as `type`.
void* to_device(const Matrix& m, cudaDataType_t type) {
  std::vector<unsigned char> bytes(m.values.size() * bytes_of(type));
  for (size_t i = 0; i < m.values.size(); ++i) {
    if (type == CUDA_R_32F) std::memcpy(&bytes[i * 4], &m.values[i], 4);
    if (type == CUDA_R_16F) {
      const __half h = __float2half_rn(m.values[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
    if (type == CUDA_R_16BF) {
      const __nv_bfloat16 h = __float2bfloat16_rn(m.values[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  void* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, bytes.size()), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return device;
}

std::vector<float> from_device(const void* device, size_t count, cudaDataType_t type) {
  std::vector<unsigned char> bytes(count * bytes_of(type));
  EXPECT_EQ(cudaMemcpy(bytes.data(), device, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (type == CUDA_R_32F) std::memcpy(&out[i], &bytes[i * 4], 4);
    if (type == CUDA_R_16F) {
      __half h;
      std::memcpy(&h, &bytes[i * 2], 2);
      out[i] = __half2float(h);
    }
    if (type == CUDA_R_16BF) {
      __nv_bfloat16 h;
      std::memcpy(&h, &bytes[i * 2], 2);
      out[i] = __bfloat162float(h);
    }
  }
  return out;
}

struct Product {
  size_t m, n, k;
  bool trans_a, trans_b;
  size_t pad_a, pad_b, pad_d;  // leading dimension - rows
  cudaDataType_t in, out;
  float alpha, beta;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
};

// Runs `p` through cuBLASLt and checks D against the definition computed here.
void check_product(const Product& p) {
  std::mt19937 rng(static_cast<unsigned>(p.m * 131 + p.n * 17 + p.k));
  const size_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
  const size_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
  const Matrix a = random_matrix(a_rows, a_cols, a_rows + p.pad_a, rng);
  const Matrix b = random_matrix(b_rows, b_cols, b_rows + p.pad_b, rng);
  const Matrix c = random_matrix(p.m, p.n, p.m + p.pad_d, rng);
  std::vector<float> bias(p.m);
  for (float& v : bias) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  void* da = to_device(a, p.in);
  void* db = to_device(b, p.in);
  void* dd = to_device(c, p.out);  // C and D share memory: D = ... + beta * C in place
  const Matrix bias_matrix{p.m, 1, p.m, bias};
  void* dbias = to_device(bias_matrix, p.out);

  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const cublasOperation_t ta = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          tb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &p.epilogue, sizeof(p.epilogue));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof(dbias));
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatrixLayoutCreate(&la, p.in, a.rows, a.cols, static_cast<int64_t>(a.ld));
  cublasLtMatrixLayoutCreate(&lb, p.in, b.rows, b.cols, static_cast<int64_t>(b.ld));
  cublasLtMatrixLayoutCreate(&ld, p.out, p.m, p.n, static_cast<int64_t>(c.ld));
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref, 1, &result, &returned),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(returned, 1);
  ASSERT_EQ(cublasLtMatmul(handle, desc, &p.alpha, da, la, db, lb, &p.beta, dd, ld, dd, ld, &result.algo,
                           nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> got = from_device(dd, c.values.size(), p.out);
  for (size_t j = 0; j < p.n; ++j)
    for (size_t i = 0; i < p.m; ++i) {
      double sum = 0;
      for (size_t q = 0; q < p.k; ++q) {
        const float av = rounded(p.trans_a ? a.get(q, i) : a.get(i, q), p.in);
        const float bv = rounded(p.trans_b ? b.get(j, q) : b.get(q, j), p.in);
        sum += static_cast<double>(av) * bv;
      }
      double want = p.alpha * sum;
      if (p.beta != 0) want += p.beta * rounded(c.get(i, j), p.out);
      if ((p.epilogue & CUBLASLT_EPILOGUE_BIAS) != 0) want += rounded(bias[i], p.out);
      if ((p.epilogue & CUBLASLT_EPILOGUE_RELU) != 0) want = want > 0 ? want : 0;
      if ((p.epilogue & CUBLASLT_EPILOGUE_GELU) != 0)
        want = 0.5 * want * (1 + std::tanh(std::sqrt(2 / M_PI) * (want + 0.044715 * want * want * want)));
      const double tolerance =
          p.out == CUDA_R_32F ? 1e-5 * (1 + std::abs(want)) : 1e-2 * (1 + std::abs(want));
      EXPECT_NEAR(got[at(i, j, c.ld)], want, tolerance) << "D(" << i << ", " << j << ")";
    }
  for (size_t j = 0; j < p.n; ++j)  // the padding between columns is never written
    for (size_t i = p.m; i < c.ld; ++i) EXPECT_EQ(got[at(i, j, c.ld)], rounded(c.get(i, j), p.out));
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
  cudaFree(dbias);
}

TEST(CublasLt, EveryTransposeWithPaddedLeadingDimensions) {
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      SCOPED_TRACE(testing::Message() << "trans_a=" << ta << " trans_b=" << tb);
      check_product({5, 7, 3, ta, tb, 2, 1, 3, CUDA_R_32F, CUDA_R_32F, 1.0f, 0.0f});
    }
}

TEST(CublasLt, AlphaAndBetaScaleTheProductAndC) {
  check_product({4, 6, 9, false, true, 0, 0, 0, CUDA_R_32F, CUDA_R_32F, 0.5f, -2.0f});
}

TEST(CublasLt, HalfAndBfloatInputsWithF32OrTheirOwnOutput) {
  for (const cudaDataType_t in : {CUDA_R_16F, CUDA_R_16BF}) {
    check_product({8, 3, 16, true, false, 0, 4, 0, in, CUDA_R_32F, 1.0f, 1.0f});
    check_product({8, 3, 16, true, false, 0, 4, 0, in, in, 1.0f, 0.0f});
  }
}

TEST(CublasLt, Epilogues) {
  for (const cublasLtEpilogue_t e :
       {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_GELU,
        CUBLASLT_EPILOGUE_GELU_BIAS}) {
    SCOPED_TRACE(testing::Message() << "epilogue " << static_cast<int>(e));
    Product p{6, 5, 4, false, false, 0, 0, 0, CUDA_R_32F, CUDA_R_32F, 1.0f, 0.0f};
    p.epilogue = e;
    check_product(p);
  }
}

TEST(CublasLt, BetaZeroNeverReadsC) {
  // C full of NaN: with beta = 0 the product must not see it.
  const float nan = std::nanf("");
  float* c = nullptr;
  float *a = nullptr, *b = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&a), 4 * sizeof(float));
  cudaMalloc(reinterpret_cast<void**>(&b), 4 * sizeof(float));
  cudaMalloc(reinterpret_cast<void**>(&c), 4 * sizeof(float));
  const float ones[4] = {1, 1, 1, 1}, nans[4] = {nan, nan, nan, nan};
  cudaMemcpy(a, ones, sizeof(ones), cudaMemcpyHostToDevice);
  cudaMemcpy(b, ones, sizeof(ones), cudaMemcpyHostToDevice);
  cudaMemcpy(c, nans, sizeof(nans), cudaMemcpyHostToDevice);
  cublasLtHandle_t handle = nullptr;
  cublasLtCreate(&handle);
  cublasLtMatmulDescOpaque_t desc{};
  ASSERT_EQ(cublasLtMatmulDescInit(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayoutOpaque_t layout{};
  ASSERT_EQ(cublasLtMatrixLayoutInit(&layout, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  const float alpha = 1, beta = 0;
  ASSERT_EQ(cublasLtMatmul(handle, &desc, &alpha, a, &layout, b, &layout, &beta, c, &layout, c, &layout,
                           nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  float d[4];
  cudaMemcpy(d, c, sizeof(d), cudaMemcpyDeviceToHost);
  for (const float v : d) EXPECT_EQ(v, 2.0f);
  cublasLtDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

TEST(CublasLt, StridedBatches) {
  constexpr int kBatch = 3;
  constexpr size_t kM = 2, kN = 2, kK = 2, kStride = 5;  // elements between batches (past the 4 used)
  std::vector<float> a(kStride * kBatch), b(kStride * kBatch);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(i % 7) - 3, b[i] = static_cast<float>(i % 5) - 2;
  float *da = nullptr, *db = nullptr, *dd = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&da), a.size() * 4);
  cudaMalloc(reinterpret_cast<void**>(&db), b.size() * 4);
  cudaMalloc(reinterpret_cast<void**>(&dd), a.size() * 4);
  cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  cublasLtHandle_t handle = nullptr;
  cublasLtCreate(&handle);
  cublasLtMatmulDescOpaque_t desc{};
  cublasLtMatmulDescInit(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayoutOpaque_t layout{};
  cublasLtMatrixLayoutInit(&layout, CUDA_R_32F, 2, 2, 2);
  const int32_t batch = kBatch;
  const int64_t stride = kStride;
  cublasLtMatrixLayoutSetAttribute(&layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch));
  cublasLtMatrixLayoutSetAttribute(&layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                   sizeof(stride));
  const float alpha = 1, beta = 0;
  ASSERT_EQ(cublasLtMatmul(handle, &desc, &alpha, da, &layout, db, &layout, &beta, dd, &layout, dd, &layout,
                           nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  std::vector<float> d(a.size());
  cudaMemcpy(d.data(), dd, d.size() * 4, cudaMemcpyDeviceToHost);
  for (int bt = 0; bt < kBatch; ++bt)
    for (size_t j = 0; j < kN; ++j)
      for (size_t i = 0; i < kM; ++i) {
        float want = 0;
        for (size_t q = 0; q < kK; ++q) want += a[bt * kStride + at(i, q, 2)] * b[bt * kStride + at(q, j, 2)];
        EXPECT_EQ(d[bt * kStride + at(i, j, 2)], want);
      }
  cublasLtDestroy(handle);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
}

TEST(CublasLt, RefusesWhatTheReferenceRefuses) {
  cublasLtHandle_t handle = nullptr;
  cublasLtCreate(&handle);
  cublasLtMatmulDescOpaque_t desc{};
  cublasLtMatmulDescInit(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayoutOpaque_t a{}, b{}, d{}, short_ld{};
  cublasLtMatrixLayoutInit(&a, CUDA_R_32F, 4, 3, 4);
  cublasLtMatrixLayoutInit(&b, CUDA_R_32F, 5, 2, 5);  // 5 rows: op(A) has 3 columns
  cublasLtMatrixLayoutInit(&d, CUDA_R_32F, 4, 2, 4);
  cublasLtMatrixLayoutInit(&short_ld, CUDA_R_32F, 4, 3, 3);
  cublasLtMatmulPreferenceOpaque_t pref{};
  cublasLtMatmulPreferenceInit(&pref);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, &desc, &a, &b, &d, &d, &pref, 1, &result, &returned),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasLtMatmulAlgoGetHeuristic(handle, &desc, &short_ld, &b, &d, &d, &pref, 1, &result, &returned),
      CUBLAS_STATUS_INVALID_VALUE);
  // An algorithm chosen for 16-byte-aligned pointers refuses a pointer aligned to 4.
  cublasLtMatrixLayoutInit(&b, CUDA_R_32F, 3, 2, 3);
  const uint32_t sixteen = 16;
  for (const auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(&pref, attr, &sixteen, sizeof(sixteen));
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, &desc, &a, &b, &d, &d, &pref, 1, &result, &returned),
            CUBLAS_STATUS_SUCCESS);
  float* memory = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&memory), 64 * sizeof(float));
  const float alpha = 1, beta = 0;
  EXPECT_EQ(cublasLtMatmul(handle, &desc, &alpha, memory + 1, &a, memory + 16, &b, &beta, memory + 32, &d,
                           memory + 32, &d, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmul(handle, &desc, &alpha, memory, &a, memory + 16, &b, &beta, memory + 32, &d,
                           memory + 32, &d, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  cudaDeviceSynchronize();
  cudaFree(memory);
  cublasLtDestroy(handle);
}

}  // namespace
