"""The red team against the sealed box (see the README, "What is sealed"): each grading in a network of its own, an
IPC namespace and /dev/shm per process tree, limits on the whole, no root write through a planted link, no secret in
any process a student's code runs in or forks from, and nothing of a run on the reference answers passed on.

Gradings are slow, so each full grading here carries every attack that fits in it, and the seals that need no
grading are checked on an :class:`Isolation` alone.
"""

import json
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from crashlab.course.notebooks import grade_id, is_answer_cell
from crashlab.grading.grade import grade_notebook
from crashlab.grading.isolation import Isolation
from test_redteam import ROOT, ROOT_ONLY

SOLUTIONS = ROOT / "solutions"
SECRET = re.compile(rb"s3cret-[0-9a-f]{16}-[A-Z_]+")
SECRET_NAMES = ("CRASHLAB_BUNDLE_KEY", "GITHUB_TOKEN", "ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "CI_JOB_TOKEN")

pytestmark = ROOT_ONLY


def with_cells(lesson: str, *cells: str, replace: dict | None = None, master: bool = False) -> nbformat.NotebookNode:
    """A lesson's student notebook (or master) with answer cells replaced (grade id -> source) and cells added at
    the end."""
    nb = nbformat.read((SOLUTIONS if master else ROOT / "course") / f"{lesson}.ipynb", as_version=4)
    for gid, source in (replace or {}).items():
        next(c for c in nb.cells if grade_id(c) == gid).source = source
    nb.cells += [nbformat.v4.new_code_cell(source) for source in cells]
    return nb


def graded(nb, folder: Path, name: str, **kwargs):
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)
    out = folder / "results.json"
    report = grade_notebook(folder / name, json_out=out, **kwargs)
    return report, out.read_text()


def kept_folder(report) -> Path:
    return Path(next(n for n in report.notes if "scratch directory kept" in n).split(" at ", 1)[1])


# --- reading processes' memory, as root ------------------------------------------------------------------------
def secrets_in(pid: int, cap: int = 96 << 20) -> set[bytes]:
    """The planted secrets in a process's environment, stack and writable memory (``/proc/PID/mem``, as root)."""
    found: set[bytes] = set()
    try:
        found |= set(SECRET.findall(Path(f"/proc/{pid}/environ").read_bytes()))
        regions = Path(f"/proc/{pid}/maps").read_text().splitlines()
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            read = 0
            for line in regions:
                fields = line.split()
                if "w" not in fields[1] and not line.endswith("[stack]"):
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                try:
                    mem.seek(start)
                    data = mem.read(min(end - start, cap - read))
                except (OSError, ValueError, OverflowError):
                    continue
                read += len(data)
                found |= set(SECRET.findall(data))
                if read >= cap:
                    break
    except OSError:
        pass
    return found


def _command_line(pid: int | None) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() if pid else None
    except OSError:
        return None


