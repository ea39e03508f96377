"""The grading bundle (``crashlab autograder OUT.zip``): everything needed to grade, and nothing a student has.

One zip serves Gradescope and GitHub Classroom. Gradescope unpacks it into ``/autograder/source``, runs
``setup.sh`` once and ``run_autograder`` per submission (:mod:`crashlab.grading.gradescope` writes
``/autograder/results/results.json``). The classroom workflow of a student release fetches the same bundle at
grading time from where the instructor keeps it private (``grade.sh`` of :mod:`crashlab.release.student`).

In it: ``setup.sh`` and ``run_autograder``, the library (with the lesson answers that later lessons build on:
grading lesson N refuses and hides those of lesson N and later), ``pyproject.toml`` and ``constraints.txt``
(every requirement pinned), the masters, and ``grading.json`` naming the notebooks it grades. ``--encrypt
KEYFILE`` also writes ``OUT.zip.enc`` (AES-256, key from the file, made if missing), which may sit anywhere
the workflow can download it: the key is the secret.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import tempfile
import zipfile
from pathlib import Path

import nbformat

from crashlab.grading.gradescope import MANIFEST
from crashlab.course.notebooks import lesson_of, repo_root
from crashlab.plumbing.outputs import BUNDLE, ENCRYPTED_BUNDLE, check_replaceable, replace_with
from crashlab.release.files import TEMPLATES, library_files
from crashlab.course.metadata import lesson_meta

BUNDLE_README = """# Grading bundle -- instructors only

Made by `crashlab autograder`. It holds the master notebooks (every answer and hidden check): never put it,
or anything unpacked from it, where students can read it. Gradescope: upload the zip as the autograder
(base image Ubuntu 22.04). GitHub Classroom: see the course README, "Running a graded class".
"""
OPENSSL = ["openssl", "enc", "-aes-256-cbc", "-pbkdf2", "-iter", "200000", "-salt"]  # grade.sh decrypts with the same


def masters_for(notebooks: list[str] | None, solutions: Path) -> tuple[list[Path], list[Path]]:
    """(the masters graded, every master the bundle carries): a lesson that runs earlier lessons' reference
    agents (``uses_lessons``) needs their masters too."""
    masters = sorted(solutions.glob("*.ipynb"))
    if notebooks:
        unknown = sorted(set(notebooks) - {m.stem for m in masters} - {lesson_of(nbformat.read(m, 4)) for m in masters})
        if unknown:
            raise ValueError(f"no master for {', '.join(unknown)} (masters: {', '.join(m.stem for m in masters)})")
    read = {m: nbformat.read(m, as_version=4) for m in masters}
    graded = [m for m in masters if not notebooks or m.stem in notebooks or lesson_of(read[m]) in notebooks]
    needed = {lesson for m in graded for lesson in lesson_meta(read[m]).get("uses_lessons", [])}
    carried = [m for m in masters if m in graded or lesson_of(read[m]) in needed]
    return graded, carried


def _add(archive: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def without_widget_state(master: Path) -> bytes:
    """The master as the grader needs it: without the state of its progress-bar widgets (tens of kilobytes a
    lesson, which nothing in grading reads)."""
    nb = nbformat.read(master, as_version=4)
    nb.metadata.pop("widgets", None)
    return nbformat.writes(nb).encode()


def build_autograder(out: Path, notebooks: list[str] | None = None, root: Path | None = None, *,
                     force: bool = False) -> list[Path]:
    """Write the bundle to ``out`` (atomically); returns the masters it grades. An existing ``out`` that is not
    a bundle is refused (:class:`crashlab.plumbing.outputs.OutputError`) unless ``force``."""
    root = root or repo_root()
    graded, carried = masters_for(notebooks, root / "solutions")
    check_replaceable(out, BUNDLE, force=force)
    out = Path(out).absolute()
    fd, tmp = tempfile.mkstemp(prefix=".autograder-", suffix=".zip", dir=out.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w") as archive:
            _add(archive, "setup.sh", (TEMPLATES / "setup.sh").read_bytes(), executable=True)
            _add(archive, "run_autograder", (TEMPLATES / "run_autograder").read_bytes(), executable=True)
            _add(archive, "README.md", BUNDLE_README.encode())
            _add(archive, MANIFEST, json.dumps({"notebooks": [m.name for m in graded]}, indent=1).encode())
            for name in ("pyproject.toml", "constraints.txt"):
                _add(archive, name, (root / name).read_bytes())
            for path in library_files(root):
                _add(archive, path.relative_to(root).as_posix(), path.read_bytes())
            for master in carried:
                _add(archive, f"solutions/{master.name}", without_widget_state(master))
        os.chmod(tmp, 0o600)  # the masters are in it
        replace_with(tmp, out, BUNDLE, force=force)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return graded


def encrypted_name(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + ".enc")


# What ``--encrypt`` writes (``secrets.token_urlsafe(32)``: 43 characters) and what it takes back: one line of
# URL-safe characters, 32 at least.
_KEY = re.compile(rb"[A-Za-z0-9_-]{32,512}\r?\n?")


def check_key_file(key_file: Path) -> None:
    """A ValueError, in one line, unless ``key_file`` is missing (a key is made there) or holds a key as
    :func:`encrypt` makes them. openssl takes the first line of any file as the password: a notebook's ``{`` or a
    README's title would encrypt the bundle with a key anyone can guess, and nothing would say so."""
    if not key_file.exists() and not key_file.is_symlink():
        return
    if not key_file.is_file():
        raise ValueError(f"the key file {key_file} is not a file: name the key file --encrypt made before, or a new "
                         f"path for a new key")
    with open(key_file, "rb") as f:
        head = f.read(1024)
    if not _KEY.fullmatch(head):
        raise ValueError(f"{key_file} does not hold a key as --encrypt makes them (one line of 32 or more letters, "
                         f"digits, '-' or '_'): name that key file, or a new path for a new key")


def encrypt(bundle: Path, key_file: Path, *, force: bool = False) -> Path:
    """``bundle`` encrypted with the key in ``key_file`` (a new random key is written there if it does not
    exist); returns the ``.enc`` file, which replaces only an earlier encrypted bundle (or anything, with
    ``force``). The classroom workflow decrypts it with ``openssl`` too."""
    target = encrypted_name(bundle)
    check_replaceable(target, ENCRYPTED_BUNDLE, force=force)
    check_key_file(key_file)
    if not key_file.exists():
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    fd, made = tempfile.mkstemp(prefix=".autograder-", suffix=".enc", dir=target.absolute().parent)
    os.close(fd)
    try:
        subprocess.run([*OPENSSL, "-in", str(bundle), "-out", made, "-pass", f"file:{key_file}"], check=True,
                       capture_output=True)
        replace_with(made, target, ENCRYPTED_BUNDLE, force=force)
    except BaseException:
        Path(made).unlink(missing_ok=True)
        raise
    return target
