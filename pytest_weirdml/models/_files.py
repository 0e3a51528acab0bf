"""Files the harness writes in a directory someone else may write (``queue:DIR``, ``human``).

An answerer who can write the directory can plant a symbolic link at any name it can predict,
so nothing is ever opened there by a name that may already exist: each file is created new under
a random name (``O_CREAT|O_EXCL|O_NOFOLLOW``), written through that descriptor and renamed onto
its final name (a link planted there is replaced, never followed).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# A dot-name that sorts apart from the ids and ends in neither of the answerer's suffixes.
_PART = ".weirdml-{}.part"


def write_new(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, never through a name that exists: a reader sees the
    whole file or none, and a link planted at ``path`` or anywhere beside it is left alone."""
    for _ in range(16):
        part = path.with_name(_PART.format(secrets.token_hex(8)))
        try:
            fd = os.open(part, _NEW, 0o666)
        except FileExistsError:
            continue
        break
    else:  # sixteen random names taken: someone fills the directory on purpose
        raise FileExistsError(f"no free temporary name in {path.parent}")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text.encode("utf-8"))
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise
