"""What a person sees, in a real browser: headless Chromium (Debian's `chromium`, driven by Playwright) opens
the JupyterLab that `make lab` starts, runs lesson 1 with its master answers and the unanswered lesson 5 with
Run All, and opens the demo report at 1,024 px. Lesson 5 runs without its given demonstrations (tagged
``skip-when-grading`` and not ``uses-answers``), as tests/grading/test_student_notebooks.py runs every unanswered
notebook: they run the same code in the master, where nbval runs them in full, and what this window is for is what
Lab shows of an unanswered notebook -- Run All going past each exercise's placeholder, each stop one short line.

Checked as a person would: the kernel's name and state, every cell run, no error output (lesson 1) or only
short "finish exercise N" errors (lesson 5 unanswered), the timeline image shown at a sensible size, no empty
plot, no browser console errors (Run All's time is printed, never checked); the report's heatmaps fit the window with legible cell text and
name their lesson. Screenshots go to test-artifacts/browser/ (git-ignored). Skipped where Chromium is missing
(`.ci/run` installs it when it runs as root).
"""

from __future__ import annotations

import base64
import io
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import nbformat
import pytest

from crashlab.grading.build import SKIP_WHEN_GRADING_TAG, USES_ANSWERS_TAG
from crashlab.plumbing.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
JUPYTER = Path(sys.executable).parent / "jupyter"
CHROMIUM = Path(os.environ.get("CRASHLAB_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(os.environ.get("CRASHLAB_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "browser"
# The flags a headless Chromium needs here: without the background-networking ones it keeps trying to reach
# Google's services and logs every refused connection. Playwright adds --headless and a fresh user-data-dir.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
LESSON1, LESSON5 = "01_naive_event_log.ipynb", "05_temporal.ipynb"
# The display name `make setup` installs the course's kernel under (the notebooks carry the same: test_lab holds it).
KERNEL = re.search(r'--display-name "([^"]+)"', (ROOT / "Makefile").read_text()).group(1)
LAB_VIEWPORT = {"width": 1280, "height": 1000}
FOLDER = {LESSON1: "lesson01", LESSON5: "lesson05"}  # a folder each: a kernel writes its agents and worlds there
# Seconds before the test stops waiting for Run All: a guard against a hang, far above a Run All on 2 busy cores (each
# one's time is printed; how fast it is, is no test's business: the README gives the figures).
RUN_ALL_BOUND = {LESSON1: 400, LESSON5: 400}
# Console errors a person would not see and that say nothing about the course; each one listed with why.
# None seen with JupyterLab 4.6.6 and Chromium 156; add (pattern, why) pairs here, never a blanket pattern.
BENIGN_CONSOLE: list[tuple[str, str]] = [
]

if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run installs it as root)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Python playwright is not installed (the test extra)")


def shot(page, name: str, **kwargs) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), **kwargs)
    print(f"\nscreenshot: {path}")
    return path


def answered(course: Path, master: Path) -> nbformat.NotebookNode:
    """The student notebook with every answer cell holding the master's answer (markers dropped): what a
    learner who finished the lesson has in front of them."""
    nb = nbformat.read(course, as_version=4)
    answers = {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in nbformat.read(master, as_version=4).cells
               if cell.metadata.get("nbgrader", {}).get("solution")}
    filled = 0
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
            cell.source = "\n".join(line for line in answers[grade_id].splitlines()
                                    if line.strip() not in ("# BEGIN SOLUTION", "# END SOLUTION"))
            filled += 1
    assert filled == len(answers) > 0, f"{course.name}: {filled} of {len(answers)} answer cells found"
    return nb


def without_given_demonstrations(course: Path) -> nbformat.NotebookNode:
    """The student notebook less its given demonstrations: the long runs of given code that nbval runs in full over
    the master (the build's own rule: running them over a student notebook checks nothing new). The cells that
    run an answer (``uses-answers``) stay: unanswered, each must stop at once with one line."""
    nb = nbformat.read(course, as_version=4)
    kept = [c for c in nb.cells if not (SKIP_WHEN_GRADING_TAG in c.metadata.get("tags", [])
                                         and USES_ANSWERS_TAG not in c.metadata.get("tags", []))]
    assert len(kept) < len(nb.cells), f"{course.name}: no given demonstration found (tags changed?)"
    nb.cells = kept
    return nb


