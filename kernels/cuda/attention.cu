// Causal attention kernels behind attention.hpp: FlashAttention-2 on tensor cores.
// bf16 mma.sync.m16n8k16 with fp32 accumulation, operands staged in shared memory with
// cp.async (double-buffered) and read into fragments with ldmatrix. The probabilities P and
// dS = P (dP - delta) are formed in fp32 and rounded to bf16 for the products that read them
// (P V, P^T dO, dS^T Q, dS K), as FlashAttention-2 and cuDNN do; the logsumexp and every
// accumulator stay fp32.
//
// Forward: a block of 4 warps owns 128 query rows, 32 per warp (two m-tiles, so each K and V
// fragment read from shared memory feeds two products); it walks key/value tiles of 32 up to
// the diagonal (fully masked tiles are never visited) with an online softmax in the exp2
// domain, and writes the output and the natural-log logsumexp of each row.
// Backward (no atomics, deterministic): delta = rowsum(dout * out); a dK/dV kernel whose block
// owns 64 keys (16 per warp) and walks query tiles of 32 from the diagonal to the end; a dQ
// kernel whose block owns 64 queries and walks key tiles of 64 up to the diagonal, passing dS
// between its two phases through shared memory. P is recomputed from the logsumexp in both.
// Causal work per row block grows linearly, so each block of every kernel takes a long and a
// short row block (x and n - 1 - x): the blocks are equal and the last wave has no tail.
// Shared rows are padded by 8 bf16 (16 bytes) so that ldmatrix's eight row addresses of one
// 8x8 matrix hit distinct banks. Rows past T are zero-filled in shared memory (never read from
// global) and masked, so any T >= 1 works.
//
// Register use (sm_90, -Xptxas -v, head size 128): forward 255 with a 28-byte spill, dK/dV
// 255 without spills, dQ 255 with a 20-byte spill; two blocks per SM each. Variants
// measured at the reference shape and dropped are listed in docs/PERFORMANCE.md.
#include <atomic>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/allocator.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/attention_backend.hpp"
#include "kernels/cuda/common.cuh"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Shapes of the kernels that ship (head size 64 and 128 alike).
constexpr int kFwdMTiles = 2;   // forward: m-tiles of 16 query rows per warp
constexpr int kFwdWarps = 4;
constexpr int kFwdKeys = 32;    // forward: keys per tile
constexpr int kKvWarps = 4;     // dK/dV: 16 keys per warp
constexpr int kKvQ = 32;        // dK/dV: queries per tile
constexpr int kDqWarpRows = 2;  // dQ: warps along the queries (32 each), times 2 along keys/dims
constexpr int kDqKeys = 64;     // dQ: keys per tile

// The fused row of one token: [q (NH heads) | k (NKV heads) | v (NKV heads)], each head hs
// wide; query head h reads kv head h / (NH / NKV) (grouped-query attention; NKV = NH is
// plain multi-head attention, whose row is (3C)).
struct QkvLayout {
  int C, NH, NKV;
  __device__ __forceinline__ std::int64_t width(int hs) const {
    return std::int64_t{C} + 2 * std::int64_t{NKV} * hs;
  }
  __device__ __forceinline__ int kv_head(int h) const { return h / (NH / NKV); }
};

struct HeadView {  // pointers of one (batch, head) inside the fused layouts
  const bf16* q;   // (T, hs), row stride W = C + 2 NKV hs
  const bf16* k;   // of the query head's kv head
  const bf16* v;
  std::int64_t stride;  // W
};

__device__ __forceinline__ HeadView head_view(const bf16* qkv, int b, int h, int T,
                                              const QkvLayout& L, int hs) {
  const std::int64_t W = L.width(hs);
  const bf16* row = qkv + std::int64_t{b} * T * W;
  const bf16* k = row + L.C + std::int64_t{L.kv_head(h)} * hs;
  return {row + std::int64_t{h} * hs, k, k + std::int64_t{L.NKV} * hs, W};
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
template <int R, int D, int NT>
__device__ __forceinline__ void load_rows(bf16* dst, const bf16* src, std::int64_t stride, int r0,
                                          int T) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kLd = D + 8;
  static_assert(R * kChunks % NT == 0, "whole rounds of 16-byte chunks");
#pragma unroll
  for (int i = 0; i < R * kChunks / NT; ++i) {
    const int idx = threadIdx.x + i * NT;
    const int r = idx / kChunks, c = idx % kChunks, row = r0 + r;
    const bool ok = row < T;
    const bf16* g = ok ? src + row * stride + c * 8 : src;
    cp_async16(dst + r * kLd + c * 8, g, ok);
  }
}

// ----------------------------------------------------------------------------
// forward

template <int D, int kMT, int kW, int kN>
struct FwdCfg {
  static constexpr int kThreads = kW * kWarpSize;
  static constexpr int kRows = kW * 16 * kMT;
  static constexpr int kLd = D + 8;
  static constexpr int kSmem = (kRows + 4 * kN) * kLd * 2;  // Q, K x2, V x2
};

template <int D, int kMT, int kW, int kN>
__global__ void __launch_bounds__(kW * kWarpSize)
    attention_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, QkvLayout L,
                             float scale_log2) {
  const int C = L.C, NH = L.NH;
  using Cfg = FwdCfg<D, kMT, kW, kN>;
  constexpr int NT = Cfg::kThreads, kRows = Cfg::kRows, kLd = Cfg::kLd;
  constexpr int kKSteps = D / 16;
  constexpr int kSBlocks = kN / 8;
  constexpr int kOBlocks = D / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);
  bf16* k_s = q_s + kRows * kLd;      // [2][kN][kLd]
  bf16* v_s = k_s + 2 * kN * kLd;     // [2][kN][kLd]

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane >> 2, tq = lane & 3;
  // Block x takes row blocks n_rb - 1 - x (the longest) and x, so every block does the same
  // causal work and no tail of short blocks is left on a few SMs.
  const int n_rb = (T + kRows - 1) / kRows;
  auto rows = [&](const int q0) {
    const HeadView hv = head_view(qkv, b, h, T, L, D);
    const int n_tiles = (min(T, q0 + kRows) + kN - 1) / kN;

    load_rows<kRows, D, NT>(q_s, hv.q, hv.stride, q0, T);
    load_rows<kN, D, NT>(k_s, hv.k, hv.stride, 0, T);
    load_rows<kN, D, NT>(v_s, hv.v, hv.stride, 0, T);
    cp_async_commit();

    float o[kMT][kOBlocks][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nb = 0; nb < kOBlocks; ++nb)
        o[mt][nb][0] = o[mt][nb][1] = o[mt][nb][2] = o[mt][nb][3] = 0.0f;
    float m[kMT][2], l[kMT][2];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
    const int wrow = warp * 16 * kMT;  // this warp's first row inside the block
    const int row0 = q0 + wrow;        // and in the sequence
    const bf16* qw = q_s + wrow * kLd;

    for (int j = 0; j < n_tiles; ++j) {
      const int buf = j & 1;
      if (j + 1 < n_tiles) {  // prefetch the next tile into the other buffer
        load_rows<kN, D, NT>(k_s + (buf ^ 1) * kN * kLd, hv.k, hv.stride, (j + 1) * kN, T);
        load_rows<kN, D, NT>(v_s + (buf ^ 1) * kN * kLd, hv.v, hv.stride, (j + 1) * kN, T);
      }
      cp_async_commit();
      cp_async_wait<1>();  // tile j (and Q) landed
      __syncthreads();
      const bf16* kb = k_s + buf * kN * kLd;
      const bf16* vb = v_s + buf * kN * kLd;
      const int k0 = j * kN;

      {
        float s[kMT][kSBlocks][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int nb = 0; nb < kSBlocks; ++nb)
            s[mt][nb][0] = s[mt][nb][1] = s[mt][nb][2] = s[mt][nb][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          unsigned qf[kMT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            ldsm_x4(qf[mt], a_addr(qw + mt * 16 * kLd, kLd, kk * 16, lane));
#pragma unroll
          for (int np = 0; np < kSBlocks / 2; ++np) {
            unsigned bfr[4];
            ldsm_x4(bfr, bt_addr(kb, kLd, np * 16, kk * 16, lane));
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              mma16816(s[mt][2 * np], qf[mt], bfr[0], bfr[1]);
              mma16816(s[mt][2 * np + 1], qf[mt], bfr[2], bfr[3]);
            }
          }
        }
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          const int r0 = row0 + mt * 16;
          if (k0 + kN - 1 > r0) {  // the tile crosses this m-tile's diagonal
#pragma unroll
            for (int nb = 0; nb < kSBlocks; ++nb)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int qi = r0 + g + (e >> 1) * 8, kj = k0 + nb * 8 + 2 * tq + (e & 1);
                if (kj > qi) s[mt][nb][e] = -INFINITY;
              }
          }
          // Online softmax. A row whose keys in this tile are all masked keeps m (finite: it
          // saw key 0 in the first tile) and adds exp2(-inf) = 0.
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            float mx = -INFINITY;
#pragma unroll
            for (int nb = 0; nb < kSBlocks; ++nb)
              mx = fmaxf(mx, fmaxf(s[mt][nb][2 * hr], s[mt][nb][2 * hr + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m[mt][hr], mx * scale_log2);
            const float alpha = exp2f(m[mt][hr] - m_new);  // 0 on the first tile
            float sum = 0.0f;
#pragma unroll
            for (int nb = 0; nb < kSBlocks; ++nb)
#pragma unroll
              for (int e = 2 * hr; e < 2 * hr + 2; ++e) {
                const float p = exp2f(fmaf(s[mt][nb][e], scale_log2, -m_new));
                s[mt][nb][e] = p;
                sum += p;
              }
            l[mt][hr] = l[mt][hr] * alpha + sum;
#pragma unroll
            for (int nb = 0; nb < kOBlocks; ++nb) {
              o[mt][nb][2 * hr] *= alpha;
              o[mt][nb][2 * hr + 1] *= alpha;
            }
            m[mt][hr] = m_new;
          }
        }
        // O += P V, P rounded to bf16 A fragments first (half the registers of the fp32 S)
        unsigned pa[kMT][kN / 16][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int kk = 0; kk < kN / 16; ++kk) to_a(s[mt][2 * kk], s[mt][2 * kk + 1], pa[mt][kk]);
#pragma unroll
        for (int np = 0; np < kOBlocks / 2; ++np) {
#pragma unroll
          for (int kk = 0; kk < kN / 16; ++kk) {
            unsigned bfr[4];
            ldsm_x4_t(bfr, b_addr(vb, kLd, kk * 16, np * 16, lane));
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              mma16816(o[mt][2 * np], pa[mt][kk], bfr[0], bfr[1]);
              mma16816(o[mt][2 * np + 1], pa[mt][kk], bfr[2], bfr[3]);
            }
          }
        }
      }
      __syncthreads();  // buffer `buf` is free for the prefetch of the next iteration
    }

