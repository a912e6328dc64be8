"""``python -m baton.cli ...``: the ``baton`` console script, for where it is not on ``PATH``."""

from baton.cli import main

if __name__ == "__main__":
    main()
