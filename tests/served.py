"""The app as served for the tests: `python -m demo` in a subprocess on a free port (App), Debian's
Chromium, pages that leave a picture when a test fails in them, and the pocket app's first look at a cold
start. The session's servers and browser are fixtures in tests/conftest.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class App:
    """`python -m demo ARGS` (or `entry`: `python demo/app.py ARGS`) on a free port, torn down by pid (its own process only). The server answers
    at once and prepares its model in the background; ready=True also waits until the console says the
    model is ready (or could not be loaded)."""

    def __init__(self, args: list[str], log: Path, timeout: float = 180.0, ready: bool = True, env: dict | None = None,
                 entry: tuple[str, ...] = ("-m", "demo")):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = log
        env = dict(os.environ, HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False", **(env or {}))
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, *entry, "--port", str(self.port), *args], cwd=ROOT,
                                     env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        deadline = self.started + timeout
        self.answered = None  # seconds from start until the URL answered
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app exited ({self.proc.returncode}):\n{log.read_text()}")
            if self.answered is None:
                try:
                    with urllib.request.urlopen(self.url, timeout=2) as r:
                        if r.status == 200:
                            self.answered = time.monotonic() - self.started
                except OSError:
                    pass
            if self.answered is not None and (not ready or self.prepared()):
                return
            time.sleep(0.25)
        self.close()
        raise RuntimeError(f"the app did not answer within {timeout} s:\n{log.read_text()}")

    def prepared(self) -> bool:
        text = self.log.read_text()
        return " is ready" in text or "spec-arena: could not load" in text

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.prepared():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the app did not get ready within {timeout} s:\n{self.log.read_text()}")
            time.sleep(0.5)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def artifacts() -> Path:
    out = Path(os.environ.get("SPEC_ARENA_ARTIFACTS") or ROOT / "tests" / "artifacts")
    out.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("SPEC_ARENA_ARTIFACTS") and not (out / ".gitignore").exists():
        (out / ".gitignore").write_text("*\n")  # CI keeps them as artifacts; git never sees them
    return out


@contextmanager
def opened(browser, failure: str | None = None, size: tuple[int, int] | None = (1440, 1000)):
    """A new page (size: its viewport; None: Playwright's default), closed afterwards; when the test fails
    inside, its full picture goes to the artifacts as `failure`."""
    page = browser.new_page(**({"viewport": {"width": size[0], "height": size[1]}} if size else {}))
    try:
        yield page
    except Exception:
        if failure:
            page.screenshot(path=str(artifacts() / failure), full_page=True)
        raise
    finally:
        page.close()


def set_slider(page, elem_id: str, value: float) -> None:
    """Type the value into the slider's box until the slider itself shows it: a fill while the page is still
    starting up (or Settings still opening) is sometimes lost, and the event then runs with the old value."""
    from playwright.sync_api import expect

    box, bar = page.locator(f"#{elem_id} input[type=number]"), page.locator(f"#{elem_id} input[type=range]")
    for _ in range(3):
        box.fill(str(value))
        box.press("Enter")
        page.wait_for_timeout(300)  # the page's own change handlers settle (a Run at once read the old value)
        if float(bar.input_value()) == float(value):
            return
    expect(bar).to_have_value(str(value))


def first_look(browser, url: str) -> dict:
    """The page of a cold start while it prepares, on a desktop and a phone (screenshots of both)."""
    out = {}
    for size, name in (((1440, 1000), "app-pocket-preparing.png"), ((390, 844), "app-pocket-preparing-phone.png")):
        with opened(browser, "app-pocket-preparing-failure.png", size) as page:
            page.goto(url)  # no waiting for the model: this is the page while it prepares
            page.wait_for_selector("#preparing li:has-text('calibrating')", timeout=300_000)
            out[name] = {"run disabled": page.locator("#run").is_disabled(), "run": page.locator("#run").inner_text(),
                         "status": page.locator("#status").inner_text(),
                         "preparing": page.locator("#preparing").inner_text(),
                         "header": page.locator("#header").inner_text()}
            page.screenshot(path=str(artifacts() / name), full_page=False)
    return out
