"""Layout conversion between user arrays and the channel-blocked buffers of the kernels.

User arrays arrive as 4-D memoryviews in logical (N, C, H, W) order with any
strides (an NHWC array is passed transposed), so NCHW, NHWC, sliced and
negative-stride inputs are read in place without an extra copy.  Blocked
buffers are contiguous ``[N][G][blocks][H][W][block]``: channels innermost, so
a tile kernel finds the channels of one pixel side by side.

Glossary
--------
real            the fused element type: float or double
block           channels (slots) per block; ``nblocks`` blocks per group
slots           channel positions of a group in the packed buffer: its channels, each
                repeated ``mult`` times (depthwise channel multiplier), then zeros
msum            slots summed into one output channel when unpacking (a multiplier folded back)
coff            byte offset of each slot's source channel
sn, sc, sh, sw  byte strides of a user array's image, channel, row and column
Kg, Cg, RS      output and input channels per group, taps (R*S) of a weight
cols, reds      the packed weight's column (vector) and reduction sides: output or input
                channels, as ``swap`` says
cpg             channels per group of the unpacked result
grp             a group index
"""

from cython.parallel cimport prange
from libc.math cimport INFINITY
from libc.stdint cimport int64_t
from libc.string cimport memset

from cconv._kernels.transpose cimport (
    cconv_transpose2_double, cconv_transpose2_double_even, cconv_transpose4_float,
    cconv_transpose4_float_even,
)

ctypedef fused real:
    float
    double

# ONE_THREAD_LOOPS: on one thread the packing loops run without an OpenMP region.  Entering
# a parallel region of one thread costs ~0.8 us (libgomp starts a team and wakes its
# barrier with futex calls, two system calls per region); a small call packs twice and runs
# its tiles, so three regions were ~2.4 us of a 1x16x14x14 3x3 forward (AMD EPYC Zen 5).
# Each loop's body is one shared inline function, called from the parallel and the plain
# loop.

# Largest channel block the kernels use (2 AVX-512 vectors of float32 is 32).
cdef enum:
    MAX_BLOCK = 64