#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float lsum = l[mt][hr];
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
        const int qi = row0 + mt * 16 + g + hr * 8;
        if (qi >= T) continue;
        const float inv = 1.0f / lsum;  // >= 1: the row's maximum contributes exp(0)
        bf16* o_row = out + (std::int64_t{b} * T + qi) * C + std::int64_t{h} * D;
#pragma unroll
        for (int nb = 0; nb < kOBlocks; ++nb)
          *reinterpret_cast<__nv_bfloat162*>(o_row + nb * 8 + 2 * tq) =
              __floats2bfloat162_rn(o[mt][nb][2 * hr] * inv, o[mt][nb][2 * hr + 1] * inv);
        if (tq == 0) lse[std::int64_t{bh} * T + qi] = (m[mt][hr] + log2f(lsum)) * kLn2;
      }
  };
  const int first = n_rb - 1 - blockIdx.x;
  rows(first * kRows);
  if (blockIdx.x != first) {
    __syncthreads();  // shared memory is reused by the second row block
    rows(blockIdx.x * kRows);
  }
}

// ----------------------------------------------------------------------------
// backward

template <int D>
__global__ void attention_delta_kernel(float* delta, const bf16* dout, const bf16* out, int B,
                                       int T, int C, int NH) {
  constexpr int kLanes = D / 8;  // lanes per row
  constexpr int kRowsPerBlock = 128 / kLanes;
  const std::int64_t row = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / kLanes;
  const int part = threadIdx.x % kLanes;
  float sum = 0.0f;
  if (row < std::int64_t{B} * NH * T) {
    const int t = static_cast<int>(row % T);
    const int bh = static_cast<int>(row / T), b = bh / NH, h = bh % NH;
    const std::int64_t base = (std::int64_t{b} * T + t) * C + std::int64_t{h} * D + part * 8;
    const uint4 ov = *reinterpret_cast<const uint4*>(out + base);
    const uint4 dv = *reinterpret_cast<const uint4*>(dout + base);
    const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(&ov);
    const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(&dv);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 of = __bfloat1622float2(o2[i]), df = __bfloat1622float2(d2[i]);
      sum = fmaf(of.x, df.x, sum);
      sum = fmaf(of.y, df.y, sum);
    }
  }
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset >>= 1)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (part == 0 && row < std::int64_t{B} * NH * T) delta[row] = sum;
}

