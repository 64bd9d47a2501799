// depthwise_mma.cuh: depthwise convolutions of 16-bit channels-last data on tensor cores
// (skcontract/kernels/depthwise_mma.py): steps of 1 or 2 (the same both ways), undilated,
// filters of at most 9 columns (B's 16 rows hold them; depthwise_mma.py's MAX_TAPS, which
// bounds the rows too), channels on 16 bytes.
//
// One filter row i of one channel is a small GEMM. At unit step, for 16 output rows y0 + m
// and 8 output columns x0 + n,
//   out[y0 + m][x0 + n] += sum_k in[y0 + m - top + i][x0 - left + k] * B_i[k][n],
// with B_i the 16 x 8 banded (Toeplitz) matrix B_i[k][n] = w[i][k - n] (0 <= k - n < S,
// else 0; k - n <= 7 + S - 1 < 16 for S <= 9): one mma.sync m16n8k16 makes 128 outputs of
// a filter row, R of them a block of 16 x 8 outputs of a channel. At step 2 the input's
// columns are staged split by parity, so that the taps j = 2u + p of a filter row read
// parity plane p at column x + u: two such GEMMs a filter row (p = 0, 1), each banded
// (B[k][n] = w[i][2 (k - n) + p]), their A rows 2 m + i (ldmatrix takes a row address a
// lane, so rows two apart cost nothing).
//
// A CTA takes a tile of DWMMA_ROWS x DWMMA_COLS output pixels of DwMma<STEP>::CH channels
// (16 at unit step: 32 bytes a pixel, whole sectors; 8 at step 2, whose input window is
// twice as wide and tall). It stages the tile's input window in shared memory
// channel-major (a plane of rows x DWMMA_PITCH columns a channel and column parity, columns
// contiguous, so that ldmatrix reads A's 16 x 16 blocks: columns 8 b .. 8 b + 15 for column
// block b; rows of 80 bytes keep its eight rows on distinct banks), padding as zeros. Each
// warp computes DwMma<STEP>::CPW channels: its B fragments made a filter row from the
// filters (staged in shared memory beside the window, loaded with it), then for each of the
// tile's four column blocks ldmatrix.x4 + mma into fp32
// accumulators that start at the bias. The accumulators go back through the same shared
// memory, rounded once, channel-major again, and the CTA writes each output pixel's
// channels as 16-byte vectors. Loads and stores move two pixels at a time (two of one
// column parity), so the transposes move 32-bit words (byte permutes pair the pixels'
// channels), and a thread issues the loads of DWMMA_BATCH such pairs before it stores any.
// Offsets inside an image are 32-bit (the host checks that its extent fits).
#pragma once

#include "sk_common.cuh"
#include "mma_fragments.cuh"
#include "depthwise.cuh"

