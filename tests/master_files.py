"""Helpers the lesson tests share: a master's files in a scratch folder, and an edit that fails loudly when the
master no longer holds the text it replaces."""

from pathlib import Path

import nbformat

from crashlab.grading.notebooks import written_files


def write_master_files(master: Path, folder: Path):
    """Write every ``%%writefile`` file of ``master`` into ``folder``; return the master notebook."""
    nb = nbformat.read(master, as_version=4)
    for name, source in written_files(nb).items():
        (folder / name).write_text(source)
    return nb


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path.name}: the master changed, update this test"
    path.write_text(text.replace(old, new))


def master_value(master: Path, gid: str, name: str):
    """What ``name`` is after the master's answer cell ``gid`` runs, computed as the judge computes it while
    grading (lesson 8's self-check letters: the key no library module holds)."""
    from crashlab.grading import references

    saved = dict(references.REFERENCES)
    references.REFERENCES.update(references.master_answers(nbformat.read(master, as_version=4), [gid]))
    try:
        return references.reference_value(gid, name)
    finally:
        references.REFERENCES.clear()
        references.REFERENCES.update(saved)