// dK, dV. grid (ceil(ceil(T / 16W) / 2), B * NKV), block 32 W, dynamic shared
// kv_smem_bytes<D, W, QT>(). A block owns 16 W keys (16 per warp) of one kv head and walks,
// for each query head of its group in turn (NH / NKV of them, in head order: a fixed sum,
// so deterministic), the query tiles of QT from its first key to the end (earlier queries
// cannot see these keys); dK and dV accumulate over all of them. Per warp and tile:
// S^T = K Q^T, dP^T = V dO^T, P^T = exp(S^T scale - lse), dS^T = P^T (dP^T - delta),
// dV += P^T dO, dK += dS^T Q (P^T and dS^T go from accumulators to A fragments in registers).
template <int D, int W, int QT>
constexpr int kv_smem_bytes() {
  return (2 * 16 * W + 4 * QT) * (D + 8) * 2 + 4 * QT * static_cast<int>(sizeof(float));
}

template <int D, int W, int QT>
__global__ void __launch_bounds__(32 * W)
    attention_backward_kv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                 const float* delta, int T, QkvLayout L, float scale,
                                 float scale_log2) {
  const int C = L.C, NH = L.NH, NKV = L.NKV, G = NH / NKV;
  constexpr int kKeys = 16 * W;  // keys per block, 16 per warp
  constexpr int kLd = D + 8;
  constexpr int kKSteps = D / 16;
  constexpr int kSBlocks = QT / 8;
  constexpr int kOBlocks = D / 8;
  static_assert(kKeys % QT == 0, "query tiles start at the key block");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* k_s = reinterpret_cast<bf16*>(smem_raw);  // [kKeys][kLd]
  bf16* v_s = k_s + kKeys * kLd;
  bf16* q_s = v_s + kKeys * kLd;                // [2][QT][kLd]
  bf16* do_s = q_s + 2 * QT * kLd;
  float* lse_s = reinterpret_cast<float*>(do_s + 2 * QT * kLd);  // [2][QT], log2 domain
  float* dl_s = lse_s + 2 * QT;

  const int bk = blockIdx.y, b = bk / NKV, hk = bk % NKV;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane >> 2, tq = lane & 3;
  // Block x takes key blocks x (the most queries) and n_rb - 1 - x: equal work per block.
  const int n_rb = (T + kKeys - 1) / kKeys;
  const std::int64_t row_w = L.width(D);
  const bf16* qkv_b = qkv + std::int64_t{b} * T * row_w;  // batch b's rows, stride row_w
  auto rows = [&](const int k0) {
    const bf16* k_h = qkv_b + C + std::int64_t{hk} * D;
    const bf16* v_h = k_h + std::int64_t{NKV} * D;
    const int n_tiles = (T - k0 + QT - 1) / QT;
    const int n_steps = G * n_tiles;  // step i: query head hk G + i / n_tiles, tile i % n_tiles

    auto load_q_tile = [&](int buf, int i) {
      const int h = hk * G + i / n_tiles, qt = k0 + (i % n_tiles) * QT;
      const std::int64_t bh = std::int64_t{b} * NH + h;
      load_rows<QT, D, 32 * W>(q_s + buf * QT * kLd, qkv_b + std::int64_t{h} * D, row_w, qt, T);
      // dout (B, T, C): row stride C
      load_rows<QT, D, 32 * W>(do_s + buf * QT * kLd,
                               dout + std::int64_t{b} * T * C + std::int64_t{h} * D, C, qt, T);
      if (threadIdx.x < QT) {
        const int qi = qt + threadIdx.x;
        lse_s[buf * QT + threadIdx.x] = qi < T ? lse[bh * T + qi] * kLog2e : 0.0f;
        dl_s[buf * QT + threadIdx.x] = qi < T ? delta[bh * T + qi] : 0.0f;
      }
    };
    load_rows<kKeys, D, 32 * W>(k_s, k_h, row_w, k0, T);
    load_rows<kKeys, D, 32 * W>(v_s, v_h, row_w, k0, T);
    load_q_tile(0, 0);
    cp_async_commit();

    float dk[kOBlocks][4], dv[kOBlocks][4];
#pragma unroll
    for (int nb = 0; nb < kOBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[nb][e] = dv[nb][e] = 0.0f;
    const int key0 = k0 + warp * 16;  // this warp's first key
    const bf16* kw = k_s + warp * 16 * kLd;
    const bf16* vw = v_s + warp * 16 * kLd;

    for (int i = 0; i < n_steps; ++i) {
      const int buf = i & 1, qt = k0 + (i % n_tiles) * QT;
      if (i + 1 < n_steps) load_q_tile(buf ^ 1, i + 1);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
      const bf16* qb = q_s + buf * QT * kLd;
      const bf16* dob = do_s + buf * QT * kLd;
      const float* ls = lse_s + buf * QT;
      const float* dls = dl_s + buf * QT;

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
      const bool edge = qt < key0 + 15 || qt + QT > T;
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
      for (int kk = 0; kk < QT / 16; ++kk) {
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
      bf16* dk_row = dqkv + (std::int64_t{b} * T + kj) * row_w + C + std::int64_t{hk} * D + 2 * tq;
      bf16* dv_row = dk_row + std::int64_t{NKV} * D;
#pragma unroll
      for (int nb = 0; nb < kOBlocks; ++nb) {
        *reinterpret_cast<__nv_bfloat162*>(dk_row + nb * 8) =
            __floats2bfloat162_rn(dk[nb][2 * hr] * scale, dk[nb][2 * hr + 1] * scale);
        *reinterpret_cast<__nv_bfloat162*>(dv_row + nb * 8) =
            __floats2bfloat162_rn(dv[nb][2 * hr], dv[nb][2 * hr + 1]);
      }
    }
  };
  const int first = blockIdx.x, second = n_rb - 1 - blockIdx.x;
  rows(first * kKeys);
  if (second != first) {
    __syncthreads();  // shared memory is reused by the second row block
    rows(second * kKeys);
  }
}

// dQ. A block of 2 * kWQ warps owns kQ = 32 * kWQ queries and walks key tiles of kN up to its
// last query, in two phases split by a barrier: (A) warp (wq, wh) forms S = Q K^T and
// dP = dO V^T for queries wq*32.. (two m-tiles) and keys wh*kN/2.., then dS = P (dP - delta)
// as bf16 in shared memory; (B) warp (wq, wh) accumulates dQ += dS K for queries wq*32.. and
// head dims wh*D/2.. (two m-tiles: each K fragment feeds two products).
// grid (ceil(ceil(T / kQ) / 2), B * NH), block kThreads, dynamic shared kSmem. K and V are
// the query head's kv head's (QkvLayout).
template <int D, int kWQ, int kN>
struct QCfg {
  static constexpr int kThreads = 2 * kWQ * kWarpSize;
  static constexpr int kQ = 32 * kWQ;
  static constexpr int kLd = D + 8, kLdS = kN + 8;
  static constexpr int kSmem = (2 * kQ * kLd + 4 * kN * kLd + kQ * kLdS) * 2;
};

template <int D, int kWQ, int kN>
__global__ void __launch_bounds__(2 * kWQ * kWarpSize)
    attention_backward_q_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                const float* delta, int T, QkvLayout L, float scale,
                                float scale_log2) {
  const int C = L.C, NH = L.NH;
  using Cfg = QCfg<D, kWQ, kN>;
  constexpr int NT = Cfg::kThreads, kQ = Cfg::kQ, kLd = Cfg::kLd, kLdS = Cfg::kLdS;
  constexpr int kKSteps = D / 16;
  constexpr int kKHalf = kN / 2;       // keys per warp in phase A
  constexpr int kABlocks = kKHalf / 8;
  constexpr int kDHalf = D / 2;
  constexpr int kBBlocks = kDHalf / 8;
  static_assert(kKHalf % 16 == 0, "whole ldmatrix tiles of keys per warp");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // [kQ][kLd]
  bf16* do_s = q_s + kQ * kLd;
  bf16* k_s = do_s + kQ * kLd;                    // [2][kN][kLd]
  bf16* v_s = k_s + 2 * kN * kLd;
  bf16* ds_s = v_s + 2 * kN * kLd;                // [kQ][kLdS]

  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane >> 2, tq = lane & 3;
  const int wq = warp % kWQ, wh = warp / kWQ;
  // Block x takes row blocks n_rb - 1 - x (the longest) and x, so every block does the same
  // causal work and no tail of short blocks is left on a few SMs.
  const int n_rb = (T + kQ - 1) / kQ;
  auto rows = [&](const int q0) {
    const HeadView hv = head_view(qkv, b, h, T, L, D);
    const bf16* dout_h = dout + std::int64_t{b} * T * C + std::int64_t{h} * D;
    const int n_tiles = (min(T, q0 + kQ) + kN - 1) / kN;

    load_rows<kQ, D, NT>(q_s, hv.q, hv.stride, q0, T);
    load_rows<kQ, D, NT>(do_s, dout_h, C, q0, T);
    load_rows<kN, D, NT>(k_s, hv.k, hv.stride, 0, T);
    load_rows<kN, D, NT>(v_s, hv.v, hv.stride, 0, T);
    cp_async_commit();

    const int row0 = q0 + wq * 32;  // this warp's first query (both phases)
    __shared__ float delta_s[kQ];  // this row block's delta, staged once
    for (int r = threadIdx.x; r < kQ; r += NT)
      delta_s[r] = q0 + r < T ? delta[std::int64_t{bh} * T + q0 + r] : 0.0f;
    __syncthreads();
    float row_lse[2][2], row_delta[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int qi = row0 + mt * 16 + g + hr * 8;
        row_lse[mt][hr] = qi < T ? lse[std::int64_t{bh} * T + qi] * kLog2e : 0.0f;
        row_delta[mt][hr] = delta_s[qi - q0];
      }
    float dq[2][kBBlocks][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nb = 0; nb < kBBlocks; ++nb)
        dq[mt][nb][0] = dq[mt][nb][1] = dq[mt][nb][2] = dq[mt][nb][3] = 0.0f;
    const bf16* qw = q_s + wq * 32 * kLd;
    const bf16* dow = do_s + wq * 32 * kLd;

    for (int j = 0; j < n_tiles; ++j) {
      const int buf = j & 1, k0 = j * kN;
      if (j + 1 < n_tiles) {
        load_rows<kN, D, NT>(k_s + (buf ^ 1) * kN * kLd, hv.k, hv.stride, k0 + kN, T);
        load_rows<kN, D, NT>(v_s + (buf ^ 1) * kN * kLd, hv.v, hv.stride, k0 + kN, T);
      }
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
      const bf16* kb = k_s + buf * kN * kLd;
      const bf16* vb = v_s + buf * kN * kLd;

      // (A) S and dP for 32 queries x kN/2 keys, dS to shared.
      {
        float s[2][kABlocks][4], dp[2][kABlocks][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nb = 0; nb < kABlocks; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][nb][e] = dp[mt][nb][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          unsigned qa[2][4], da[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            ldsm_x4(qa[mt], a_addr(qw + mt * 16 * kLd, kLd, kk * 16, lane));
            ldsm_x4(da[mt], a_addr(dow + mt * 16 * kLd, kLd, kk * 16, lane));
          }
#pragma unroll
          for (int np = 0; np < kABlocks / 2; ++np) {
            unsigned bk[4], bv[4];
            ldsm_x4(bk, bt_addr(kb, kLd, wh * kKHalf + np * 16, kk * 16, lane));
            ldsm_x4(bv, bt_addr(vb, kLd, wh * kKHalf + np * 16, kk * 16, lane));
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              mma16816(s[mt][2 * np], qa[mt], bk[0], bk[1]);
              mma16816(s[mt][2 * np + 1], qa[mt], bk[2], bk[3]);
              mma16816(dp[mt][2 * np], da[mt], bv[0], bv[1]);
              mma16816(dp[mt][2 * np + 1], da[mt], bv[2], bv[3]);
            }
          }
        }
        const bool edge = k0 + wh * kKHalf + kKHalf - 1 > row0;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nb = 0; nb < kABlocks; ++nb) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int qi = row0 + mt * 16 + g + (e >> 1) * 8;
              const int kj = k0 + wh * kKHalf + nb * 8 + 2 * tq + (e & 1);
              float p = exp2f(fmaf(s[mt][nb][e], scale_log2, -row_lse[mt][e >> 1]));
              if (edge && kj > qi) p = 0.0f;
              s[mt][nb][e] = p * (dp[mt][nb][e] - row_delta[mt][e >> 1]);  // dS
            }
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
              const int r = wq * 32 + mt * 16 + g + hr * 8, c = wh * kKHalf + nb * 8 + 2 * tq;
              *reinterpret_cast<unsigned*>(ds_s + r * kLdS + c) =
                  pack_bf16(s[mt][nb][2 * hr], s[mt][nb][2 * hr + 1]);
            }
          }
      }
      __syncthreads();  // dS of the whole tile is in shared memory

      // (B) dQ += dS K for 32 queries x D/2 dims.
#pragma unroll
      for (int kk = 0; kk < kN / 16; ++kk) {
        unsigned a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
          ldsm_x4(a[mt], a_addr(ds_s + (wq * 32 + mt * 16) * kLdS, kLdS, kk * 16, lane));
#pragma unroll
        for (int np = 0; np < kBBlocks / 2; ++np) {
          unsigned bk[4];
          ldsm_x4_t(bk, b_addr(kb, kLd, kk * 16, wh * kDHalf + np * 16, lane));
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma16816(dq[mt][2 * np], a[mt], bk[0], bk[1]);
            mma16816(dq[mt][2 * np + 1], a[mt], bk[2], bk[3]);
          }
        }
      }
      __syncthreads();  // K/V buffer `buf` and dS are free
    }

#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int qi = row0 + mt * 16 + g + hr * 8;
        if (qi >= T) continue;
        bf16* row = dqkv + (std::int64_t{b} * T + qi) * hv.stride + std::int64_t{h} * D +
                    wh * kDHalf + 2 * tq;
#pragma unroll
        for (int nb = 0; nb < kBBlocks; ++nb)
          *reinterpret_cast<__nv_bfloat162*>(row + nb * 8) =
              __floats2bfloat162_rn(dq[mt][nb][2 * hr] * scale, dq[mt][nb][2 * hr + 1] * scale);
      }
  };
  const int first = n_rb - 1 - blockIdx.x, second = blockIdx.x;
  rows(first * kQ);
  if (second != first) {
    __syncthreads();  // shared memory is reused by the second row block
    rows(second * kQ);
  }
}

