// depthwise_mma.cuh: depthwise convolutions of 16-bit channels-last data on tensor cores
// (skcontract/kernels/depthwise.py, DepthwiseLaunch.mma): unit steps, undilated, filters of
// at most 9 columns (B's 16 rows hold 8 + S - 1 of them; depthwise.py's MMA_MAX_TAPS, rows
// too), channels on 16 bytes.
//
// One filter row i of one channel is a small GEMM: for 16 output rows y0 + m and 8 output
// columns x0 + n,
//   out[y0 + m][x0 + n] += sum_k in[y0 + m - top + i][x0 - left + k] * B_i[k][n],
// with B_i the 16 x 8 banded (Toeplitz) matrix B_i[k][n] = w[i][k - n] (0 <= k - n < S,
// else 0; k - n <= 7 + S - 1 < 16 for S <= 9): one mma.sync m16n8k16 makes 128 outputs of
// a filter row, R of them a block of 16 x 8 outputs of a channel.
//
// A CTA takes a tile of DWMMA_ROWS x DWMMA_COLS output pixels of DWMMA_CHANNELS channels
// (32 bytes a pixel: whole sectors). It stages the tile's input window in shared memory
// channel-major (a plane of (16 + R - 1) rows x DWMMA_PITCH columns a channel, columns
// contiguous, so that ldmatrix reads A's 16 x 16 blocks: row m + i, columns 8 b .. 8 b + 15
// of plane c for filter row i of column block b; rows of 80 bytes keep its eight rows on
// distinct banks), padding as zeros. Warp w computes channels 2 w and 2 w + 1: their B
// fragments made once from the filters, then for each of the tile's four column blocks R
// ldmatrix.x4 + mma into fp32 accumulators that start at the bias. The accumulators go back
// through the same shared memory, rounded once, channel-major again, and the CTA writes
// each output pixel's channels as two 16-byte vectors. Loads and stores of two adjacent
// pixels at a time, so the transposes move 32-bit words (byte permutes pair the pixels'
// channels). Offsets inside an image are 32-bit (the host checks that its extent fits).
#pragma once

#include "sk_common.cuh"
#include "mma_fragments.cuh"
#include "depthwise.cuh"

namespace skc {

constexpr int DWMMA_THREADS = 256;  // 8 warps, two channels each
constexpr int DWMMA_CHANNELS = 16;  // a tile's channels: 32 bytes of a pixel
constexpr int DWMMA_ROWS = 16;      // a tile's output rows: the mma's M
constexpr int DWMMA_BLOCKS = 4;     // a tile's column blocks of 8 (the mma's N)
constexpr int DWMMA_COLS = 8 * DWMMA_BLOCKS;  // a tile's output columns
constexpr int DWMMA_PITCH = DWMMA_COLS + 8;   // a plane's columns: block b reads 8b .. 8b + 15
constexpr int DWMMA_PAIRS = DWMMA_PITCH / 2;  // pixel pairs a plane row

// Shared memory of a tile for filters of r rows: 16-bit channel planes of the input window,
// reused for the output tile (DWMMA_ROWS <= its rows).
__host__ __device__ constexpr int depthwise_mma_smem(int r) {
  return DWMMA_CHANNELS * (DWMMA_ROWS + r - 1) * DWMMA_PITCH * 2;
}

// 16 bytes of 16-bit values: one 16-byte load or store.
struct alignas(16) DwVec {
  unsigned w[4];
};

// B_i's fragment of this lane for filter row `wrow` (S taps, element stride sws; null: a
// channel past c, all zero): b[0] holds B[2t][g], B[2t + 1][g] (low half first), b[1]
// B[2t + 8][g], B[2t + 9][g], with g = lane / 4, t = lane % 4.
template <class T>
__device__ __forceinline__ void depthwise_mma_b(const T* wrow, int s, long long sws, int lane,
                                                unsigned (&b)[2]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    unsigned v[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int j = 2 * t + 8 * half + e - g;  // the tap of B[k][g], k = 2t + 8 half + e
      v[e] = (wrow != nullptr && j >= 0 && j < s) ? (unsigned)wrow[j * sws].x : 0u;
    }
    b[half] = v[0] | (v[1] << 16);
  }
}

