"""A NumPy memory handler for cconv's results: the memory of a freed large result serves the
next result of the same size.

A result of several megabytes is fresh memory on every call (``malloc`` serves it by
``mmap``), and the operating system zeroes each of its pages on the first write: measured on
a 4096x4096 float32 image filtered 5x5 on 2 threads (AMD EPYC Zen 5, AVX-512), 8.1-8.4 ms a
call into a new array and 5.8-5.9 ms into one written before.  A pipeline that filters image
after image (or a training loop) frees each result before it asks for the next of the same
size, so this handler keeps the blocks of freed results (at least ``MIN_BYTES``, the most
recent first, ``limit`` bytes and ``MAX_BLOCKS`` blocks at most, the oldest given back to
``free`` first) and hands one out again for an equal size.  The blocks it hands out start
on a 64-byte boundary (``ALIGN_BYTES``).

Only arrays allocated while :func:`install` is in effect (a context-local setting, as NumPy's
handlers are) use it; every array keeps a reference to its handler, so such an array may be
freed anywhere, any time.  ``calloc`` (``numpy.zeros``) and ``realloc`` go straight to the C
library (through ``cconv_block_*`` below, which pairs each block with the right ``free``);
only blocks on a cache line are kept, since a kept block is handed out as a result.
"""

from cpython.pycapsule cimport PyCapsule_New
from cpython.pythread cimport (PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_release_lock, PyThread_type_lock, WAIT_LOCK)
from libc.stdint cimport uint8_t
from libc.string cimport memcpy

cdef extern from *:
    """
    /* Blocks on a CCONV_BLOCK_ALIGN-byte boundary, and their free and realloc: every block
     * the handler hands out comes from here, so any may go to cconv_block_free or _realloc.
     * Windows' C library frees aligned blocks with a function of its own. */
    #include <stdlib.h>
    #include <string.h>
    #define CCONV_BLOCK_ALIGN 64
    #if defined(_WIN32)
    #include <malloc.h>
    static void *cconv_block_alloc(size_t n) { return _aligned_malloc(n ? n : 1, CCONV_BLOCK_ALIGN); }
    static void cconv_block_free(void *p) { _aligned_free(p); }
    static void *cconv_block_realloc(void *p, size_t n)
    {
        return _aligned_realloc(p, n ? n : 1, CCONV_BLOCK_ALIGN);
    }
    static void *cconv_block_calloc(size_t nelem, size_t elsize)
    {
        size_t n = nelem * elsize;
        void *p;
        if (elsize && n / elsize != nelem)
            return NULL;  /* overflow */
        p = cconv_block_alloc(n);
        if (p != NULL)
            memset(p, 0, n);
        return p;
    }
    #else
    static void *cconv_block_alloc(size_t n)
    {
        void *p = NULL;
        return posix_memalign(&p, CCONV_BLOCK_ALIGN, n ? n : 1) == 0 ? p : NULL;
    }
    static void cconv_block_free(void *p) { free(p); }
    static void *cconv_block_realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }
    /* fresh pages come zeroed; the block may be off a cache line (see _free) */
    static void *cconv_block_calloc(size_t nelem, size_t elsize)
    {
        return calloc(nelem ? nelem : 1, elsize ? elsize : 1);
    }
    #endif
    """
    enum: CCONV_BLOCK_ALIGN
    void *cconv_block_alloc(size_t n) noexcept nogil
    void cconv_block_free(void *p) noexcept nogil
    void *cconv_block_realloc(void *p, size_t n) noexcept nogil
    void *cconv_block_calloc(size_t nelem, size_t elsize) noexcept nogil

cimport numpy as cnp

cnp.import_array()

cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/mman.h>
    /* As NumPy's own allocator does for blocks of 4 MiB and more: transparent huge pages,
     * when the system gives them on request, fault 2 MiB at a time. */
    static void cconv_advise_huge_pages(void *p, size_t n)
    {
        size_t skip = (4096 - (size_t)p % 4096) % 4096;
        if (n >= ((size_t)1 << 22) && n > skip)
            madvise((char *)p + skip, n - skip, MADV_HUGEPAGE);
    }
    #else
    static void cconv_advise_huge_pages(void *p, size_t n) { (void)p; (void)n; }
    #endif
    """
    void cconv_advise_huge_pages(void *p, size_t n) noexcept nogil

cdef extern from "numpy/ndarraytypes.h":
    ctypedef struct PyDataMemAllocator:
        void *ctx
        void *(*malloc)(void *ctx, size_t size) noexcept nogil
        void *(*calloc)(void *ctx, size_t nelem, size_t elsize) noexcept nogil
        void *(*realloc)(void *ctx, void *ptr, size_t new_size) noexcept nogil
        void (*free)(void *ctx, void *ptr, size_t size) noexcept nogil

    ctypedef struct PyDataMem_Handler:
        char name[127]
        uint8_t version
        PyDataMemAllocator allocator

cdef extern from "numpy/arrayobject.h":
    object PyDataMem_SetHandler(object handler)

# Blocks smaller than this come from malloc's heap without mmap: nothing to save.
MIN_BYTES = 1 << 20
cdef enum:
    MAX_BLOCKS = 16

# Where every block the handler's malloc allocates starts: a cache line.
ALIGN_BYTES = CCONV_BLOCK_ALIGN

cdef void *_blocks[MAX_BLOCKS]
cdef size_t _sizes[MAX_BLOCKS]
cdef Py_ssize_t _count = 0
cdef size_t _held = 0
cdef size_t _limit = 0
cdef size_t _min_bytes = MIN_BYTES
cdef PyThread_type_lock _lock = PyThread_allocate_lock()
cdef PyDataMem_Handler _handler


cdef void *_remove_locked(Py_ssize_t i) noexcept nogil:
    """Take kept block ``i`` out of the list (oldest first), the lock held; return it."""
    global _count, _held
    cdef void *p = _blocks[i]
    cdef Py_ssize_t j
    _held -= _sizes[i]
    for j in range(i, _count - 1):
        _blocks[j] = _blocks[j + 1]
        _sizes[j] = _sizes[j + 1]
    _count -= 1
    return p


cdef void *_take(size_t size) noexcept nogil:
    """A kept block of exactly ``size`` bytes (the most recently kept), or NULL."""
    cdef void *p = NULL
    cdef Py_ssize_t i
    PyThread_acquire_lock(_lock, WAIT_LOCK)
    i = _count - 1
    while i >= 0:
        if _sizes[i] == size:
            p = _remove_locked(i)
            break
        i -= 1
    PyThread_release_lock(_lock)
    return p


cdef void _keep(void *p, size_t size) noexcept nogil:
    """Keep a freed block, giving the oldest kept blocks back to ``free`` to make room; a
    block larger than the limit is freed at once."""
    global _count, _held
    cdef void *evicted[MAX_BLOCKS]
    cdef Py_ssize_t nevicted = 0, i
    if size > _limit:
        cconv_block_free(p)
        return
    PyThread_acquire_lock(_lock, WAIT_LOCK)
    while _count > 0 and (_count == MAX_BLOCKS or _held + size > _limit):
        evicted[nevicted] = _remove_locked(0)
        nevicted += 1
    _blocks[_count] = p
    _sizes[_count] = size
    _count += 1
    _held += size
    PyThread_release_lock(_lock)
    for i in range(nevicted):  # outside the lock: munmap takes its time
        cconv_block_free(evicted[i])


cdef void *_malloc(void *ctx, size_t size) noexcept nogil:
    cdef void *p
    if size >= _min_bytes and _limit:
        p = _take(size)
        if p != NULL:
            return p
    # on a cache line (NumPy's malloc gives 16 bytes): results are written in full vectors,
    # and a store that straddles two lines costs both
    p = cconv_block_alloc(size)
    if p != NULL:
        cconv_advise_huge_pages(p, size)
    return p


cdef void *_calloc(void *ctx, size_t nelem, size_t elsize) noexcept nogil:
    return cconv_block_calloc(nelem, elsize)


cdef void *_realloc(void *ctx, void *ptr, size_t new_size) noexcept nogil:
    return cconv_block_realloc(ptr, new_size)


cdef void _free(void *ctx, void *ptr, size_t size) noexcept nogil:
    if ptr == NULL:
        return
    # only aligned blocks are kept (calloc's and realloc's may not be): a kept block is
    # handed out as a result
    if size >= _min_bytes and _limit and <size_t>ptr % CCONV_BLOCK_ALIGN == 0:
        _keep(ptr, size)
    else:
        cconv_block_free(ptr)


cdef bytes _name = b"cconv_results"
memcpy(_handler.name, <const char *>_name, len(_name) + 1)
_handler.version = 1
_handler.allocator.ctx = NULL
_handler.allocator.malloc = _malloc
_handler.allocator.calloc = _calloc
_handler.allocator.realloc = _realloc
_handler.allocator.free = _free
_capsule = PyCapsule_New(&_handler, "mem_handler", NULL)


def install():
    """Make NumPy allocate through this handler in the current context; return the handler
    it replaced (give it to :func:`restore`)."""
    return PyDataMem_SetHandler(_capsule)


def restore(previous):
    """Put back the handler :func:`install` replaced."""
    PyDataMem_SetHandler(previous)


def set_limit(size_t nbytes):
    """Keep at most ``nbytes`` of freed results (0: keep none, and free what is kept)."""
    global _limit
    _limit = nbytes
    if nbytes == 0:
        clear()


def clear():
    """Give every kept block back to the C library."""
    global _count, _held
    cdef void *evicted[MAX_BLOCKS]
    cdef Py_ssize_t n, i
    with nogil:
        PyThread_acquire_lock(_lock, WAIT_LOCK)
        n = _count
        for i in range(n):
            evicted[i] = _blocks[i]
        _count = 0
        _held = 0
        PyThread_release_lock(_lock)
        for i in range(n):
            cconv_block_free(evicted[i])


def held_bytes():
    """Bytes of freed results kept now."""
    return _held


def after_fork_in_child():
    """A fresh lock: the parent's may have been held by a thread the child does not have."""
    global _lock
    _lock = PyThread_allocate_lock()