void check_dims(const char* what, int B, int T, int C, int NH, int NKV) {
  require(B > 0 && T > 0 && C > 0 && NH > 0 && NKV > 0, what,
          "B, T, C, NH, NKV must be positive, got " + std::to_string(B) + ", " +
              std::to_string(T) + ", " + std::to_string(C) + ", " + std::to_string(NH) + ", " +
              std::to_string(NKV));
  require(C % NH == 0 && (C / NH == 64 || C / NH == 128), what,
          "head size C / NH must be 64 or 128, got C=" + std::to_string(C) +
              " NH=" + std::to_string(NH));
  require(NH % NKV == 0, what,
          "NH must be a multiple of NKV, got NH=" + std::to_string(NH) +
              " NKV=" + std::to_string(NKV));
  require(std::int64_t{B} * NH <= 65535, what, "B * NH must be <= 65535");
}

// Opts `kernel` into `bytes` of dynamic shared memory on the current device, once per device
// (the attribute is per device; a call costs host time on every launch otherwise).
template <auto Kernel>
void allow_dynamic_smem(int bytes) {
  static std::atomic<std::uint64_t> done{0};  // bit d: device d is set up
  const int dev = current_device();
  const std::uint64_t bit = dev < 64 ? std::uint64_t{1} << dev : 0;
  if ((done.load(std::memory_order_acquire) & bit) != 0) return;
  CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.fetch_or(bit, std::memory_order_release);
}

