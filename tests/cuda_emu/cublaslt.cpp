// cuBLASLt's matrix multiply on the emulated GPU, written from NVIDIA's cuBLASLt reference
// (not from the backend's calls):
//   D = epilogue(alpha * op(A) op(B) + beta * C [+ bias])
// with column-major layouts (rows, cols, leading dimension, optional strided batches), op
// the transposition of TRANSA/TRANSB, A and B of one type (f32, f16 or bf16), C and D of one
// type (f32, or A's type), f32 compute and scale, C not read when beta is 0, and the
// epilogues DEFAULT, RELU, BIAS, RELU_BIAS, GELU and GELU_BIAS (GELU is the tanh form; the
// bias holds one value per row of D, of D's type unless BIAS_DATA_TYPE says otherwise).
// The heuristic offers one algorithm, for the alignments the preference states; the multiply
// then refuses pointers aligned to less, as a real kernel would fault on them.
// Products are summed in double and rounded once, so results are at least as accurate as
// any order a GPU kernel sums in.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_emu/runtime.h"

struct cublasLtContext {};

namespace cuda_emu {

namespace {

constexpr uint32_t kDescMagic = 0x6c744431, kLayoutMagic = 0x6c744c31, kPrefMagic = 0x6c745031,
                   kAlgoMagic = 0x6c744131;

struct MatmulDesc {
  uint32_t magic;
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's type
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
};

struct Layout {
  uint32_t magic;
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t order = CUBLASLT_ORDER_COL;
  int32_t batch = 1;
  int64_t batch_stride = 0;  // elements between batches
};

struct Preference {
  uint32_t magic;
  uint64_t workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D: cuBLASLt's default is 256 bytes
};

struct Algo {
  uint32_t magic;
  uint32_t align[4];  // what the pointers were promised to be aligned to
};

static_assert(sizeof(MatmulDesc) <= sizeof(cublasLtMatmulDescOpaque_t));
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t));
static_assert(sizeof(Preference) <= sizeof(cublasLtMatmulPreferenceOpaque_t));
static_assert(sizeof(Algo) <= sizeof(cublasLtMatmulAlgo_t));

template <class T, class Opaque>
T* as(Opaque* opaque) {
  return reinterpret_cast<T*>(opaque);
}

// A refused call: `status`, and why on stderr.
cublasStatus_t decline(cublasStatus_t status, const std::string& why) {
  std::fprintf(stderr, "cuda-emu: cuBLASLt: %s\n", why.c_str());
  return status;
}

size_t element_bytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 0;
  }
}

float load(const void* base, cudaDataType_t t, size_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(base)[i];
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(base)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  }
}

void store(void* base, cudaDataType_t t, size_t i, float v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(base)[i] = v; break;
    case CUDA_R_16F: static_cast<__half*>(base)[i] = __float2half_rn(v); break;
    default: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v); break;
  }
}

// Elements a layout spans, all batches included.
size_t span(const Layout& l) {
  if (l.rows == 0 || l.cols == 0) return 0;
  const size_t one = static_cast<size_t>(l.ld) * (l.cols - 1) + l.rows;
  return static_cast<size_t>(l.batch_stride) * static_cast<size_t>(l.batch - 1) + one;
}

// The problem's shape: D is m x n, the sum runs over k.
struct Shape {
  uint64_t m, n, k;
};

