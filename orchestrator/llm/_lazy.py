"""Package attributes imported on first use (PEP 562), for packages whose re-exports would
otherwise import what a light process never needs: ``openai`` above all, which ``baton watch``,
``post`` and ``--help`` must not pay for (half a second or more a process).

Private to baton: the packages that re-export names this way (``baton`` itself, :mod:`baton.llm`,
:mod:`baton.engine`, :mod:`baton.lead`, :mod:`baton.session`) use it. It lives with the model
client, the heavy import that these re-exports keep out of light processes, in the lowest of those
packages, which every one of the others may import; it imports nothing itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_attributes(package: str, homes: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that finds each name in its home module
    (``homes``: module -> the names it defines), importing that module on first use."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        home = home_of.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__