template <int D>
void launch_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, QkvLayout L,
                    float scale_log2, cudaStream_t stream) {
  using Cfg = FwdCfg<D, kFwdMTiles, kFwdWarps, kFwdKeys>;
  constexpr auto kernel = attention_forward_kernel<D, kFwdMTiles, kFwdWarps, kFwdKeys>;
  allow_dynamic_smem<kernel>(Cfg::kSmem);
  const dim3 grid(ceil_div(ceil_div(T, Cfg::kRows), 2), B * L.NH);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmem, stream>>>(out, lse, qkv, T, L, scale_log2);
  CUDA_CHECK_LAUNCH();
}

template <int D>
void launch_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                     const float* lse, float* delta, int B, int T, QkvLayout L, float scale,
                     float scale_log2, cudaStream_t stream) {
  const std::int64_t rows = std::int64_t{B} * L.NH * T;
  constexpr int kDeltaRows = 128 / (D / 8);  // rows per 128-thread block
  attention_delta_kernel<D><<<ceil_div(rows, kDeltaRows), 128, 0, stream>>>(delta, dout, out, B,
                                                                            T, L.C, L.NH);
  CUDA_CHECK_LAUNCH();

  constexpr int kv_smem = kv_smem_bytes<D, kKvWarps, kKvQ>();
  constexpr auto kv = attention_backward_kv_kernel<D, kKvWarps, kKvQ>;
  allow_dynamic_smem<kv>(kv_smem);
  kv<<<dim3(ceil_div(ceil_div(T, 16 * kKvWarps), 2), B * L.NKV), 32 * kKvWarps, kv_smem,
       stream>>>(dqkv, dout, qkv, lse, delta, T, L, scale, scale_log2);
  CUDA_CHECK_LAUNCH();

  using QC = QCfg<D, kDqWarpRows, kDqKeys>;
  constexpr auto dq = attention_backward_q_kernel<D, kDqWarpRows, kDqKeys>;
  allow_dynamic_smem<dq>(QC::kSmem);
  dq<<<dim3(ceil_div(ceil_div(T, QC::kQ), 2), B * L.NH), QC::kThreads, QC::kSmem, stream>>>(
      dqkv, dout, qkv, lse, delta, T, L, scale, scale_log2);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers: cuDNN when chosen and able (attention.hpp), else the kernels above. The shape
// checks come first, so both backends accept the same shapes.

void gqa_attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH,
                           int NKV, cudaStream_t stream) {
  check_dims("attention_forward", B, T, C, NH, NKV);
  if (cuda_detail::attention_on_cudnn(AttentionPass::forward, B, T, C, NH, NKV,
                                      {out, lse, qkv})) {
    cudnn_attention_forward(out, lse, qkv, B, T, C, NH, NKV, stream);
    return;
  }
  const int hs = C / NH;
  const float scale_log2 = kLog2e / std::sqrt(static_cast<float>(hs));
  const QkvLayout L{C, NH, NKV};
  if (hs == 64)
    launch_forward<64>(out, lse, qkv, B, T, L, scale_log2, stream);
  else
    launch_forward<128>(out, lse, qkv, B, T, L, scale_log2, stream);
}

void gqa_attention_backward_input(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out,
                                  const float* lse, int B, int T, int C, int NH, int NKV,
                                  cudaStream_t stream) {
  check_dims("attention_backward_input", B, T, C, NH, NKV);
  if (cuda_detail::attention_on_cudnn(AttentionPass::backward, B, T, C, NH, NKV,
                                      {dqkv, dout, qkv, out, lse})) {
    cudnn_attention_backward_input(dqkv, dout, qkv, out, lse, B, T, C, NH, NKV, stream);
    return;
  }
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float scale_log2 = scale * kLog2e;
  const QkvLayout L{C, NH, NKV};
  DeviceBuffer delta(sizeof(float) * std::int64_t{B} * NH * T, current_device(), stream,
                     "attention backward delta");
  if (hs == 64)
    launch_backward<64>(dqkv, dout, qkv, out, lse, delta.as<float>(), B, T, L, scale, scale_log2,
                        stream);
  else
    launch_backward<128>(dqkv, dout, qkv, out, lse, delta.as<float>(), B, T, L, scale,
                         scale_log2, stream);
}

}  // namespace conveyor
