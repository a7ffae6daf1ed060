// Causal attention kernels behind attention.hpp, in two implementations selected at compile
// time by CONVEYOR_ATTENTION_TENSOR_CORES:
//  1 (default): the tensor-core FlashAttention-2 kernels (mma.sync bf16, P and dS rounded
//    to bf16 for their products as FlashAttention-2 does).
//  0: the first CUDA-core kernels (~12 TFLOP/s forward, ~11.6 backward at that shape), kept
//    as the reference the tensor-core kernels were checked against.
#ifndef CONVEYOR_ATTENTION_TENSOR_CORES
#define CONVEYOR_ATTENTION_TENSOR_CORES 1
#endif

#if CONVEYOR_ATTENTION_TENSOR_CORES
// Flash-style causal attention on tensor cores (FlashAttention-2 decomposition):
// bf16 mma.sync.m16n8k16 with fp32 accumulation, operands staged in shared memory with
// cp.async (double-buffered) and read into fragments with ldmatrix. The probabilities P and
// dS = P (dP - delta) are formed in fp32 and rounded to bf16 for the products that read them
// (P V, P^T dO, dS^T Q, dS K); the logsumexp and every accumulator stay fp32.
//
// Forward: a block of 4 warps owns 64 consecutive query rows of one (batch, head), 16 rows
// per warp (Q stays in shared memory); it walks key/value tiles of 64 keys up to
// the diagonal (fully masked tiles are never visited) with an online softmax in the exp2
// domain and writes the output and the natural-log logsumexp of each row.
// Backward (no atomics, deterministic): delta = rowsum(dout * out); a dK/dV kernel whose
// block owns 64 keys (16 per warp) and walks query tiles of 32 from the diagonal to the
// end, forming S^T and dP^T per warp; a dQ kernel whose block owns 64 queries and walks
// key tiles of 32 up to the diagonal. P is recomputed from the logsumexp in both.
// Shared rows are padded by 8 bf16 (16 bytes) so that ldmatrix's eight row addresses of
// one 8x8 matrix hit distinct banks. Rows past T are zero-filled in shared memory (never
// read from global) and masked, so any T >= 1 works.
#include <cmath>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/common.cuh"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Forward tiles.
constexpr int kFwdRows = 64;  // queries per block (16 per warp)
constexpr int kFwdKeys = 64;  // keys per tile
// Backward tiles.
constexpr int kKvRows = 64;   // keys per dK/dV block (16 per warp)
constexpr int kKvQ = 32;      // queries per tile in the dK/dV kernel
constexpr int kQRows = 64;    // queries per dQ block (16 per warp)
constexpr int kQKeys = 32;    // keys per tile in the dQ kernel

struct HeadView {  // pointers of one (batch, head) inside the fused layouts
  const bf16* q;   // (T, hs), row stride 3C
  const bf16* k;
  const bf16* v;
  std::int64_t stride;  // 3C
};

__device__ __forceinline__ HeadView head_view(const bf16* qkv, int b, int h, int T, int C, int hs) {
  const bf16* q = qkv + std::int64_t{b} * T * 3 * C + std::int64_t{h} * hs;
  return {q, q + C, q + 2 * C, 3 * std::int64_t{C}};
}

// ----------------------------------------------------------------------------
// PTX helpers

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; zero-fills (reads nothing) when !pred.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool pred) {
  const int bytes = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c += a * b, m16n8k16, bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lower column) in the low half
  return *reinterpret_cast<const unsigned*>(&v);
}

// A-operand fragment of a 16x16 tile from two C fragments (n-blocks 2kk, 2kk+1) of fp32
// values, rounded to bf16 (as FlashAttention-2 and cuDNN do with P and dS).
__device__ __forceinline__ void to_a(const float (&c0)[4], const float (&c1)[4],
                                     unsigned (&a)[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

// Fragment addresses inside a row-major shared tile with leading dimension ld (elements).
// A operand (16 rows x 16 k) at rows [0,16), k [k0, k0+16).
__device__ __forceinline__ const bf16* a_addr(const bf16* base, int ld, int k0, int lane) {
  return base + (lane & 15) * ld + k0 + (lane >> 4) * 8;
}
// B operand stored as [n][k] (B^T row-major): n [n0, n0+16) (two n-blocks), k [k0, k0+16).
// ldsm_x4 gives {b0, b1} of n-block n0/8 in r[0..1] and of n-block n0/8+1 in r[2..3].
__device__ __forceinline__ const bf16* bt_addr(const bf16* base, int ld, int n0, int k0,
                                               int lane) {
  return base + (n0 + (lane & 7) + ((lane >> 4) << 3)) * ld + k0 + ((lane >> 3) & 1) * 8;
}
// B operand stored as [k][n] (row-major): k [k0, k0+16), n [n0, n0+16); use ldsm_x4_t.
__device__ __forceinline__ const bf16* b_addr(const bf16* base, int ld, int k0, int n0,
                                              int lane) {
  return base + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0 + (lane >> 4) * 8;
}

// Rows [r0, r0 + R) of a (T, D) matrix with row stride `stride` into shared [R][D + 8],
// rows >= T zero-filled. Issues cp.async; the caller commits and waits.
template <int R, int D>
__device__ __forceinline__ void load_rows(bf16* dst, const bf16* src, std::int64_t stride, int r0,
                                          int T) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kLd = D + 8;
  static_assert(R * kChunks % kThreads == 0, "whole rounds of 16-byte chunks");
#pragma unroll
  for (int i = 0; i < R * kChunks / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads;
    const int r = idx / kChunks, c = idx % kChunks, row = r0 + r;
    const bool ok = row < T;
    const bf16* g = ok ? src + row * stride + c * 8 : src;
    cp_async16(dst + r * kLd + c * 8, g, ok);
  }
}

// ----------------------------------------------------------------------------
// forward

template <int D>
constexpr int fwd_smem_bytes() {
  return (kFwdRows + 4 * kFwdKeys) * (D + 8) * 2;  // Q, K x2, V x2
}

// grid (ceil(T / 64), B * NH), block 128, dynamic shared fwd_smem_bytes<D>().
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, int C, int NH,
                             float scale_log2) {
  constexpr int kLd = D + 8;
  constexpr int kKSteps = D / 16;      // k-steps of S = Q K^T
  constexpr int kSBlocks = kFwdKeys / 8;  // n-blocks of S
  constexpr int kOBlocks = D / 8;      // n-blocks of O
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);
  bf16* k_s = q_s + kFwdRows * kLd;       // [2][kFwdKeys][kLd]
  bf16* v_s = k_s + 2 * kFwdKeys * kLd;   // [2][kFwdKeys][kLd]

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane >> 2, tq = lane & 3;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kFwdRows;  // longest rows first
  const HeadView hv = head_view(qkv, b, h, T, C, D);
  const int n_tiles = (min(T, q0 + kFwdRows) + kFwdKeys - 1) / kFwdKeys;

  load_rows<kFwdRows, D>(q_s, hv.q, hv.stride, q0, T);
  load_rows<kFwdKeys, D>(k_s, hv.k, hv.stride, 0, T);
  load_rows<kFwdKeys, D>(v_s, hv.v, hv.stride, 0, T);
  cp_async_commit();

  float o[kOBlocks][4];
