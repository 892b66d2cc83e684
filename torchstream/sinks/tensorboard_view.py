"""Serve a log directory with TensorBoard and look at it in a headless browser.

Used by the test that checks the explainer charts as a user sees them, and by the script that
makes the README's screenshot. Needs Chromium and its driver (Debian: ``apt-get install
chromium chromium-driver``) and the ``selenium`` package; :func:`browser_available` says whether
they are there.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["browser_available", "dashboard_text", "serve_tensorboard"]

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
DRIVER = ("chromedriver",)


def _which(names: Sequence[str]) -> str | None:
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    return None


def browser_available() -> bool:
    """Whether Chromium, ChromeDriver and selenium are installed."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return False
    return _which(CHROMIUM) is not None and _which(DRIVER) is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_tensorboard(logdir: str | Path, *, timeout: float = 120.0) -> Iterator[str]:
    """Start ``tensorboard --logdir`` on a free localhost port; yields its URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
         "--host", "127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        start = time.monotonic()
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"tensorboard exited with code {proc.returncode}: {err[-2000:]}")
            try:
                urllib.request.urlopen(f"{url}/data/runs", timeout=2).read()
                break
            except OSError:
                if time.monotonic() - start > timeout:
                    raise TimeoutError(f"tensorboard did not answer on {url} in {timeout} s") from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _driver(width: int, height: int) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = _which(CHROMIUM), _which(DRIVER)
    if binary is None or driver is None:
        raise RuntimeError("Chromium and chromedriver are needed (apt-get install chromium "
                           "chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=opts)


def dashboard_text(
    url: str,
    *,
    dashboard: str = "custom_scalars",
    wait_for: Sequence[str] = (),
    ready: Callable[[str], bool] | None = None,
    screenshot: str | Path | None = None,
    scroll_to: str | None = None,
    timeout: float = 90.0,
    size: tuple[int, int] = (1400, 1000),
) -> str:
    """Open a TensorBoard dashboard (``#custom_scalars``, ``#timeseries``, ...) headless, wait
    until every string of ``wait_for`` is on the page and ``ready(text)`` holds (charts render
    one after another), optionally scroll the first element
    whose text is ``scroll_to`` into view, save a screenshot, and return the page's text."""
    drv = _driver(*size)
    try:
        drv.get(f"{url}/#{dashboard}")
        start = time.monotonic()
        text = ""
        while True:
            text = drv.find_element("tag name", "body").text
            if all(w in text for w in wait_for) and (ready is None or ready(text)):
                break
            if time.monotonic() - start > timeout:
                missing = [w for w in wait_for if w not in text] or ["ready(text)"]
                raise TimeoutError(f"{missing} not on the {dashboard} dashboard after "
                                   f"{timeout} s; the page shows: {text[:500]!r}")
            time.sleep(1.0)
        if scroll_to is not None:
            from selenium.webdriver.common.by import By

            for el in drv.find_elements(By.XPATH, f"//*[normalize-space(text())='{scroll_to}']"):
                drv.execute_script("arguments[0].scrollIntoView({block: 'start'});", el)
                break
            time.sleep(1.5)  # let the charts redraw
        if screenshot is not None:
            Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
            drv.save_screenshot(str(screenshot))
        return text
    finally:
        drv.quit()
