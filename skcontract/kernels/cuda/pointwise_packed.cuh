// pointwise_packed.cuh: the two small kernels around a pointwise convolution whose GEMM
// reads rows of P pixels (skcontract/kernels/pointwise_packed.py; the plan's rule:
// skcontract/ops/conv_plan.py, pointwise_packed_pixels).
//
// A dense channels-last input of N H W pixels of C 16-bit channels, C short of a k-tile,
// is also (N H W / P) rows of P C channels; the GEMM of those rows with the filters' K x C
// block P times down the diagonal of a (P K) x (P C) matrix writes the output, (N H W / P)
// rows of P K channels, which are its N H W pixels of K. block_diagonal writes that
// matrix from the filters at any strides.
//
// The zeros off the diagonal meet every channel of a row, so a non-finite channel
// (inf x 0 = NaN) would turn the other pixels of its row NaN; and the pixels after the last
// whole row are not in the GEMM. packed_fix, launched after the GEMM, reads the input once,
// a 16-byte vector a thread, and recomputes every pixel of a row where it finds a
// non-finite channel, and the tail's pixels: from the bias, the C products summed in float
// by fmaf and rounded once (the GEMM adds the bias to its float sum last: the two may
// differ in the last bit). The thread of a row's first vector holding a non-finite channel
// recomputes the row alone (P K C multiply-adds), having read the row's earlier vectors
// again; a cost only rows that hold one pay.
#pragma once

#include "sk_common.cuh"

namespace skc {

// Whether a 16-bit element is an infinity or a NaN: its exponent bits all set.
__device__ __forceinline__ bool non_finite(half_t v) { return (v.x & 0x7c00u) == 0x7c00u; }
__device__ __forceinline__ bool non_finite(bfloat16_t v) { return (v.x & 0x7f80u) == 0x7f80u; }

template <class T>
__global__ void block_diagonal(const T* __restrict__ w, T* __restrict__ out, int K, int C,
                               int P, long long sk, long long sc) {
  const long long cols = (long long)P * C, total = (long long)P * K * cols;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += step) {
    const long long row = i / cols, col = i - row * cols;
    const long long k = row % K, c = col % C;
    out[i] = row / K == col / C ? w[k * sk + c * sc] : T{0};
  }
}

// Whether 16-byte vector v of x holds an infinity or a NaN.
template <class T>
__device__ __forceinline__ bool vector_non_finite(const T* __restrict__ x, long long v) {
  const uint4 q = reinterpret_cast<const uint4*>(x)[v];
  const unsigned words[4] = {q.x, q.y, q.z, q.w};
  bool bad = false;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    bad |= non_finite(T{(unsigned short)(words[i] & 0xffffu)});
    bad |= non_finite(T{(unsigned short)(words[i] >> 16)});
  }
  return bad;
}

// Pixels [p0, p0 + count) of the output from the input and the filters.
template <class T>
__device__ void pointwise_pixels(const T* __restrict__ x, const T* __restrict__ w,
                                 const T* __restrict__ bias, long long sb, T* __restrict__ out,
                                 long long p0, int count, int C, int K, long long sk,
                                 long long sc) {
  for (long long p = p0; p < p0 + count; ++p) {
    const T* px = x + p * C;
    for (int k = 0; k < K; ++k) {
      float acc = bias != nullptr ? Cvt<T>::to_f32(bias[k * sb]) : 0.0f;
      for (int c = 0; c < C; ++c)
        acc = fmaf(Cvt<T>::to_f32(px[c]), Cvt<T>::to_f32(w[k * sk + c * sc]), acc);
      out[p * K + k] = Cvt<T>::from_f32(acc);
    }
  }
}

// rows: the GEMM's rows of P pixels; pixels: N H W (rows * P plus the tail). x and out are
// dense channels-last and on 16 bytes; P C is a multiple of 8 (C of 16-byte rows).
template <class T>
__global__ void packed_fix(const T* __restrict__ x, const T* __restrict__ w,
                           const T* __restrict__ bias, long long sb, T* __restrict__ out,
                           long long pixels, long long rows, int P, int C, int K, long long sk,
                           long long sc) {
  constexpr int E = 16 / (int)sizeof(T);
  const long long row_vecs = (long long)P * C / E, vecs = rows * row_vecs;
  const long long work = vecs + (pixels - rows * P);
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < work; v += step) {
    if (v >= vecs) {  // a tail pixel
      pointwise_pixels(x, w, bias, sb, out, rows * P + (v - vecs), 1, C, K, sk, sc);
      continue;
    }
    if (!vector_non_finite<T>(x, v)) continue;
    // the row's first vector holding a non-finite channel recomputes it, the others not
    const long long first = v / row_vecs * row_vecs;
    bool earlier = false;
    for (long long u = first; u < v && !earlier; ++u) earlier = vector_non_finite<T>(x, u);
    if (!earlier) pointwise_pixels(x, w, bias, sb, out, first / row_vecs * P, P, C, K, sk, sc);
  }
}

}  // namespace skc
