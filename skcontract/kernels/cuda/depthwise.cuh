// depthwise.cuh: depthwise convolutions, one filter a channel (skcontract/kernels/depthwise.py):
// out[n][c][p][q] = bias[c] + sum_{i, j} x[n][c][p * sh - pt + i * dh][q * sw - pl + j * dw]
// * w[c][i][j], taps outside the image read as zeros. An implicit GEMM runs such a
// convolution as one GEMM a channel of one output column, all padding; it is memory-bound,
// and here a thread computes one output element from its taps, accumulated in Acc (float for
// 16-bit and float32 data, double for float64), and rounds it once. Consecutive threads take
// consecutive channels where the output is channels-last (channels_fast), else consecutive
// columns, so the input's and the output's accesses are coalesced for either layout; a tap
// read by neighbouring outputs comes from L1 / L2. Any element strides (NCHW, NHWC, views).
//
// depthwise_vec is the channels-last kernel where the channels lie on 16 bytes (the host
// checks: channels contiguous in the input and the output, C and every other stride a
// multiple of the 16-byte vector, both pointers on 16 bytes). A thread computes a strip of
// DEPTHWISE_STRIP output columns of one vector of channels: each input load is 16 bytes,
// the filters come from shared memory as vectors, and the index arithmetic is done once a
// strip. depthwise_square is its form for the common square filters, on packs of channels
// (DepthwisePack: 8 or 16 bytes of 16-bit channels, 16 of wider ones; the host checks the
// same of the pack): each input pack a strip's filter row reads is loaded and converted once, the
// filters staged converted.
#pragma once

#include "sk_common.cuh"

