"""``python -m cconv``: the same command as the ``cconv`` console script."""
from ._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
