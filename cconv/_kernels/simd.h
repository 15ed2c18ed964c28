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

/* variadic: the index list may arrive expanded (through another macro) or as one name */
#if defined(__clang__)
#define CCONV_SHUFFLE(a, b, I, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define CCONV_SHUFFLE(a, b, I, ...) __builtin_shuffle(a, b, (I){__VA_ARGS__})
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

/* In-place transpose of a square block of vectors: r[i] holds row i of a VL x VL block
 * (VL = the vector's element count); afterwards r[j] holds column j.  The classic network
 * of unpacks (32-bit pairs, then 64-bit pairs: a 4x4 transpose inside every 128-bit lane)
 * and 128-bit lane shuffles: every step one cheap single-source-lane instruction
 * (unpcklps / unpcklpd / shufps, vshuff32x4, vperm2f128).  The channel-blocked depthwise
 * kernels turn VL planes into pixel vectors of VL channels with it, and back.  Measured
 * reason: a first version exchanging one index bit per stage compiled half its shuffles to
 * vpermt2ps and spent ~146 cycles per 16x16 block (AMD EPYC Zen 5), about twice this. */
#define CCONV_SWAP(r, i, j, V, I, LO, HI)                                        \
    do { V a_ = r[i], b_ = r[j];                                               \
         r[i] = CCONV_SHUFFLE(a_, b_, I, LO); r[j] = CCONV_SHUFFLE(a_, b_, I, HI); } while (0)

#if CCONV_VBYTES == 64
#define CCONV_F_UNPACK_LO 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29
#define CCONV_F_UNPACK_HI 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31
#define CCONV_F_PAIRS_LO 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define CCONV_F_PAIRS_HI 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define CCONV_F_LANES01 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define CCONV_F_LANES23 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define CCONV_F_LANES02 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27
#define CCONV_F_LANES13 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31
#define CCONV_D_UNPACK_LO 0, 8, 2, 10, 4, 12, 6, 14
#define CCONV_D_UNPACK_HI 1, 9, 3, 11, 5, 13, 7, 15
#define CCONV_D_LANES01 0, 1, 2, 3, 8, 9, 10, 11
#define CCONV_D_LANES23 4, 5, 6, 7, 12, 13, 14, 15
#define CCONV_D_LANES02 0, 1, 4, 5, 8, 9, 12, 13
#define CCONV_D_LANES13 2, 3, 6, 7, 10, 11, 14, 15
#elif CCONV_VBYTES == 32
#define CCONV_F_UNPACK_LO 0, 8, 1, 9, 4, 12, 5, 13
#define CCONV_F_UNPACK_HI 2, 10, 3, 11, 6, 14, 7, 15
#define CCONV_F_PAIRS_LO 0, 1, 8, 9, 4, 5, 12, 13
#define CCONV_F_PAIRS_HI 2, 3, 10, 11, 6, 7, 14, 15
#define CCONV_F_LANES02 0, 1, 2, 3, 8, 9, 10, 11
#define CCONV_F_LANES13 4, 5, 6, 7, 12, 13, 14, 15
#define CCONV_D_UNPACK_LO 0, 4, 2, 6
#define CCONV_D_UNPACK_HI 1, 5, 3, 7
#define CCONV_D_LANES02 0, 1, 4, 5
#define CCONV_D_LANES13 2, 3, 6, 7
#else
#define CCONV_F_UNPACK_LO 0, 4, 1, 5
#define CCONV_F_UNPACK_HI 2, 6, 3, 7
#define CCONV_F_PAIRS_LO 0, 1, 4, 5
#define CCONV_F_PAIRS_HI 2, 3, 6, 7
#define CCONV_D_UNPACK_LO 0, 2
#define CCONV_D_UNPACK_HI 1, 3
#endif

