"""Screenshots of the documentation site for docs/images: the home page and IncrementalPFI's API
page, taken in headless Chromium from the built site served on a local port.

    python scripts/docs_screenshots.py [--site build/site] [--out docs/images]

Build the site first (``make docs``, or ``mkdocs build -d DIR`` and ``--site DIR``).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import threading
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

#: Page (below the site's root), the element to scroll to (None: the top) and the file name.
SHOTS = (
    ("", None, "site_home.png"),
    ("reference/explain/", "torchstream.explain.IncrementalPFI", "site_incremental_pfi.png"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default="build/site")
    parser.add_argument("--out", default="docs/images")
    parser.add_argument("--size", type=int, nargs=2, default=(1280, 900), metavar=("W", "H"))
    args = parser.parse_args()
    site = Path(args.site)
    if not (site / "index.html").is_file():
        raise SystemExit(f"error: no built site in {site} (run `make docs` first)")
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={args.size[0]},{args.size[1]}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        for page, element, name in SHOTS:
            driver.get(base + page)
            wait = WebDriverWait(driver, 30)
            wait.until(expected_conditions.presence_of_element_located((By.TAG_NAME, "h1")))
            if element is not None:
                target = wait.until(expected_conditions.presence_of_element_located(
                    (By.ID, element)))
                driver.execute_script("arguments[0].scrollIntoView(true); window.scrollBy(0, -70);",
                                      target)
                time.sleep(1.0)  # the header's title changes with the scroll, animated
            path = Path(args.out) / name
            driver.save_screenshot(str(path))
            print(f"{path}: {base + page}")
    finally:
        driver.quit()
        server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    main()
