// Twenty-ninth session probe (not part of the product): a bf16 GEMM for few rows on AVX512-BF16,
// weights packed as [64-column panels][K/2][4 x 16 columns][2] so that one 512-bit load feeds one
// vdpbf16ps per row; every output element sums its K pairs in order, whatever the row count.
// Built and timed by gemv_probe.py.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

// W packed: [P panels][K/2][NB=4 blocks][16 cols][2] bf16, panel = 64 columns
static constexpr int NB = 4;
torch::Tensor pack(torch::Tensor w) {  // w [N, K] bf16
  TORCH_CHECK(w.dtype() == torch::kBFloat16 && w.dim() == 2);
  int64_t N = w.size(0), K = w.size(1);
  TORCH_CHECK(K % 2 == 0);
  int64_t P = (N + 16 * NB - 1) / (16 * NB);
  auto wp = torch::zeros({P * 16 * NB, K}, w.options());
  wp.narrow(0, 0, N).copy_(w);
  // [P, NB, 16, K/2, 2] -> [P, K/2, NB, 16, 2]
  return wp.view({P, NB, 16, K / 2, 2}).permute({0, 3, 1, 2, 4}).contiguous();
}

template <int M>
static inline void panel(const uint16_t* x, int64_t ldx, const uint16_t* wp, int64_t K2, float* out, int64_t ldo) {
  __m512 acc[M][NB];
  for (int m = 0; m < M; m++) for (int i = 0; i < NB; i++) acc[m][i] = _mm512_setzero_ps();
  for (int64_t kp = 0; kp < K2; kp++) {
    const uint16_t* wk = wp + kp * NB * 32;
    _mm_prefetch((const char*)(wk + 16 * NB * 32), _MM_HINT_T0);
    __m512bh w[NB];
    for (int i = 0; i < NB; i++) w[i] = (__m512bh)_mm512_loadu_si512((const void*)(wk + i * 32));
    for (int m = 0; m < M; m++) {
      __m512bh b = (__m512bh)_mm512_set1_epi32(*(const int32_t*)(x + m * ldx + 2 * kp));
      for (int i = 0; i < NB; i++) acc[m][i] = _mm512_dpbf16_ps(acc[m][i], w[i], b);
    }
  }
  for (int m = 0; m < M; m++) for (int i = 0; i < NB; i++) _mm512_storeu_ps(out + m * ldo + i * 16, acc[m][i]);
}

torch::Tensor gemm(torch::Tensor x, torch::Tensor wp, int64_t N) {  // x [M, K] bf16 contiguous
  TORCH_CHECK(x.dtype() == torch::kBFloat16 && x.is_contiguous());
  int64_t M = x.size(0), K = x.size(1), P = wp.size(0), K2 = K / 2;
  auto out = torch::empty({M, P * 16 * NB}, x.options().dtype(torch::kFloat));
  const uint16_t* xp = (const uint16_t*)x.data_ptr();
  const uint16_t* w = (const uint16_t*)wp.data_ptr();
  float* o = out.data_ptr<float>();
  int64_t ldo = P * 16 * NB;
  at::parallel_for(0, P, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; p++) {
      const uint16_t* wpp = w + p * K2 * NB * 32;
      int64_t m = 0;
      for (; m + 6 <= M; m += 6) panel<6>(xp + m * K, K, wpp, K2, o + m * ldo + p * 64, ldo);
      switch (M - m) {
        case 1: panel<1>(xp + m * K, K, wpp, K2, o + m * ldo + p * 64, ldo); break;
        case 2: panel<2>(xp + m * K, K, wpp, K2, o + m * ldo + p * 64, ldo); break;
        case 3: panel<3>(xp + m * K, K, wpp, K2, o + m * ldo + p * 64, ldo); break;
        case 4: panel<4>(xp + m * K, K, wpp, K2, o + m * ldo + p * 64, ldo); break;
        case 5: panel<5>(xp + m * K, K, wpp, K2, o + m * ldo + p * 64, ldo); break;
        default: break;
      }
    }
  });
  return out.narrow(1, 0, N).to(torch::kBFloat16);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("pack", &pack); m.def("gemm", &gemm); }