#pragma unroll
  for (int nb = 0; nb < kOBlocks; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g, g + 8 (l per thread)
  const int row0 = q0 + warp * 16;  // this warp's first query

  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1;
    if (j + 1 < n_tiles) {  // prefetch the next tile into the other buffer
      load_rows<kFwdKeys, D>(k_s + (buf ^ 1) * kFwdKeys * kLd, hv.k, hv.stride,
                             (j + 1) * kFwdKeys, T);
      load_rows<kFwdKeys, D>(v_s + (buf ^ 1) * kFwdKeys * kLd, hv.v, hv.stride,
                             (j + 1) * kFwdKeys, T);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile j (and Q) landed
    __syncthreads();
    const bf16* kb = k_s + buf * kFwdKeys * kLd;
    const bf16* vb = v_s + buf * kFwdKeys * kLd;

    float s[kSBlocks][4];
#pragma unroll
    for (int nb = 0; nb < kSBlocks; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      unsigned qf[4];  // re-read from shared per tile: registers go to the accumulators
      ldsm_x4(qf, a_addr(q_s + warp * 16 * kLd, kLd, kk * 16, lane));
#pragma unroll
      for (int np = 0; np < kSBlocks / 2; ++np) {
        unsigned bfr[4];
        ldsm_x4(bfr, bt_addr(kb, kLd, np * 16, kk * 16, lane));
        mma16816(s[2 * np], qf, bfr[0], bfr[1]);
        mma16816(s[2 * np + 1], qf, bfr[2], bfr[3]);
      }
    }
    const int k0 = j * kFwdKeys;
    if (k0 + kFwdKeys - 1 > row0) {  // the tile crosses this warp's diagonal
#pragma unroll
      for (int nb = 0; nb < kSBlocks; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int qi = row0 + g + (e >> 1) * 8, kj = k0 + nb * 8 + 2 * tq + (e & 1);
          if (kj > qi) s[nb][e] = -INFINITY;
        }
    }
    // Online softmax; every row has an unmasked key in every tile it visits (key k0 <= row
    // on the diagonal tile), so m is finite after the first tile.
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < kSBlocks; ++nb) mx = fmaxf(mx, fmaxf(s[nb][2 * hr], s[nb][2 * hr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[hr], mx * scale_log2);
      const float alpha = exp2f(m[hr] - m_new);  // 0 on the first tile
      float sum = 0.0f;
#pragma unroll
      for (int nb = 0; nb < kSBlocks; ++nb)
#pragma unroll
        for (int e = 2 * hr; e < 2 * hr + 2; ++e) {
          const float p = exp2f(s[nb][e] * scale_log2 - m_new);
          s[nb][e] = p;
          sum += p;
        }
      l[hr] = l[hr] * alpha + sum;
#pragma unroll
      for (int nb = 0; nb < kOBlocks; ++nb) {
        o[nb][2 * hr] *= alpha;
        o[nb][2 * hr + 1] *= alpha;
      }
      m[hr] = m_new;
    }
    // O += P V
#pragma unroll
    for (int kk = 0; kk < kFwdKeys / 16; ++kk) {
      unsigned a[4];
      to_a(s[2 * kk], s[2 * kk + 1], a);
#pragma unroll
      for (int np = 0; np < kOBlocks / 2; ++np) {
        unsigned bfr[4];
        ldsm_x4_t(bfr, b_addr(vb, kLd, kk * 16, np * 16, lane));
        mma16816(o[2 * np], a, bfr[0], bfr[1]);
        mma16816(o[2 * np + 1], a, bfr[2], bfr[3]);
      }
    }
    __syncthreads();  // buffer `buf` is free for the prefetch of the next iteration
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 1);
    l[hr] += __shfl_xor_sync(0xffffffffu, l[hr], 2);
    const int qi = row0 + g + hr * 8;
    if (qi >= T) continue;
    const float inv = 1.0f / l[hr];  // l >= 1: the row's maximum contributes exp(0)
    bf16* o_row = out + (std::int64_t{b} * T + qi) * C + std::int64_t{h} * D;
#pragma unroll
    for (int nb = 0; nb < kOBlocks; ++nb) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(o[nb][2 * hr] * inv, o[nb][2 * hr + 1] * inv);
      *reinterpret_cast<__nv_bfloat162*>(o_row + nb * 8 + 2 * tq) = v;
    }
    if (tq == 0) lse[std::int64_t{bh} * T + qi] = (m[hr] + log2f(l[hr])) * kLn2;
  }
}

