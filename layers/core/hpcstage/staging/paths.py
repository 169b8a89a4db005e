"""Mapping object keys to paths under a staging root, so that no key can name a file outside it.

S3 keys are arbitrary UTF-8: ``../../etc/passwd``, ``/abs``, ``a//b`` and ``a/./b`` are all valid
keys. A file system resolves those components, so a naive ``root + "/" + key`` could write outside
the root, or map two different keys onto one file. Keys are therefore checked component by
component and refused when any component is empty, ``.`` or ``..``; everything else (quotes,
``$(...)``, ``;``, newlines, a leading ``-``) is a legal file name and is kept byte for byte.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable

from .errors import UnsafePathError

# Lustre and ext4/xfs limit one path component to 255 bytes.
NAME_MAX_BYTES = 255


def relative_path(key: str, *, what: str = "object key") -> str:
    """Validate ``key`` and return it as a relative POSIX path (a trailing ``/`` is dropped).

    Raises UnsafePathError naming the key and the rule it breaks.
    """
    if not isinstance(key, str):
        raise UnsafePathError(f"{what} must be a string, not {type(key).__name__}")
    if key == "":
        raise UnsafePathError(f"empty {what}")
    if "\0" in key:
        raise UnsafePathError(f"{what} {key!r} contains a NUL byte, which no file name can hold")
    if key.startswith("/"):
        raise UnsafePathError(f"{what} {key!r} is absolute; it must be relative to the staging root")
    # A single trailing "/" marks an S3 "folder" object: it names the directory itself.
    parts = key[:-1].split("/") if key.endswith("/") else key.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            shown = "empty" if part == "" else repr(part)
            raise UnsafePathError(
                f"{what} {key!r} has an {shown} path component; it could leave the staging root "
                "or collide with another key"
            )
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES:
            raise UnsafePathError(f"{what} {key!r} has a component longer than {NAME_MAX_BYTES} bytes")
    return "/".join(parts)


def is_folder_marker(key: str) -> bool:
    """A zero-byte object whose key ends in "/" stands for a directory, not a file."""
    return key.endswith("/")


def as_prefix(prefix: str) -> str:
    """A key prefix that names a directory: "" stays "", anything else ends with one "/"."""
    return prefix if not prefix or prefix.endswith("/") else prefix + "/"


def strip_prefix(key: str, prefix: str) -> str:
    """The part of ``key`` below ``prefix`` (which must end with "/" unless empty)."""
    if not key.startswith(prefix):
        raise UnsafePathError(f"object key {key!r} is outside the repository prefix {prefix!r}")
    rest = key[len(prefix) :]
    if rest == "":
        raise UnsafePathError(f"object key {key!r} is the repository prefix itself, not a file below it")
    return rest


def join_under(root: str, rel: str) -> str:
    """``root/rel`` for a path already checked by relative_path (POSIX, no resolution needed)."""
    return posixpath.join(root, rel) if rel else root


def check_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` if, with symlinks resolved, it is not inside ``root``.

    relative_path already rules out ``..``; this catches a symlink planted inside the root (by a
    job, say) that points elsewhere.
    """
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise UnsafePathError(
            f"{os.fspath(path)!r} resolves to {real!r}, outside the staging root {real_root!r}"
        )


def validate_all(keys: Iterable[str], *, what: str = "object key", limit: int = 10) -> None:
    """Check every key; raise one error that names up to ``limit`` bad keys and how many there are."""
    bad: list[str] = []
    count = 0
    for key in keys:
        try:
            relative_path(key, what=what)
        except UnsafePathError as err:
            count += 1
            if len(bad) < limit:
                bad.append(str(err))
    if count:
        more = f" (and {count - len(bad)} more)" if count > len(bad) else ""
        raise UnsafePathError(f"{count} unsafe {what}(s) refused: " + "; ".join(bad) + more)
