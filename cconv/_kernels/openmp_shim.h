/* One home for OpenMP: the package also builds, single-threaded, without it. */
#ifndef CCONV_OPENMP_SHIM_H
#define CCONV_OPENMP_SHIM_H
#ifdef _OPENMP
#include <omp.h>
#define CCONV_HAVE_OPENMP 1
#define CCONV_OPENMP_VERSION _OPENMP
#else
#define CCONV_HAVE_OPENMP 0
#define CCONV_OPENMP_VERSION 0
static inline int omp_get_max_threads(void) { return 1; }
static inline void omp_set_num_threads(int n) { (void)n; }
#endif

#ifndef CCONV_BUILD_FLAGS
#define CCONV_BUILD_FLAGS "unknown"
#endif

/* Which SIMD extensions the running CPU (and OS) supports. */
static inline int cconv_cpu_has_avx512(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
        && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}
static inline int cconv_cpu_has_avx2(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}
/* The CPU's vendor: 1 Intel, 2 AMD, 0 another or unknown (for rules measured per vendor). */
static inline int cconv_cpu_vendor(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_is("intel"))
        return 1;
    if (__builtin_cpu_is("amd"))
        return 2;
#endif
    return 0;
}
#endif