// Loads the CTA's input window (rows ih0 .., columns iw0 .., channels c0 .. c0 + 15) into
// the channel planes; positions outside the image, and channels past c, are zeros.
template <class T>
__device__ __forceinline__ void depthwise_mma_load(unsigned* planes, const T* xi, int rows,
                                                   int ih0, int iw0, int h, int wd,
                                                   int sxh, int sxw, bool second) {
  const int plane_words = rows * DWMMA_PAIRS;
  for (int e = threadIdx.x; e < plane_words; e += DWMMA_THREADS) {
    const int row = e / DWMMA_PAIRS, pair = e - row * DWMMA_PAIRS;
    const int ih = ih0 + row, iw = iw0 + 2 * pair;
    DwVec px[2][2] = {};  // [pixel][vector of 8 channels]
    if (ih >= 0 && ih < h) {
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        if (iw + u < 0 || iw + u >= wd) continue;
        const T* p = xi + ih * sxh + (iw + u) * sxw;
        px[u][0] = *reinterpret_cast<const DwVec*>(p);
        if (second) px[u][1] = *reinterpret_cast<const DwVec*>(p + 8);
      }
    }
    // channel 8 v + 2 q + e of the two pixels, as one word of the plane
#pragma unroll
    for (int v = 0; v < 2; ++v)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const unsigned a = px[0][v].w[q], b = px[1][v].w[q];
        planes[(8 * v + 2 * q) * plane_words + e] = __byte_perm(a, b, 0x5410);
        planes[(8 * v + 2 * q + 1) * plane_words + e] = __byte_perm(a, b, 0x7632);
      }
  }
}

// Writes the output tile from the channel planes (DWMMA_ROWS rows of DWMMA_PAIRS words,
// columns past DWMMA_COLS unused): each pixel's channels as two 16-byte vectors, the pixels
// and channels inside the output only.
template <class T>
__device__ __forceinline__ void depthwise_mma_store(const unsigned* planes, T* oi, int rows,
                                                    int op0, int oq0, int p, int q, int sop,
                                                    int soq, bool second) {
  const int plane_words = rows * DWMMA_PAIRS;
  constexpr int PAIRS = DWMMA_COLS / 2;
  for (int e = threadIdx.x; e < DWMMA_ROWS * PAIRS; e += DWMMA_THREADS) {
    const int row = e / PAIRS, pair = e - row * PAIRS;
    const int op = op0 + row, oq = oq0 + 2 * pair;
    if (op >= p || oq >= q) continue;
    const int at = row * DWMMA_PAIRS + pair;
    DwVec px[2][2];
#pragma unroll
    for (int v = 0; v < 2; ++v)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned lo = planes[(8 * v + 2 * k) * plane_words + at];
        const unsigned hi = planes[(8 * v + 2 * k + 1) * plane_words + at];
        px[0][v].w[k] = __byte_perm(lo, hi, 0x5410);
        px[1][v].w[k] = __byte_perm(lo, hi, 0x7632);
      }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (oq + u >= q) break;
      T* o = oi + op * sop + (oq + u) * soq;
      *reinterpret_cast<DwVec*>(o) = px[u][0];
      if (second) *reinterpret_cast<DwVec*>(o + 8) = px[u][1];
    }
  }
}

