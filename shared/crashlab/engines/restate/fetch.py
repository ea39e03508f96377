"""The Restate server's binary, installed without Node.js: ``python -m crashlab.engines.restate.fetch PREFIX``.

npm's ``@restatedev/restate-server`` is a launcher in JavaScript; the binary itself is in an optional dependency,
one package per platform (``@restatedev/restate-server-linux-x64``), and npm only downloads and unpacks it (the
course passes ``--ignore-scripts``). The grading bundle's ``setup.sh`` cannot count on npm: Gradescope's Ubuntu
base image has no Node.js. So this does what npm does for that one package, with the standard library: read the
package's entry in the npm registry, download its tarball, check it against the entry's sha512 ``integrity``
(the hash npm checks), and unpack it where :func:`crashlab.engines.restate.server.restate_binary` looks
(``PREFIX/node_modules/<package>/``). A verified tarball is kept in the user's cache, so a second install on the
same machine downloads nothing but the registry entry.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from crashlab.engines.restate.server import RESTATE_VERSION, platform_package

REGISTRY = os.environ.get("npm_config_registry", "https://registry.npmjs.org").rstrip("/")
TIMEOUT_S = 60


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crashlab" / "restate"


def registry_entry(package: str, version: str) -> dict:
    """The registry's ``dist`` of ``package@version``: its ``tarball`` URL and ``integrity`` (``sha512-<base64>``)."""
    url = f"{REGISTRY}/{package.replace('/', '%2f')}/{version}"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply:
        dist = json.load(reply)["dist"]
    if not str(dist.get("integrity", "")).startswith("sha512-"):
        raise RuntimeError(f"the registry's entry for {package}@{version} has no sha512 integrity to check")
    return dist


def _sha512(path: Path) -> str:
    digest = hashlib.sha512()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return "sha512-" + base64.b64encode(digest.digest()).decode()


def verified_tarball(package: str, version: str) -> Path:
    """The package's tarball, from the cache if one there still matches the registry's hash, else downloaded."""
    dist = registry_entry(package, version)
    cache = _cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    cached = cache / f"{package.rsplit('/', 1)[-1]}-{version}.tgz"
    if cached.is_file() and _sha512(cached) == dist["integrity"]:
        return cached
    fd, partial = tempfile.mkstemp(dir=cache, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(dist["tarball"], timeout=TIMEOUT_S) as reply:
            shutil.copyfileobj(reply, out, 1 << 20)
        if _sha512(Path(partial)) != dist["integrity"]:
            raise RuntimeError(f"the download of {dist['tarball']} does not match the registry's sha512: not installed")
        os.replace(partial, cached)
    finally:
        Path(partial).unlink(missing_ok=True)
    return cached


def unpack_npm_tarball(archive: tarfile.TarFile, into: Path) -> None:
    """Unpack an npm tarball (one folder, ``package/``), refusing any member that would land outside it or is
    not a plain file or folder. Python 3.11 before 3.11.4 (Ubuntu 22.04's own) has no extraction filters."""
    members = archive.getmembers()
    for member in members:
        parts = Path(member.name).parts
        if not (member.isfile() or member.isdir()) or not parts or parts[0] != "package" or ".." in parts \
                or Path(member.name).is_absolute():
            raise RuntimeError(f"the tarball holds {member.name!r}, which no npm package holds")
    if hasattr(tarfile, "data_filter"):
        archive.extractall(into, members, filter="data")
    else:
        archive.extractall(into, members)


def install(prefix: Path, version: str = RESTATE_VERSION) -> Path:
    """Unpack this platform's server package under ``prefix/node_modules`` (replacing an earlier copy); the binary."""
    package = platform_package()
    tarball = verified_tarball(package, version)
    target = Path(prefix) / "node_modules" / package
    target.parent.mkdir(parents=True, exist_ok=True)
    unpacked = Path(tempfile.mkdtemp(dir=target.parent, prefix=".unpack-"))
    try:
        with tarfile.open(tarball) as archive:
            unpack_npm_tarball(archive, unpacked)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(unpacked / "package", target)
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
    binary = target / "bin" / "restate-server"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise RuntimeError(f"{package}@{version} holds no executable bin/restate-server")
    return binary


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m crashlab.engines.restate.fetch PREFIX   (the binary goes under PREFIX/node_modules)",
              file=sys.stderr)
        return 2
    try:
        binary = install(Path(argv[0]))
    except (OSError, RuntimeError, ValueError, KeyError, tarfile.TarError) as exc:
        print(f"error: could not install the Restate server {RESTATE_VERSION} from {REGISTRY}: {exc}", file=sys.stderr)
        return 1
    print(f"installed {binary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