// Checks one product against what the reference allows; the shape, or why not.
cublasStatus_t check(const MatmulDesc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dl,
                     Shape& shape) {
  if (d.magic != kDescMagic || a.magic != kLayoutMagic || b.magic != kLayoutMagic ||
      c.magic != kLayoutMagic || dl.magic != kLayoutMagic)
    return decline(CUBLAS_STATUS_NOT_INITIALIZED, "a descriptor or layout was not initialised");
  if (d.compute != CUBLAS_COMPUTE_32F || d.scale != CUDA_R_32F)
    return decline(CUBLAS_STATUS_NOT_SUPPORTED,
                   "only CUBLAS_COMPUTE_32F with CUDA_R_32F scaling is emulated");
  if (d.pointer_mode != CUBLASLT_POINTER_MODE_HOST)
    return decline(CUBLAS_STATUS_NOT_SUPPORTED, "only host alpha and beta are emulated");
  if (element_bytes(a.type) == 0 || a.type != b.type || c.type != dl.type ||
      (dl.type != CUDA_R_32F && dl.type != a.type))
    return decline(CUBLAS_STATUS_NOT_SUPPORTED,
                   "A and B must share f32, f16 or bf16; C and D f32 or A's type");
  for (const Layout* l : {&a, &b, &c, &dl}) {
    if (l->order != CUBLASLT_ORDER_COL)
      return decline(CUBLAS_STATUS_NOT_SUPPORTED, "only column-major layouts are emulated");
    if (l->ld < static_cast<int64_t>(l->rows) || l->ld < 1)
      return decline(CUBLAS_STATUS_INVALID_VALUE,
                     fmt::format("a leading dimension {} below the {} rows", l->ld, l->rows));
    if (l->batch != dl.batch) return decline(CUBLAS_STATUS_INVALID_VALUE, "the batch counts differ");
  }
  const uint64_t a_rows = d.trans_a == CUBLAS_OP_N ? a.rows : a.cols,
                 a_cols = d.trans_a == CUBLAS_OP_N ? a.cols : a.rows;
  const uint64_t b_rows = d.trans_b == CUBLAS_OP_N ? b.rows : b.cols,
                 b_cols = d.trans_b == CUBLAS_OP_N ? b.cols : b.rows;
  shape = Shape{dl.rows, dl.cols, a_cols};
  if (a_rows != shape.m || b_rows != shape.k || b_cols != shape.n || c.rows != dl.rows || c.cols != dl.cols)
    return decline(CUBLAS_STATUS_INVALID_VALUE,
                   fmt::format("op(A) is {}x{}, op(B) {}x{}, C {}x{}, D {}x{}: they do not multiply", a_rows,
                               a_cols, b_rows, b_cols, c.rows, c.cols, dl.rows, dl.cols));
  switch (d.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_RELU:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_BIAS: break;
    default: return decline(CUBLAS_STATUS_NOT_SUPPORTED, "this epilogue is not emulated");
  }
  const int32_t bias_type = d.bias_type == -1 ? dl.type : d.bias_type;
  if ((d.epilogue & CUBLASLT_EPILOGUE_BIAS) != 0 && bias_type != dl.type && bias_type != CUDA_R_32F)
    return decline(CUBLAS_STATUS_NOT_SUPPORTED, "the bias must be of D's type or f32");
  return CUBLAS_STATUS_SUCCESS;
}