// ----------------------------------------------------------------------------
// backward

// delta[b, h, t] = sum_d dout[b, t, h, d] * out[b, t, h, d]. One warp per (b, h, t).
__global__ void attention_delta_kernel(float* delta, const bf16* dout, const bf16* out, int B,
                                       int T, int C, int NH) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t row = blockIdx.x * std::int64_t{kWarps} + threadIdx.x / kWarpSize;
  if (row >= std::int64_t{B} * NH * T) return;
  const int t = static_cast<int>(row % T);
  const int bh = static_cast<int>(row / T), b = bh / NH, h = bh % NH;
  const int hs = C / NH;
  const std::int64_t base = (std::int64_t{b} * T + t) * C + std::int64_t{h} * hs;
  float sum = 0.0f;
  for (int d = lane; d < hs; d += kWarpSize) sum += to_float(dout[base + d]) * to_float(out[base + d]);
  sum = warp_sum(sum);
  if (lane == 0) delta[row] = sum;
}

// Both backward kernels stage 2 x 64 owned rows and 2 buffers x 2 x 32 streamed rows.
template <int D>
constexpr int bwd_smem_bytes() {
  return (2 * 64 + 4 * 32) * (D + 8) * 2 + 4 * kKvQ * static_cast<int>(sizeof(float));
}

