"""``python -m mindwatch`` (and the script ``msrun`` starts for ``mindwatch demo --workers``)."""

from mindwatch.cli import main

if __name__ == "__main__":
    main()