# --- one Lab server and one browser for the whole module ----------------------------------------------------

@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab started with `make lab`'s own flags, on a scratch copy of the notebooks (the repository is
    never written), a free port and a token. Each notebook gets a folder of its own, as its kernel writes its
    agents and worlds next to it. Stopped at the end: its kernels through its API, then its process group
    (only what this fixture started)."""
    scratch = tmp_path_factory.mktemp("lab")
    notebooks = scratch / "notebooks"
    (notebooks / FOLDER[LESSON1]).mkdir(parents=True)
    (notebooks / FOLDER[LESSON5]).mkdir()
    nbformat.write(answered(ROOT / "course" / LESSON1, ROOT / "solutions" / LESSON1),
                   notebooks / FOLDER[LESSON1] / LESSON1)
    nbformat.write(without_given_demonstrations(ROOT / "course" / LESSON5), notebooks / FOLDER[LESSON5] / LESSON5)

    lab_command = subprocess.run(["make", "-s", "-n", "lab"], cwd=ROOT, capture_output=True, text=True, check=True)
    args = lab_command.stdout.strip().splitlines()[-1].split()[2:]  # after ".venv/bin/jupyter lab"
    assert any(a.startswith("--notebook-dir=") for a in args), args
    args = [f"--notebook-dir={notebooks}" if a.startswith("--notebook-dir=") else a for a in args]
    port, token = free_port(), secrets.token_hex(16)
    # A learner's saved workspaces or settings must not change what this Lab shows.
    env = {**os.environ, "JUPYTERLAB_WORKSPACES_DIR": str(scratch / "workspaces"),
           "JUPYTERLAB_SETTINGS_DIR": str(scratch / "settings"), "JUPYTER_RUNTIME_DIR": str(scratch / "runtime")}
    log_path = scratch / "lab.log"
    log = open(log_path, "wb")
    started = time.monotonic()
    process = subprocess.Popen([str(JUPYTER), "lab", *args, "--no-browser", f"--ServerApp.port={port}",
                                f"--IdentityProvider.token={token}"],
                               cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    api = httpx.Client(base_url=base, headers={"Authorization": f"token {token}"}, timeout=10)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"Lab exited ({process.returncode}): {log_path.read_text()[-800:]}"
            assert time.monotonic() < deadline, f"Lab did not answer within 60 s: {log_path.read_text()[-800:]}"
            try:
                if api.get("/api/status").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        print(f"\nLab up in {time.monotonic() - started:.1f} s")
        yield {"base": base, "token": token, "notebooks": notebooks}
    finally:
        try:
            for session in api.get("/api/sessions").json():
                api.delete(f"/api/sessions/{session['id']}")
        except (httpx.HTTPError, ValueError):
            pass
        api.close()
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class Console:
    """Every console error and uncaught page error, less the known-benign ones."""

    def __init__(self, page):
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def real(self) -> list[str]:
        return [e for e in self.errors if not any(re.search(pattern, e) for pattern, _why in BENIGN_CONSOLE)]


# --- driving Lab --------------------------------------------------------------------------------------------

def kernel_state(page) -> dict:
    return page.evaluate("""() => ({
        name: document.querySelector('.jp-Toolbar-kernelName')?.innerText.trim(),
        status: document.querySelector('#jp-main-statusbar')?.innerText,
        indicator: document.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status'),
        prompts: [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
                 .map(p => p.textContent.trim()),
    })""")


def menu(page, top: str, item: str) -> None:
    """Click a menu of Lab's menu bar, then one of its items, by the words a person reads."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()


class Notebook:
    """One notebook, open in a Lab window of its own (a workspace of its own), its kernel started."""

    def __init__(self, browser, lab, name: str, bound: float):
        """Open the notebook's URL; :meth:`ready` waits for it."""
        self.name, self.bound = name, bound
        self.path = lab["notebooks"] / FOLDER[name] / name
        self.page = browser.new_page(viewport=LAB_VIEWPORT)
        self.console = Console(self.page)
        self.opening = time.monotonic()
        self.page.goto(f"{lab['base']}/lab/workspaces/{FOLDER[name]}/tree/{FOLDER[name]}/{name}?token={lab['token']}",
                       wait_until="commit")
        self.done: list[float | None] = []  # per code cell: when its execution count appeared, after Run All
        self.seconds: float | None = None
        self.timed_out = False
        self._started_running = False
        self._settled = 0

    def ready(self) -> "Notebook":
        """Wait (bounded) for the notebook's cells and its kernel: '{KERNEL} | Idle' in the status bar."""
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        while True:
            self.state = state = kernel_state(self.page)
            if state["indicator"] == "idle" and f"{KERNEL} | Idle" in (state["status"] or ""):
                break
            assert time.monotonic() - self.opening < 60, \
                f"{self.name}: the kernel is not '{KERNEL} | Idle' 60 s after opening: {state}"
            time.sleep(0.3)
        self.opened = time.monotonic() - self.opening
        self.kernel = state["name"]
        self.page.keyboard.press("Control+b")  # hide the file browser: more of the notebook in the screenshots
        return self

    def run_all(self) -> None:
        menu(self.page, "Run", "Run All Cells")
        self.started = time.monotonic()
        self.state = kernel_state(self.page)

    def poll(self) -> bool:
        """True once Run All has finished (the kernel idle across three polls, not the gap between two cells)
        or run past its bound. Lab 4.6 shows a queued cell as `[ ]:`, so the kernel's state is what counts."""
        if self.seconds is not None or self.timed_out:
            return True
        self.state = state = kernel_state(self.page)
        now = time.monotonic() - self.started
        self.done += [None] * (len(state["prompts"]) - len(self.done))
        for k, prompt in enumerate(state["prompts"]):
            if self.done[k] is None and re.fullmatch(r"\[\d+\]:", prompt):
                self.done[k] = now
        busy = state["indicator"] != "idle" or any("*" in p for p in state["prompts"])
        # Not finished before it started: the first cell may reach the kernel a moment after the click.
        self._started_running = self._started_running or busy or any(t is not None for t in self.done)
        self._settled = self._settled + 1 if self._started_running and not busy else 0
        if self._settled >= 3:
            self.seconds = now
        elif now > self.bound:
            self.timed_out = True
        return self.seconds is not None or self.timed_out

    def save(self) -> nbformat.NotebookNode:
        """File → Save Notebook, then the notebook as Lab wrote it: the outputs exactly as the person saw them."""
        before = self.path.stat().st_mtime_ns
        menu(self.page, "File", "Save Notebook")
        deadline = time.monotonic() + 30
        while self.path.stat().st_mtime_ns == before:
            assert time.monotonic() < deadline, f"{self.name} was not saved within 30 s"
            time.sleep(0.2)
        time.sleep(0.3)
        self.nb = nbformat.read(self.path, as_version=4)
        return self.nb

    def slowest(self, n: int = 4) -> str:
        """The cells that took longest, with their first line: where Run All's time went."""
        spans, last = [], 0.0
        for (i, cell), t in zip(code_cells(self.nb), self.done):
            if t is not None:
                spans.append((t - last, i, cell.source.splitlines()[0] if cell.source else ""))
                last = t
        return "; ".join(f"cell {i} {s:.0f} s ({line[:40]})" for s, i, line in sorted(spans, reverse=True)[:n])

    def show_cell(self, index: int) -> None:
        """Scroll a cell to the top of the notebook panel. Lab lays off-screen cells out lazily
        (content-visibility), so heights change as cells come into view: scroll, let it settle, again."""
        cell = self.page.locator(".jp-Notebook .jp-Cell").nth(index)
        for _ in range(3):
            cell.evaluate("c => c.scrollIntoView({block: 'start'})")
            self.page.wait_for_timeout(300)

    def show_output(self, index: int) -> None:
        """Scroll so that a cell's output ends at the bottom of the window: the code above it, the output."""
        output = self.page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-Cell-outputArea")
        for _ in range(3):
            output.evaluate("o => o.scrollIntoView({block: 'end'})")
            self.page.wait_for_timeout(300)

    def images(self, cell_index: int | None = None) -> list[dict]:
        scope = self.page.locator(".jp-Notebook")
        if cell_index is not None:
            scope = scope.locator(".jp-Cell").nth(cell_index)
        images = scope.locator(".jp-OutputArea-output img")
        return [images.nth(k).evaluate(IMAGE_STATS) for k in range(images.count())]

    def common_problems(self, label: str) -> list[str]:
        """What any notebook must show after Run All: the course's kernel, idle; every cell run; no empty
        figure; no browser console error."""
        problems = []
        if self.kernel != KERNEL:
            problems.append(f"{label}: the toolbar shows kernel {self.kernel!r}, not {KERNEL!r}")
        if self.timed_out:
            ran = sum(t is not None for t in self.done)
            running = code_cells(self.nb)[ran][0] if ran < len(code_cells(self.nb)) else None
            problems.append(f"{label}: Run All did not finish within {self.bound:.0f} s: {ran} of {len(self.done)} "
                            f"code cells had run, still running: cell {running}")
        elif f"{KERNEL} | Idle" not in (self.state["status"] or ""):
            problems.append(f"{label}: the status bar does not say '{KERNEL} | Idle': {self.state['status']!r}")
        unrun = [i for i, c in code_cells(self.nb) if c.execution_count is None]
        if unrun and not self.timed_out:
            problems.append(f"{label}: cells Run All never ran (an error stopped it?): {unrun}")
        empty = [s for s in self.images() if empty_plot(s)]
        zero_axes = [i for i, c in code_cells(self.nb) for o in c.outputs
                     if "with 0 Axes" in o.get("data", {}).get("text/plain", "")]
        if empty or zero_axes:
            problems.append(f"{label}: empty plots: {empty}; figures with 0 axes in cells {zero_axes}")
        problems += [f"{label}: browser {error}" for error in self.console.real()]
        return problems

    def errors(self) -> list[tuple[int, str]]:
        return [(i, error_text(o)) for i, c in code_cells(self.nb) for o in c.outputs if o.output_type == "error"]


IMAGE_STATS = """img => {
    const canvas = document.createElement('canvas');
    canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
    const g = canvas.getContext('2d');
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, canvas.width, canvas.height).data;
    let ink = 0, colour = 0;
    for (let i = 0; i < d.length; i += 4) {
        const hi = Math.max(d[i], d[i + 1], d[i + 2]), lo = Math.min(d[i], d[i + 1], d[i + 2]);
        if (lo < 235) ink++;
        if (hi - lo > 60) colour++;
    }
    const r = img.getBoundingClientRect();
    const area = img.closest('.jp-OutputArea-output') || document.body;
    return {naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight, width: r.width, height: r.height,
            room: area.getBoundingClientRect().width, ink: ink / (d.length / 4), colour: colour / (d.length / 4),
            alt: img.alt, visible: r.width > 0 && r.height > 0};
}"""


def empty_plot(stats: dict) -> bool:
    """A figure with nothing drawn: blank, or only black-and-white axes (every plot of the course has colour)."""
    return stats["ink"] < 0.005 or stats["colour"] < 0.001


def error_text(output) -> str:
    text = "\n".join(output.get("traceback") or [f"{output.get('ename')}: {output.get('evalue')}"])
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def code_cells(nb):
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]