// dK, dV. grid (ceil(T / 64), B * NH), block 128, dynamic shared bwd_smem_bytes<D>(). The
// block owns keys [k0, k0 + 64) (16 per warp) and walks query tiles of 32 from k0 to the end
// (earlier queries cannot see these keys). Per warp and tile: S^T = K Q^T, dP^T = V dO^T,
// P^T = exp(S^T scale - lse), dS^T = P^T (dP^T - delta), dV += P^T dO, dK += dS^T Q.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_kv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                 const float* delta, int T, int C, int NH, float scale,
                                 float scale_log2) {
  constexpr int kLd = D + 8;
  constexpr int kKSteps = D / 16;
  constexpr int kSBlocks = kKvQ / 8;
  constexpr int kOBlocks = D / 8;
  static_assert(kKvRows % kKvQ == 0, "query tiles start at the key block");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* k_s = reinterpret_cast<bf16*>(smem_raw);  // [kKvRows][kLd]
  bf16* v_s = k_s + kKvRows * kLd;
  bf16* q_s = v_s + kKvRows * kLd;                // [2][kKvQ][kLd]
  bf16* do_s = q_s + 2 * kKvQ * kLd;
  float* lse_s = reinterpret_cast<float*>(do_s + 2 * kKvQ * kLd);  // [2][kKvQ], log2 domain
  float* dl_s = lse_s + 2 * kKvQ;

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane >> 2, tq = lane & 3;
  const int k0 = blockIdx.x * kKvRows;  // blocks with the most queries first
  const HeadView hv = head_view(qkv, b, h, T, C, D);
  const bf16* dout_h = dout + std::int64_t{b} * T * C + std::int64_t{h} * D;  // row stride C
  const float* lse_h = lse + std::int64_t{bh} * T;
  const float* delta_h = delta + std::int64_t{bh} * T;
  const int n_tiles = (T - k0 + kKvQ - 1) / kKvQ;

  auto load_q_tile = [&](int buf, int qt) {
    load_rows<kKvQ, D>(q_s + buf * kKvQ * kLd, hv.q, hv.stride, qt, T);
    load_rows<kKvQ, D>(do_s + buf * kKvQ * kLd, dout_h, C, qt, T);
    if (threadIdx.x < kKvQ) {
      const int qi = qt + threadIdx.x;
      lse_s[buf * kKvQ + threadIdx.x] = qi < T ? lse_h[qi] * kLog2e : 0.0f;
      dl_s[buf * kKvQ + threadIdx.x] = qi < T ? delta_h[qi] : 0.0f;
    }
  };
  load_rows<kKvRows, D>(k_s, hv.k, hv.stride, k0, T);
  load_rows<kKvRows, D>(v_s, hv.v, hv.stride, k0, T);
  load_q_tile(0, k0);
  cp_async_commit();

  float dk[kOBlocks][4], dv[kOBlocks][4];
#pragma unroll
  for (int nb = 0; nb < kOBlocks; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[nb][e] = dv[nb][e] = 0.0f;
  const int key0 = k0 + warp * 16;  // this warp's first key
  const bf16* kw = k_s + warp * 16 * kLd;
  const bf16* vw = v_s + warp * 16 * kLd;

  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1, qt = k0 + j * kKvQ;
    if (j + 1 < n_tiles) load_q_tile(buf ^ 1, qt + kKvQ);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const bf16* qb = q_s + buf * kKvQ * kLd;
    const bf16* dob = do_s + buf * kKvQ * kLd;
    const float* ls = lse_s + buf * kKvQ;
    const float* dls = dl_s + buf * kKvQ;

    float s[kSBlocks][4], dp[kSBlocks][4];
#pragma unroll
    for (int nb = 0; nb < kSBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nb][e] = dp[nb][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      unsigned ka[4], va[4];
      ldsm_x4(ka, a_addr(kw, kLd, kk * 16, lane));
      ldsm_x4(va, a_addr(vw, kLd, kk * 16, lane));
#pragma unroll
      for (int np = 0; np < kSBlocks / 2; ++np) {
        unsigned bq[4], bd[4];
        ldsm_x4(bq, bt_addr(qb, kLd, np * 16, kk * 16, lane));
        ldsm_x4(bd, bt_addr(dob, kLd, np * 16, kk * 16, lane));
        mma16816(s[2 * np], ka, bq[0], bq[1]);
        mma16816(s[2 * np + 1], ka, bq[2], bq[3]);
        mma16816(dp[2 * np], va, bd[0], bd[1]);
        mma16816(dp[2 * np + 1], va, bd[2], bd[3]);
      }
    }
    const bool edge = qt < key0 + 15 || qt + kKvQ > T;
#pragma unroll
    for (int nb = 0; nb < kSBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nb * 8 + 2 * tq + (e & 1);
        const int qi = qt + col, kj = key0 + g + (e >> 1) * 8;
        float p = exp2f(s[nb][e] * scale_log2 - ls[col]);
        if (edge && (kj > qi || qi >= T)) p = 0.0f;
        s[nb][e] = p;
        dp[nb][e] = p * (dp[nb][e] - dls[col]);
      }
#pragma unroll
    for (int kk = 0; kk < kKvQ / 16; ++kk) {
      unsigned pa[4];
      to_a(s[2 * kk], s[2 * kk + 1], pa);
#pragma unroll
      for (int np = 0; np < kOBlocks / 2; ++np) {
        unsigned bd[4];
        ldsm_x4_t(bd, b_addr(dob, kLd, kk * 16, np * 16, lane));
        mma16816(dv[2 * np], pa, bd[0], bd[1]);
        mma16816(dv[2 * np + 1], pa, bd[2], bd[3]);
      }
      unsigned da[4];
      to_a(dp[2 * kk], dp[2 * kk + 1], da);
#pragma unroll
      for (int np = 0; np < kOBlocks / 2; ++np) {
        unsigned bq[4];
        ldsm_x4_t(bq, b_addr(qb, kLd, kk * 16, np * 16, lane));
        mma16816(dk[2 * np], da, bq[0], bq[1]);
        mma16816(dk[2 * np + 1], da, bq[2], bq[3]);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int kj = key0 + g + hr * 8;
    if (kj >= T) continue;
    bf16* row = dqkv + (std::int64_t{b} * T + kj) * 3 * C + std::int64_t{h} * D + 2 * tq;
#pragma unroll
    for (int nb = 0; nb < kOBlocks; ++nb) {
      *reinterpret_cast<__nv_bfloat162*>(row + C + nb * 8) =
          __floats2bfloat162_rn(dk[nb][2 * hr] * scale, dk[nb][2 * hr + 1] * scale);
      *reinterpret_cast<__nv_bfloat162*>(row + 2 * C + nb * 8) =
          __floats2bfloat162_rn(dv[nb][2 * hr], dv[nb][2 * hr + 1]);
    }
  }
}

// dQ. grid (ceil(T / 64), B * NH), block 128, dynamic shared bwd_smem_bytes<D>(). The block
// owns queries [q0, q0 + 64) (16 per warp) and walks key tiles of 32 up to its last query.
// Per warp and tile: S = Q K^T, dP = dO V^T, dS = P (dP - delta), dQ += dS K.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_q_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                const float* delta, int T, int C, int NH, float scale,
                                float scale_log2) {
  constexpr int kLd = D + 8;
  constexpr int kKSteps = D / 16;
  constexpr int kSBlocks = kQKeys / 8;
  constexpr int kOBlocks = D / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // [kQRows][kLd]
  bf16* do_s = q_s + kQRows * kLd;
  bf16* k_s = do_s + kQRows * kLd;                // [2][kQKeys][kLd]
  bf16* v_s = k_s + 2 * kQKeys * kLd;

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane >> 2, tq = lane & 3;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kQRows;  // blocks with the most keys first
  const HeadView hv = head_view(qkv, b, h, T, C, D);
  const bf16* dout_h = dout + std::int64_t{b} * T * C + std::int64_t{h} * D;
  const int n_tiles = (min(T, q0 + kQRows) + kQKeys - 1) / kQKeys;

  load_rows<kQRows, D>(q_s, hv.q, hv.stride, q0, T);
  load_rows<kQRows, D>(do_s, dout_h, C, q0, T);
  load_rows<kQKeys, D>(k_s, hv.k, hv.stride, 0, T);
  load_rows<kQKeys, D>(v_s, hv.v, hv.stride, 0, T);
  cp_async_commit();

  const int row0 = q0 + warp * 16;
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int qi = row0 + g + hr * 8;
    row_lse[hr] = qi < T ? lse[std::int64_t{bh} * T + qi] * kLog2e : 0.0f;
    row_delta[hr] = qi < T ? delta[std::int64_t{bh} * T + qi] : 0.0f;
  }
  float dq[kOBlocks][4];
#pragma unroll
  for (int nb = 0; nb < kOBlocks; ++nb) dq[nb][0] = dq[nb][1] = dq[nb][2] = dq[nb][3] = 0.0f;
  const bf16* qw = q_s + warp * 16 * kLd;
  const bf16* dow = do_s + warp * 16 * kLd;

  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1, k0 = j * kQKeys;
    if (j + 1 < n_tiles) {
      load_rows<kQKeys, D>(k_s + (buf ^ 1) * kQKeys * kLd, hv.k, hv.stride, k0 + kQKeys, T);
      load_rows<kQKeys, D>(v_s + (buf ^ 1) * kQKeys * kLd, hv.v, hv.stride, k0 + kQKeys, T);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const bf16* kb = k_s + buf * kQKeys * kLd;
    const bf16* vb = v_s + buf * kQKeys * kLd;

    float s[kSBlocks][4], dp[kSBlocks][4];
#pragma unroll
    for (int nb = 0; nb < kSBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nb][e] = dp[nb][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      unsigned qa[4], da[4];
      ldsm_x4(qa, a_addr(qw, kLd, kk * 16, lane));
      ldsm_x4(da, a_addr(dow, kLd, kk * 16, lane));
#pragma unroll
      for (int np = 0; np < kSBlocks / 2; ++np) {
        unsigned bk[4], bv[4];
        ldsm_x4(bk, bt_addr(kb, kLd, np * 16, kk * 16, lane));
        ldsm_x4(bv, bt_addr(vb, kLd, np * 16, kk * 16, lane));
        mma16816(s[2 * np], qa, bk[0], bk[1]);
        mma16816(s[2 * np + 1], qa, bk[2], bk[3]);
        mma16816(dp[2 * np], da, bv[0], bv[1]);
        mma16816(dp[2 * np + 1], da, bv[2], bv[3]);
      }
    }
    const bool edge = k0 + kQKeys - 1 > row0;
#pragma unroll
    for (int nb = 0; nb < kSBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qi = row0 + g + (e >> 1) * 8, kj = k0 + nb * 8 + 2 * tq + (e & 1);
        float p = exp2f(s[nb][e] * scale_log2 - row_lse[e >> 1]);
        if (edge && kj > qi) p = 0.0f;
        s[nb][e] = p * (dp[nb][e] - row_delta[e >> 1]);  // dS
      }
#pragma unroll
    for (int kk = 0; kk < kQKeys / 16; ++kk) {
      unsigned a[4];
      to_a(s[2 * kk], s[2 * kk + 1], a);
#pragma unroll
      for (int np = 0; np < kOBlocks / 2; ++np) {
        unsigned bk[4];
        ldsm_x4_t(bk, b_addr(kb, kLd, kk * 16, np * 16, lane));
        mma16816(dq[2 * np], a, bk[0], bk[1]);
        mma16816(dq[2 * np + 1], a, bk[2], bk[3]);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int qi = row0 + g + hr * 8;
    if (qi >= T) continue;
    bf16* row = dqkv + (std::int64_t{b} * T + qi) * 3 * C + std::int64_t{h} * D + 2 * tq;
#pragma unroll
    for (int nb = 0; nb < kOBlocks; ++nb)
      *reinterpret_cast<__nv_bfloat162*>(row + nb * 8) =
          __floats2bfloat162_rn(dq[nb][2 * hr] * scale, dq[nb][2 * hr + 1] * scale);
  }
}

void check_dims(const char* what, int B, int T, int C, int NH) {
  require(B > 0 && T > 0 && C > 0 && NH > 0, what,
          "B, T, C, NH must be positive, got " + std::to_string(B) + ", " + std::to_string(T) +
              ", " + std::to_string(C) + ", " + std::to_string(NH));
  require(C % NH == 0 && (C / NH == 64 || C / NH == 128), what,
          "head size C / NH must be 64 or 128, got C=" + std::to_string(C) +
              " NH=" + std::to_string(NH));
  require(std::int64_t{B} * NH <= 65535, what, "B * NH must be <= 65535");
}

template <int D>
void launch_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH,
                    float scale_log2, cudaStream_t stream) {
  constexpr int smem = fwd_smem_bytes<D>();
  CUDA_CHECK(cudaFuncSetAttribute(attention_forward_kernel<D>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(ceil_div(T, kFwdRows), B * NH);
  attention_forward_kernel<D><<<grid, kThreads, smem, stream>>>(out, lse, qkv, T, C, NH,
                                                                scale_log2);
  CUDA_CHECK_LAUNCH();
}

template <int D>
void launch_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                     const float* delta, int B, int T, int C, int NH, float scale,
                     float scale_log2, cudaStream_t stream) {
  constexpr int smem = bwd_smem_bytes<D>();
  CUDA_CHECK(cudaFuncSetAttribute(attention_backward_kv_kernel<D>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CUDA_CHECK(cudaFuncSetAttribute(attention_backward_q_kernel<D>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  attention_backward_kv_kernel<D><<<dim3(ceil_div(T, kKvRows), B * NH), kThreads, smem, stream>>>(
      dqkv, dout, qkv, lse, delta, T, C, NH, scale, scale_log2);
  CUDA_CHECK_LAUNCH();
  attention_backward_q_kernel<D><<<dim3(ceil_div(T, kQRows), B * NH), kThreads, smem, stream>>>(
      dqkv, dout, qkv, lse, delta, T, C, NH, scale, scale_log2);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream) {
  check_dims("attention_forward", B, T, C, NH);
  const int hs = C / NH;
  const float scale_log2 = kLog2e / std::sqrt(static_cast<float>(hs));
  if (hs == 64)
    launch_forward<64>(out, lse, qkv, B, T, C, NH, scale_log2, stream);
  else
    launch_forward<128>(out, lse, qkv, B, T, C, NH, scale_log2, stream);
}

void attention_backward_input(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                              const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
  check_dims("attention_backward_input", B, T, C, NH);
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float scale_log2 = scale * kLog2e;
  const std::int64_t rows = std::int64_t{B} * NH * T;
  DeviceBuffer delta(sizeof(float) * rows, current_device(), stream, "attention backward delta");
  attention_delta_kernel<<<ceil_div(rows, kWarps), kThreads, 0, stream>>>(delta.as<float>(), dout,
                                                                         out, B, T, C, NH);
  CUDA_CHECK_LAUNCH();
  if (hs == 64)
    launch_backward<64>(dqkv, dout, qkv, lse, delta.as<float>(), B, T, C, NH, scale, scale_log2,
                        stream);
  else
    launch_backward<128>(dqkv, dout, qkv, lse, delta.as<float>(), B, T, C, NH, scale, scale_log2,
                         stream);
}

}  // namespace conveyor

#else  // CONVEYOR_ATTENTION_TENSOR_CORES

// Flash-style causal attention: forward with online softmax, backward as dK/dV and dQ
// kernels. Correctness first: CUDA-core FMAs, fp32 accumulation, no tensor cores yet.
//
// Work decomposition (forward and dQ): a block of 4 warps owns 16 consecutive query rows of
// one (batch, head), 4 rows per warp; it walks key tiles of 32 keys staged in shared
// memory, lane j of a warp owning key j of the tile for the scores and output dimensions
// d = lane + 32 i for the accumulators. dK/dV is the mirror image: a block owns 16 keys and
// walks query tiles. Shared rows are padded so that lane j reading row j hits bank j.
#include <cmath>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/common.cuh"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kBlockRows = kWarps * kRowsPerWarp;  // 16 rows (queries or keys) per block
constexpr int kTile = 32;                          // keys (or queries) per shared tile
constexpr int kThreads = kWarps * kWarpSize;

struct HeadView {  // pointers of one (batch, head) inside the fused layouts
  const bf16* q;   // (T, hs), row stride 3C
  const bf16* k;
  const bf16* v;
  std::int64_t stride;  // 3C
};

__device__ __forceinline__ HeadView head_view(const bf16* qkv, int b, int h, int T, int C, int hs) {
  const bf16* q = qkv + std::int64_t{b} * T * 3 * C + std::int64_t{h} * hs;
  return {q, q + C, q + 2 * C, 3 * std::int64_t{C}};
}

// ----------------------------------------------------------------------------
// kernels

// grid (ceil(T / 16), B * NH), block 128.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, int C, int NH,
                             float scale) {
  constexpr int kPer = D / kWarpSize;  // output dims per lane
  __shared__ float q_s[kBlockRows][D];
  __shared__ float k_s[kTile][D + 1];
  __shared__ float v_s[kTile][D + 1];

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int q0 = blockIdx.x * kBlockRows;
  const HeadView hv = head_view(qkv, b, h, T, C, D);

  for (int idx = threadIdx.x; idx < kBlockRows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D, qi = q0 + r;
    q_s[r][d] = qi < T ? to_float(hv.q[qi * hv.stride + d]) : 0.0f;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kPer];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) o[r][i] = 0.0f;
  }

  const int kv_end = min(T, q0 + kBlockRows);  // keys past the block's last query are masked
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();  // the previous tile is no longer read (and q_s is written, first time)
    for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
      const int j = idx / D, d = idx % D, kj = k0 + j;
      k_s[j][d] = kj < T ? to_float(hv.k[kj * hv.stride + d]) : 0.0f;
      v_s[j][d] = kj < T ? to_float(hv.v[kj * hv.stride + d]) : 0.0f;
    }
    __syncthreads();

    float s[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float kd = k_s[lane][d];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += q_s[warp * kRowsPerWarp + r][d] * kd;
    }
    const int kj = k0 + lane;
    float p[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int qi = q0 + warp * kRowsPerWarp + r;
      const bool valid = qi < T && kj <= qi;
      const float sr = valid ? s[r] * scale : -INFINITY;
      const float tile_max = warp_max(sr);
      p[r] = 0.0f;
      if (tile_max == -INFINITY) continue;  // whole tile masked for this row (warp-uniform)
      const float m_new = fmaxf(m[r], tile_max);
      p[r] = valid ? expf(sr - m_new) : 0.0f;
      const float alpha = expf(m[r] - m_new);  // 0 on the first tile (m = -inf)
      l[r] = l[r] * alpha + warp_sum(p[r]);
#pragma unroll
      for (int i = 0; i < kPer; ++i) o[r][i] *= alpha;
      m[r] = m_new;
    }
    for (int j = 0; j < kTile; ++j) {
      float vj[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) vj[i] = v_s[j][lane + kWarpSize * i];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float pj = __shfl_sync(0xffffffffu, p[r], j);
#pragma unroll
        for (int i = 0; i < kPer; ++i) o[r][i] += pj * vj[i];
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int qi = q0 + warp * kRowsPerWarp + r;
    if (qi >= T) continue;
    const float inv = 1.0f / l[r];  // l >= 1: the row's maximum contributes exp(0)
    bf16* o_row = out + (std::int64_t{b} * T + qi) * C + std::int64_t{h} * D;
#pragma unroll
    for (int i = 0; i < kPer; ++i) o_row[lane + kWarpSize * i] = to_bf16(o[r][i] * inv);
    if (lane == 0) lse[std::int64_t{bh} * T + qi] = m[r] + logf(l[r]);
  }
}

// delta[b, h, t] = sum_d dout[b, t, h, d] * out[b, t, h, d]. One warp per (b, h, t).
__global__ void attention_delta_kernel(float* delta, const bf16* dout, const bf16* out, int B,
                                       int T, int C, int NH) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t row = blockIdx.x * std::int64_t{kWarps} + threadIdx.x / kWarpSize;
  if (row >= std::int64_t{B} * NH * T) return;
  const int t = static_cast<int>(row % T);
  const int bh = static_cast<int>(row / T), b = bh / NH, h = bh % NH;
  const int hs = C / NH;
  const std::int64_t base = (std::int64_t{b} * T + t) * C + std::int64_t{h} * hs;
  float sum = 0.0f;
  for (int d = lane; d < hs; d += kWarpSize) sum += to_float(dout[base + d]) * to_float(out[base + d]);
  sum = warp_sum(sum);
  if (lane == 0) delta[row] = sum;
}

