"""Facts about the running process: OpenMP availability and threads, CPU SIMD support."""

from cconv._kernels.openmp_shim cimport (
    CCONV_BUILD_FLAGS, CCONV_HAVE_OPENMP, CCONV_OPENMP_VERSION, cconv_cpu_has_avx2,
    cconv_cpu_has_avx512, cconv_cpu_vendor, omp_get_max_threads, omp_set_num_threads,
)


def have_openmp():
    """Return True if the extensions were compiled with OpenMP."""
    return bool(CCONV_HAVE_OPENMP)


def openmp_version():
    """Return the ``_OPENMP`` date macro the build saw (0 without OpenMP)."""
    return int(CCONV_OPENMP_VERSION)


def build_flags():
    """Return the C compiler flags the extensions were built with."""
    return CCONV_BUILD_FLAGS.decode()


def max_threads():
    """Return ``omp_get_max_threads()`` of the calling thread (1 without OpenMP)."""
    return omp_get_max_threads()


def set_max_threads(int n):
    """Call ``omp_set_num_threads(n)`` for the calling thread."""
    omp_set_num_threads(n)


def cpu_supports(str level):
    """Return True if the CPU and OS support SIMD ``level`` ("avx512", "avx2" or "base")."""
    if level == "avx512":
        return bool(cconv_cpu_has_avx512())
    if level == "avx2":
        return bool(cconv_cpu_has_avx2())
    return level == "base"


def cpu_vendor():
    """Return the CPU's vendor: "intel", "amd", or "other" (another or unknown)."""
    return {1: "intel", 2: "amd"}.get(cconv_cpu_vendor(), "other")