float gelu_tanh(float x) {
  const double v = x;
  return static_cast<float>(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
}

uint32_t alignment_of(const void* p) {
  const auto bits = reinterpret_cast<uintptr_t>(p);
  return bits == 0 ? 256u : static_cast<uint32_t>(std::min<uintptr_t>(256, bits & (~bits + 1)));
}

// D for one batch; C may be D (in place).
void multiply(const MatmulDesc& d, const Layout& al, const Layout& bl, const Layout& cl, const Layout& dl,
              const Shape& s, float alpha, float beta, const void* a, const void* b, const void* c,
              void* out) {
  const int32_t bias_type = d.bias_type == -1 ? dl.type : d.bias_type;
  const bool has_bias = (d.epilogue & CUBLASLT_EPILOGUE_BIAS) != 0;
  // op(A) as m rows of k, op(B) as n rows of k: both summed along contiguous rows.
  std::vector<float> ar(s.m * s.k), bc(s.n * s.k);
  for (uint64_t i = 0; i < s.m; ++i)
    for (uint64_t p = 0; p < s.k; ++p)
      ar[i * s.k + p] = load(a, al.type, d.trans_a == CUBLAS_OP_N ? i + p * al.ld : p + i * al.ld);
  for (uint64_t j = 0; j < s.n; ++j)
    for (uint64_t p = 0; p < s.k; ++p)
      bc[j * s.k + p] = load(b, bl.type, d.trans_b == CUBLAS_OP_N ? p + j * bl.ld : j + p * bl.ld);
  std::vector<float> result(s.m * s.n);
  for (uint64_t j = 0; j < s.n; ++j)
    for (uint64_t i = 0; i < s.m; ++i) {
      double sum = 0;
      for (uint64_t p = 0; p < s.k; ++p) sum += static_cast<double>(ar[i * s.k + p]) * bc[j * s.k + p];
      double v = alpha * sum;
      if (beta != 0.0f)
        v += static_cast<double>(beta) * load(c, cl.type, i + j * static_cast<uint64_t>(cl.ld));
      float f = static_cast<float>(v);
      if (has_bias) f += load(d.bias, static_cast<cudaDataType_t>(bias_type), i);
      if ((d.epilogue & CUBLASLT_EPILOGUE_RELU) != 0) f = std::max(f, 0.0f);
      if ((d.epilogue & CUBLASLT_EPILOGUE_GELU) != 0) f = gelu_tanh(f);
      result[j * s.m + i] = f;
    }
  for (uint64_t j = 0; j < s.n; ++j)
    for (uint64_t i = 0; i < s.m; ++i)
      store(out, dl.type, i + j * static_cast<uint64_t>(dl.ld), result[j * s.m + i]);
}

template <class T>
cublasStatus_t set_field(T& field, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(T))
    return decline(CUBLAS_STATUS_INVALID_VALUE, "an attribute of the wrong size");
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

}  // namespace cuda_emu

using cuda_emu::Algo;
using cuda_emu::decline;
using cuda_emu::Layout;
using cuda_emu::MatmulDesc;
using cuda_emu::Preference;
using cuda_emu::set_field;