// dK, dV. grid (ceil(T / 16), B * NH), block 128. The block owns keys [k0, k0 + 16) and
// walks query tiles from the one holding k0 to the end (earlier queries cannot see them).
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_kv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                 const float* delta, int T, int C, int NH, float scale) {
  constexpr int kPer = D / kWarpSize;
  constexpr int kPad = D + 2;  // bf16 rows padded by one 4-byte word
  __shared__ float k_s[kBlockRows][D];
  __shared__ float v_s[kBlockRows][D];
  __shared__ bf16 q_s[kTile][kPad];
  __shared__ bf16 do_s[kTile][kPad];
  __shared__ float lse_s[kTile];
  __shared__ float delta_s[kTile];

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int k0 = blockIdx.x * kBlockRows;
  const HeadView hv = head_view(qkv, b, h, T, C, D);
  const bf16* dout_h = dout + std::int64_t{b} * T * C + std::int64_t{h} * D;  // row stride C

  for (int idx = threadIdx.x; idx < kBlockRows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D, kj = k0 + r;
    k_s[r][d] = kj < T ? to_float(hv.k[kj * hv.stride + d]) : 0.0f;
    v_s[r][d] = kj < T ? to_float(hv.v[kj * hv.stride + d]) : 0.0f;
  }

  float dk[kRowsPerWarp][kPer], dv[kRowsPerWarp][kPer];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int i = 0; i < kPer; ++i) dk[r][i] = dv[r][i] = 0.0f;

  for (int qt = k0 / kTile * kTile; qt < T; qt += kTile) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
      const int j = idx / D, d = idx % D, qi = qt + j;
      q_s[j][d] = qi < T ? hv.q[qi * hv.stride + d] : to_bf16(0.0f);
      do_s[j][d] = qi < T ? dout_h[std::int64_t{qi} * C + d] : to_bf16(0.0f);
    }
    if (threadIdx.x < kTile) {
      const int qi = qt + threadIdx.x;
      lse_s[threadIdx.x] = qi < T ? lse[std::int64_t{bh} * T + qi] : 0.0f;
      delta_s[threadIdx.x] = qi < T ? delta[std::int64_t{bh} * T + qi] : 0.0f;
    }
    __syncthreads();

    // lane = query qt + lane; rows r = this warp's keys.
    float s[kRowsPerWarp], dp[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = dp[r] = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float qd = to_float(q_s[lane][d]);
      const float dod = to_float(do_s[lane][d]);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        s[r] += qd * k_s[warp * kRowsPerWarp + r][d];
        dp[r] += dod * v_s[warp * kRowsPerWarp + r][d];
      }
    }
    const int qi = qt + lane;
    float p[kRowsPerWarp], ds[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int kj = k0 + warp * kRowsPerWarp + r;
      const bool valid = qi < T && kj < T && kj <= qi;
      p[r] = valid ? expf(s[r] * scale - lse_s[lane]) : 0.0f;
      ds[r] = p[r] * (dp[r] - delta_s[lane]);
    }
    for (int j = 0; j < kTile; ++j) {
      float qj[kPer], doj[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        qj[i] = to_float(q_s[j][lane + kWarpSize * i]);
        doj[i] = to_float(do_s[j][lane + kWarpSize * i]);
      }
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float pj = __shfl_sync(0xffffffffu, p[r], j);
        const float dsj = __shfl_sync(0xffffffffu, ds[r], j);
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
          dv[r][i] += pj * doj[i];
          dk[r][i] += dsj * qj[i];
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int kj = k0 + warp * kRowsPerWarp + r;
    if (kj >= T) continue;
    bf16* row = dqkv + (std::int64_t{b} * T + kj) * 3 * C + std::int64_t{h} * D;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      row[C + lane + kWarpSize * i] = to_bf16(dk[r][i] * scale);
      row[2 * C + lane + kWarpSize * i] = to_bf16(dv[r][i]);
    }
  }
}