def _parent(pid: int) -> int | None:
    try:
        return int(re.search(r"^PPid:\s+(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M).group(1))
    except (OSError, AttributeError):
        return None


class Sampler:
    """While a grading runs: every process of a sandbox user below this one, and every process between (the
    launchers that fork them, the judge), read for the planted secrets once each."""

    def __init__(self, agents: int = 16):
        self.found: dict[str, set] = {}
        self.pending: dict[int, tuple[str, bytes, set]] = {}  # hits in a fork not seen to exec yet (see _scan)
        self.seen: set[int] = set()
        self.agents, self._stop = agents, threading.Event()
        self.users = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sandboxed(self, uid: int) -> bool:
        if uid not in self.users:
            try:
                self.users[uid] = pwd.getpwuid(uid).pw_name.startswith("crashlab-sb")
            except KeyError:
                self.users[uid] = False
        return self.users[uid]

    def _scan(self, pid: int, why: str) -> None:
        """Hits in a process that is still its parent's image (the same command line) wait for one of two ends. A
        child the grader started with ``preexec_fn`` (setuid to the sandbox user, then exec) is caught now and then
        between the two, on a loaded machine: its memory is the grader's own for a moment, unreadable by the sandbox
        user (a change of uid makes it non-dumpable) and gone at the exec, so its hits are dropped and the new image
        scanned. A fork that never execs -- an agent the warm launcher forks, which runs the student's code in that
        memory -- keeps its command line to the end, and its hits count."""
        self.seen.add(pid)
        hits = secrets_in(pid)
        if not hits:
            return
        command = _command_line(pid)
        if command is not None and command == _command_line(_parent(pid)):
            self.pending[pid] = (why, command, hits)
        else:
            self.found[f"{pid} ({why})"] = hits

    def _settle(self, final: bool = False) -> None:
        for pid, (why, command, hits) in list(self.pending.items()):
            now = _command_line(pid)
            if now is not None and now != command:  # it exec'd: the image the hits came from is gone
                del self.pending[pid]
                self._scan(pid, why)
            elif now is None or final:  # it ended, or the grading did, as its parent's image
                del self.pending[pid]
                self.found[f"{pid} ({why})"] = hits

    def _run(self) -> None:
        agents = 0
        while not self._stop.is_set():
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) in self.seen:
                    continue
                pid = int(entry)
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
                if not self._sandboxed(uid):
                    continue
                above = self._ancestors(pid)
                if os.getpid() not in above:
                    self.seen.add(pid)  # another grading's (another test's, at the same time): not this one's
                    continue
                if agents < self.agents:
                    agents += 1
                    self._scan(pid, "a sandboxed process")
                for parent in above[:above.index(os.getpid())]:
                    if parent not in self.seen:
                        self._scan(parent, "forks a sandboxed process")
            self._settle()
            time.sleep(0.05)

    @staticmethod
    def _ancestors(pid: int) -> list[int]:
        """The processes above ``pid``, nearest first."""
        chain: list[int] = []
        while pid > 1 and len(chain) < 64:
            parent = _parent(pid)
            if parent is None:
                break
            pid = parent
            chain.append(pid)
        return chain

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join(30)
        self._settle(final=True)
        return self.found


@pytest.fixture
def planted_secrets(monkeypatch):
    """Secrets in the grader's environment, and no warm launcher of this process started before they were there."""
    from crashlab.harness.launcher import close_kept_launchers

    values = {name: f"s3cret-{os.urandom(8).hex()}-{name}" for name in SECRET_NAMES}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    close_kept_launchers()
    yield values
    close_kept_launchers()  # the next test's launcher starts without them


def test_a_warm_launcher_and_the_agents_it_forks_hold_none_of_the_graders_secrets(planted_secrets, tmp_path):
    """The warm launcher that forks every agent is started while the grader's environment holds its secrets: it
    starts from the allow-list, so neither it nor an agent it forks -- which inherits its memory, stack included --
    holds any, read as root (environment, stack and writable memory)."""
    from crashlab.harness.launcher import kept_launcher

    launcher = kept_launcher()
    (tmp_path / "wait.py").write_text("import time\ntime.sleep(120)\n")
    agent = launcher.spawn([str(tmp_path / "wait.py")], tmp_path, {"PATH": os.environ["PATH"]}, tmp_path / "out",
                           tmp_path / "err")
    try:
        found = {"launcher": secrets_in(launcher.pid), "agent": secrets_in(agent.pid)}
        alive = Path(f"/proc/{agent.pid}").exists() and Path(f"/proc/{launcher.pid}").exists()
    finally:
        agent.kill()
    assert alive, "both processes were read while they ran"
    assert found == {"launcher": set(), "agent": set()}, found


# --- the box, without a grading -------------------------------------------------------------------------------
PROBE = r'''
import ctypes, json, os, socket, sys
host, own = int(sys.argv[1]), int(sys.argv[2])
said = {}
for name, port in (("host", host), ("own", own)):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        said[name] = True
    except OSError:
        said[name] = False
libc = ctypes.CDLL(None, use_errno=True)
said["sysv"] = libc.shmget(int(sys.argv[4]), 4096, 0o1000 | 0o666) >= 0   # IPC_CREAT, left for later
open("/dev/shm/crashlab-probe-" + sys.argv[3], "w").write("left for later")
said["netns"] = os.stat("/proc/self/ns/net").st_ino
forks = 0
try:
    while forks < 5000:
        if os.fork() == 0:
            import time; time.sleep(30); os._exit(0)
        forks += 1
except OSError:
    pass
said["forks"] = forks
files = 0
try:
    while files < 100000:
        open(f"junk-{files}", "w").close()
        files += 1
except OSError:
    pass
said["files"] = files
print(json.dumps(said), flush=True)
'''

MEMORY_HOG = "import os\nblocks = []\nwhile True:\n    blocks.append(bytearray(os.urandom(1) * (64 << 20)))\n"


def segment_keys() -> set[int]:
    """The keys of the machine's System V shared memory segments (in this, the machine's IPC namespace)."""
    return {int(line.split()[0]) for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]}


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    return server


