"""Package attributes imported on first use (PEP 562), for packages whose re-exports would
otherwise import what a light process never needs (``openai`` for ``baton watch``)."""

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