// dQ. grid (ceil(T / 16), B * NH), block 128. The block owns queries [q0, q0 + 16) and walks
// key tiles up to its last query.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_q_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                const float* delta, int T, int C, int NH, float scale) {
  constexpr int kPer = D / kWarpSize;
  constexpr int kPad = D + 2;
  __shared__ float q_s[kBlockRows][D];
  __shared__ float do_s[kBlockRows][D];
  __shared__ bf16 k_s[kTile][kPad];
  __shared__ bf16 v_s[kTile][kPad];

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int q0 = blockIdx.x * kBlockRows;
  const HeadView hv = head_view(qkv, b, h, T, C, D);
  const bf16* dout_h = dout + std::int64_t{b} * T * C + std::int64_t{h} * D;

  for (int idx = threadIdx.x; idx < kBlockRows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D, qi = q0 + r;
    q_s[r][d] = qi < T ? to_float(hv.q[qi * hv.stride + d]) : 0.0f;
    do_s[r][d] = qi < T ? to_float(dout_h[std::int64_t{qi} * C + d]) : 0.0f;
  }
  float row_lse[kRowsPerWarp], row_delta[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int qi = q0 + warp * kRowsPerWarp + r;
    row_lse[r] = qi < T ? lse[std::int64_t{bh} * T + qi] : 0.0f;
    row_delta[r] = qi < T ? delta[std::int64_t{bh} * T + qi] : 0.0f;
  }

  float dq[kRowsPerWarp][kPer];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int i = 0; i < kPer; ++i) dq[r][i] = 0.0f;

  const int kv_end = min(T, q0 + kBlockRows);
  for (int k0 = 0; k0 < kv_end; k0 += kTile) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
      const int j = idx / D, d = idx % D, kj = k0 + j;
      k_s[j][d] = kj < T ? hv.k[kj * hv.stride + d] : to_bf16(0.0f);
      v_s[j][d] = kj < T ? hv.v[kj * hv.stride + d] : to_bf16(0.0f);
    }
    __syncthreads();

    // lane = key k0 + lane; rows r = this warp's queries.
    float s[kRowsPerWarp], dp[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = dp[r] = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float kd = to_float(k_s[lane][d]);
      const float vd = to_float(v_s[lane][d]);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        s[r] += q_s[warp * kRowsPerWarp + r][d] * kd;
        dp[r] += do_s[warp * kRowsPerWarp + r][d] * vd;
      }
    }
    const int kj = k0 + lane;
    float ds[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int qi = q0 + warp * kRowsPerWarp + r;
      const bool valid = qi < T && kj <= qi;
      const float p = valid ? expf(s[r] * scale - row_lse[r]) : 0.0f;
      ds[r] = p * (dp[r] - row_delta[r]);
    }
    for (int j = 0; j < kTile; ++j) {
      float kj_[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) kj_[i] = to_float(k_s[j][lane + kWarpSize * i]);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float dsj = __shfl_sync(0xffffffffu, ds[r], j);
#pragma unroll
        for (int i = 0; i < kPer; ++i) dq[r][i] += dsj * kj_[i];
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int qi = q0 + warp * kRowsPerWarp + r;
    if (qi >= T) continue;
    bf16* row = dqkv + (std::int64_t{b} * T + qi) * 3 * C + std::int64_t{h} * D;
#pragma unroll
    for (int i = 0; i < kPer; ++i) row[lane + kWarpSize * i] = to_bf16(dq[r][i] * scale);
  }
}

