#pragma once
// Rotary position embedding (RoPE) in Hugging Face's rotate-half convention (transformers'
// apply_rotary_pos_emb): for head dim D the pairs are (i, i + D/2), i < D/2, and
//   out[i]       = x[i] cos(t w_i) - x[i + D/2] sin(t w_i)
//   out[i + D/2] = x[i + D/2] cos(t w_i) + x[i] sin(t w_i)
// i.e. out = x cos + rotate_half(x) sin with rotate_half(x) = [-x2, x1], at position t with
// inverse frequency w_i = theta^(-2i/D) (rope_theta), optionally rescaled by Llama 3.1's
// "llama3" rule (rotary_llama3_scaling). Weights converted from Meta's interleaved
// checkpoints need HF's permutation of the q and k projection rows to match this.
//
// Tables: cos and sin are (T, D/2), row t for position t (positions 0..T-1; a table built for
// more positions serves any shorter T). They are computed in double (inverse frequencies,
// the angle t * w_i, cos and sin) and rounded once to Real. transformers computes the
// inverse frequencies and the angle in float32, so its float tables differ from these by up
// to about 1.2e-7 * t * w_i radians (two float32 roundings): not bitwise the same; these are
// the exact values rounded once.
//
// Application: in place on a (B, T, H, D) slice whose (b, t) rows are row_stride elements
// apart, element (b, t, h, d) at x[(b * T + t) * row_stride + h * D + d], so it runs on the
// q or the k part of a fused qkv row (pass the part's first element and the fused row's
// width). Columns outside the slice are not touched.
// Invariant: the rotation is linear and orthogonal, so the backward is the inverse rotation
// (its transpose, angle -t w_i) applied in place to the gradient; no parameters.
// REQUIRES: D even; row_stride >= H * D.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace conveyor::cpu {

/// Llama 3.1's rope_scaling with rope_type "llama3" (config.json's four numbers).
struct RotaryLlama3Scaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
};

/// w_i = theta^(-2i/D) for i < D/2: the unscaled inverse frequencies (D/2).
inline std::vector<double> rotary_inv_freq(std::int64_t D, double theta) {
  std::vector<double> w(static_cast<std::size_t>(D / 2));
  for (std::int64_t i = 0; i < D / 2; ++i)
    w[static_cast<std::size_t>(i)] =
        1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(D));
  return w;
}

/// Rescales inverse frequencies in place by the llama3 rule, as transformers'
/// _compute_llama3_parameters does. With wavelength l = 2 pi / w, L the original context,
/// l_low = L / low_freq_factor and l_high = L / high_freq_factor:
///   l < l_high (high frequencies):  w unchanged;
///   l > l_low  (low frequencies):   w / factor;
///   otherwise (both ends included): (1 - s) w / factor + s w, s = (L / l - low) / (high - low),
/// which meets the other two at l = l_high (s = 1) and l = l_low (s = 0).
/// REQUIRES: high_freq_factor > low_freq_factor.
inline void rotary_llama3_scaling(std::vector<double>& inv_freq, const RotaryLlama3Scaling& p) {
  const double L = p.original_max_position_embeddings;
  const double low_freq_wavelen = L / p.low_freq_factor;
  const double high_freq_wavelen = L / p.high_freq_factor;
  for (double& w : inv_freq) {
    const double wavelen = 2 * std::numbers::pi / w;
    if (wavelen < high_freq_wavelen) continue;
    if (wavelen > low_freq_wavelen) {
      w /= p.factor;
      continue;
    }
    const double s = (L / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
    w = (1 - s) * w / p.factor + s * w;
  }
}

/// cos[t, i] = cos(t w_i), sin[t, i] = sin(t w_i) for t < T, computed in double.
template <class Real>
void rotary_tables(Real* cos,               // (T, D/2)
                   Real* sin,               // (T, D/2)
                   const double* inv_freq,  // (D/2)
                   std::int64_t T, std::int64_t D) {
  const std::int64_t half = D / 2;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inv_freq[i];
      cos[t * half + i] = static_cast<Real>(std::cos(angle));
      sin[t * half + i] = static_cast<Real>(std::sin(angle));
    }
}

namespace rotary_detail {

// Rotates every pair by +angle (sign = 1) or -angle (sign = -1).
template <class Real>
void rotate(Real* x, const Real* cos, const Real* sin, Real sign, std::int64_t B, std::int64_t T,
            std::int64_t H, std::int64_t D, std::int64_t row_stride) {
  const std::int64_t half = D / 2;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t) {
      const Real* c = cos + t * half;  // (D/2)
      const Real* s = sin + t * half;  // (D/2)
      for (std::int64_t h = 0; h < H; ++h) {
        Real* x1 = x + (b * T + t) * row_stride + h * D;  // (D/2)
        Real* x2 = x1 + half;                             // (D/2)
        for (std::int64_t i = 0; i < half; ++i) {
          const Real a = x1[i], d = x2[i], si = sign * s[i];
          x1[i] = a * c[i] - d * si;
          x2[i] = d * c[i] + a * si;
        }
      }
    }
}

}  // namespace rotary_detail

template <class Real>
void rotary_forward(Real* x,          // (B, T, H, D) in place, rows row_stride apart
                    const Real* cos,  // (T, D/2)
                    const Real* sin,  // (T, D/2)
                    std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D,
                    std::int64_t row_stride) {
  rotary_detail::rotate(x, cos, sin, Real(1), B, T, H, D, row_stride);
}

template <class Real>
void rotary_backward(Real* dx,         // (B, T, H, D) in place: dout in, dinp out (=)
                     const Real* cos,  // (T, D/2)
                     const Real* sin,  // (T, D/2)
                     std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D,
                     std::int64_t row_stride) {
  rotary_detail::rotate(dx, cos, sin, Real(-1), B, T, H, D, row_stride);
}

}  // namespace conveyor::cpu