# --- the lessons --------------------------------------------------------------------------------------------

def lesson1_problems(lesson: Notebook) -> list[str]:
    label = "lesson 1 (master answers)"
    problems = lesson.common_problems(label)
    problems += [f"{label}: error output in cell {i}:\n{text[-1500:]}" for i, text in lesson.errors()]
    at = next(i for i, c in code_cells(lesson.nb) if c.source.startswith("timeline("))
    shown = lesson.images(at)
    if len(shown) != 1:
        problems.append(f"{label}: the timeline cell ({at}) shows {len(shown)} images, not 1")
    for t in shown:
        print(f"timeline image: {t['naturalWidth']}x{t['naturalHeight']} px, shown {t['width']:.0f} px wide "
              f"in an output area of {t['room']:.0f} px")
        if not (500 <= t["naturalWidth"] <= 2500 and 150 <= t["naturalHeight"] <= 1200):
            problems.append(f"{label}: the timeline is {t['naturalWidth']}x{t['naturalHeight']} px")
        if t["width"] > t["room"] + 1:
            problems.append(f"{label}: the timeline ({t['width']:.0f} px) is wider than its output area")
    if len(lesson.images()) < 2:
        problems.append(f"{label}: {len(lesson.images())} images; the timeline and the heatmap are expected")
    lesson.show_cell(at - 1)  # the sentence above the timeline, then the picture
    shot(lesson.page, "lesson01-master-answers-timeline.png")
    heatmap_at = next(i for i, c in code_cells(lesson.nb) if "matrix_heatmap(" in c.source)
    lesson.show_cell(heatmap_at - 2)  # the second crash matrix, its table and the heatmap
    shot(lesson.page, "lesson01-master-answers-end.png")
    return problems