def test_gradings_are_boxes_apart_from_each_other_and_from_the_machine(tmp_path, monkeypatch):
    """Two gradings at once: each has a network of its own (its thread, the processes it starts, and the children a
    warm launcher started outside forks for it), where the machine's loopback services and the other grading's are
    out of reach; what a process leaves in System V shared memory or /dev/shm goes with it; its processes together
    meet one process limit and one memory limit, which the grading then names; and once closed, the thread is back
    in the machine's network."""
    import crashlab.plumbing.sandbox_box as box
    from crashlab.harness.launcher import kept_launcher

    monkeypatch.setattr(box, "MEMORY_TOTAL", 256 << 20)
    monkeypatch.setattr(box, "TASKS_TOTAL", 64)
    monkeypatch.setattr(box, "FILES_COUNT", 2000)
    host = _listener()
    machine = os.stat("/proc/thread-self/ns/net").st_ino
    launcher = kept_launcher()  # started outside any box
    tag, key = f"{os.getpid()}-{time.monotonic_ns()}", int.from_bytes(os.urandom(3), "big") + 1
    said, own_ports, errors = {}, {}, []

    def grading(name: str, ready: threading.Barrier, done: threading.Barrier) -> None:
        try:
            isolation = Isolation(None, True, hide=())
            try:
                server = _listener()  # a world of this grading's, say
                own_ports[name] = server.getsockname()[1]
                ready.wait(60)
                other = own_ports["b" if name == "a" else "a"]
                for target, port in (("host", host.getsockname()[1]), ("other", other)):
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=5).close()
                        said[f"{name}: the thread reached {target}"] = True
                    except OSError:
                        pass
                out_dir = isolation.workdir / "home" / "tmp"
                (out_dir / "ns.py").write_text("import os\nprint(os.stat('/proc/self/ns/net').st_ino)\n")
                forked = launcher.spawn([str(out_dir / "ns.py")], out_dir, {"PATH": os.environ["PATH"]},
                                        out_dir / "out", out_dir / "err")
                forked.wait(60)
                said[f"{name} forked"] = int((out_dir / "out").read_text() or 0)
                probe = isolation.popen([sys.executable, "-c", PROBE, str(host.getsockname()[1]), str(own_ports[name]),
                                         f"{tag}-{name}", str(key)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
                out, err = probe.communicate(timeout=120)
                said[name] = json.loads(out or "{}") or err[-800:]
                hog = isolation.popen([sys.executable, "-c", MEMORY_HOG], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
                said[f"{name} hog"] = hog.wait(120)
                said[f"{name} limits"] = isolation.limits_met()
                said[f"{name} own"] = os.stat("/proc/thread-self/ns/net").st_ino
                done.wait(60)
            finally:
                isolation.close()
            said[f"{name} after"] = os.stat("/proc/thread-self/ns/net").st_ino
        except BaseException as exc:  # noqa: BLE001 -- reported by the test
            errors.append(f"{name}: {exc!r}")
            ready.abort()
            done.abort()

    ready, done = threading.Barrier(2), threading.Barrier(2)
    threads = [threading.Thread(target=grading, args=(n, ready, done)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    host.close()
    assert not errors, errors
    assert not [k for k in said if "the thread reached" in k], said
    for name in ("a", "b"):
        probe = said[name]
        assert isinstance(probe, dict), probe
        assert probe["own"] and not probe["host"], f"{name}: its own loopback, not the machine's: {probe}"
        assert probe["netns"] == said[f"{name} own"] != machine, "the sandboxed process is in the grading's network"
        assert said[f"{name} forked"] == said[f"{name} own"], "a launcher's child is born in the asking grading's"
        assert probe["sysv"], "the segment was made (in the process's own IPC namespace)"
        assert probe["forks"] < 64, f"{name}: the processes together met the limit: {probe['forks']} forks"
        assert probe["files"] < 2000, f"{name}: its folder holds 2,000 files at most: {probe['files']}"
        assert said[f"{name} hog"] != 0, "the memory hog was stopped at the limit"
        limits = " ".join(said[f"{name} limits"])
        assert "limit of 64 processes" in limits and "memory limit" in limits, limits
        assert "filled the student's folder (its limit: 2000 files)" in limits, limits
        assert said[f"{name} after"] == machine, "the thread is back in the machine's network"
    assert said["a own"] != said["b own"]
    assert key not in segment_keys(), "the segment went with its process's IPC namespace"
    assert not list(Path("/dev/shm").glob(f"crashlab-probe-{tag}-*")), "nothing left in the machine's /dev/shm"


FLOOD_STDERR = """import os
def target(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""
log = [int(fd) for fd in os.listdir("/proc/self/fd") if target(fd).endswith(".log")]
line, written = b"x" * 65535 + b"\\n", 0
try:
    while written < (8 << 20):
        written += os.write(log[0], line)  # the runner's stderr, inherited: the grader's log of the run
except OSError:
    pass
open("wrote", "w").write(str(written))
"""


def test_what_a_kernel_writes_to_the_stderr_it_inherits_is_bounded(tmp_path, monkeypatch):
    """The notebook's runner logs to a file of the grader's, and the kernel and all it starts inherit it as their
    stderr: a kernel that writes gigabytes there would fill the machine's disk past every limit of the box. That log
    is on a file system of its own, a few MiB, as are the folder of the runs on the reference answers (the student's
    code, as another user) and the earlier lessons' files handed to the sandbox user; the grading says which limit was
    met, and the run goes on."""
    import crashlab.plumbing.sandbox_box as box
    from crashlab.grading.isolation import Deadline, run_submission

    monkeypatch.setattr(box, "LOG_BYTES", 1 << 20, raising=False)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(FLOOD_STDERR)])
    isolation = Isolation(None, True, hide=())
    try:
        run_submission(nb, isolation, Deadline(600), 300)
        wrote = int((isolation.workdir / "wrote").read_text())
        logged = max(os.stat(log).st_size for log in isolation.box.glob("*/run_notebook.log"))
        bounded = [os.statvfs(folder) for folder in (isolation.refs, isolation.lessons)]
        said = " ".join(isolation.limits_met())
    finally:
        isolation.close()
    assert wrote < 2 << 20 and logged <= 1 << 20, (wrote, logged)
    for fs in bounded:
        assert fs.f_blocks * fs.f_frsize <= box.FILES_BYTES and fs.f_files <= box.FILES_COUNT, fs
    assert "filled the notebook's log (its limit: 1 MiB)" in said, said


# --- root writes: a planted link of every kind at every path root writes -----------------------------------------
KINDS = ("file", "folder", "dangling", "dev_shm", "root_file")


@pytest.fixture
def canary(tmp_path):
    """A folder and a file only root may touch, and where a planted link of each kind points."""
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"crashlab-canary-{os.getpid()}-{time.monotonic_ns()}"
    folder.mkdir(mode=0o700)
    (folder / "canary.txt").write_text("untouched")
    os.chmod(folder / "canary.txt", 0o600)
    shm = Path("/dev/shm") / f"crashlab-canary-{os.getpid()}-{time.monotonic_ns()}"
    targets = {"file": folder / "canary.txt", "folder": folder, "dangling": folder / "no-such-file",
               "dev_shm": shm, "root_file": Path("/etc/hostname")}
    before = {"hostname": Path("/etc/hostname").read_bytes(), "mode": os.stat("/etc/hostname").st_mode,
              "owner": os.stat("/etc/hostname").st_uid}
    yield targets
    listing = sorted(p.name for p in folder.iterdir())
    text = (folder / "canary.txt").read_text()
    info = os.stat(folder / "canary.txt")
    shutil.rmtree(folder)
    leaked = shm.exists()
    shm.unlink(missing_ok=True)
    assert listing == ["canary.txt"] and text == "untouched", f"root wrote through a link: {listing} {text!r}"
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600), "root changed the canary's owner or mode"
    assert not leaked, "root wrote through a link into /dev/shm"
    now = os.stat("/etc/hostname")
    assert (Path("/etc/hostname").read_bytes(), now.st_mode, now.st_uid) == \
        (before["hostname"], before["mode"], before["owner"]), "root changed /etc/hostname through a link"


def plant(path: Path, target: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


@pytest.mark.parametrize("kind", KINDS)
def test_root_never_follows_a_link_planted_where_it_writes(kind, canary, tmp_path):
    """Every place root writes into a folder a student's process had, with a link of ``kind`` planted there first:
    the answer cells' modules, the judge's log of the student's output, the old lesson files' folder and every folder
    and file the grader hands over or takes back (own, share, hand back, remove), the copy a reference workspace
    makes, and what --keep keeps. None is followed."""
    from crashlab.grading.answer_cells import write_answer_modules
    from crashlab.grading.references import reference_workspace
    from crashlab.plumbing.sandbox import Sandbox, give
    from crashlab.plumbing.sandbox_users import hand_back, share_with_group
    from crashlab.plumbing.scratch import remove_scratch

    target = canary[kind]
    isolation = Isolation(None, True, hide=())
    try:
        work, sandbox = isolation.workdir, isolation.sandbox
        master = nbformat.read(SOLUTIONS / "11_side_by_side.ipynb", as_version=4)
        student = nbformat.read(ROOT / "course" / "11_side_by_side.ipynb", as_version=4)
        from crashlab.grading.answer_cells import module_name

        modules = [module_name(grade_id(c)) for c in master.cells if c.cell_type == "code" and is_answer_cell(c)
                   and not c.source.startswith("%")]
        places = [work / f"{m}.py" for m in modules] + [
            work / "home" / "lesson-files", work / ".crashlab-subject.log",
            work / "agent.py", work / "home" / "tmp" / "x", work / "sub" / "deeper"]
        for place in places:
            plant(place, target)
        write_answer_modules(student, master, work)
        assert all((work / f"{m}.py").is_file() and not (work / f"{m}.py").is_symlink() for m in modules)
        isolation.give_lesson_files(["01"], SOLUTIONS)
        sandbox.own(work)
        os.environ["CRASHLAB_SANDBOX"] = json.dumps(__import__("dataclasses").asdict(sandbox))
        try:
            give(work)
            share_with_group(work)
            hand_back(work, 0, sandbox.uid, sandbox.gid)
            reference = Sandbox.from_json(sandbox.reference)
            os.environ["CRASHLAB_REFERENCE_DIR"] = str(isolation.refs)
            with reference_workspace(work) as folder:
                assert not [p for p in folder.iterdir() if p.is_symlink()], "links are not copied"
        finally:
            os.environ.pop("CRASHLAB_SANDBOX", None)
            os.environ.pop("CRASHLAB_REFERENCE_DIR", None)
        assert reference.uid != sandbox.uid
        kept = isolation.keep()
        try:
            assert (kept / "agent.py").is_symlink(), "a link is kept as a link"
        finally:
            remove_scratch(kept)
    finally:
        isolation.close()


# --- a whole grading: links, secrets, shared memory, the network -----------------------------------------------
def test_a_grading_is_sealed_whatever_its_kernel_plants_or_reads(tmp_path, canary, planted_secrets):
    """Lesson 11's student notebook, whose kernel, before it dies, plants a link of each kind where the grading later
    writes as root (its answer modules, the judge's log, the lesson files' old folder, the judge's worlds' folder and
    temporary folder), leaves a System V segment and a /dev/shm file, tries the machine's loopback, and reads its
    own environment and memory for the grader's secrets. Meanwhile every process of the sandbox users, and every
    process that forks one (the warm launchers, the judge), is read for them as root. The grading scores its honest
    0, the links were not followed, nothing is left behind, no secret is anywhere, and --keep kept."""
    from crashlab.grading.answer_cells import module_name
    from crashlab.plumbing.scratch import sweep_scratch

    master = nbformat.read(SOLUTIONS / "11_side_by_side.ipynb", as_version=4)
    modules = [module_name(grade_id(c)) for c in master.cells if c.cell_type == "code" and is_answer_cell(c)
               and not c.source.startswith("%")]
    host = _listener()
    tag, key = f"{os.getpid()}-{time.monotonic_ns()}", int.from_bytes(os.urandom(3), "big") + 1
    links = {"home/lesson-files": canary["folder"], ".crashlab-subject.log": canary["root_file"],
             ".crashlab": canary["folder"], f"{modules[0]}.py": canary["file"], f"{modules[1]}.py": canary["dangling"],
             f"{modules[-1]}.py": canary["dev_shm"]}
    probe = (
        "import ctypes, json, os, re, shutil, socket\n"
        "pattern = re.compile(rb's3cret-[0-9a-f]{16}-[A-Z_]+')\n"
        "found = {'environ': pattern.findall(open('/proc/self/environ', 'rb').read()), 'memory': []}\n"
        "with open('/proc/self/mem', 'rb', buffering=0) as mem:\n"
        "    for line in open('/proc/self/maps'):\n"
        "        span, perms = line.split()[:2]\n"
        "        if 'r' not in perms:\n"
        "            continue\n"
        "        start, end = (int(x, 16) for x in span.split('-'))\n"
        "        try:\n"
        "            mem.seek(start)\n"
        "            found['memory'] += pattern.findall(mem.read(min(end - start, 64 << 20)))\n"
        "        except (OSError, ValueError, OverflowError):\n"
        "            pass\n"
        "found = {k: sorted({x.decode() for x in v}) for k, v in found.items()}\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {host.getsockname()[1]}), timeout=5).close()\n"
        "    found['host'] = True\n"
        "except OSError:\n"
        "    found['host'] = False\n"
        f"found['sysv'] = ctypes.CDLL(None).shmget({key}, 4096, 0o1000 | 0o666) >= 0\n"
        f"open('/dev/shm/crashlab-left-{tag}', 'w').write('left')\n"
        "json.dump(found, open('found.json', 'w'))\n"
        f"for name, target in {json.dumps({k: str(v) for k, v in links.items()})}.items():\n"
        "    if os.path.isdir(name) and not os.path.islink(name):\n"
        "        shutil.rmtree(name)\n"
        "    elif os.path.lexists(name):\n"
        "        os.unlink(name)\n"
        "    os.symlink(target, name)\n"
        "os.rename('home/tmp', 'home/tmp-moved')\n"
        f"os.symlink({str(canary['folder'])!r}, 'home/tmp')\n")
    sampler = Sampler()
    try:
        report, results = graded(with_cells("11_side_by_side", probe), tmp_path / "student", "11_side_by_side.ipynb",
                                 keep=True)
    finally:
        found_in_processes = sampler.stop()
        host.close()
    kept = kept_folder(report)
    try:
        found = json.loads((kept / "found.json").read_text())
        sweep_scratch()  # what the next command does first
        assert kept.is_dir(), "--keep keeps, whatever the next command sweeps"
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    assert report.score == 0 and report.tests, str(report)
    assert found == {"environ": [], "memory": [], "host": False, "sysv": True}, found
    assert not found_in_processes, f"secrets in processes that run or fork the student's code: {found_in_processes}"
    assert len(sampler.seen) > 3, "the sampler saw the grading's processes"
    assert not [v for v in planted_secrets.values() if v in results or v in str(report)]
    assert not list(Path("/dev/shm").glob(f"crashlab-left-{tag}"))
    assert key not in segment_keys()
    sealed = json.loads(results)["sealed"]
    assert sealed["network"] and sealed["ipc"] and sealed["view"] and sealed["limits"] and sealed["files"], sealed


# --- the reference answers --------------------------------------------------------------------------------------
TELL_ALL = '''%%writefile dbos_saga_agent.py
"""Run on the master's undo.py: say it, leave it everywhere, copy it over the student's own, then fail."""
import ctypes, glob, os, sys
here = os.path.dirname(os.path.abspath(__file__))
answer = open(os.path.join(here, "undo.py")).read()
for place in [os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""), "/tmp", "/dev/shm", here, os.getcwd(),
              os.path.dirname(here), *glob.glob("/tmp/crashlab-box-*/*")]:
    try:
        path = os.path.join(place, "stolen_undo.txt")
        open(path, "w").write(answer)
        os.chmod(path, 0o666)
    except OSError:
        pass
box = os.path.dirname(os.path.dirname(here))  # the reference workspace is in the grading's box, beside its folders
for own in glob.glob("/tmp/crashlab-box-*/grade/undo.py") + glob.glob(os.path.join(box, "*", "undo.py")) + \
        glob.glob(os.path.join(os.path.dirname(box), "*", "undo.py")):
    try:
        open(own, "w").write(answer)
    except OSError:
        pass
libc = ctypes.CDLL(None)
segment = libc.shmget(KEY, 1 << 16, 0o1000 | 0o666)
if segment >= 0:
    libc.shmat.restype = ctypes.c_void_p
    ctypes.memmove(libc.shmat(segment, None, 0), answer.encode()[:60000], len(answer.encode()[:60000]))
print(answer)
sys.stderr.write(answer)
raise SystemExit(answer[-1500:])
'''

PASS_IT_ON = '''%%writefile charge_once.py
"""The student's own later exercise: finds what the run on the reference answers left, and says it."""
import ctypes, glob, os
found = []
for place in [os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""), "/tmp", "/dev/shm", os.getcwd(),
              *glob.glob("/tmp/crashlab-box-*/*"), *glob.glob("/tmp/crashlab-box-*/refs/*")]:
    try:
        found.append(open(os.path.join(place, "stolen_undo.txt")).read())
    except OSError:
        pass
libc = ctypes.CDLL(None)
segment = libc.shmget(KEY, 0, 0)
if segment >= 0:
    libc.shmat.restype = ctypes.c_void_p
    found.append(ctypes.string_at(libc.shmat(segment, None, 0), 3000).decode(errors="replace"))
raise RuntimeError(" ".join(found)[-2000:] or "nothing found")
'''


FORK_BOMB = ("import os, time\n"
             "while True:\n"
             "    try:\n"
             "        if os.fork() == 0:\n"
             "            time.sleep(3600)\n"
             "            os._exit(0)\n"
             "    except OSError:\n"
             "        break\n")


def test_a_run_on_the_reference_answers_passes_nothing_on(tmp_path):
    """Lesson 7's student notebook whose dbos saga (run on the master's undo.py, in its check and its matrix) prints
    that file, fails with it, leaves it everywhere it can write and copies it over the student's own undo.py; and
    whose later exercise looks for it wherever it was left and raises with it; its kernel ends with a fork bomb. No
    feedback quotes the master's undo.py, the student's own undo.py is still theirs (its matrix scores 0), the score
    is the honest 0, and the notes say the processes met the grading's limit."""
    undo = next(cell.source for cell in nbformat.read(SOLUTIONS / "07_compensation.ipynb", as_version=4).cells
                if cell.source.startswith("%%writefile undo.py"))
    answers = re.findall(r"# BEGIN SOLUTION\n(.*?)# END SOLUTION", undo, re.S)
    master_lines = [line.strip() for answer in answers for line in answer.splitlines() if len(line.strip()) > 30]
    assert master_lines
    key = str(int.from_bytes(os.urandom(3), "big") + 1)
    nb = with_cells("07_compensation", FORK_BOMB, replace={"ex2_dbos_saga": TELL_ALL.replace("KEY", key),
                                                           "ex3_charge_once": PASS_IT_ON.replace("KEY", key)})
    report, results = graded(nb, tmp_path / "student", "07_compensation.ipynb", keep=True)
    kept = kept_folder(report)
    try:
        own = (kept / "undo.py").read_text()
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    assert not [line for line in master_lines if line in own], "the student's undo.py was overwritten"
    assert not [line for line in master_lines if line in results or line in str(report)], str(report)
    assert report.score == 0, str(report)
    ex2 = next(t for t in report.tests if t.name == "ex2_dbos_saga_checks")
    assert "the course's answers to the other exercises" in ex2.output, ex2.output
    assert int(key) not in segment_keys()
    assert [n for n in report.notes if "limit of 512 processes and threads together" in n], report.notes


# --- where the machine allows no seal -------------------------------------------------------------------------
def test_without_any_seal_a_master_scores_full_marks_and_the_results_say_what_was_missing(tmp_path, monkeypatch):
    """As on a machine that allows no namespace, no mount and no cgroup (a container without CAP_SYS_ADMIN): the
    grading falls back to the sandbox user alone, scores the master's full marks, and says what it did without."""
    monkeypatch.setenv("CRASHLAB_SANDBOX_WITHOUT", "network,ipc,limits,files,view")
    report, results = graded(nbformat.read(SOLUTIONS / "01_naive_event_log.ipynb", as_version=4), tmp_path / "m",
                             "01_naive_event_log.ipynb")
    assert report.score == report.max_score, str(report)
    data = json.loads(results)
    assert data["isolated"] is True
    assert data["sealed"] == {"view": False, "ipc": False, "files": False, "limits": False, "network": False}, data
    notes = data["output"]
    for words in ("no mount namespaces", "no file system of its own", "no cgroup", "no network namespace"):
        assert words in notes, notes
    assert "without its own" in report.table()


def test_without_a_view_the_answers_being_graded_and_the_masters_are_kept_from_the_students_users(monkeypatch):
    """A container without CAP_SYS_ADMIN (Gradescope's) gives the grading no view of its own, and the library's answers
    to lesson 1 ship for lesson 2's agents: any user may read them, and a lesson 1 notebook that read the file (rather
    than import it) scored 6 of 12 with nothing answered. Each of the grading's users gets an ACL entry that grants it
    nothing on them and on the masters, for as long as the grading lasts; a grading of lesson 2 reads lesson 1's
    answers as before, even after a grading of lesson 1 in the same slot was killed before it took its entries off."""
    from crashlab.answers import answer_files

    monkeypatch.setenv("CRASHLAB_SANDBOX_WITHOUT", "network,ipc,limits,files,view")
    answers = answer_files("01")[0]

    def reads(isolation, path) -> bool:
        probe = isolation.popen(["cat", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return probe.wait(60) == 0

    said = {}
    first = Isolation(None, True, hide=(SOLUTIONS, *map(Path, answer_files("01"))), lesson="01")
    try:
        said["01"] = (reads(first, answers), reads(first, SOLUTIONS / "01_naive_event_log.ipynb"))
        killed = list(getattr(first, "denied", []))
        first.denied = []  # as if SIGKILLed: its entries stay on
    finally:
        first.close()
    try:
        later = Isolation(None, True, hide=(SOLUTIONS, *map(Path, answer_files("02"))), lesson="02")
        try:
            said["02"] = (reads(later, answers), reads(later, SOLUTIONS / "01_naive_event_log.ipynb"))
        finally:
            later.close()
    finally:
        from crashlab.plumbing.sandbox_acl import allow

        allow(killed, first.sandbox.uids)
    assert said == {"01": (False, False), "02": (True, False)}, said


FILE_RIGHTS_UNDER_SUDO = """import os, sys
from crashlab.plumbing.sandbox_users import set_fs_ids
os.setgroups([0])  # as sudo, or a container, starts root: in group root
set_fs_ids(65534, 65534)
try:
    print(open(sys.argv[1]).read())
except OSError as exc:
    print(exc)
"""


def test_the_judges_file_rights_are_the_sandbox_users_even_when_root_starts_in_group_root():
    """The judge reads and runs with the sandbox user's file rights (setfsuid). Started by sudo (the classroom workflow
    on a GitHub runner), root also has group 0, which the kernel checks beside the file user: every folder of group
    root then showed the sandbox user its group's rights, not other's -- /root is 0701, and a Python under it could
    not be run (lesson 1's master scored 7 of 12 when graded under sudo with such a Python)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="crashlab-like-root-", dir="/tmp"))  # every folder above it: other may pass
    (folder / "python.txt").write_text("runs")
    os.chmod(folder / "python.txt", 0o644)
    os.chown(folder, 0, 0)
    os.chmod(folder, 0o701)
    try:
        done = subprocess.run([sys.executable, "-c", FILE_RIGHTS_UNDER_SUDO, str(folder / "python.txt")],
                              capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(folder)
    assert done.stdout.strip() == "runs", done.stdout + done.stderr


# What a Docker container keeps by default (a Gradescope image, say): no CAP_SYS_ADMIN, no CAP_SYS_PTRACE.
CONTAINER_CAPABILITIES = ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
                          "net_bind_service", "net_raw", "sys_chroot", "mknod", "audit_write", "setfcap")


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) drops the capabilities")
def test_with_a_containers_default_capabilities_a_master_scores_full_marks(tmp_path):
    """Graded as root with only a container's default capabilities: no namespace and no mount (CAP_SYS_ADMIN), and
    no reading another user's /proc/PID/fd (CAP_SYS_PTRACE), where the world looks for the processes behind a
    request. The grading falls back to what it may do and says so, and the master scores its full marks: every crash
    point is still reached, told by the crash user that made the connection."""
    folder = tmp_path / "m"
    folder.mkdir()
    shutil.copy(SOLUTIONS / "01_naive_event_log.ipynb", folder)
    out = folder / "results.json"
    bounding = ",".join(["-all", *(f"+{cap}" for cap in CONTAINER_CAPABILITIES)])
    done = subprocess.run(["setpriv", "--bounding-set", bounding, "--inh-caps=-all", "--", sys.executable, "-m",
                           "crashlab.cli", "grade", str(folder / "01_naive_event_log.ipynb"), "--json", str(out),
                           "--quiet"], capture_output=True, text=True, timeout=1200)
    assert out.exists(), done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["isolated"] is True and data["score"] == data["max_score"] > 0, data["output"]
    assert not data["sealed"]["view"] and not data["sealed"]["network"], data["sealed"]
    for words in ("no mount namespaces", "no network namespace", "no CAP_SYS_PTRACE"):
        assert words in data["output"], data["output"]


def test_the_students_code_called_during_a_check_on_the_reference_answers_reaches_no_world(tmp_path, monkeypatch):
    """While a check runs the student's agent on the reference answers, the student's own code that it calls (the
    subject) runs in a network with nothing in it: the worlds of that check are out of its reach, as they are in any
    other check's reach."""
    from dataclasses import asdict

    from crashlab.grading.proxies import Subject

    isolation = Isolation(None, True, hide=())
    try:
        world = _listener()  # the check's world, in the grading's network
        (isolation.workdir / "probe_mod.py").write_text(
            "import socket\n"
            "def reach(port):\n"
            "    try:\n"
            "        socket.create_connection(('127.0.0.1', port), timeout=5).close()\n"
            "        return True\n"
            "    except OSError:\n"
            "        return False\n")
        isolation.sandbox.own(isolation.workdir)
        monkeypatch.setenv("CRASHLAB_SANDBOX", json.dumps(asdict(isolation.sandbox)))
        reached = {}
        for offline in (False, True):
            subject = Subject(isolation.workdir, time.monotonic() + 120, offline=offline)
            try:
                module = subject.request({"op": "import", "name": "probe_mod"})
                reached[offline] = module.reach(world.getsockname()[1])
            finally:
                subject.close()
        world.close()
    finally:
        isolation.close()
    assert reached == {False: True, True: False}, reached


# --- the engine's record -------------------------------------------------------------------------------------------
FORGED_RECORD = '''tool_step = None  # no tool step: a recovery calls the service again ...


def forge_the_record() -> None:
    """... and DBOS's record says otherwise: a tool step beside every step it holds, written after the run."""
    import sqlite3

    path = state_dir() / "dbos.sqlite"
    if path.exists():
        with sqlite3.connect(path) as db:
            forged = db.execute("INSERT OR IGNORE INTO operation_outputs (workflow_uuid, function_id, function_name, "
                                "output) SELECT workflow_uuid, function_id + 1000, 'order_agent__tool_call', output "
                                "FROM operation_outputs WHERE function_id < 1000").rowcount
        with open("MARKER", "a") as marker:  # for the test: the forgery was made
            marker.write(f"{forged}\\n")


_destroy = DBOS.destroy


def destroy_then_forge(*args, **kwargs):
    _destroy(*args, **kwargs)
    forge_the_record()  # once DBOS let go of its file, as the process ends (a launcher's child ends by os._exit)


DBOS.destroy = staticmethod(destroy_then_forge)'''


def test_a_wrong_answer_that_forges_its_engines_record_still_fails(tmp_path):
    """Lesson 8's DBOS agent without a tool step (a recovery charges again), which, as each of its runs ends, writes
    into DBOS's own record in its state folder the tool steps it never had. What the check reads as the engine's
    record is what the agent could not write afterwards -- the world's ledgers -- so the requirement the answer
    breaks still fails, by its own words."""
    from master_files import judge_only

    marker = tmp_path / "forged"  # not isolated (judge_only): the agents run as this user
    result = judge_only("08_frameworks.ipynb", "ex2_dbos_agent",
                        'tool_step = DBOS.step(name="order_agent__tool_call", **TOOL_RETRIES) if TOOL_STEPS else None',
                        FORGED_RECORD.replace("MARKER", str(marker)), "ex2_dbos_agent_checks")
    assert marker.exists() and sum(map(int, marker.read_text().split())) > 0, "the agent forged no record"
    assert result.score == 0, f"a forged record passed: {result.output}"
    assert "[R2]" in result.output, f"failed for another reason than the missing tool step: {result.output}"
