"""Installing the Restate server without npm: what is unpacked, and what is refused. The real download runs when
tests/grading/test_autograder.py runs the grading bundle's setup.sh (which installs the server this way)."""

import io
import tarfile
from pathlib import Path

import pytest

from crashlab.engines.restate import fetch


def tarball(path: Path, *members: tuple[str, bytes | None, str | None]) -> Path:
    """A gzipped tarball of ``(name, content, link target)`` members: a file, or a symbolic link when a target is given."""
    with tarfile.open(path, "w:gz") as archive:
        for name, content, target in members:
            info = tarfile.TarInfo(name)
            if target is not None:
                info.type, info.linkname = tarfile.SYMTYPE, target
                archive.addfile(info)
            else:
                info.size, info.mode = len(content), 0o755
                archive.addfile(info, io.BytesIO(content))
    return path


def test_an_npm_tarball_unpacks_into_its_package_folder(tmp_path):
    good = tarball(tmp_path / "good.tgz", ("package/bin/restate-server", b"#!/bin/sh\n", None))
    with tarfile.open(good) as archive:
        fetch.unpack_npm_tarball(archive, tmp_path / "out")
    assert (tmp_path / "out" / "package" / "bin" / "restate-server").read_bytes() == b"#!/bin/sh\n"


@pytest.mark.parametrize("member", [("package/../../evil", b"x", None), ("/etc/evil", b"x", None),
                                    ("package/bin/restate-server", None, "/bin/sh"), ("other/file", b"x", None)],
                         ids=["dot-dot", "absolute", "symlink", "outside-package"])
def test_a_tarball_member_outside_the_package_or_not_a_plain_file_is_refused(tmp_path, member):
    bad = tarball(tmp_path / "bad.tgz", member)
    with tarfile.open(bad) as archive, pytest.raises(RuntimeError, match="no npm package holds"):
        fetch.unpack_npm_tarball(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))


def test_a_download_that_does_not_match_the_registrys_hash_is_not_kept(tmp_path, monkeypatch):
    served = tarball(tmp_path / "served.tgz", ("package/bin/restate-server", b"tampered", None))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "registry_entry", lambda package, version: {
        "tarball": served.as_uri(), "integrity": "sha512-" + "A" * 86 + "=="})
    with pytest.raises(RuntimeError, match="does not match the registry's sha512"):
        fetch.verified_tarball("@restatedev/restate-server-linux-x64", "0.0.0")
    assert not list((tmp_path / "cache").rglob("*.tgz")) and not list((tmp_path / "cache").rglob("*.part"))
