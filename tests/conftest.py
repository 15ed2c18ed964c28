"""Shared pytest / hypothesis configuration for the cconv tests.

Profiles (choose with HYPOTHESIS_PROFILE=...; "ci" is the default):

* ci   -- 50 examples per property, no deadline; the whole tests/ directory (compat excluded)
          is meant to stay within a few minutes on a 2-core machine.
* dev  -- 10 examples, for a quick edit-run loop.
* deep -- 500 examples, for a long soak before a release.

The strategies themselves live in conv_strategies.py (importing from a conftest module is
fragile when tests/compat/ has its own conftest.py); the float64 reference is reference.py.
"""

import os
import sys

from hypothesis import HealthCheck, settings

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if _HERE not in sys.path:            # reference.py / conv_strategies.py, whatever the import mode
    sys.path.insert(0, _HERE)
if _ROOT not in sys.path:            # an in-place build of cconv; an installed one still wins
    sys.path.append(_ROOT)

_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                     HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=50, **_common)
settings.register_profile("dev", max_examples=10, **_common)
settings.register_profile("deep", max_examples=500, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

from conv_strategies import (  # noqa: E402,F401  (re-exported for convenience)
    FLOAT_DTYPES,
    assert_close,
    conv_cases,
    transpose_cases,
)