extern "C" {

size_t cublasLtGetVersion() { return CUBLAS_VERSION; }

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

const char* cublasLtGetStatusString(cublasStatus_t status) { return cublasLtGetStatusName(status); }

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t desc, size_t size,
                                               cublasComputeType_t compute, cudaDataType_t scale) {
  if (size < sizeof(MatmulDesc)) return decline(CUBLAS_STATUS_INVALID_VALUE, "a matmul descriptor too small");
  *cuda_emu::as<MatmulDesc>(desc) = MatmulDesc{cuda_emu::kDescMagic, compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  *desc = new cublasLtMatmulDescOpaque_t{};
  return cublasLtMatmulDescInit_internal(*desc, sizeof(**desc), compute, scale);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  MatmulDesc& d = *cuda_emu::as<MatmulDesc>(desc);
  if (d.magic != cuda_emu::kDescMagic)
    return decline(CUBLAS_STATUS_NOT_INITIALIZED, "a matmul descriptor not initialised");
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return set_field(d.trans_a, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set_field(d.trans_b, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set_field(d.epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set_field(d.bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set_field(d.bias_type, buf, size);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set_field(d.pointer_mode, buf, size);
    default:
      return decline(CUBLAS_STATUS_NOT_SUPPORTED,
                     fmt::format("matmul attribute {} is not emulated", static_cast<int>(attr)));
  }
}

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t layout, size_t size,
                                                 cudaDataType type, uint64_t rows, uint64_t cols,
                                                 int64_t ld) {
  if (size < sizeof(Layout)) return decline(CUBLAS_STATUS_INVALID_VALUE, "a layout too small");
  *cuda_emu::as<Layout>(layout) = Layout{cuda_emu::kLayoutMagic, type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = new cublasLtMatrixLayoutOpaque_t{};
  return cublasLtMatrixLayoutInit_internal(*layout, sizeof(**layout), type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(const cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                size_t size) {
  Layout& l = *cuda_emu::as<Layout>(layout);
  if (l.magic != cuda_emu::kLayoutMagic)
    return decline(CUBLAS_STATUS_NOT_INITIALIZED, "a layout not initialised");
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return set_field(l.order, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set_field(l.batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set_field(l.batch_stride, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_LD: return set_field(l.ld, buf, size);
    default: return decline(CUBLAS_STATUS_NOT_SUPPORTED, "this layout attribute is not emulated");
  }
}

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size) {
  if (size < sizeof(Preference)) return decline(CUBLAS_STATUS_INVALID_VALUE, "a preference too small");
  *cuda_emu::as<Preference>(pref) = Preference{cuda_emu::kPrefMagic};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t{};
  return cublasLtMatmulPreferenceInit_internal(*pref, sizeof(**pref));
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  Preference& p = *cuda_emu::as<Preference>(pref);
  if (p.magic != cuda_emu::kPrefMagic)
    return decline(CUBLAS_STATUS_NOT_INITIALIZED, "a preference not initialised");
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return set_field(p.workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return set_field(p.align[0], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return set_field(p.align[1], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return set_field(p.align[2], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return set_field(p.align[3], buf, size);
    default: return decline(CUBLAS_STATUS_NOT_SUPPORTED, "this preference attribute is not emulated");
  }
}

// One algorithm when the product is supported and every promised alignment is at least an
// element (cuBLASLt has no kernel for less).
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  *returned = 0;
  const Preference& p = *cuda_emu::as<Preference>(pref);
  if (p.magic != cuda_emu::kPrefMagic)
    return decline(CUBLAS_STATUS_NOT_INITIALIZED, "a preference not initialised");
  if (requested < 1) return decline(CUBLAS_STATUS_INVALID_VALUE, "requestedAlgoCount below 1");
  cuda_emu::Shape shape{};
  const Layout* layouts[4] = {cuda_emu::as<Layout>(a), cuda_emu::as<Layout>(b), cuda_emu::as<Layout>(c),
                              cuda_emu::as<Layout>(d)};
  if (const cublasStatus_t s = cuda_emu::check(*cuda_emu::as<MatmulDesc>(desc), *layouts[0], *layouts[1],
                                               *layouts[2], *layouts[3], shape);
      s != CUBLAS_STATUS_SUCCESS)
    return s;
  for (int i = 0; i < 4; ++i)
    if (p.align[i] < cuda_emu::element_bytes(layouts[i]->type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  Algo algo{cuda_emu::kAlgoMagic, {p.align[0], p.align[1], p.align[2], p.align[3]}};
  std::memcpy(&results[0].algo, &algo, sizeof(algo));
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                       cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                       cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t* algo,
                                       cublasLtMatmulHeuristicResult_t* result) {
  cuda_emu::Shape shape{};
  if (const cublasStatus_t s =
          cuda_emu::check(*cuda_emu::as<MatmulDesc>(desc), *cuda_emu::as<Layout>(a), *cuda_emu::as<Layout>(b),
                          *cuda_emu::as<Layout>(c), *cuda_emu::as<Layout>(d), shape);
      s != CUBLAS_STATUS_SUCCESS)
    return s;
  Algo chosen;
  std::memcpy(&chosen, algo, sizeof(chosen));
  if (chosen.magic != cuda_emu::kAlgoMagic) return CUBLAS_STATUS_INVALID_VALUE;
  *result = cublasLtMatmulHeuristicResult_t{};
  result->algo = *algo;
  result->state = CUBLAS_STATUS_SUCCESS;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* a, cublasLtMatrixLayout_t adesc, const void* b,
                              cublasLtMatrixLayout_t bdesc, const void* beta, const void* c,
                              cublasLtMatrixLayout_t cdesc, void* d, cublasLtMatrixLayout_t ddesc,
                              const cublasLtMatmulAlgo_t* algo, void*, size_t, cudaStream_t stream) {
  if (handle == nullptr) return decline(CUBLAS_STATUS_NOT_INITIALIZED, "a null handle");
  const MatmulDesc md = *cuda_emu::as<MatmulDesc>(desc);
  const Layout al = *cuda_emu::as<Layout>(adesc), bl = *cuda_emu::as<Layout>(bdesc),
               cl = *cuda_emu::as<Layout>(cdesc), dl = *cuda_emu::as<Layout>(ddesc);
  cuda_emu::Shape shape{};
  if (const cublasStatus_t s = cuda_emu::check(md, al, bl, cl, dl, shape); s != CUBLAS_STATUS_SUCCESS)
    return s;
  if (algo != nullptr) {
    Algo chosen;
    std::memcpy(&chosen, algo, sizeof(chosen));
    if (chosen.magic != cuda_emu::kAlgoMagic)
      return decline(CUBLAS_STATUS_INVALID_VALUE, "not an algorithm of this cuBLASLt");
    const void* pointers[4] = {a, b, c, d};
    for (int i = 0; i < 4; ++i)
      if (cuda_emu::alignment_of(pointers[i]) < chosen.align[i])
        return decline(
            CUBLAS_STATUS_INVALID_VALUE,
            fmt::format("matrix {} at {} is aligned to {} bytes, below the {} its algorithm was chosen for",
                        "ABCD"[i], pointers[i], cuda_emu::alignment_of(pointers[i]), chosen.align[i]));
  }
  const float alpha_value = *static_cast<const float*>(alpha), beta_value = *static_cast<const float*>(beta);
  cuda_emu::Runtime& r = cuda_emu::runtime();
  const std::lock_guard lock(r.mutex);
  CUstream_st* on = r.streams.resolve(stream);
  if (on == nullptr) return decline(CUBLAS_STATUS_INVALID_VALUE, "not a live stream");
  const bool has_bias = (md.epilogue & CUBLASLT_EPILOGUE_BIAS) != 0;
  const size_t bias_bytes =
      shape.m *
      cuda_emu::element_bytes(md.bias_type == -1 ? dl.type : static_cast<cudaDataType_t>(md.bias_type));
  // Every operand must lie in device memory, now and when the stream reaches the product.
  const auto operands_live = [&r, a, b, c, d, al, bl, cl, dl, beta_value, has_bias, md, bias_bytes] {
    return r.memory.on_device(a, cuda_emu::span(al) * cuda_emu::element_bytes(al.type)) &&
           r.memory.on_device(b, cuda_emu::span(bl) * cuda_emu::element_bytes(bl.type)) &&
           (beta_value == 0.0f ||
            r.memory.on_device(c, cuda_emu::span(cl) * cuda_emu::element_bytes(cl.type))) &&
           r.memory.on_device(d, cuda_emu::span(dl) * cuda_emu::element_bytes(dl.type)) &&
           (!has_bias || r.memory.on_device(md.bias, bias_bytes));
  };
  if (shape.m == 0 || shape.n == 0) return CUBLAS_STATUS_SUCCESS;
  if (!operands_live())
    return decline(CUBLAS_STATUS_INVALID_VALUE, "an operand is not inside live device memory");
  r.streams.enqueue(on, fmt::format("cublasLtMatmul {}x{}x{}", shape.m, shape.n, shape.k),
                    [=]() -> std::string {
                      if (!operands_live())
                        return "an operand was freed before the product ran (a stream-ordering error)";
                      for (int32_t batch = 0; batch < dl.batch; ++batch) {
                        const auto at = [batch](const void* base, const Layout& l) {
                          return static_cast<const char*>(base) + static_cast<size_t>(batch) *
                                                                      static_cast<size_t>(l.batch_stride) *
                                                                      cuda_emu::element_bytes(l.type);
                        };
                        cuda_emu::multiply(md, al, bl, cl, dl, shape, alpha_value, beta_value, at(a, al),
                                           at(b, bl), at(c, cl), const_cast<char*>(at(d, dl)));
                      }
                      return "";
                    });
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
