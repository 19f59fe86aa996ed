"""The one exception type that means "the user gave us something wrong".

The CLI turns it into a one-line message and exit status 2; anything else escaping is our bug
and is allowed to show a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping


class UserError(ValueError):
    """Bad input from a user: unknown names, malformed files, impossible options."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM stopped long work; the message says what was kept (exit 130)."""


def closest(name: str, choices: Iterable[str], n: int = 3) -> str:
    """A 'did you mean' suffix listing the closest valid names (or all of them if few)."""
    options = sorted(choices)
    near = difflib.get_close_matches(name, options, n=n, cutoff=0.4)
    if near:
        return f"; did you mean {', '.join(near)}?"
    shown = ", ".join(options[:12]) + (", ..." if len(options) > 12 else "")
    return f"; valid choices: {shown}"


def config_count(value: object, field: str, origin: str, top: int) -> int:
    """A count in a model's config file: a JSON integer (not a bool, a float or a string)
    from 1 to `top`, else a UserError naming the file and the field."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        raise UserError(f"{origin}: field {field!r} must be an integer from 1 to {top:,}, "
                        f"got {value!r}")  # fmt: skip
    return value


def check_positive(**values: object) -> None:
    """Every named value is a positive integer (or None, meaning "not given")."""
    check_positive_in(values, values)


def check_positive_in(given: Mapping[str, object], names: Iterable[str]) -> None:
    """check_positive of the named entries of `given`, without a keyword dict: a sweep
    checks nine for each of its points (1.4 us a point by keywords, 0.34 us so: timeit,
    2026-12-04), so a plain int or None is told apart first."""
    for name in names:
        value = given[name]
        if value is None or (type(value) is int and value >= 1):
            continue
        import numpy as np

        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise UserError(f"{name} must be a positive integer, got {value!r}")
