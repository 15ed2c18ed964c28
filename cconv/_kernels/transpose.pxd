# Cython declarations of transpose.h: 4x4 (float) and 2x2 (double) in-register transposes,
# d[j * dstride + i] = s_i[j], and the same from every other element (s_i[2 * j]).

cdef extern from "transpose.h" nogil:
    void cconv_transpose4_float(const float *s0, const float *s1, const float *s2,
                                const float *s3, float *d, Py_ssize_t dstride) noexcept
    void cconv_transpose2_double(const double *s0, const double *s1, double *d,
                                 Py_ssize_t dstride) noexcept
    void cconv_transpose4_float_even(const float *s0, const float *s1, const float *s2,
                                     const float *s3, float *d, Py_ssize_t dstride) noexcept
    void cconv_transpose2_double_even(const double *s0, const double *s1, double *d,
                                      Py_ssize_t dstride) noexcept
