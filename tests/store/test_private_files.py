import os
from pathlib import Path

import pytest

from hatp_mcp.store.private_files import OWNER_ONLY, read_private


def test_an_owner_only_file_is_read_with_the_mode_of_the_file_opened(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"s3cret\n")
    secret.chmod(0o600)
    mode, raw = read_private(secret)
    assert (mode & 0o777, raw) == (0o600, b"s3cret\n")


def test_a_file_others_may_read_or_that_is_not_regular_is_not_read(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.write_bytes(b"s3cret")
    loose.chmod(0o644)
    assert read_private(loose) == (os.stat(loose).st_mode, None)
    assert not OWNER_ONLY(os.stat(tmp_path).st_mode)  # a folder is not a regular file ...
    with pytest.raises(OSError):  # ... and is never read as one
        read_private(tmp_path)


def test_the_caller_chooses_which_modes_it_allows(tmp_path: Path) -> None:
    runnable = tmp_path / "runnable"
    runnable.write_bytes(b"token")
    runnable.chmod(0o700)
    assert read_private(runnable)[1] is None  # owner-only means no execute bit either
    assert read_private(runnable, lambda m: not m & 0o077)[1] == b"token"
