"""Conversions between integer images and float sums for the SciPy front ends.

``load``: integer (or bool) pixels to float32 / float64, rounded to nearest as NumPy's casts
and C's conversions do; in parallel on cconv's threads, as the strips of an integer image
are converted while the same OpenMP team computes them (NumPy's cast of a strip ran on one
thread while the other waited).

``store``: float sums to integer results, as SciPy's C code converts a double on x86-64.

SciPy's ndimage filters sum in double precision and store with a C cast.  On x86-64 a cast of a
double to a 32- or 64-bit integer truncates toward zero and gives the type's minimum for NaN
and out-of-range values (the ``cvttsd2si`` instruction); 8- and 16-bit results keep the low
bits of the 32-bit conversion, unsigned 32-bit results the low bits of the 64-bit one.  The
loops here spell those rules out (no undefined C conversion is left to the compiler) and run
in parallel: NumPy's own double-to-integer casts ran at about a tenth of memory speed.
"""

from cython.parallel cimport prange
from libc.stdint cimport (INT32_MIN, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t,
                          uint16_t, uint32_t)

ctypedef fused source:
    float
    double

ctypedef fused integer:
    int8_t
    uint8_t
    int16_t
    uint16_t
    int32_t
    uint32_t
    int64_t


cdef int _check_threads(int num_threads) except -1:
    # prange takes any int: a negative count made OpenMP allocate terabytes and abort
    if num_threads < 1:
        raise ValueError(f"num_threads must be positive, got {num_threads}")
    return 0


def load(const integer[::1] src, source[::1] dst, int num_threads):
    """``dst[i] = src[i]`` converted (round to nearest), integers (a bool array as its uint8
    view; not uint64) to float32 or float64."""
    cdef Py_ssize_t i, n = src.shape[0]
    if dst.shape[0] != n:
        raise ValueError(f"dst has {dst.shape[0]} elements for {n}")
    _check_threads(num_threads)
    with nogil:
        for i in prange(n, num_threads=num_threads, schedule="static"):
            dst[i] = <source>src[i]


cdef inline int32_t _to_int32(double v) noexcept nogil:
    # truncation toward zero; NaN and values outside int32 give its minimum
    if v > -2147483649.0 and v < 2147483648.0:
        return <int32_t>v
    return INT32_MIN


cdef inline int64_t _to_int64(double v) noexcept nogil:
    # the same for int64: 2**63 and beyond, -2**63 - 1024 and below, NaN give the minimum
    if v >= -9223372036854775808.0 and v < 9223372036854775808.0:
        return <int64_t>v
    return INT64_MIN


def store(const source[::1] src, integer[::1] dst, int num_threads):
    """``dst[i] = (type of dst)(int32)src[i]`` for 8-, 16- and 32-bit results (a bool result
    as its uint8 view), ``(type of dst)(int64)src[i]`` for uint32 and int64 ones."""
    cdef Py_ssize_t i, n = src.shape[0]
    if dst.shape[0] != n:
        raise ValueError(f"dst has {dst.shape[0]} elements for {n}")
    _check_threads(num_threads)
    with nogil:
        for i in prange(n, num_threads=num_threads, schedule="dynamic", chunksize=65536):
            if integer is uint32_t or integer is int64_t:
                dst[i] = <integer>_to_int64(src[i])
            else:
                dst[i] = <integer>_to_int32(src[i])
