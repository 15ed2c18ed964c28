# Cython declarations of openmp_shim.h: OpenMP when the build has it (one thread otherwise),
# the build's compiler flags, and the CPU's SIMD support.

cdef extern from "openmp_shim.h":
    int CCONV_HAVE_OPENMP
    int CCONV_OPENMP_VERSION
    const char* CCONV_BUILD_FLAGS
    int omp_get_max_threads() noexcept nogil
    void omp_set_num_threads(int n) noexcept nogil
    int cconv_cpu_has_avx512() noexcept nogil
    int cconv_cpu_has_avx2() noexcept nogil
    int cconv_cpu_vendor() noexcept nogil
