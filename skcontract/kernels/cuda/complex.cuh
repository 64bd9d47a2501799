// complex.cuh: the complex storage and accumulator type of the kernels that read complex
// operands as they lie (the Dot family: memory-bound complex products, sk_dot.cuh), and its
// arithmetic in sk_common.cuh's overload sets (AccCvt, acc_add, acc_mul) and acc_scale (a
// value times a real alpha or beta, ScalarOf).
// Complex<R> is two R's, real part first, as numpy's and CuPy's complex64 / complex128 lie.
// Its alignment is R's, not 2 x R's: a complex view of a real array may start on any R, so
// element loads are two R loads; the Dot kernel's 16-byte loads of aligned operands read
// whole elements (the host checked the alignment).
#pragma once
#include "sk_common.cuh"

namespace skc {

template <class R>
struct Complex {
  R re, im;
  Complex() = default;  // trivial: a __shared__ array of them takes no initializer
  __device__ __forceinline__ constexpr Complex(R r, R i = R(0)) : re(r), im(i) {}
};
using complex64_t = Complex<float>;
using complex128_t = Complex<double>;

// The real type of a kernel's alpha and beta for accumulator Acc: complex products are
// scaled by real factors (einsum's 1 and 0).
template <class Acc> struct ScalarOf { using type = Acc; };
template <class R> struct ScalarOf<Complex<R>> { using type = R; };

template <class R> struct AccCvt<Complex<R>, Complex<R>> {
  __device__ __forceinline__ static Complex<R> from_acc(Complex<R> v) { return v; }
  __device__ __forceinline__ static Complex<R> to_acc(Complex<R> v) { return v; }
};

template <class R>
__device__ __forceinline__ Complex<R> acc_add(Complex<R> a, Complex<R> b) {
  return Complex<R>(a.re + b.re, a.im + b.im);
}
template <class R>
__device__ __forceinline__ Complex<R> acc_mul(Complex<R> a, Complex<R> b) {
  return Complex<R>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}

// a, or its conjugate where C (a real value is its own): an operand read conjugated.
template <bool C, class T>
__device__ __forceinline__ T conj_if(T a) { return a; }
template <bool C, class R>
__device__ __forceinline__ Complex<R> conj_if(Complex<R> a) {
  return C ? Complex<R>(a.re, -a.im) : a;
}

// s * v for a real factor s (ScalarOf).
__device__ __forceinline__ float acc_scale(float s, float v) { return s * v; }
__device__ __forceinline__ double acc_scale(double s, double v) { return s * v; }
template <class R>
__device__ __forceinline__ Complex<R> acc_scale(R s, Complex<R> v) {
  return Complex<R>(s * v.re, s * v.im);
}

}  // namespace skc
