"""Tests of the compatibility adapters in cconv.compat (one module per library adapted)."""
