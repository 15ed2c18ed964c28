/* GCC/Clang vector types for the tile kernels.
 *
 * The kernels keep all loops in Cython; this header only names a vector of
 * CCONV_VBYTES bytes and the few operations they need, written as plain C
 * expressions (no intrinsics).  With these types gcc keeps a whole block of
 * accumulators in registers, which plain C arrays do not achieve.  The same source
 * compiles for AVX-512 (64 bytes), AVX2 (32) and baseline SSE/NEON (16): setup.py builds
 * one module per width.
 */
#ifndef CCONV_SIMD_H
#define CCONV_SIMD_H

#include <string.h>

#define VEC_FLOAT_LEN (CCONV_VBYTES / 4)
#define VEC_DOUBLE_LEN (CCONV_VBYTES / 8)

#ifndef CCONV_VBYTES
#define CCONV_VBYTES 16
#endif

#define CCONV_DEFINE_VECTOR(T, V)                                              \
    typedef T V __attribute__((vector_size(CCONV_VBYTES)));                    \
    static inline V V##_load(const T *p) { V v; memcpy(&v, p, sizeof v); return v; } \
    static inline void V##_store(T *p, V v) { memcpy(p, &v, sizeof v); }       \
    static inline V V##_zero(void) { V v = {0}; return v; }                    \
    /* x - 0 is exactly x (unlike 0 + x for x = -0.0), so gcc folds it to a broadcast */ \
    static inline V V##_splat(T x) { V z = {0}; return x - z; }                \
    /* a * b + c; -ffp-contract=fast turns it into one FMA */                  \
    static inline V V##_fma(V a, V b, V c) { return a * b + c; }

CCONV_DEFINE_VECTOR(float, vec_float)
CCONV_DEFINE_VECTOR(double, vec_double)

/* The even and the odd elements of the 2 * len elements from p, from two loads and one
 * two-source shuffle each: a stride-2 row split into its two column phases (what a column
 * stride of 2 reads).  Measured reason: gcc compiles the plain loop over a stride-2 row to
 * one insert per element, and vectorises none of a row shorter than a vector (the 14
 * columns of a MobileNet stride-2 depthwise plane spent 64% of the layer's time there). */
#if CCONV_VBYTES == 64
#define CCONV_EVEN_FLOAT 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define CCONV_EVEN_DOUBLE 0, 2, 4, 6, 8, 10, 12, 14
#define CCONV_ODD_FLOAT 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
#define CCONV_ODD_DOUBLE 1, 3, 5, 7, 9, 11, 13, 15
#elif CCONV_VBYTES == 32
#define CCONV_EVEN_FLOAT 0, 2, 4, 6, 8, 10, 12, 14
#define CCONV_EVEN_DOUBLE 0, 2, 4, 6
#define CCONV_ODD_FLOAT 1, 3, 5, 7, 9, 11, 13, 15
#define CCONV_ODD_DOUBLE 1, 3, 5, 7
#else
#define CCONV_EVEN_FLOAT 0, 2, 4, 6
#define CCONV_EVEN_DOUBLE 0, 2
#define CCONV_ODD_FLOAT 1, 3, 5, 7
#define CCONV_ODD_DOUBLE 1, 3
#endif

/* The inverse: the first and the second halves of the elements of two vectors taken in
 * turn (even[0], odd[0], even[1], odd[1], ...), a row of two column phases put back
 * together (the stride-2 data gradient computes its even and odd columns apart). */
#if CCONV_VBYTES == 64
#define CCONV_LOW_FLOAT 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define CCONV_HIGH_FLOAT 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31
#define CCONV_LOW_DOUBLE 0, 8, 1, 9, 2, 10, 3, 11
#define CCONV_HIGH_DOUBLE 4, 12, 5, 13, 6, 14, 7, 15
#elif CCONV_VBYTES == 32
#define CCONV_LOW_FLOAT 0, 8, 1, 9, 2, 10, 3, 11
#define CCONV_HIGH_FLOAT 4, 12, 5, 13, 6, 14, 7, 15
#define CCONV_LOW_DOUBLE 0, 4, 1, 5
#define CCONV_HIGH_DOUBLE 2, 6, 3, 7
#else
#define CCONV_LOW_FLOAT 0, 4, 1, 5
#define CCONV_HIGH_FLOAT 2, 6, 3, 7
#define CCONV_LOW_DOUBLE 0, 2
#define CCONV_HIGH_DOUBLE 1, 3
#endif

typedef int vec_float_index __attribute__((vector_size(CCONV_VBYTES)));
typedef long long vec_double_index __attribute__((vector_size(CCONV_VBYTES)));

#if defined(__clang__)
#define CCONV_SHUFFLE(a, b, I, idx) __builtin_shufflevector(a, b, idx)
#else
#define CCONV_SHUFFLE(a, b, I, idx) __builtin_shuffle(a, b, (I){idx})
#endif

static inline void vec_float_deinterleave(const float *p, vec_float *even, vec_float *odd)
{
    vec_float a = vec_float_load(p), b = vec_float_load(p + VEC_FLOAT_LEN);
    *even = CCONV_SHUFFLE(a, b, vec_float_index, CCONV_EVEN_FLOAT);
    *odd = CCONV_SHUFFLE(a, b, vec_float_index, CCONV_ODD_FLOAT);
}

static inline void vec_double_deinterleave(const double *p, vec_double *even,
                                           vec_double *odd)
{
    vec_double a = vec_double_load(p), b = vec_double_load(p + VEC_DOUBLE_LEN);
    *even = CCONV_SHUFFLE(a, b, vec_double_index, CCONV_EVEN_DOUBLE);
    *odd = CCONV_SHUFFLE(a, b, vec_double_index, CCONV_ODD_DOUBLE);
}


static inline void vec_float_interleave(vec_float even, vec_float odd, vec_float *low,
                                        vec_float *high)
{
    *low = CCONV_SHUFFLE(even, odd, vec_float_index, CCONV_LOW_FLOAT);
    *high = CCONV_SHUFFLE(even, odd, vec_float_index, CCONV_HIGH_FLOAT);
}

static inline void vec_double_interleave(vec_double even, vec_double odd, vec_double *low,
                                         vec_double *high)
{
    *low = CCONV_SHUFFLE(even, odd, vec_double_index, CCONV_LOW_DOUBLE);
    *high = CCONV_SHUFFLE(even, odd, vec_double_index, CCONV_HIGH_DOUBLE);
}

#endif
