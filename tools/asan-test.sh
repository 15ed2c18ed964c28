#!/usr/bin/env bash
# Build cconv's extensions with AddressSanitizer + UndefinedBehaviorSanitizer in a scratch copy
# of the source tree and run a subset of the tests under them.  Exits non-zero when the build
# fails, a test fails, or any sanitizer report is written (reports are collected from every
# process, subprocesses started by the tests included).
#
# Usage (from any directory):
#     tools/asan-test.sh [extra pytest args...]      e.g. tools/asan-test.sh -x -k forward
# Environment:
#     CCONV_ASAN_DIR      scratch copy (default /tmp/cconv-asan; removed and rebuilt each run)
#     CCONV_ASAN_TESTS    test files, relative to the repo (default: see ASAN_TESTS below)
#     PYTHON              interpreter (default python3); needs numpy, Cython, setuptools,
#                         pytest, hypothesis, threadpoolctl
#     HYPOTHESIS_PROFILE  default "dev" (10 examples per property: sanitized code is ~3-10x slower)
#
# The working tree is copied (tracked + untracked-but-not-ignored files), never built in place,
# so the normal in-place build in the repository is left alone.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="${CCONV_ASAN_DIR:-/tmp/cconv-asan}"
PYTHON="${PYTHON:-python3}"
ASAN_TESTS="${CCONV_ASAN_TESTS:-tests/test_forward.py tests/test_backward.py tests/test_transpose.py tests/test_validation.py tests/test_out_alpha_beta.py tests/test_winograd.py tests/test_fuzz.py tests/test_hardening.py tests/test_depthwise.py tests/test_depthwise_rows_alignment.py tests/test_depthwise_blocked.py tests/test_padding_modes.py tests/test_padding_split.py tests/test_depthwise_weight_bands.py tests/kernels/test_kernel_rows.py tests/test_conv1d_rows.py tests/test_conv1d_rows_window.py tests/test_conv1d_rows_weight.py tests/test_conv1d_row_product.py tests/test_conv3d.py tests/test_conv3d_folded.py tests/test_conv3d_winograd_weight.py tests/test_conv3d_winograd_taps.py tests/test_workspace.py tests/test_depthwise_columns.py tests/test_direct_phases.py tests/kernels/test_kernel_pointwise.py tests/test_gemm.py tests/test_pointwise_paths.py tests/test_results_cache.py tests/test_convert.py tests/test_small_calls.py tests/test_relayout.py tests/kernels/test_kernel_col2im.py tests/kernels/test_kernel_tiles.py tests/kernels/test_kernel_layout.py}"
start=$(date +%s)

case "$SCRATCH" in
    /|"$REPO"|"$REPO"/*) echo "asan-test: refusing to use $SCRATCH as the scratch dir" >&2; exit 2 ;;
esac

echo "asan-test: copying $REPO -> $SCRATCH"
rm -rf "$SCRATCH"
mkdir -p "$SCRATCH"
# Tracked and untracked (not ignored) files that exist: generated .c/.pyx/.so are ignored, so
# the copy is rebuilt from the sources.
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf -) | tar -xf - -C "$SCRATCH"

echo "asan-test: building with CCONV_SANITIZE=1"
(cd "$SCRATCH" && CCONV_SANITIZE=1 "$PYTHON" setup.py build_ext --inplace -j 2 \
    > "$SCRATCH/build.log" 2>&1) || { tail -50 "$SCRATCH/build.log"; echo "asan-test: build FAILED" >&2; exit 1; }
build_end=$(date +%s)
echo "asan-test: build took $((build_end - start)) s"

ASAN_LIB="$(gcc -print-file-name=libasan.so)"
if [ ! -e "$ASAN_LIB" ]; then
    echo "asan-test: libasan.so not found (gcc -print-file-name=libasan.so gave $ASAN_LIB)" >&2
    exit 1
fi
LOGDIR="$SCRATCH/sanitizer-logs"
mkdir -p "$LOGDIR"

# Every report goes to $LOGDIR/<kind>.<pid> so that a report from any process (a subprocess
# of a test, a report that a test swallowed) still fails the run.
set +e
(
    cd "$SCRATCH"
    export LD_PRELOAD="$ASAN_LIB"
    export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1:exitcode=86:log_path=$LOGDIR/asan:strict_string_checks=0:detect_stack_use_after_return=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=87:log_path=$LOGDIR/ubsan"
    export PYTHONMALLOC=malloc            # let ASan see Python object allocations too
    export CCONV_UNDER_SANITIZER=1        # tests/test_hardening.py skips RSS-based leak checks
    export CCONV_CACHE_DIR="$SCRATCH/find-cache"
    export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-dev}"
    export PYTHONDONTWRITEBYTECODE=1
    export PYTHONPATH="$SCRATCH${PYTHONPATH:+:$PYTHONPATH}"
    # Prove the sanitized copy is what is imported.
    "$PYTHON" -c "import cconv, sys; assert cconv.__file__.startswith('$SCRATCH'), cconv.__file__; print('asan-test: testing', cconv.__file__)" &&
    # shellcheck disable=SC2086
    "$PYTHON" -m pytest -q -p no:cacheprovider $ASAN_TESTS "$@"
)
rc=$?
set -e
end=$(date +%s)

reports=$(find "$LOGDIR" -type f | wc -l)
if [ "$reports" -gt 0 ]; then
    echo "asan-test: $reports sanitizer report file(s):" >&2
    for f in "$LOGDIR"/*; do echo "==== $f" >&2; head -60 "$f" >&2; done
fi
echo "asan-test: tests took $((end - build_end)) s, total $((end - start)) s; pytest rc=$rc, sanitizer reports=$reports"
if [ "$rc" -ne 0 ] || [ "$reports" -gt 0 ]; then
    echo "asan-test: FAILED" >&2
    exit 1
fi
echo "asan-test: clean"