namespace skc {

constexpr int DEPTHWISE_THREADS = 256;
// Output columns a thread of depthwise_vec and depthwise_square computes: four amortise a
// tap's weight load over four columns, and a filter row's input vectors (3 + KS of 4 * KS
// at unit step) over the strip, while the accumulators (4 x 8 floats a row for 16-bit data)
// and a row's inputs stay in registers.
constexpr int DEPTHWISE_STRIP = 4;

// The accumulator of T: float, double for double (as the GEMM kernels accumulate).
template <class T> struct DepthwiseAcc { using type = float; };
template <> struct DepthwiseAcc<double> { using type = double; };

// Sizes and steps; strides in elements: x (n, c, h, w), w (c, r, s), out (n, c, p, q).
template <class T>
__global__ void __launch_bounds__(DEPTHWISE_THREADS)
depthwise(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
          T* __restrict__ out, int n, int c, int h, int wd, int p, int q, int r, int s,
          int stride_h, int stride_w, int pad_top, int pad_left, int dil_h, int dil_w,
          long long sxn, long long sxc, long long sxh, long long sxw, long long swc,
          long long swr, long long sws, long long son, long long soc, long long sop,
          long long soq, int channels_fast, int has_bias) {
  using Acc = typename DepthwiseAcc<T>::type;
  using Cv = AccCvt<T, Acc>;
  const int total = n * c * p * q;  // below 2^31 (the host checks)
  for (int t = blockIdx.x * DEPTHWISE_THREADS + threadIdx.x; t < total;
       t += gridDim.x * DEPTHWISE_THREADS) {
    int ch, oq, op, nn;
    if (channels_fast) {
      ch = t % c;
      int rest = t / c;
      oq = rest % q;
      rest /= q;
      op = rest % p;
      nn = rest / p;
    } else {
      oq = t % q;
      int rest = t / q;
      op = rest % p;
      rest /= p;
      ch = rest % c;
      nn = rest / c;
    }
    const T* xc = x + nn * sxn + ch * sxc;
    const T* wc = w + ch * swc;
    Acc acc = has_bias ? Cv::to_acc(bias[ch]) : Acc(0);
    const int ih0 = op * stride_h - pad_top, iw0 = oq * stride_w - pad_left;
    for (int i = 0; i < r; ++i) {
      const int ih = ih0 + i * dil_h;
      if (ih < 0 || ih >= h) continue;
      for (int j = 0; j < s; ++j) {
        const int iw = iw0 + j * dil_w;
        if (iw < 0 || iw >= wd) continue;
        acc += Cv::to_acc(xc[ih * sxh + iw * sxw]) * Cv::to_acc(wc[i * swr + j * sws]);
      }
    }
    out[nn * son + ch * soc + op * sop + oq * soq] = Cv::from_acc(acc);
  }
}

// The work items [first, last) of block `block` of `blocks` over `total` items taken
// `lanes` at a time: one contiguous run a block, whole rounds of lanes. Items run strips
// fastest, then rows, then images, so a block walks down its rows, and the input rows an
// output row shares with the one before it are still in its SM's L1 (a block striding over
// the rows would leave them to other SMs, each reading them from L2 again). The items
// number fewer than the outputs (below 2^31: the host checks), so the kernels walk them
// with 32-bit indices, a strip's column, row and image found by two 32-bit divisions.
struct DepthwiseRun {
  long long first, last;
};
__device__ __forceinline__ DepthwiseRun depthwise_run(long long total, int lanes, int block,
                                                      int blocks) {
  const long long rounds = (total + lanes - 1) / lanes;
  const long long per = (rounds + blocks - 1) / blocks * lanes;
  const long long first = block * per;
  return {first, first + per < total ? first + per : total};
}

// 16 bytes of T as the vector depthwise_vec loads and stores.
template <class T> struct alignas(16) DepthwiseVec {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

// Where element e of a block's filter staging comes from: its (tap, channel of the slice).
// Consecutive threads read consecutive channels of channels-last filters (swc == 1), else
// consecutive taps of one channel (KCRS): coalesced either way.
__device__ __forceinline__ void depthwise_stage_at(int e, int width, int taps, long long swc,
                                                   int& tap, int& cc) {
  if (swc == 1) {
    tap = e / width;
    cc = e - tap * width;
  } else {
    cc = e / taps;
    tap = e - cc * taps;
  }
}

// A strip's accumulators, each column's starting at the channels' bias (or zero).
template <class T, class Acc, int QT, int V>
__device__ __forceinline__ void depthwise_strip_start(Acc (&acc)[QT][V],
                                                      const T* __restrict__ bias, int ch0,
                                                      int has_bias) {
  using Cv = AccCvt<T, Acc>;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const Acc b0 = has_bias ? Cv::to_acc(bias[ch0 + v]) : Acc(0);
#pragma unroll
    for (int u = 0; u < QT; ++u) acc[u][v] = b0;
  }
}

// A strip's columns below q, rounded once, 16 bytes a column (`row`: the strip's output
// row at its first channel).
template <class T, class Acc, int QT, int V>
__device__ __forceinline__ void depthwise_strip_store(const Acc (&acc)[QT][V], T* row,
                                                      int oq0, int q, long long soq) {
  using Cv = AccCvt<T, Acc>;
  using Vec = DepthwiseVec<T>;
#pragma unroll
  for (int u = 0; u < QT; ++u) {
    if (oq0 + u >= q) break;
    Vec res;
#pragma unroll
    for (int v = 0; v < V; ++v) res.v[v] = Cv::from_acc(acc[u][v]);
    *reinterpret_cast<Vec*>(row + (oq0 + u) * soq) = res;
  }
}

// One filter row of a strip, any filter width, column step and dilation: each tap's input
// vector is loaded for each output column that reads it (L1 serves the repeats).
template <class T, class Acc>
__device__ __forceinline__ void depthwise_row(
    Acc (&acc)[DEPTHWISE_STRIP][DepthwiseVec<T>::N], const T* xrow, const T* wrow, int width,
    int s, int iw0, int oq0, int q, int wd, int stride_w, int dil_w, long long sxw) {
  using Cv = AccCvt<T, Acc>;
  using Vec = DepthwiseVec<T>;
  for (int j = 0; j < s; ++j) {
    const Vec wj = *reinterpret_cast<const Vec*>(wrow + j * width);
#pragma unroll
    for (int u = 0; u < DEPTHWISE_STRIP; ++u) {
      const int iw = iw0 + u * stride_w + j * dil_w;
      if (oq0 + u >= q || iw < 0 || iw >= wd) continue;
      const Vec in = *reinterpret_cast<const Vec*>(xrow + iw * sxw);
#pragma unroll
      for (int v = 0; v < Vec::N; ++v) acc[u][v] += Cv::to_acc(in.v[v]) * Cv::to_acc(wj.v[v]);
    }
  }
}

// Sizes and steps as depthwise's; strides in elements, all but the channels' (1). A block
// takes `slice` channel vectors (blockIdx.y: channels [blockIdx.y * slice * N, ...)) and
// stages their filters in shared memory as [tap][channel] (r * s * slice vectors, dynamic
// shared memory), so a tap's weights of a vector are one 16-byte load whatever the filters'
// strides. Its threads are lanes x slice, the vector fastest; a lane takes strips of
// DEPTHWISE_STRIP output columns (of one image row) in turn, over the block's contiguous
// run of strips (depthwise_run). Any filter, step and dilation (depthwise_row); the common
// square filters run depthwise_square.
template <class T>
__global__ void __launch_bounds__(DEPTHWISE_THREADS, 2)
depthwise_vec(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
              T* __restrict__ out, int n, int c, int h, int wd, int p, int q, int r, int s,
              int stride_h, int stride_w, int pad_top, int pad_left, int dil_h, int dil_w,
              long long sxn, long long sxh, long long sxw, long long swc, long long swr,
              long long sws, long long son, long long sop, long long soq, int has_bias,
              int slice) {
  using Acc = typename DepthwiseAcc<T>::type;
  using Cv = AccCvt<T, Acc>;
  using Vec = DepthwiseVec<T>;
  constexpr int V = Vec::N;
  constexpr int QT = DEPTHWISE_STRIP;
  extern __shared__ __align__(16) unsigned char depthwise_smem[];
  T* wsm = reinterpret_cast<T*>(depthwise_smem);
  const int width = slice * V, c0 = blockIdx.y * width;
  const int taps = r * s;
  for (int e = threadIdx.x; e < taps * width; e += DEPTHWISE_THREADS) {
    int tap, cc;
    depthwise_stage_at(e, width, taps, swc, tap, cc);
    const int i = tap / s, j = tap - i * s, ch = c0 + cc;
    wsm[tap * width + cc] = ch < c ? w[ch * swc + i * swr + j * sws] : Cv::from_acc(Acc(0));
  }
  __syncthreads();
  const int lanes = DEPTHWISE_THREADS / slice;
  const int lane = threadIdx.x / slice, gv = threadIdx.x - lane * slice;
  const int ch0 = c0 + gv * V;
  if (lane >= lanes || ch0 >= c) return;
  const int strips = (q + QT - 1) / QT;
  const DepthwiseRun run = depthwise_run((long long)n * p * strips, lanes, blockIdx.x,
                                         gridDim.x);
  for (int t = (int)run.first + lane; t < (int)run.last; t += lanes) {
    const int rest = t / strips, oq0 = (t - rest * strips) * QT;
    const int nn = rest / p, op = rest - nn * p;
    Acc acc[QT][V];
    depthwise_strip_start<T, Acc, QT, V>(acc, bias, ch0, has_bias);
    const T* xn = x + nn * sxn + ch0;
    const int ih0 = op * stride_h - pad_top, iw0 = oq0 * stride_w - pad_left;
    for (int i = 0; i < r; ++i) {
      const int ih = ih0 + i * dil_h;
      if (ih < 0 || ih >= h) continue;
      const T* wrow = wsm + i * s * width + gv * V;
      depthwise_row<T, Acc>(acc, xn + ih * sxh, wrow, width, s, iw0, oq0, q, wd, stride_w,
                            dil_w, sxw);
    }
    depthwise_strip_store<T, Acc, QT, V>(acc, out + nn * son + op * sop + ch0, oq0, q, soq);
  }
}

// Output columns a thread of depthwise_square computes: DEPTHWISE_STRIP at unit step; half
// as many at larger steps, whose windows share fewer input columns (3 x 3 at step 2: a
// strip of two loads 2.5 input columns a column, of four 2.25).
__host__ __device__ constexpr int depthwise_square_strip(int step) {
  return step == 1 ? DEPTHWISE_STRIP : DEPTHWISE_STRIP / 2;
}

// A 32-bit word of two 16-bit values (the first at the lower address, the low half) as two
// floats, and two floats rounded into one.
__device__ __forceinline__ void unpack_pair(half_t, unsigned w, float& lo, float& hi) {
  asm("{.reg .f16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b;}"
      : "=f"(lo), "=f"(hi) : "r"(w));
}
__device__ __forceinline__ void unpack_pair(bfloat16_t, unsigned w, float& lo, float& hi) {
  lo = __uint_as_float(w << 16);
  hi = __uint_as_float(w & 0xffff0000u);
}
__device__ __forceinline__ unsigned pack_pair(half_t, float lo, float hi) {
  unsigned w;  // cvt's first source goes to the upper half
  asm("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(w) : "f"(lo), "f"(hi));
  return w;
}
__device__ __forceinline__ unsigned pack_pair(bfloat16_t, float lo, float hi) {
  unsigned w;
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;" : "=r"(w) : "f"(lo), "f"(hi));
  return w;
}

// The channels a thread of depthwise_square takes, loaded as one Raw word (8 or 16 bytes of
// 16-bit channels, 16 bytes of float32 or float64 ones) and unpacked to accumulators, so a
// load, its zero fill and its conversion are whole 32-bit words (a 16-bit element apart
// would take a byte permute each). N 16-bit channels: four for the wider filters (a strip's
// converted inputs, (strip - 1) * step + KS columns, and accumulators then fit two blocks an
// SM), eight (16-byte loads) where the filter is narrow enough for them to fit too.
template <class T, int N = 4> struct DepthwisePack {  // 16-bit channels: N, 2N bytes
  static_assert(N == 4 || N == 8, "packs of 4 or 8 16-bit channels");
  static constexpr int P = N;
  using Raw = typename Conditional<N == 4, uint2, uint4>::type;
  __device__ __forceinline__ static void unpack(Raw r, float (&f)[P]) {
    const unsigned* w = reinterpret_cast<const unsigned*>(&r);
#pragma unroll
    for (int k = 0; k < P / 2; ++k) unpack_pair(T{}, w[k], f[2 * k], f[2 * k + 1]);
  }
  __device__ __forceinline__ static Raw pack(const float (&f)[P]) {
    Raw r;
    unsigned* w = reinterpret_cast<unsigned*>(&r);
#pragma unroll
    for (int k = 0; k < P / 2; ++k) w[k] = pack_pair(T{}, f[2 * k], f[2 * k + 1]);
    return r;
  }
};
template <int N> struct DepthwisePack<float, N> {  // four, 16 bytes
  static constexpr int P = 4;
  using Raw = float4;
  __device__ __forceinline__ static void unpack(Raw r, float (&f)[P]) {
    f[0] = r.x; f[1] = r.y; f[2] = r.z; f[3] = r.w;
  }
  __device__ __forceinline__ static Raw pack(const float (&f)[P]) {
    return make_float4(f[0], f[1], f[2], f[3]);
  }
};
template <int N> struct DepthwisePack<double, N> {  // two, 16 bytes
  static constexpr int P = 2;
  using Raw = double2;
  __device__ __forceinline__ static void unpack(Raw r, double (&f)[P]) { f[0] = r.x; f[1] = r.y; }
  __device__ __forceinline__ static Raw pack(const double (&f)[P]) {
    return make_double2(f[0], f[1]);
  }
};

// depthwise_vec's work for square KS x KS filters stepping KSTEP both ways, undilated
// (MobileNet's, EfficientNet's and ConvNeXt's depthwise layers): a thread computes a strip
// of depthwise_square_strip(KSTEP) output columns of one pack of P = PC channels
// (DepthwisePack<T, PC>; `slice` packs a block, blockIdx.y the slice). For each of the strip's
// filter rows it loads the row's SPAN input packs once (a column outside the image is a
// zero pack: which columns lie inside is a mask made once a strip) and converts each
// element once; the filters are staged converted (Acc) in shared memory as [tap][pack], so
// a tap's weights are 16-byte loads (one, two for 8 16-bit channels), contiguous across a
// warp. Offsets inside an image
// are 32-bit (the host checks that an image's extent fits). The filter rows are a loop,
// not unrolled: one row's inputs live at a time, so the kernel fits two blocks an SM,
// whose warps hide the loads' latency. Columns past q are computed from zeros and not
// stored.
template <class T, int KS, int KSTEP, int PC>
__global__ void __launch_bounds__(DEPTHWISE_THREADS, 2)
depthwise_square(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                 T* __restrict__ out, int n, int c, int h, int wd, int p, int q, int pad_top,
                 int pad_left, long long sxn, int sxh, int sxw, long long swc, long long swr,
                 long long sws, long long son, int sop, int soq, int has_bias, int slice) {
  using Acc = typename DepthwiseAcc<T>::type;
  using Cv = AccCvt<T, Acc>;
  using Pack = DepthwisePack<T, PC>;
  using Raw = typename Pack::Raw;
  using Staged = DepthwisePack<Acc>;  // 16 bytes of a pack's staged weights: accumulators
  constexpr int P = Pack::P, QT = depthwise_square_strip(KSTEP);
  constexpr int SPAN = (QT - 1) * KSTEP + KS, TAPS = KS * KS;
  constexpr int CHUNKS = P / Staged::P;  // 16-byte loads of a tap's staged weights
  static_assert(P == PC && CHUNKS * Staged::P == P, "a pack's staged weights: whole loads");
  extern __shared__ __align__(16) unsigned char depthwise_smem[];
  Acc* wsm = reinterpret_cast<Acc*>(depthwise_smem);
  const int width = slice * P, c0 = blockIdx.y * width;
  for (int e = threadIdx.x; e < TAPS * width; e += DEPTHWISE_THREADS) {
    int tap, cc;
    depthwise_stage_at(e, width, TAPS, swc, tap, cc);
    const int i = tap / KS, j = tap - i * KS, ch = c0 + cc;
    wsm[tap * width + cc] = ch < c ? Cv::to_acc(w[ch * swc + i * swr + j * sws]) : Acc(0);
  }
  __syncthreads();
  const int lanes = DEPTHWISE_THREADS / slice;
  const int lane = threadIdx.x / slice, gv = threadIdx.x - lane * slice;
  const int ch0 = c0 + gv * P;
  if (lane >= lanes || ch0 >= c) return;
  const int strips = (q + QT - 1) / QT;
  const DepthwiseRun run = depthwise_run((long long)n * p * strips, lanes, blockIdx.x,
                                         gridDim.x);
  const Acc* wpack = wsm + gv * P;
  Acc b0[P];
#pragma unroll
  for (int v = 0; v < P; ++v) b0[v] = has_bias ? Cv::to_acc(bias[ch0 + v]) : Acc(0);
  for (int t = (int)run.first + lane; t < (int)run.last; t += lanes) {
    const int rest = t / strips, oq0 = (t - rest * strips) * QT;
    const int nn = rest / p, op = rest - nn * p;
    Acc acc[QT][P];
#pragma unroll
    for (int u = 0; u < QT; ++u)
#pragma unroll
      for (int v = 0; v < P; ++v) acc[u][v] = b0[v];
    const int ih0 = op * KSTEP - pad_top, iw0 = oq0 * KSTEP - pad_left;
    unsigned inside = 0;  // bit s: input column iw0 + s lies in the image
#pragma unroll
    for (int s = 0; s < SPAN; ++s) inside |= (unsigned)(iw0 + s >= 0 && iw0 + s < wd) << s;
    const T* xs = x + nn * sxn + ch0 + iw0 * sxw;
#pragma unroll 1
    for (int i = 0; i < KS; ++i) {
      const int ih = ih0 + i;
      if (ih < 0 || ih >= h) continue;
      const T* xrow = xs + ih * sxh;
      Acc f[SPAN][P];
#pragma unroll
      for (int s = 0; s < SPAN; ++s) {
        Raw in;
        if (inside >> s & 1u) {
          in = *reinterpret_cast<const Raw*>(xrow + s * sxw);
        } else {
          in = Raw{};
        }
        Pack::unpack(in, f[s]);
      }
      const Acc* wrow = wpack + i * KS * width;
#pragma unroll
      for (int j = 0; j < KS; ++j) {  // a tap's weights loaded once for the strip
        Acc wf[P];
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
          Acc part[Staged::P];
          Staged::unpack(*reinterpret_cast<const typename Staged::Raw*>(
                             wrow + j * width + k * Staged::P), part);
#pragma unroll
          for (int v = 0; v < Staged::P; ++v) wf[k * Staged::P + v] = part[v];
        }
#pragma unroll
        for (int u = 0; u < QT; ++u)
#pragma unroll
          for (int v = 0; v < P; ++v) acc[u][v] += f[u * KSTEP + j][v] * wf[v];
      }
    }
    T* orow = out + nn * son + op * sop + ch0;
#pragma unroll
    for (int u = 0; u < QT; ++u) {
      if (oq0 + u >= q) break;
      *reinterpret_cast<Raw*>(orow + (oq0 + u) * soq) = Pack::pack(acc[u]);
    }
  }
}

}  // namespace skc