void check_dims(const char* what, int B, int T, int C, int NH) {
  require(B > 0 && T > 0 && C > 0 && NH > 0, what,
          "B, T, C, NH must be positive, got " + std::to_string(B) + ", " + std::to_string(T) +
              ", " + std::to_string(C) + ", " + std::to_string(NH));
  require(C % NH == 0 && (C / NH == 64 || C / NH == 128), what,
          "head size C / NH must be 64 or 128, got C=" + std::to_string(C) +
              " NH=" + std::to_string(NH));
  require(std::int64_t{B} * NH <= 65535, what, "B * NH must be <= 65535");
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream) {
  check_dims("attention_forward", B, T, C, NH);
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const dim3 grid(ceil_div(T, kBlockRows), B * NH);
  if (hs == 64)
    attention_forward_kernel<64><<<grid, kThreads, 0, stream>>>(out, lse, qkv, T, C, NH, scale);
  else
    attention_forward_kernel<128><<<grid, kThreads, 0, stream>>>(out, lse, qkv, T, C, NH, scale);
  CUDA_CHECK_LAUNCH();
}

void attention_backward_input(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                              const float* lse, int B, int T, int C, int NH, cudaStream_t stream) {
  check_dims("attention_backward_input", B, T, C, NH);
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const std::int64_t rows = std::int64_t{B} * NH * T;
  DeviceBuffer delta(sizeof(float) * rows, current_device(), stream, "attention backward delta");
  attention_delta_kernel<<<ceil_div(rows, kWarps), kThreads, 0, stream>>>(delta.as<float>(), dout,
                                                                         out, B, T, C, NH);
  CUDA_CHECK_LAUNCH();
  const dim3 grid(ceil_div(T, kBlockRows), B * NH);
  if (hs == 64) {
    attention_backward_kv_kernel<64><<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse,
                                                                    delta.as<float>(), T, C, NH,
                                                                    scale);
    CUDA_CHECK_LAUNCH();
    attention_backward_q_kernel<64><<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse,
                                                                   delta.as<float>(), T, C, NH,
                                                                   scale);
  } else {
    attention_backward_kv_kernel<128><<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse,
                                                                     delta.as<float>(), T, C, NH,
                                                                     scale);
    CUDA_CHECK_LAUNCH();
    attention_backward_q_kernel<128><<<grid, kThreads, 0, stream>>>(dqkv, dout, qkv, lse,
                                                                    delta.as<float>(), T, C, NH,
                                                                    scale);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor

#endif  // CONVEYOR_ATTENTION_TENSOR_CORES