def lesson5_problems(lesson: Notebook) -> list[str]:
    """Unanswered: Run All must end, every error a short 'finish exercise N' message, not a traceback (its time is
    printed)."""
    label = "lesson 5 (unanswered)"
    problems = lesson.common_problems(label)
    errors = lesson.errors()
    long = [(i, text) for i, text in errors if len([line for line in text.splitlines() if line.strip()]) > 3
            or not re.search(r"exercise\s*\d", text, re.I)]
    print(f"{label}: {len(errors)} error outputs, {len(long)} not a short 'exercise N' message: " + "; ".join(
        f"cell {i}, {len(text.strip().splitlines())} lines, last: {text.strip().splitlines()[-1][:100]!r}"
        for i, text in long))
    problems += [f"{label}: cell {i} shows a {len(text.strip().splitlines())}-line error, not one short "
                 f"'finish exercise N' line:\n{text[-1200:]}" for i, text in long]
    if errors:
        lesson.show_output(errors[0][0])  # the first exercise's check, its error under it
        shot(lesson.page, "lesson05-unanswered.png")
        short = [i for i, text in errors if (i, text) not in long]
        if short:
            lesson.show_output(short[0])  # a skipped demonstration: its one line under its code
            shot(lesson.page, "lesson05-unanswered-skipped-cells.png")
    else:
        shot(lesson.page, "lesson05-unanswered.png")
    return problems