// Sizes; strides in elements, all but the channels' (1): x (n, c, h, w), w (c, r, s),
// out (n, c, p, q). Unit steps, undilated, r and s <= 9; the grid is one CTA a (channel
// group of 16, tile) pair, the channel groups fastest, then the tile's column, its row and
// the image (ceil(c / 16) x ceil(q / 32) x ceil(p / 16) x n CTAs); dynamic shared memory
// depthwise_mma_smem(r).
template <class T>
__global__ void __launch_bounds__(DWMMA_THREADS, 3)
depthwise_mma(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
              T* __restrict__ out, int n, int c, int h, int wd, int p, int q, int r, int s,
              int pad_top, int pad_left, long long sxn, int sxh, int sxw, long long swc,
              long long swr, long long sws, long long son, int sop, int soq, int has_bias) {
  extern __shared__ __align__(16) unsigned char depthwise_mma_smem_raw[];
  unsigned* planes = reinterpret_cast<unsigned*>(depthwise_mma_smem_raw);
  const int groups = (c + DWMMA_CHANNELS - 1) / DWMMA_CHANNELS;
  const int tiles_q = (q + DWMMA_COLS - 1) / DWMMA_COLS, tiles_p = (p + DWMMA_ROWS - 1) / DWMMA_ROWS;
  const long long bid = blockIdx.x;
  const int grp = (int)(bid % groups);
  long long rest = bid / groups;
  const int tq = (int)(rest % tiles_q);
  rest /= tiles_q;
  const int tp = (int)(rest % tiles_p);
  const int nn = (int)(rest / tiles_p);
  const int c0 = grp * DWMMA_CHANNELS, op0 = tp * DWMMA_ROWS, oq0 = tq * DWMMA_COLS;
  const bool second = c0 + 8 < c;  // the group's second vector of 8 channels exists
  const int rows = DWMMA_ROWS + r - 1;

  depthwise_mma_load(planes, x + nn * sxn + c0, rows, op0 - pad_top, oq0 - pad_left, h, wd,
                     sxh, sxw, second);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float acc[2][DWMMA_BLOCKS][4];
#pragma unroll
  for (int cc = 0; cc < 2; ++cc) {
    const int ch = c0 + 2 * warp + cc;
    const float b0 = (has_bias && ch < c) ? Cvt<T>::to_f32(bias[ch]) : 0.f;
#pragma unroll
    for (int blk = 0; blk < DWMMA_BLOCKS; ++blk)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[cc][blk][e] = b0;
  }
  __syncthreads();
  const unsigned short* halves = reinterpret_cast<const unsigned short*>(planes);
  const int plane_halves = rows * DWMMA_PITCH;
  // ldmatrix.x4's row addresses: lanes 0-15 rows 0-15 of columns 0-7, lanes 16-31 of 8-15
  const int a_row = lane & 15, a_col = (lane >> 4) * 8;
#pragma unroll
  for (int cc = 0; cc < 2; ++cc) {
    const int ch = c0 + 2 * warp + cc;
    const T* wch = ch < c ? w + ch * swc : nullptr;
    const unsigned short* plane = halves + (2 * warp + cc) * plane_halves;
#pragma unroll 1
    for (int i = 0; i < r; ++i) {
      unsigned bf[2];
      depthwise_mma_b(wch == nullptr ? wch : wch + i * swr, s, sws, lane, bf);
      const unsigned short* arow = plane + (i + a_row) * DWMMA_PITCH + a_col;
#pragma unroll
      for (int blk = 0; blk < DWMMA_BLOCKS; ++blk) {
        unsigned a[4];
        ldmatrix_x4(a, arow + 8 * blk);
        MmaOp<T>::mma(acc[cc][blk], a, bf[0], bf[1]);
      }
    }
  }
  __syncthreads();  // every warp's reads of the input planes are done: they take the output
  const int g = lane >> 2, t = lane & 3;
  const int plane_words = rows * DWMMA_PAIRS;
#pragma unroll
  for (int cc = 0; cc < 2; ++cc) {
    unsigned* plane = planes + (2 * warp + cc) * plane_words;
#pragma unroll
    for (int blk = 0; blk < DWMMA_BLOCKS; ++blk) {
      // accumulators e, e + 1: row g (+ 8), columns 8 blk + 2t, + 1: one word of the plane
      plane[g * DWMMA_PAIRS + 4 * blk + t] =
          pack_pair(T{}, acc[cc][blk][0], acc[cc][blk][1]);
      plane[(g + 8) * DWMMA_PAIRS + 4 * blk + t] =
          pack_pair(T{}, acc[cc][blk][2], acc[cc][blk][3]);
    }
  }
  __syncthreads();
  depthwise_mma_store(planes, out + nn * son + c0, rows, op0, oq0, p, q, sop, soq, second);
}

}  // namespace skc
