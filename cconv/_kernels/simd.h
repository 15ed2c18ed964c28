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


#endif
