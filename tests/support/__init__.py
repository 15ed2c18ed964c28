"""Helpers shared by the cconv tests (importable as ``support`` because pyproject.toml's
``[tool.pytest.ini_options]`` puts ``tests/`` on ``sys.path``; test modules never import
each other, only this package).

* ``support.reference``  -- the one float64 reference for convolution, its gradients and the
  transposed convolution (checked against PyTorch in tests/test_reference.py).
* ``support.checks``     -- comparisons with the reference: ``assert_close``, ``rel_err``.
* ``support.strategies`` -- hypothesis strategies for convolution problems and the layout /
  memory-order helpers they use.
* ``support.torch_ops``  -- the same operations computed by PyTorch (import it only after
  ``pytest.importorskip("torch")``).

Nothing here imports cconv, so importing ``support`` never fixes the SIMD level before
``--simd`` (tests/conftest.py) has set it.
"""