cdef inline unsigned int _nonfinite(const real *p) noexcept nogil:
    # Exponent bits all ones: NaN or an infinity (bit test: exact under any FP flags).
    if real is float:
        return ((<const unsigned int *>p)[0] & 0x7f800000U) == 0x7f800000U
    else:
        return ((<const unsigned long long *>p)[0] & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL


cdef unsigned int _nonfinite_count(const real *p, Py_ssize_t n) noexcept nogil:
    # 1 if one of p[0:n] is NaN or infinite (exponent bits all ones).
    cdef Py_ssize_t i
    cdef unsigned int bad32 = 0
    cdef unsigned long long bad64 = 0
    if real is float:
        for i in range(n):
            bad32 = bad32 | (((<const unsigned int *>p)[i] & 0x7f800000U) == 0x7f800000U)
        return bad32 != 0
    else:
        for i in range(n):
            bad64 = bad64 | (((<const unsigned long long *>p)[i] & 0x7ff0000000000000ULL)
                             == 0x7ff0000000000000ULL)
        return bad64 != 0


cdef unsigned int _pack_row_by_channel(const char *row, const Py_ssize_t *coff,
                                       Py_ssize_t valid, Py_ssize_t sw, Py_ssize_t W, real *d,
                                       Py_ssize_t block, Py_ssize_t pad_left,
                                       Py_ssize_t width) noexcept nogil:
    # d[wp][c] = row[coff[c] + (wp - pad_left) * sw] for c < valid and wp - pad_left inside
    # 0..W-1, else 0.  Returns 1 if a copied value is NaN or infinite.
    cdef Py_ssize_t c, wp, first = max(0, pad_left), last = min(width, W + pad_left)
    cdef const real *src
    cdef unsigned int bad = 0
    if first >= last:
        memset(d, 0, width * block * sizeof(real))
        return 0
    memset(d, 0, first * block * sizeof(real))
    memset(d + last * block, 0, (width - last) * block * sizeof(real))
    if valid < block:
        for wp in range(first, last):
            memset(d + wp * block + valid, 0, (block - valid) * sizeof(real))
    cdef Py_ssize_t lanes = 4 if real is float else 2
    cdef Py_ssize_t blocked = 0, tail = first, off
    # elements between a row's pixels: 1, or 2 for a stride phase of a row (the weight
    # gradient of a strided layer packs its input so: ResNet-50's res3 3x3 stride-2 weight
    # gradient 1.025x against the scalar copy, interleaved, AMD EPYC Zen 4; the pack, 17% of
    # it by perf, waits on memory more than it computes)
    cdef Py_ssize_t step = sw // <Py_ssize_t>sizeof(real)
    if sw != step * <Py_ssize_t>sizeof(real) or not 1 <= step <= 2:
        for c in range(valid):
            for wp in range(first, last):
                src = <const real *>(row + coff[c] + (wp - pad_left) * sw)
                d[wp * block + c] = src[0]
                bad = bad | _nonfinite(src)
        return bad
    # lanes x lanes blocks (channels x pixels) transposed in registers, then scalar copies of
    # what they leave: pixels [tail, last) of the blocked channels and all pixels of the
    # remaining ones.
    blocked = valid - valid % lanes
    tail = first + (last - first) // lanes * lanes
    c = 0
    while c < blocked:
        wp = first
        while wp < tail:
            off = (wp - pad_left) * sw
            if real is float and step == 1:
                cconv_transpose4_float(
                    <const float *>(row + coff[c] + off),
                    <const float *>(row + coff[c + 1] + off),
                    <const float *>(row + coff[c + 2] + off),
                    <const float *>(row + coff[c + 3] + off), <float *>(d + wp * block + c),
                    block)
            elif real is float:
                cconv_transpose4_float_even(
                    <const float *>(row + coff[c] + off),
                    <const float *>(row + coff[c + 1] + off),
                    <const float *>(row + coff[c + 2] + off),
                    <const float *>(row + coff[c + 3] + off), <float *>(d + wp * block + c),
                    block)
            elif step == 1:
                cconv_transpose2_double(
                    <const double *>(row + coff[c] + off),
                    <const double *>(row + coff[c + 1] + off), <double *>(d + wp * block + c),
                    block)
            else:
                cconv_transpose2_double_even(
                    <const double *>(row + coff[c] + off),
                    <const double *>(row + coff[c + 1] + off), <double *>(d + wp * block + c),
                    block)
            wp = wp + lanes
        c = c + lanes
    for c in range(valid):
        src = <const real *>(row + coff[c]) - pad_left * step
        for wp in range(tail if c < blocked else first, last):
            d[wp * block + c] = src[wp * step]
        # a separate pass over the (L1-hot) source row: this integer loop vectorises, a
        # test inside the scattered-store loop did not
        if step == 1:
            bad = bad | _nonfinite_count(src + first, last - first)
    if step == 2:  # the copies, contiguous (the slots past ``valid`` are zeros)
        bad = bad | _nonfinite_count(d + first * block, (last - first) * block)
    return bad


cdef unsigned int _fill_padding(const char *row, const Py_ssize_t *coff, Py_ssize_t valid,
                               Py_ssize_t sw, real *d, Py_ssize_t block, Py_ssize_t begin,
                               Py_ssize_t end, const int64_t *col_src, real value,
                               unsigned int value_bad) noexcept nogil:
    # d[wp][c] = row[coff[c] + col_src[wp] * sw] (``value`` where col_src[wp] is -1) for
    # the padding columns begin <= wp < end and c < valid: a padding mode's columns.
    cdef Py_ssize_t wp, c
    cdef unsigned int bad = 0
    for wp in range(begin, end):
        if col_src[wp] < 0:
            for c in range(valid):
                d[wp * block + c] = value
            bad = bad | value_bad
        else:
            for c in range(valid):
                d[wp * block + c] = (<const real *>(row + coff[c] + col_src[wp] * sw))[0]
    return bad


cdef Py_ssize_t _pack_plane(const char *x, Py_ssize_t sn, Py_ssize_t sc, Py_ssize_t sh, Py_ssize_t sw,
                      Py_ssize_t H, Py_ssize_t W, real *dst, Py_ssize_t n, Py_ssize_t first_channel,
                      Py_ssize_t first_slot, Py_ssize_t slots, Py_ssize_t mult, Py_ssize_t block,
                      Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t height,
                      Py_ssize_t width, const int64_t *row_src, Py_ssize_t map_rows,
                      const int64_t *col_src, Py_ssize_t map_cols, real value,
                      unsigned int value_bad) noexcept nogil:
    # Byte offset of each slot's source channel.  Slots past the group's end are zeros;
    # they always form the tail of a block, so a count marks them (an offset can be
    # negative with negative strides, so it cannot serve as a marker).
    cdef Py_ssize_t coff[MAX_BLOCK]
    cdef Py_ssize_t valid = min(block, slots - first_slot)
    cdef Py_ssize_t c, hp, wp, h, w
    cdef const char *row
    cdef const real *src
    cdef real *d
    cdef unsigned int bad = 0
    # NCHW-like sources (pixels closer than channels) are read channel by channel along
    # the row: contiguous reads, scattered writes inside one L1-sized row of the buffer.
    cdef bint pixels_inner = (sw if sw > 0 else -sw) < (sc if sc > 0 else -sc)
    # Channels-last sources with one slot per channel: a pixel's slots are one contiguous
    # run, copied and checked as a run (the compiler vectorises both loops).  Slot by slot
    # through the offsets, ResNet-50's NHWC layers spent 33-38% of a Winograd forward here.
    cdef bint adjacent_channels = mult == 1 and sc == <Py_ssize_t>sizeof(real)
    for c in range(valid):
        coff[c] = n * sn + (first_channel + (first_slot + c) // mult) * sc
    for hp in range(height):
        h = hp - pad_top
        if row_src != NULL:  # a padding mode: rows (and below, columns) from the maps
            h = row_src[hp] if hp < map_rows else -2
        d = dst + hp * width * block
        if h < 0 or h >= H:
            for wp in range(width * block):
                d[wp] = 0
            if h == -1:  # a constant's row
                for wp in range(map_cols):
                    for c in range(valid):
                        d[wp * block + c] = value
                bad = bad | value_bad
            continue
        row = x + h * sh
        if pixels_inner:
            bad = bad | _pack_row_by_channel(row, coff, valid, sw, W, d, block, pad_left, width)
            if col_src != NULL:
                bad = bad | _fill_padding(row, coff, valid, sw, d, block, 0, pad_left, col_src,
                                          value, value_bad)
                bad = bad | _fill_padding(row, coff, valid, sw, d, block, pad_left + W,
                                          map_cols, col_src, value, value_bad)
            continue
        for wp in range(width):
            w = wp - pad_left
            if w < 0 or w >= W:
                for c in range(block):
                    d[wp * block + c] = 0
            elif adjacent_channels:
                src = <const real *>(row + coff[0] + w * sw)
                for c in range(valid):
                    d[wp * block + c] = src[c]
                bad = bad | _nonfinite_count(src, valid)
                for c in range(valid, block):
                    d[wp * block + c] = 0
            else:
                for c in range(valid):
                    src = <const real *>(row + coff[c] + w * sw)
                    d[wp * block + c] = src[0]
                    bad = bad | _nonfinite(src)
                for c in range(valid, block):
                    d[wp * block + c] = 0
        if col_src != NULL:
            bad = bad | _fill_padding(row, coff, valid, sw, d, block, 0, pad_left, col_src,
                                      value, value_bad)
            bad = bad | _fill_padding(row, coff, valid, sw, d, block, pad_left + W, map_cols,
                                      col_src, value, value_bad)
    return bad


def pack_input(const real[:, :, :, :] x, real[::1] packed, Py_ssize_t groups,
               Py_ssize_t channels_per_group, Py_ssize_t slots_per_group, Py_ssize_t mult,
               Py_ssize_t block, Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t height,
               Py_ssize_t width, int num_threads, const int64_t[::1] row_src=None,
               const int64_t[::1] col_src=None, double value=0.0):
    """Copy ``x`` into a padded, channel-blocked buffer; return a non-finite count.

    ``packed[n][grp][b][hp][wp][c]`` receives ``x[n, grp*channels_per_group + s // mult,
    hp - pad_top, wp - pad_left]`` with slot ``s = b*block + c``, or 0 where the
    slot is ``>= slots_per_group`` or the pixel lies in the padding.  ``mult > 1``
    repeats each channel ``mult`` times (depthwise channel multiplier).

    Parameters
    ----------
    x : 4-D memoryview, logical (N, C, H, W), any strides
    packed : contiguous buffer of ``N*groups*ceil(slots/block)*height*width*block`` elements
    groups, channels_per_group, slots_per_group, mult, block : int
    pad_top, pad_left, height, width : int
        Position of the image inside the padded ``height x width`` plane.
    num_threads : int
    row_src, col_src, value : optional
        A padding mode instead of zeros (both maps or neither): padded row ``hp`` copies
        input row ``row_src[hp]`` and padded column ``wp`` input column ``col_src[wp]``, -1
        meaning ``value``; rows / columns past the maps are zero.  The image keeps its
        place: ``col_src[pad_left + w] == w``.

    Returns
    -------
    int
        Number of packed planes that received a NaN or an infinity (0: all finite), so
        that callers whose algorithm would spread a NaN beyond its window need no extra
        pass over ``x``.
    """
    cdef Py_ssize_t N = x.shape[0], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t nblocks, plane, planes
    cdef Py_ssize_t i, n, grp, b, bad = 0
    cdef const int64_t *rows = NULL
    cdef const int64_t *cols = NULL
    cdef Py_ssize_t map_rows = 0, map_cols = 0
    cdef real fill = <real>value
    cdef unsigned int value_bad = not (-INFINITY < value < INFINITY)
    if (row_src is None) != (col_src is None):
        raise ValueError("row_src and col_src go together")
    if row_src is not None:
        map_rows, map_cols = row_src.shape[0], col_src.shape[0]
        if map_rows > height or map_cols > width or pad_left < 0 or pad_left + W > map_cols:
            raise ValueError(f"padding maps ({map_rows} x {map_cols}) do not fit the "
                             f"{height} x {width} plane around a {H} x {W} image")
        for i in range(map_rows):
            if not -1 <= row_src[i] < H:
                raise ValueError(f"row_src[{i}] = {row_src[i]} is not a row of {H}")
        for i in range(map_cols):
            if not -1 <= col_src[i] < W:
                raise ValueError(f"col_src[{i}] = {col_src[i]} is not a column of {W}")
        if map_rows:
            rows = &row_src[0]
        if map_cols:
            cols = &col_src[0]
    if block > MAX_BLOCK or block < 1:
        raise ValueError(f"block must be in 1..{MAX_BLOCK}, got {block}")
    nblocks = (slots_per_group + block - 1) // block  # (a block of 0 divided by zero here)
    plane = height * width * block
    planes = N * groups * nblocks
    if packed.shape[0] != planes * plane:
        raise ValueError(f"packed has {packed.shape[0]} elements, expected {planes * plane}")
    if planes == 0:
        return 0
    cdef const char *base = <const char *>&x[0, 0, 0, 0]
    cdef Py_ssize_t sn = x.strides[0], sc = x.strides[1], sh = x.strides[2], sw = x.strides[3]
    cdef real *dst = &packed[0]
    with nogil:
        if num_threads > 1:
            for i in prange(planes, num_threads=num_threads, schedule="dynamic"):
                bad += _pack_input_plane(i, base, sn, sc, sh, sw, H, W, dst, plane, nblocks,
                                         groups, channels_per_group, slots_per_group, mult,
                                         block, pad_top, pad_left, height, width, rows,
                                         map_rows, cols, map_cols, fill, value_bad)
        else:  # no OpenMP region for one thread (see ONE_THREAD_LOOPS)
            for i in range(planes):
                bad += _pack_input_plane(i, base, sn, sc, sh, sw, H, W, dst, plane, nblocks,
                                         groups, channels_per_group, slots_per_group, mult,
                                         block, pad_top, pad_left, height, width, rows,
                                         map_rows, cols, map_cols, fill, value_bad)
    return bad


def pack_input_phases(const real[:, :, :, :] x, real[::1] packed, Py_ssize_t groups,
                      Py_ssize_t channels_per_group, Py_ssize_t block, Py_ssize_t pad_top,
                      Py_ssize_t pad_left, Py_ssize_t height, Py_ssize_t width,
                      Py_ssize_t phase_h, Py_ssize_t phase_w, int num_threads):
    """``x`` zero-padded and split into stride phases; return a non-finite count.

    Phase ``(a, b)``, at ``(a * phase_w + b) * size`` of ``packed`` (``size``: one phase's
    ``N*groups*ceil(channels_per_group/block)`` planes of ``height x width x block``), holds
    the padded pixels ``(a + i*phase_h, b + j*phase_w)`` at ``(i, j)``: what ``pack_input``
    makes of the view ``x[:, :, h0::phase_h, w0::phase_w]``, ``h0 = (a - pad_top) %
    phase_h`` placed at row ``(h0 + pad_top) // phase_h`` (columns likewise).  A channel
    block's phases are packed one after the other, so its source planes are read from
    memory once, not once per phase as by a ``pack_input`` per phase view (interleaved,
    AMD EPYC Zen 4, the direct weight gradient of 8x128x56x56 and 8x256x28x28 3x3 stride-2
    layers: 1.04-1.05x on 1 thread, 1.01-1.02x on 2).

    Parameters
    ----------
    x : 4-D memoryview, logical (N, C, H, W), any strides
    packed : contiguous buffer of ``phase_h * phase_w * size`` elements
    groups, channels_per_group, block : int
    pad_top, pad_left : int
        Zero padding before the image, in pixels of the whole padded plane.
    height, width : int
        One phase's plane.
    phase_h, phase_w : int
        The strides whose phases are split (>= 1).
    num_threads : int

    Returns
    -------
    int
        Packed planes that received a NaN or an infinity, as ``pack_input``.
    """
    cdef Py_ssize_t N = x.shape[0], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t nblocks, plane, planes, i, bad = 0
    if block > MAX_BLOCK or block < 1:
        raise ValueError(f"block must be in 1..{MAX_BLOCK}, got {block}")
    if phase_h < 1 or phase_w < 1:
        raise ValueError(f"phases must be at least 1, got {phase_h} x {phase_w}")
    nblocks = (channels_per_group + block - 1) // block
    plane = height * width * block
    planes = N * groups * nblocks
    if packed.shape[0] != phase_h * phase_w * planes * plane:
        raise ValueError(f"packed has {packed.shape[0]} elements, expected "
                         f"{phase_h * phase_w * planes * plane}")
    if planes == 0:
        return 0
    cdef const char *base = <const char *>&x[0, 0, 0, 0]
    cdef Py_ssize_t sn = x.strides[0], sc = x.strides[1], sh = x.strides[2], sw = x.strides[3]
    cdef real *dst = &packed[0]
    with nogil:
        if num_threads > 1:
            for i in prange(planes, num_threads=num_threads, schedule="dynamic"):
                bad += _pack_plane_phases(i, base, sn, sc, sh, sw, H, W, dst, plane, planes,
                                          nblocks, groups, channels_per_group, block,
                                          pad_top, pad_left, height, width, phase_h, phase_w)
        else:  # no OpenMP region for one thread (see ONE_THREAD_LOOPS)
            for i in range(planes):
                bad += _pack_plane_phases(i, base, sn, sc, sh, sw, H, W, dst, plane, planes,
                                          nblocks, groups, channels_per_group, block,
                                          pad_top, pad_left, height, width, phase_h, phase_w)
    return bad


cdef inline Py_ssize_t _pack_plane_phases(
        Py_ssize_t i, const char *base, Py_ssize_t sn, Py_ssize_t sc, Py_ssize_t sh,
        Py_ssize_t sw, Py_ssize_t H, Py_ssize_t W, real *dst, Py_ssize_t plane,
        Py_ssize_t planes, Py_ssize_t nblocks, Py_ssize_t groups, Py_ssize_t channels_per_group,
        Py_ssize_t block, Py_ssize_t pad_top, Py_ssize_t pad_left, Py_ssize_t height,
        Py_ssize_t width, Py_ssize_t phase_h, Py_ssize_t phase_w) noexcept nogil:
    # pack_input_phases' job i: every phase of packed plane i = (image, group, channel block)
    cdef Py_ssize_t a, b, h0, w0, rows, cols, bad = 0
    cdef const char *start
    for a in range(phase_h):
        h0 = (a - pad_top) % phase_h
        if h0 < 0:  # C's remainder takes the dividend's sign
            h0 = h0 + phase_h
        rows = (H - h0 + phase_h - 1) // phase_h if H > h0 else 0
        for b in range(phase_w):
            w0 = (b - pad_left) % phase_w
            if w0 < 0:
                w0 = w0 + phase_w
            cols = (W - w0 + phase_w - 1) // phase_w if W > w0 else 0
            # a phase of padding only reads nothing: its view starts at the array
            start = base + h0 * sh + w0 * sw if rows > 0 and cols > 0 else base
            bad += _pack_input_plane(i, start, sn, sc, sh * phase_h, sw * phase_w, rows, cols,
                                     dst + (a * phase_w + b) * planes * plane, plane, nblocks,
                                     groups, channels_per_group, channels_per_group, 1, block,
                                     (h0 + pad_top) // phase_h, (w0 + pad_left) // phase_w,
                                     height, width, NULL, 0, NULL, 0, 0, 0)
    return bad


cdef inline Py_ssize_t _pack_input_plane(
        Py_ssize_t i, const char *base, Py_ssize_t sn, Py_ssize_t sc, Py_ssize_t sh,
        Py_ssize_t sw, Py_ssize_t H, Py_ssize_t W, real *dst, Py_ssize_t plane,
        Py_ssize_t nblocks, Py_ssize_t groups, Py_ssize_t channels_per_group,
        Py_ssize_t slots_per_group, Py_ssize_t mult, Py_ssize_t block, Py_ssize_t pad_top,
        Py_ssize_t pad_left, Py_ssize_t height, Py_ssize_t width, const int64_t *rows,
        Py_ssize_t map_rows, const int64_t *cols, Py_ssize_t map_cols, real fill,
        unsigned int value_bad) noexcept nogil:
    # pack_input's job i: packed plane i = (image, group, channel block)
    cdef Py_ssize_t b = i % nblocks, grp = (i // nblocks) % groups, n = i // (nblocks * groups)
    return _pack_plane(base, sn, sc, sh, sw, H, W, dst + i * plane, n,
                       grp * channels_per_group, b * block, slots_per_group, mult, block,
                       pad_top, pad_left, height, width, rows, map_rows, cols, map_cols,
                       fill, value_bad)


cdef void _unpack_plane(const real *packed, char *y, Py_ssize_t sh, Py_ssize_t sw,
                        Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t first_slot, Py_ssize_t msum,
                        Py_ssize_t block, real bias, real alpha, real beta) noexcept nogil:
    cdef Py_ssize_t npix = OH * OW
    cdef Py_ssize_t h, w, m, pix
    # The slots summed into this channel sit at a fixed stride from the first one
    # whenever they share a block; otherwise (a multiplier straddling blocks) fall back.
    cdef Py_ssize_t first = (first_slot // block) * npix * block + first_slot % block
    cdef bint one_block = (first_slot % block) + msum <= block
    cdef const real *src
    cdef real acc
    cdef real *dst
    for h in range(OH):
        dst = <real *>(y + h * sh)
        src = packed + first + h * OW * block
        for w in range(OW):
            if one_block:
                acc = 0
                for m in range(msum):
                    acc = acc + src[w * block + m]
            else:
                acc = 0
                pix = h * OW + w
                for m in range(first_slot, first_slot + msum):
                    acc = acc + packed[(m // block) * npix * block + pix * block + m % block]
            if beta == 0:
                (<real *>(<char *>dst + w * sw))[0] = alpha * (acc + bias)
            else:
                (<real *>(<char *>dst + w * sw))[0] = (alpha * (acc + bias)
                                                      + beta * (<real *>(<char *>dst + w * sw))[0])


cdef void _unpack_block(const real *src, char *y, Py_ssize_t sc, Py_ssize_t sh, Py_ssize_t sw,
                        Py_ssize_t OW, Py_ssize_t first_pixel, Py_ssize_t last_pixel,
                        Py_ssize_t channels, Py_ssize_t block, const real *bias, real alpha,
                        real beta) noexcept nogil:
    # Pixels [first, last) of one channel block: each pixel's channels are one contiguous read.
    cdef Py_ssize_t pix, k
    cdef real b
    cdef char *dst
    cdef const real *row
    for pix in range(first_pixel, last_pixel):
        row = src + pix * block
        dst = y + (pix // OW) * sh + (pix % OW) * sw
        for k in range(channels):
            b = bias[k] if bias != NULL else 0
            if beta == 0:
                (<real *>(dst + k * sc))[0] = alpha * (row[k] + b)
            else:
                (<real *>(dst + k * sc))[0] = alpha * (row[k] + b) + beta * (<real *>(dst + k * sc))[0]


def unpack_output(const real[::1] packed, real[:, :, :, :] y, Py_ssize_t groups,
                  Py_ssize_t nblocks, Py_ssize_t block, Py_ssize_t msum, const real[::1] bias,
                  double alpha, double beta, int num_threads):
    """Write a channel-blocked result into ``y`` as ``alpha * (result + bias) + beta * y``.

    ``packed`` is ``[N][groups][nblocks][OH*OW][block]``; output channel ``co`` of
    group ``grp`` is the sum of slots ``co*msum .. co*msum + msum - 1`` (``msum > 1``
    folds a depthwise channel multiplier back).  ``beta == 0`` never reads ``y``.

    Parameters
    ----------
    packed : contiguous blocked buffer
    y : 4-D memoryview, logical (N, C, OH, OW), any strides, written in place
    groups, nblocks, block, msum : int
    bias : contiguous array of C elements, or of 0 elements for no bias
    alpha, beta : float
    num_threads : int
    """
    cdef Py_ssize_t N = y.shape[0], C = y.shape[1], OH = y.shape[2], OW = y.shape[3]
    cdef Py_ssize_t cpg = C // groups
    cdef Py_ssize_t npix = OH * OW
    cdef Py_ssize_t group_size = nblocks * npix * block
    cdef Py_ssize_t i, n, c, grp
    cdef bint has_bias = bias.shape[0] > 0
    if packed.shape[0] != N * groups * group_size:
        raise ValueError(f"packed has {packed.shape[0]} elements, expected {N * groups * group_size}")
    if has_bias and bias.shape[0] != C:
        raise ValueError(f"bias has {bias.shape[0]} elements, expected {C}")
    if N * C * npix == 0:
        return
    cdef char *base = <char *>&y[0, 0, 0, 0]
    cdef Py_ssize_t sn = y.strides[0], sc = y.strides[1], sh = y.strides[2], sw = y.strides[3]
    cdef const real *src = &packed[0]
    cdef const real *bias_ptr = &bias[0] if has_bias else NULL
    cdef real a = alpha, bt = beta
    cdef Py_ssize_t chunk = 64, chunks = (npix + 63) // 64, kb, first_c, count
    if msum == 1:
        # Tiled transpose: a task is 64 pixels of one channel block.
        with nogil:
            for i in prange(N * groups * nblocks * chunks, num_threads=num_threads,
                            schedule="dynamic"):
                c = i % chunks
                kb = (i // chunks) % nblocks
                grp = (i // (chunks * nblocks)) % groups
                n = i // (chunks * nblocks * groups)
                first_c = grp * cpg + kb * block
                count = min(block, cpg - kb * block)
                _unpack_block(src + ((n * groups + grp) * nblocks + kb) * npix * block,
                              base + n * sn + first_c * sc, sc, sh, sw, OW, c * chunk,
                              min(npix, (c + 1) * chunk), count, block,
                              bias_ptr + first_c if has_bias else NULL, a, bt)
        return
    with nogil:
        for i in prange(N * C, num_threads=num_threads, schedule="dynamic"):
            n = i // C
            c = i % C
            grp = c // cpg
            _unpack_plane(src + (n * groups + grp) * group_size, base + n * sn + c * sc, sh, sw,
                          OH, OW, (c % cpg) * msum, msum, block,
                          bias[c] if has_bias else 0, a, bt)


cdef unsigned int _pack_weight_block(const real *w, real *dst, Py_ssize_t Kg, Py_ssize_t Cg,
                             Py_ssize_t RS, Py_ssize_t grp, Py_ssize_t col0, Py_ssize_t ncol,
                             Py_ssize_t red0, Py_ssize_t nred, bint swap,
                             const Py_ssize_t *taps, Py_ssize_t ntaps) noexcept nogil:
    # One (group, column block, reduction block): [taps][nred][ncol], zeros past the edges.
    # Reads go along the weight's rows (contiguous taps) and writes scatter inside this
    # L1-sized block: gathering columns instead strides Cg*R*S elements, which for
    # power-of-two channel counts maps every read to the same few cache sets.
    cdef Py_ssize_t cols = Cg if swap else Kg
    cdef Py_ssize_t reds = Kg if swap else Cg
    cdef Py_ssize_t valid_cols = min(ncol, cols - col0)
    cdef Py_ssize_t valid_reds = min(nred, reds - red0)
    cdef Py_ssize_t col_stride = RS if swap else Cg * RS
    cdef Py_ssize_t red_stride = Cg * RS if swap else RS
    cdef const real *src
    cdef Py_ssize_t t, i, j
    cdef unsigned int bad = 0
    if valid_cols < ncol or valid_reds < nred:
        memset(dst, 0, ntaps * nred * ncol * sizeof(real))
    for j in range(valid_cols):
        for i in range(valid_reds):
            src = w + grp * Kg * Cg * RS + (col0 + j) * col_stride + (red0 + i) * red_stride
            for t in range(ntaps):
                dst[(t * nred + i) * ncol + j] = src[taps[t]]
                bad = bad | _nonfinite(src + taps[t])
    return bad


def pack_weight(const real[::1] w, real[::1] packed, Py_ssize_t groups, Py_ssize_t Kg,
                Py_ssize_t Cg, Py_ssize_t RS, bint swap, Py_ssize_t col_block,
                Py_ssize_t red_block, const Py_ssize_t[::1] taps, int num_threads):
    """Pack a (K, C/groups, R, S) weight for the tile kernels; return a non-finite count.

    ``packed[grp][cb][rb][t][i][j]`` = ``w[grp*Kg + k, c, taps[t]]`` with ``k = cb*col_block + j``,
    ``c = rb*red_block + i`` (``swap=False``: forward, columns are output channels) or
    ``k = rb*red_block + i``, ``c = cb*col_block + j`` (``swap=True``: backward-data), and 0
    past the channel counts.  ``taps`` are flat indices ``r*S + s`` (one stride phase's subset
    for backward-data).

    Parameters
    ----------
    w : contiguous weight, flattened
    packed : contiguous output of ``groups*col_blocks*red_blocks*len(taps)*red_block*col_block``
    groups, Kg, Cg, RS : int
    swap : bool
    col_block, red_block : int
    taps : contiguous intp array
    num_threads : int

    Returns
    -------
    int
        Number of blocks that received a NaN or an infinity (0: all packed weights finite).
    """
    cdef Py_ssize_t cols = Cg if swap else Kg
    cdef Py_ssize_t reds = Kg if swap else Cg
    cdef Py_ssize_t col_blocks = (cols + col_block - 1) // col_block
    cdef Py_ssize_t red_blocks = (reds + red_block - 1) // red_block
    cdef Py_ssize_t ntaps = taps.shape[0]
    cdef Py_ssize_t block = ntaps * red_block * col_block
    cdef Py_ssize_t nblocks = groups * col_blocks * red_blocks
    cdef Py_ssize_t i, grp, cb, rb, bad = 0
    if w.shape[0] != groups * Kg * Cg * RS:
        raise ValueError(f"w has {w.shape[0]} elements, expected {groups * Kg * Cg * RS}")
    if packed.shape[0] != nblocks * block:
        raise ValueError(f"packed has {packed.shape[0]} elements, expected {nblocks * block}")
    for i in range(ntaps):
        if not 0 <= taps[i] < RS:
            raise ValueError(f"tap {taps[i]} outside 0..{RS - 1}")
    if nblocks * block == 0:
        return 0
    cdef const real *src = &w[0]
    cdef real *dst = &packed[0]
    cdef const Py_ssize_t *tp = &taps[0]
    with nogil:
        if num_threads > 1:
            for i in prange(nblocks, num_threads=num_threads, schedule="dynamic"):
                bad += _pack_weight_job(i, src, dst, block, Kg, Cg, RS, col_blocks, col_block,
                                        red_blocks, red_block, swap, tp, ntaps)
        else:  # no OpenMP region for one thread (see ONE_THREAD_LOOPS)
            for i in range(nblocks):
                bad += _pack_weight_job(i, src, dst, block, Kg, Cg, RS, col_blocks, col_block,
                                        red_blocks, red_block, swap, tp, ntaps)
    return bad


cdef inline unsigned int _pack_weight_job(
        Py_ssize_t i, const real *src, real *dst, Py_ssize_t block, Py_ssize_t Kg,
        Py_ssize_t Cg, Py_ssize_t RS, Py_ssize_t col_blocks, Py_ssize_t col_block,
        Py_ssize_t red_blocks, Py_ssize_t red_block, bint swap, const Py_ssize_t *tp,
        Py_ssize_t ntaps) noexcept nogil:
    # pack_weight's job i: block i = (group, column block, reduction block)
    cdef Py_ssize_t rb = i % red_blocks, cb = (i // red_blocks) % col_blocks
    cdef Py_ssize_t grp = i // (red_blocks * col_blocks)
    return _pack_weight_block(src, dst + i * block, Kg, Cg, RS, grp, cb * col_block,
                              col_block, rb * red_block, red_block, swap, tp, ntaps)