def test_lab_runs_lesson1_answered_and_lesson5_unanswered(lab, browser):
    """Both notebooks run at once, in two Lab windows on one server: the test's wall time is the longer Run
    All, not the sum (both mostly wait on agents and servers)."""
    lessons = []
    try:
        for name in (LESSON1, LESSON5):  # the longer Run All first; each window loads alone (faster than both at once)
            lessons.append(Notebook(browser, lab, name, RUN_ALL_BOUND[name]).ready())
            lessons[-1].run_all()
        while not all([lesson.poll() for lesson in lessons]):
            time.sleep(0.25)
        lesson1, lesson5 = lessons
        for lesson in lessons:
            lesson.save()
            print(f"\n{lesson.name}: opened in {lesson.opened:.1f} s, Run All "
                  f"{'over the bound' if lesson.timed_out else f'{lesson.seconds:.1f} s'}; slowest: {lesson.slowest()}")
        problems = lesson1_problems(lesson1) + lesson5_problems(lesson5)
    finally:
        for lesson in lessons:
            lesson.page.close()
    assert not problems, "\n\n".join(problems)


# --- the demo report ------------------------------------------------------------------------------------------

def demo_sections():
    """Matrices shaped like `crashlab demo`'s (every master's reference agents, their labels and crash points),
    with made-up counts: the report's layout is under test here, not the agents (the demo takes minutes). An agent
    whose points are inside a stream shows on the user's screen: its rows carry a screen audit (the naive one's with
    text shown twice), so the page's screen tables are laid out at 1,024 px too."""
    from crashlab.report.demo import reference_agents
    from crashlab.harness import BASELINE, Matrix, Row, resolve_points
    from crashlab.world.screen_audit import ScreenAudit

    sections = []
    for master, spec in reference_agents(ROOT / "solutions"):
        points = resolve_points(spec.get("crash_points", "all"))
        observe = spec.get("expect") == "observe"
        rows = [Row(BASELINE, True, {"charge": 1, "reservation": 1, "confirmation": 1}, 0, 4, 0, True, None)]
        for k, point in enumerate(points):
            duplicates = int(observe and point.startswith("after:") and not point.startswith("after:model"))
            repeated = int(point.startswith("after:model#") or (observe and k % 3 == 0))
            reached = point != "before:model#4" or not observe
            problems = [f"{point}: {duplicates} duplicate(s)"] if duplicates and not observe else []
            rows.append(Row(point, reached, {"charge": 1, "reservation": 1, "confirmation": 1 + duplicates},
                            duplicates, 4 + repeated, repeated, k % 5 != 4 or not observe, 1.2 + k / 10,
                            problems=problems))
        if any("@chunk" in point for point in points):
            for row in rows:
                twice = ['"Order ORD-8842 is complete: the card was charged"'] if observe and row.point != BASELINE else []
                row.screen = ScreenAudit("ORD-8842", shows=26, retractions=int(not observe and row.point != BASELINE),
                                         shown_twice=twice)
        sections.append((f"{master.stem[:2]} {spec['title']}", Matrix(spec["agent"], "ORD-8842", spec["expect"],
                                                                         rows, 30.0)))
    return sections