static inline void vec_float_transpose(vec_float *r)
{
    int i, k;
    /* rows 2i, 2i+1 -> their elements in pairs; then 4x4 blocks inside each 128-bit lane:
     * r[4i + k], lane L = column 4L + k of rows 4i .. 4i + 3 */
    for (i = 0; i < VEC_FLOAT_LEN; i += 2)
        CCONV_SWAP(r, i, i + 1, vec_float, vec_float_index, CCONV_F_UNPACK_LO,
                   CCONV_F_UNPACK_HI);
    for (i = 0; i < VEC_FLOAT_LEN; i += 4) {
        vec_float a = r[i], b = r[i + 1], c = r[i + 2], d = r[i + 3];
        r[i] = CCONV_SHUFFLE(a, c, vec_float_index, CCONV_F_PAIRS_LO);
        r[i + 1] = CCONV_SHUFFLE(a, c, vec_float_index, CCONV_F_PAIRS_HI);
        r[i + 2] = CCONV_SHUFFLE(b, d, vec_float_index, CCONV_F_PAIRS_LO);
        r[i + 3] = CCONV_SHUFFLE(b, d, vec_float_index, CCONV_F_PAIRS_HI);
    }
#if CCONV_VBYTES == 64
    /* a 4x4 transpose of 128-bit lanes among r[k], r[4 + k], r[8 + k], r[12 + k] */
    for (k = 0; k < 4; k++) {
        CCONV_SWAP(r, k, k + 4, vec_float, vec_float_index, CCONV_F_LANES01, CCONV_F_LANES23);
        CCONV_SWAP(r, k + 8, k + 12, vec_float, vec_float_index, CCONV_F_LANES01,
                   CCONV_F_LANES23);
        CCONV_SWAP(r, k, k + 8, vec_float, vec_float_index, CCONV_F_LANES02, CCONV_F_LANES13);
        CCONV_SWAP(r, k + 4, k + 12, vec_float, vec_float_index, CCONV_F_LANES02,
                   CCONV_F_LANES13);
    }
    /* (r[k], r[4 + k], r[8 + k], r[12 + k]) now hold columns k, 8 + k, 4 + k, 12 + k */
    for (k = 0; k < 4; k++) {
        vec_float t = r[4 + k];
        r[4 + k] = r[8 + k];
        r[8 + k] = t;
    }
#elif CCONV_VBYTES == 32
    for (k = 0; k < 4; k++)
        CCONV_SWAP(r, k, k + 4, vec_float, vec_float_index, CCONV_F_LANES02, CCONV_F_LANES13);
#else
    (void)k;
#endif
}

static inline void vec_double_transpose(vec_double *r)
{
    int i, k;
    /* rows 2i, 2i+1 -> r[2i + k], lane L = column 2L + k of rows 2i, 2i + 1 */
    for (i = 0; i < VEC_DOUBLE_LEN; i += 2)
        CCONV_SWAP(r, i, i + 1, vec_double, vec_double_index, CCONV_D_UNPACK_LO,
                   CCONV_D_UNPACK_HI);
#if CCONV_VBYTES == 64
    for (k = 0; k < 2; k++) {
        CCONV_SWAP(r, k, k + 2, vec_double, vec_double_index, CCONV_D_LANES01,
                   CCONV_D_LANES23);
        CCONV_SWAP(r, k + 4, k + 6, vec_double, vec_double_index, CCONV_D_LANES01,
                   CCONV_D_LANES23);
        CCONV_SWAP(r, k, k + 4, vec_double, vec_double_index, CCONV_D_LANES02,
                   CCONV_D_LANES13);
        CCONV_SWAP(r, k + 2, k + 6, vec_double, vec_double_index, CCONV_D_LANES02,
                   CCONV_D_LANES13);
    }
    for (k = 0; k < 2; k++) {
        vec_double t = r[2 + k];
        r[2 + k] = r[4 + k];
        r[4 + k] = t;
    }
#elif CCONV_VBYTES == 32
    for (k = 0; k < 2; k++)
        CCONV_SWAP(r, k, k + 2, vec_double, vec_double_index, CCONV_D_LANES02,
                   CCONV_D_LANES13);
#else
    (void)k;
#endif
}


/* A whole-vector store that bypasses the caches (x86 MOVNT*), to a vector-aligned address;
 * a plain store elsewhere.  Stores of a large result that no later step of the call reads
 * skip the read-for-ownership of every line.  cconv_store_fence orders them before the
 * caller's later accesses. */
#if defined(__clang__)
static inline void vec_float_stream(float *p, vec_float v) { __builtin_nontemporal_store(v, (vec_float *)p); }
static inline void vec_double_stream(double *p, vec_double v) { __builtin_nontemporal_store(v, (vec_double *)p); }
#elif defined(__AVX512F__) && CCONV_VBYTES == 64
static inline void vec_float_stream(float *p, vec_float v) { __builtin_ia32_movntps512(p, v); }
static inline void vec_double_stream(double *p, vec_double v) { __builtin_ia32_movntpd512(p, v); }
#elif defined(__AVX__) && CCONV_VBYTES == 32
static inline void vec_float_stream(float *p, vec_float v) { __builtin_ia32_movntps256(p, v); }
static inline void vec_double_stream(double *p, vec_double v) { __builtin_ia32_movntpd256(p, v); }
#elif defined(__SSE2__) && CCONV_VBYTES == 16
static inline void vec_float_stream(float *p, vec_float v) { __builtin_ia32_movntps(p, v); }
static inline void vec_double_stream(double *p, vec_double v) { __builtin_ia32_movntpd(p, v); }
#else
static inline void vec_float_stream(float *p, vec_float v) { vec_float_store(p, v); }
static inline void vec_double_stream(double *p, vec_double v) { vec_double_store(p, v); }
#endif
#if defined(__SSE__)
static inline void cconv_store_fence(void) { __builtin_ia32_sfence(); }
#else
static inline void cconv_store_fence(void) { }
#endif

#endif