namespace skc {

constexpr int DWMMA_THREADS = 256;  // 8 warps
constexpr int DWMMA_ROWS = 16;      // a tile's output rows: the mma's M
constexpr int DWMMA_BLOCKS = 4;     // a tile's column blocks of 8 (the mma's N)
constexpr int DWMMA_COLS = 8 * DWMMA_BLOCKS;  // a tile's output columns
constexpr int DWMMA_PITCH = DWMMA_COLS + 8;   // a plane's columns: block b reads 8b .. 8b + 15
constexpr int DWMMA_PAIRS = DWMMA_PITCH / 2;  // words (column pairs) of a plane row
constexpr int DWMMA_BATCH = 2;  // plane words a thread loads at once (depthwise_mma_load)

// What a step fixes: the tile's channels CH (VECS vectors of 8 a pixel, CPW a warp), the
// column parities PAR the window is split into, and its rows for filters of r rows.
template <int STEP>
struct DwMma {
  static_assert(STEP == 1 || STEP == 2, "steps of 1 or 2");
  static constexpr int CH = STEP == 1 ? 16 : 8;
  static constexpr int VECS = CH / 8, CPW = CH / (DWMMA_THREADS / 32), PAR = STEP;
  __host__ __device__ static constexpr int rows(int r) { return STEP * (DWMMA_ROWS - 1) + r; }
};

// Shared memory of a tile for filters of r rows at `step`: 16-bit planes of the input
// window (a channel and column parity each), reused for the output tile.
__host__ __device__ constexpr int depthwise_mma_planes(int step, int r) {
  return step == 1 ? DwMma<1>::CH * DwMma<1>::PAR * DwMma<1>::rows(r) * DWMMA_PITCH * 2
                   : DwMma<2>::CH * DwMma<2>::PAR * DwMma<2>::rows(r) * DWMMA_PITCH * 2;
}

// All of a tile's shared memory: the planes, then its channels' filters (r x s taps of
// 16 bits a channel, padded to 16 bytes).
__host__ __device__ constexpr int depthwise_mma_smem(int step, int r, int s) {
  return depthwise_mma_planes(step, r) +
         ((step == 1 ? DwMma<1>::CH : DwMma<2>::CH) * r * s * 2 + 15) / 16 * 16;
}

// 16 bytes of 16-bit values: one 16-byte load or store.
struct alignas(16) DwVec {
  unsigned w[4];
};

// This lane's fragment of the banded B of a filter row (its S taps' 16 bits in shared
// memory), taps STEP (k - n) + par: b[0] holds B[2t][g], B[2t + 1][g] (low half first),
// b[1] B[2t + 8][g], B[2t + 9][g], g = lane / 4, t = lane % 4.
template <int STEP>
__device__ __forceinline__ void depthwise_mma_b(const unsigned short* wrow, int s, int par,
                                                int lane, unsigned (&b)[2]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    unsigned v[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int d = 2 * t + 8 * half + e - g;  // k - n of B[k][g], k = 2t + 8 half + e
      const int j = STEP * d + par;            // its tap
      v[e] = (d >= 0 && j < s) ? (unsigned)wrow[j] : 0u;
    }
    b[half] = v[0] | (v[1] << 16);
  }
}

// Stages the filters of channels c0 .. c0 + ch (r x s taps each; zeros past c) in shared
// memory as [channel][tap], the taps of a filter row contiguous.
template <class T>
__device__ __forceinline__ void depthwise_mma_filters(unsigned short* wsm, const T* w, int c0,
                                                      int ch, int c, int r, int s,
                                                      long long swc, long long swr,
                                                      long long sws) {
  const int taps = r * s;
  for (int e = threadIdx.x; e < ch * taps; e += DWMMA_THREADS) {
    const int cc = e / taps, tap = e - cc * taps, i = tap / s, j = tap - i * s;
    wsm[e] = c0 + cc < c ? w[(c0 + cc) * swc + i * swr + j * sws].x : (unsigned short)0;
  }
}

// Loads the CTA's input window (rows ih0 .., columns iw0 .., channels c0 .. c0 + CH) into
// the planes [channel][parity][row][DWMMA_PAIRS words]; positions outside the image, and
// channels past c (`vecs` vectors of 8 exist), are zeros. A word holds two columns of one
// parity: window columns STEP (2 w) + par and STEP (2 w + 1) + par of plane word w.
// A thread takes DWMMA_BATCH words at a time, their loads all issued before any store, so
// that a thread has that many words' loads in flight.
template <int STEP, class T>
__device__ __forceinline__ void depthwise_mma_load(unsigned* planes, const T* xi, int rows,
                                                   int ih0, int iw0, int h, int wd,
                                                   int sxh, int sxw, int vecs) {
  using M = DwMma<STEP>;
  const int plane_words = rows * DWMMA_PAIRS, total = M::PAR * plane_words;
  for (int e0 = threadIdx.x; e0 < total; e0 += DWMMA_BATCH * DWMMA_THREADS) {
    DwVec px[DWMMA_BATCH][2][M::VECS] = {};  // [word][pixel][vector of 8 channels]
#pragma unroll
    for (int b = 0; b < DWMMA_BATCH; ++b) {
      const int e = e0 + b * DWMMA_THREADS;
      if (e >= total) break;
      const int par = e / plane_words, at = e - par * plane_words;
      const int row = at / DWMMA_PAIRS, pair = at - row * DWMMA_PAIRS;
      const int ih = ih0 + row, iw = iw0 + STEP * 2 * pair + par;
      if (ih < 0 || ih >= h) continue;
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int col = iw + STEP * u;
        if (col < 0 || col >= wd) continue;
        const T* p = xi + ih * sxh + col * sxw;
#pragma unroll
        for (int v = 0; v < M::VECS; ++v)
          if (v < vecs) px[b][u][v] = *reinterpret_cast<const DwVec*>(p + 8 * v);
      }
    }
    // channel 8 v + 2 q (+ 1) of the two pixels, as one word of its plane
#pragma unroll
    for (int b = 0; b < DWMMA_BATCH; ++b) {
      const int e = e0 + b * DWMMA_THREADS;
      if (e >= total) break;
      const int par = e / plane_words, at = e - par * plane_words;
#pragma unroll
      for (int v = 0; v < M::VECS; ++v)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const unsigned a = px[b][0][v].w[q], c = px[b][1][v].w[q];
          const int ch = 8 * v + 2 * q;
          planes[(ch * M::PAR + par) * plane_words + at] = __byte_perm(a, c, 0x5410);
          planes[((ch + 1) * M::PAR + par) * plane_words + at] = __byte_perm(a, c, 0x7632);
        }
    }
  }
}

