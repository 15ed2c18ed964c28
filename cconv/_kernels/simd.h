/* GCC/Clang vector types for the tile kernels.
 *
 * The kernels keep all loops in Cython; this header only names a vector of
 * CCONV_VBYTES bytes and the five operations they need, written as plain C
 * expressions (no intrinsics).  With these types gcc keeps a whole block of
 * accumulators in registers, which plain C arrays do not achieve.  The same source
 * compiles for AVX-512 (64 bytes), AVX2 (32) and baseline SSE/NEON (16): setup.py builds
 * one module per width.
 */
#ifndef CCONV_SIMD_H
#define CCONV_SIMD_H

#include <string.h>

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

#define VEC_FLOAT_LEN (CCONV_VBYTES / 4)
#define VEC_DOUBLE_LEN (CCONV_VBYTES / 8)

#endif
