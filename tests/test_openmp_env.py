"""The OpenMP spin settings cconv loads its runtime with leave the environment as it was."""

import json
import os
import subprocess
import sys


def _environment_after_import(**env):
    code = ("import json, os, cconv; print(json.dumps({k: os.environ.get(k) for k in "
            "('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT', 'KMP_BLOCKTIME')}))")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")}
    clean.update(env)
    # from the filesystem root: the installed package, never a source tree in the cwd
    out = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True,
                         text=True, check=True, cwd=os.path.abspath(os.sep)).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_spin_defaults_do_not_leak_into_the_environment():
    assert _environment_after_import() == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None,
                                           "KMP_BLOCKTIME": None}


def test_user_settings_are_kept():
    assert _environment_after_import(OMP_WAIT_POLICY="active") == {
        "OMP_WAIT_POLICY": "active", "GOMP_SPINCOUNT": None, "KMP_BLOCKTIME": None}
    assert _environment_after_import(GOMP_SPINCOUNT="123")["GOMP_SPINCOUNT"] == "123"


def test_defaults_are_given_to_the_runtime_only_when_unset(monkeypatch):
    import cconv._kernels as kernels

    seen = {}

    def load():
        seen.update({k: os.environ.get(k) for k in ("GOMP_SPINCOUNT", "KMP_BLOCKTIME")})

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setenv("KMP_BLOCKTIME", "7")
    kernels._load_runtime(load)
    assert seen == {"GOMP_SPINCOUNT": "10000", "KMP_BLOCKTIME": "7"}
    assert "GOMP_SPINCOUNT" not in os.environ and os.environ["KMP_BLOCKTIME"] == "7"
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    seen.clear()
    kernels._load_runtime(load)
    assert seen == {"GOMP_SPINCOUNT": None, "KMP_BLOCKTIME": "7"}