// Writes the output tile from the output planes [channel][DWMMA_ROWS rows][DWMMA_PAIRS
// words] (columns past DWMMA_COLS unused): each pixel's channels as 16-byte vectors, the
// pixels and channels (`vecs` vectors of 8) inside the output only.
template <int STEP, class T>
__device__ __forceinline__ void depthwise_mma_store(const unsigned* planes, T* oi, int op0,
                                                    int oq0, int p, int q, int sop, int soq,
                                                    int vecs) {
  using M = DwMma<STEP>;
  constexpr int PAIRS = DWMMA_COLS / 2, PLANE = DWMMA_ROWS * DWMMA_PAIRS;
  for (int e = threadIdx.x; e < DWMMA_ROWS * PAIRS; e += DWMMA_THREADS) {
    const int row = e / PAIRS, pair = e - row * PAIRS;
    const int op = op0 + row, oq = oq0 + 2 * pair;
    if (op >= p || oq >= q) continue;
    const int at = row * DWMMA_PAIRS + pair;
    DwVec px[2][M::VECS];
#pragma unroll
    for (int v = 0; v < M::VECS; ++v)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned lo = planes[(8 * v + 2 * k) * PLANE + at];
        const unsigned hi = planes[(8 * v + 2 * k + 1) * PLANE + at];
        px[0][v].w[k] = __byte_perm(lo, hi, 0x5410);
        px[1][v].w[k] = __byte_perm(lo, hi, 0x7632);
      }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (oq + u >= q) break;
      T* o = oi + op * sop + (oq + u) * soq;
#pragma unroll
      for (int v = 0; v < M::VECS; ++v)
        if (v < vecs) *reinterpret_cast<DwVec*>(o + 8 * v) = px[u][v];
    }
  }
}