def png_dpi(src: str) -> float:
    from PIL import Image

    data = base64.b64decode(src.split(",", 1)[1])
    return float(Image.open(io.BytesIO(data)).info.get("dpi", (100, 100))[0])


def names_lesson(alt: str, label: str) -> bool:
    number, title = label[:2], label[3:]
    return bool(re.search(rf"lesson\s*0?{int(number)}\b|\b{number}\b", alt, re.I)) or title.lower() in alt.lower()


def test_demo_report_heatmaps_fit_1024px_and_name_their_lesson(browser, tmp_path):
    from crashlab.report import write_report

    started = time.monotonic()
    sections = demo_sections()
    report = write_report(tmp_path / "crashlab-demo.html", sections,
                          "Durable agents: every lesson under the crash harness")
    written = time.monotonic() - started
    page = browser.new_page(viewport={"width": 1024, "height": 768})
    console = Console(page)
    try:
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        heatmaps = page.locator("img.heatmap")
        if heatmaps.count() == 0:  # the report before heatmaps had a class: the one image whose alt says so
            heatmaps = page.locator("img[alt*='heatmap' i]")
        count = heatmaps.count()
        assert count >= 1, "the report shows no heatmap"
        found = []
        for k in range(count):
            image = heatmaps.nth(k)
            stats = image.evaluate(IMAGE_STATS)
            stats["dpi"] = png_dpi(image.get_attribute("src"))
            found.append(stats)
        page_width = page.evaluate("() => ({scroll: document.documentElement.scrollWidth, inner: innerWidth})")
        print(f"\nreport: written in {written:.1f} s, {count} heatmap(s): " + ", ".join(
            f"{s['naturalWidth']}x{s['naturalHeight']} px at {s['dpi']:.0f} dpi shown {s['width']:.0f} px "
            f"({s['width'] / s['naturalWidth'] * s['dpi'] / 72:.2f} px/pt) alt={s['alt']!r}" for s in found))
        shot(page, "report-1024-top.png")
        heatmaps.first.evaluate("img => img.scrollIntoView({block: 'start'})")
        shot(page, "report-1024-first-heatmap.png")
        shot(page, "report-1024-full.png", full_page=True)

        assert page_width["scroll"] <= page_width["inner"], f"the report scrolls sideways at 1,024 px: {page_width}"
        for s in found:
            assert s["visible"], f"a heatmap is not displayed: {s}"
            assert s["width"] <= 1024, f"a heatmap is wider than the window: {s}"
            assert s["naturalWidth"] >= 200 and s["naturalHeight"] >= 100, f"a heatmap too small to read: {s}"
            assert not empty_plot(s), f"an empty heatmap: {s}"
            # Matplotlib sizes text in points. Shown at under 0.85 CSS px per point, even 8 pt cell text falls below
            # 7 px: too small to read. (The old report's one 3,022-px heatmap of every lesson, shrunk to the
            # window: 0.38 px/pt, 8 pt text at 3 px. The report drawn per lesson: 1.39 px/pt.)
            px_per_pt = s["width"] / s["naturalWidth"] * s["dpi"] / 72
            assert px_per_pt >= 0.85, (
                f"heatmap {s['alt']!r}: {s['naturalWidth']} px wide at {s['dpi']:.0f} dpi, shown {s['width']:.0f} px "
                f"wide: {px_per_pt:.2f} CSS px per point, 8 pt text at {8 * px_per_pt:.1f} px")
        unnamed = [label for label, _ in sections if not any(names_lesson(s["alt"], label) for s in found)]
        assert not unnamed, f"no heatmap's alt text names these lessons: {unnamed} (alts: {[s['alt'] for s in found]})"
        assert not console.real(), "browser console errors:\n" + "\n".join(console.real())
    finally:
        page.close()
