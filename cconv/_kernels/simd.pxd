# Cython declarations of simd.h: a GCC/Clang vector of CCONV_VBYTES bytes (setup.py defines
# it per SIMD level) and the operations the kernels use.  Cython sees the vector types
# as their element type; the C compiler sees whole vectors.

cdef extern from "simd.h" nogil:
    ctypedef float vec_float
    ctypedef double vec_double
    vec_float vec_float_load(const float *p) noexcept
    void vec_float_store(float *p, vec_float v) noexcept
    void vec_float_stream(float *p, vec_float v) noexcept
    vec_float vec_float_zero() noexcept
    vec_float vec_float_splat(float x) noexcept
    vec_float vec_float_fma(vec_float a, vec_float b, vec_float c) noexcept
    void vec_float_deinterleave(const float *p, vec_float *even, vec_float *odd) noexcept
    void vec_float_interleave(vec_float even, vec_float odd, vec_float *low,
                              vec_float *high) noexcept
    void vec_float_transpose(vec_float *r) noexcept
    vec_double vec_double_load(const double *p) noexcept
    void vec_double_store(double *p, vec_double v) noexcept
    void vec_double_stream(double *p, vec_double v) noexcept
    void cconv_store_fence() noexcept
    vec_double vec_double_zero() noexcept
    vec_double vec_double_splat(double x) noexcept
    vec_double vec_double_fma(vec_double a, vec_double b, vec_double c) noexcept
    void vec_double_deinterleave(const double *p, vec_double *even, vec_double *odd) noexcept
    void vec_double_interleave(vec_double even, vec_double odd, vec_double *low,
                               vec_double *high) noexcept
    void vec_double_transpose(vec_double *r) noexcept


cdef extern from *:
    void __builtin_prefetch(const void *p) noexcept nogil


cdef inline void prefetch_lines(const void *start, Py_ssize_t nbytes) noexcept nogil:
    """Asks for the cache lines of ``nbytes`` from ``start`` ahead of their use (a hint: no
    fault, even past the end of an array)."""
    cdef Py_ssize_t i = 0
    while i < nbytes:
        __builtin_prefetch(<const char *>start + i)
        i += 64


# A kernel that computes from a buffer filled from memory can ask, while it computes, for
# what its thread reads next: a few lines per step of its work (``ask_ahead``), spread over
# all of it (``ahead_step``), rather than all at once (which the hardware drops or queues
# behind).
cdef inline Py_ssize_t ahead_step(Py_ssize_t ahead_bytes, Py_ssize_t steps) noexcept nogil:
    """Bytes (whole cache lines) to ask for per step so that ``ahead_bytes`` are asked for
    over ``steps`` steps."""
    if steps <= 0:
        return ahead_bytes
    return (ahead_bytes + steps * 64 - 1) // (steps * 64) * 64


cdef inline Py_ssize_t ask_ahead(const char *ahead, Py_ssize_t ahead_bytes, Py_ssize_t fetched,
                                 Py_ssize_t per_step) noexcept nogil:
    """Asks for the next ``per_step`` bytes of ``ahead`` after the ``fetched`` asked for
    already (none past ``ahead_bytes``); returns the new count."""
    if fetched < ahead_bytes:
        prefetch_lines(ahead + fetched, min(per_step, ahead_bytes - fetched))
    return fetched + per_step