// Sizes; strides in elements, all but the channels' (1): x (n, c, h, w), w (c, r, s),
// out (n, c, p, q). Steps of STEP both ways, undilated, r and s <= 9; the grid is one CTA a
// (channel group of DwMma<STEP>::CH, tile) pair, the channel groups fastest, then the
// tile's column, its row and the image (ceil(c / CH) x ceil(q / 32) x ceil(p / 16) x n
// CTAs); dynamic shared memory depthwise_mma_smem(STEP, r, s).
template <class T, int STEP>
__global__ void __launch_bounds__(DWMMA_THREADS, 3)
depthwise_mma(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
              T* __restrict__ out, int n, int c, int h, int wd, int p, int q, int r, int s,
              int pad_top, int pad_left, long long sxn, int sxh, int sxw, long long swc,
              long long swr, long long sws, long long son, int sop, int soq, int has_bias) {
  using M = DwMma<STEP>;
  extern __shared__ __align__(16) unsigned char depthwise_mma_smem_raw[];
  unsigned* planes = reinterpret_cast<unsigned*>(depthwise_mma_smem_raw);
  const int groups = (c + M::CH - 1) / M::CH;
  const int tiles_q = (q + DWMMA_COLS - 1) / DWMMA_COLS, tiles_p = (p + DWMMA_ROWS - 1) / DWMMA_ROWS;
  const long long bid = blockIdx.x;
  const int grp = (int)(bid % groups);
  long long rest = bid / groups;
  const int tq = (int)(rest % tiles_q);
  rest /= tiles_q;
  const int tp = (int)(rest % tiles_p);
  const int nn = (int)(rest / tiles_p);
  const int c0 = grp * M::CH, op0 = tp * DWMMA_ROWS, oq0 = tq * DWMMA_COLS;
  const int vecs = min(M::VECS, (c - c0) / 8);  // vectors of 8 channels the group has
  const int rows = M::rows(r);

  unsigned short* wsm = reinterpret_cast<unsigned short*>(depthwise_mma_smem_raw +
                                                         depthwise_mma_planes(STEP, r));
  depthwise_mma_filters(wsm, w, c0, M::CH, c, r, s, swc, swr, sws);
  depthwise_mma_load<STEP>(planes, x + nn * sxn + c0, rows, op0 * STEP - pad_top,
                           oq0 * STEP - pad_left, h, wd, sxh, sxw, vecs);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float acc[M::CPW][DWMMA_BLOCKS][4];
#pragma unroll
  for (int cc = 0; cc < M::CPW; ++cc) {
    const int ch = c0 + M::CPW * warp + cc;
    const float b0 = (has_bias && ch < c) ? Cvt<T>::to_f32(bias[ch]) : 0.f;
#pragma unroll
    for (int blk = 0; blk < DWMMA_BLOCKS; ++blk)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[cc][blk][e] = b0;
  }
  __syncthreads();
  const unsigned short* halves = reinterpret_cast<const unsigned short*>(planes);
  const int plane_halves = rows * DWMMA_PITCH;
  // ldmatrix.x4's row addresses: lanes 0-15 rows 0-15 of columns 0-7, lanes 16-31 of 8-15;
  // output row m reads window row STEP m + i
  const int a_row = STEP * (lane & 15), a_col = (lane >> 4) * 8;
#pragma unroll
  for (int cc = 0; cc < M::CPW; ++cc) {
    const int local = M::CPW * warp + cc;
#pragma unroll 1
    for (int i = 0; i < r; ++i) {
#pragma unroll
      for (int par = 0; par < M::PAR; ++par) {
        unsigned bf[2];
        depthwise_mma_b<STEP>(wsm + (local * r + i) * s, s, par, lane, bf);
        const unsigned short* arow =
            halves + (local * M::PAR + par) * plane_halves + (i + a_row) * DWMMA_PITCH + a_col;
#pragma unroll
        for (int blk = 0; blk < DWMMA_BLOCKS; ++blk) {
          unsigned a[4];
          ldmatrix_x4(a, arow + 8 * blk);
          MmaOp<T>::mma(acc[cc][blk], a, bf[0], bf[1]);
        }
      }
    }
  }
  __syncthreads();  // every warp's reads of the input planes are done: they take the output
  const int g = lane >> 2, t = lane & 3;
  constexpr int PLANE = DWMMA_ROWS * DWMMA_PAIRS;
#pragma unroll
  for (int cc = 0; cc < M::CPW; ++cc) {
    unsigned* plane = planes + (M::CPW * warp + cc) * PLANE;
#pragma unroll
    for (int blk = 0; blk < DWMMA_BLOCKS; ++blk) {
      // accumulators e, e + 1: row g (+ 8), columns 8 blk + 2t, + 1: one word of the plane
      plane[g * DWMMA_PAIRS + 4 * blk + t] = pack_pair(T{}, acc[cc][blk][0], acc[cc][blk][1]);
      plane[(g + 8) * DWMMA_PAIRS + 4 * blk + t] =
          pack_pair(T{}, acc[cc][blk][2], acc[cc][blk][3]);
    }
  }
  __syncthreads();
  depthwise_mma_store<STEP>(planes, out + nn * son + c0, op0, oq0, p, q, sop, soq, vecs);
}

}  // namespace skc
