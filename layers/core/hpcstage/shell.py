"""Build shell command strings in which every argument arrives as one literal word.

Commands sent to a head node through SSM are shell text, so job names, paths and user names taken
from requests must never be interpreted by the shell. Every argument goes through `quote`, which
uses POSIX single quotes (valid for sh, dash and bash): inside them nothing is special.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

# POSIX portable user names (useradd's default rule), so a user name can never be read as an option
# by runuser (for example "-c") or contain anything that needs quoting.
_USER_NAME_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


def quote(arg: str) -> str:
    """Quote one argument for a POSIX shell; NUL cannot be passed in an argv, so it is refused."""
    if not isinstance(arg, str):
        raise TypeError(f"shell arguments must be str, not {type(arg).__name__}")
    if "\0" in arg:
        raise ValueError(f"NUL byte in shell argument {arg!r}")
    return shlex.quote(arg)


def command(argv: Sequence[str]) -> str:
    """Join an argv into one command line; the shell will split it back into exactly these words."""
    if isinstance(argv, str):
        raise TypeError("command() takes a list of arguments, not a string")
    if not argv:
        raise ValueError("empty command")
    return " ".join(quote(arg) for arg in argv)


def check_user_name(user: str) -> str:
    if not _USER_NAME_RE.fullmatch(user):
        raise ValueError(f"invalid user name {user!r}")
    return user


def as_user(user: str, cmd: str) -> str:
    """`runuser -l USER -c CMD`: run shell text CMD in USER's login environment (needs root).

    CMD is shell text on purpose (it may hold pipes built from quoted pieces); it is passed to
    runuser as one quoted argument, so the outer shell does not interpret it.
    """
    return command(["runuser", "-l", check_user_name(user), "-c", cmd])
