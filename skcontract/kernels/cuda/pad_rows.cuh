// pad_rows.cuh: lines of contiguous elements copied into dense lines padded to 16 bytes
// (skcontract/kernels/pad_rows.py): x, a batch of `rows`-line matrices whose lines hold
// `cols` contiguous elements (batch and line strides sb, sr, in elements), into
// out[line * ld + c], ld >= cols. The kernels that read operands by TMA need every line
// on 16 bytes; an operand whose lines miss them (K = 197 float16 elements, 394 bytes) is
// copied so first. The columns from `cols` to `ld` are not written.
//
// A thread moves 16-byte vectors of the output: the lines, cut into vectors from their
// first column, are numbered in one sequence and the grid strides over it, PAD_VECS
// vectors a thread in flight. A source line starts on any element, so a vector's elements
// straddle two aligned 16-byte chunks of x: the thread loads both chunks whole and funnels
// the vector out of their words (shift_out). The chunks lie inside x's line wherever the
// vector is whole and the second chunk ends by the line's end; the vectors that are not
// (a line's last one or two) and every vector where the host passes `vector` = 0 (out not
// on 16-byte lines) move an element at a time. The first chunk may begin before the line
// (by at most 15 bytes) but never before the allocation, which starts on 16 bytes.
#pragma once

namespace skc {

constexpr int PAD_THREADS = 256;
constexpr int PAD_VECS = 4;  // vectors a thread loads before it stores them

// Words [q0, q0 + 4] of (lo, hi) by selects on q0's bits (no indexing of registers by a
// run-time value, which would put them in local memory), then each output word funnelled
// from two neighbours by the remaining byte shift.
__device__ __forceinline__ uint4 shift_out(const uint4& lo, const uint4& hi, unsigned mis) {
  const unsigned a[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const unsigned q0 = mis >> 2, bits = (mis & 3) * 8;
  unsigned t[6], u[5];
#pragma unroll
  for (int i = 0; i < 6; ++i) t[i] = (q0 & 2) ? a[i + 2] : a[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) u[i] = (q0 & 1) ? t[i + 1] : t[i];
  return make_uint4(__funnelshift_r(u[0], u[1], bits), __funnelshift_r(u[1], u[2], bits),
                    __funnelshift_r(u[2], u[3], bits), __funnelshift_r(u[3], u[4], bits));
}

// Where vector v of the line sequence reads and writes, and how many of its elements hold
// data (E for a whole vector). 32-bit divisions where the sequence fits them.
template <class T>
struct PadVector {
  static constexpr int E = 16 / (int)sizeof(T);
  const T* src = nullptr;
  T* dst = nullptr;
  int count = 0;  // elements of the vector that hold data (E: a whole vector); 0: none
  int left = 0;   // bytes of the source line from the vector's start
  __device__ __forceinline__ void at(const T* x, T* out, unsigned long long v, bool narrow,
                                     int vpl, int rows, int cols, int ld, long long sb,
                                     long long sr) {
    unsigned long long line, b;
    if (narrow) {
      line = (unsigned)v / (unsigned)vpl;
      b = (unsigned)line / (unsigned)rows;
    } else {
      line = v / vpl;
      b = line / rows;
    }
    const int c0 = (int)(v - line * vpl) * E;
    const long long r = (long long)(line - b * rows);
    src = x + (long long)b * sb + r * sr + c0;
    dst = out + (long long)line * ld + c0;
    count = min(E, cols - c0);
    left = (cols - c0) * (int)sizeof(T);
  }
};

template <class T>
__global__ void __launch_bounds__(PAD_THREADS)
pad_rows_copy(const T* __restrict__ x, T* __restrict__ out, long long lines, int rows,
              int cols, int ld, long long sb, long long sr, int vector) {
  constexpr int E = PadVector<T>::E;
  const int vpl = (cols + E - 1) / E;  // vectors of a line, the last one perhaps partial
  const unsigned long long total = (unsigned long long)lines * vpl;
  const bool narrow = total <= 0xffffffffull;
  const unsigned long long stride = (unsigned long long)gridDim.x * PAD_THREADS;
  for (unsigned long long base = (unsigned long long)blockIdx.x * PAD_THREADS + threadIdx.x;
       base < total; base += stride * PAD_VECS) {
    PadVector<T> pv[PAD_VECS];
    uint4 got[PAD_VECS];
    bool whole[PAD_VECS];
#pragma unroll
    for (int j = 0; j < PAD_VECS; ++j) {
      const unsigned long long v = base + j * stride;
      whole[j] = false;
      if (v >= total) continue;
      pv[j].at(x, out, v, narrow, vpl, rows, cols, ld, sb, sr);
      const unsigned long long addr = reinterpret_cast<unsigned long long>(pv[j].src);
      const unsigned mis = (unsigned)(addr & 15);
      const uint4* chunk = reinterpret_cast<const uint4*>(addr - mis);
      // a misaligned vector's second chunk ends 32 - mis bytes past its start
      whole[j] = vector && pv[j].count == E && (mis == 0 || (int)(32 - mis) <= pv[j].left);
      if (whole[j]) {
        const uint4 lo = __ldg(chunk);
        got[j] = mis == 0 ? lo : shift_out(lo, __ldg(chunk + 1), mis);
      }
    }
#pragma unroll
    for (int j = 0; j < PAD_VECS; ++j) {
      if (whole[j]) {
        *reinterpret_cast<uint4*>(pv[j].dst) = got[j];
      } else {
        for (int e = 0; e < pv[j].count; ++e) pv[j].dst[e] = pv[j].src[e];
      }
    }
  }
}

}  // namespace skc
