"""The documentation site (``make docs``): it builds with ``mkdocs build --strict`` (a broken
link, a page missing from the navigation, a docstring mkdocstrings cannot read fails), every
user-guide page is there, the API reference renders every public class of every public
module, ``IncrementalPFI`` with its signature, and every notebook is a page with the figures and
outputs it was saved with. Needs the ``docs`` extra (``pip install -c constraints.txt -e
'.[docs]'``); skipped, saying so, without it.

The built site is then opened in headless Chromium (selenium, ``chromium`` and ``chromedriver``
on the PATH; skipped with the reason without them, failed instead when
``TORCHSTREAM_REQUIRE_BROWSER`` is set): the home page renders with the theme and its
navigation, the search finds ``IncrementalPFI`` and leads to its API page, which shows its
signature, a notebook's figures decode, and no page logs an error in the console. The guide's
code blocks are run by ``tests/test_docs_examples.py``."""

from __future__ import annotations

import functools
import html as html_lib
import http.server
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
MISSING = [m for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python",
                       "griffe", "mkdocs_jupyter")
           if importlib.util.find_spec(m.split(".")[0]) is None]
needs_docs = pytest.mark.skipif(
    bool(MISSING), reason=f"the docs extra is not installed (no {', '.join(MISSING)}): "
    "pip install -c constraints.txt -e '.[docs]'")

#: The user guide: one page per task, ``docs/guide/<slug>.md``, and a phrase its text must hold.
GUIDE = {
    "getting-started": "make run",
    "command-line": "torchstream run",
    "streams": "read_csv",
    "learners": "learn_one",
    "explaining": "IncrementalPFI",
    "drift": "DriftReporter",
    "feature-selection": "FIRES",
    "local-attributions": "LocalAttributor",
    "evaluation": "Evaluator",
    "tensorboard": "TensorBoardSink",
    "sweeps": "torchstream sweep",
    "scaling": "run_data_parallel",
    "gpus": "compile=True",
    "trust": "--trust-checkpoint",
    "reproductions": "torchstream reproduce",
    "benchmarks": "bench_explainers.py",
    "layout": "tests/test_layers.py",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built in strict mode into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    assert "WARNING" not in done.stderr, done.stderr[-5000:]
    return out


@needs_docs
def test_every_guide_page_is_written_built_and_in_the_navigation(site):
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    on_disk = {p.stem for p in (ROOT / "docs" / "guide").glob("*.md")}
    assert on_disk == set(GUIDE), "guide pages and GUIDE differ: update one of them"
    for slug, phrase in GUIDE.items():
        source = (ROOT / "docs" / "guide" / f"{slug}.md").read_text(encoding="utf-8")
        assert source.startswith("# ") and phrase in source, slug
        assert f"guide/{slug}.md" in nav, f"{slug} is not in the navigation"
        built = (site / "guide" / slug / "index.html").read_text(encoding="utf-8")
        assert "<h1" in built and len(built) > 10_000, slug


def _python_blocks(text: str) -> list[str]:
    return [textwrap.dedent(body) for _, body in
            re.findall(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M)]


def test_every_python_block_of_the_guide_compiles():
    blocks = {p.name: _python_blocks(p.read_text(encoding="utf-8"))
              for p in sorted((ROOT / "docs").rglob("*.md"))}
    assert sum(map(len, blocks.values())) >= 5
    for name, codes in blocks.items():
        for code in codes:
            compile(code, f"<{name}>", "exec")


def test_the_getting_started_example_is_the_readmes_which_runs():
    # tests/test_readme_python.py runs the README's blocks; the guide shows the same code
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Using it from Python\n"):]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    guide = (ROOT / "docs" / "guide" / "getting-started.md").read_text(encoding="utf-8")
    readme_blocks = _python_blocks(section)
    assert len(readme_blocks) == 2
    assert readme_blocks == _python_blocks(guide)[:2]


def _rendered_ids(site: Path) -> set[str]:
    ids: set[str] = set()
    for page in (site / "reference").rglob("index.html"):
        ids.update(re.findall(r'id="(torchstream(?:\.\w+)+)"', page.read_text(encoding="utf-8")))
    return ids


@needs_docs
def test_the_reference_renders_every_public_class(site):
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import api_pages
    finally:
        sys.path.pop(0)
    import griffe

    package = griffe.load("torchstream", search_paths=[str(ROOT)], resolve_aliases=True,
                          resolve_external=False)
    public_classes = {
        f"{module.path}.{name}"
        for module in [package, *api_pages._modules(package)]
        for name, member in module.members.items()
        if not isinstance(member, griffe.Alias) and member.is_class and member.is_public
        and not name.startswith("_")
    }
    assert "torchstream.explain.ipfi.IncrementalPFI" in public_classes
    assert len(public_classes) > 100

    def target(path: str) -> str:
        """Where the object rendered under ``path`` is defined; an entry that is no member of
        its parent (an attribute from a docstring's Attributes section) keeps its name."""
        obj: griffe.Object | griffe.Alias = package
        parts = path.split(".")[1:]
        for i, part in enumerate(parts):
            if part not in obj.all_members:
                return ".".join([obj.path, *parts[i:]])
            obj = obj.all_members[part]
        return obj.final_target.path if isinstance(obj, griffe.Alias) else obj.path

    # every subpackage has a page, in the navigation (named in mkdocs.yml or added at the end)
    home = (site / "index.html").read_text(encoding="utf-8")
    for uri in api_pages.pages(ROOT):
        page = Path(uri).with_suffix("")
        assert (site / page / "index.html").is_file(), uri
        assert f'href="{page}/"' in home, f"{uri} is not in the navigation"

    rendered = {target(i) for i in _rendered_ids(site)}
    missing = sorted(public_classes - rendered)
    assert not missing, f"public classes without a rendered entry: {missing}"


@needs_docs
def test_incremental_pfi_is_rendered_once_with_its_signature(site):
    ids = _rendered_ids(site)
    assert "torchstream.explain.IncrementalPFI" in ids
    assert "torchstream.explain.ipfi.IncrementalPFI" not in ids  # once, where it is imported
    page = (site / "reference" / "explain" / "index.html").read_text(encoding="utf-8")
    entry = page[page.index('id="torchstream.explain.IncrementalPFI"'):]
    text = re.sub(r"<[^>]+>", "", entry[:20_000])
    signature = re.search(r"IncrementalPFI\(\s*model_fn.*?\)", text, re.S)
    assert signature, text[:2000]
    for parameter in ("n_features", "alpha", "storage_size", "feature_groups", "compile"):
        assert parameter in signature.group(0)
    assert "Incremental permutation feature importance" in text
    # the docstring's reStructuredText became Markdown: no role left, the doctest is code
    assert ":class:" not in text and "[PFI]_" not in text
    assert "ipfi.as_dict()" in re.sub(r"<[^>]+>", "", entry[:60_000])


@needs_docs
def test_the_search_index_knows_incremental_pfi(site):
    index = (site / "search" / "search_index.json").read_text(encoding="utf-8")
    assert "reference/explain/#torchstream.explain.IncrementalPFI" in index


@needs_docs
def test_restructured_text_becomes_markdown():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from griffe_rst import markdown
    finally:
        sys.path.pop(0)
    text = ("Uses :class:`~torchstream.explain.IncrementalPFI` and :func:`torchstream.a.b` "
            "[PFI]_.\n\nParameters\n----------\nx\n    The input.\n\nA paragraph of prose.\n\n"
            "Algorithm::\n\n    code\n\n>>> 1 + 1\n2\n\nReferences\n----------\n"
            ".. [PFI] Someone (2023).")
    assert markdown(text) == (
        "Uses `IncrementalPFI` and `torchstream.a.b` [PFI].\n\nParameters\n----------\nx\n"
        "    The input.\n\nNotes\n-----\n\nA paragraph of prose.\n\nAlgorithm:\n\n    code\n\n"
        "Examples\n--------\n\n>>> 1 + 1\n2\n\nReferences\n----------\n[PFI] Someone (2023).")
    # a singular "Example" heading becomes "Examples"; a doctest under it gets no second one
    assert markdown("Example\n-------\n>>> 1\n1") == "Examples\n--------\n>>> 1\n1"


# ------------------------------------------------------------------------------------ notebooks

def _notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _outputs(notebook: dict, mime: str) -> list[str]:
    """Every output of ``mime`` in the notebook's code cells, as one string each; for
    ``"text/plain"`` the outputs shown as text: printed text, and results with no richer form
    (a table's HTML or a figure is shown instead of its text)."""
    out = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            value = data.get(mime)
            if mime == "text/plain":
                value = output.get("text") if output.get("output_type") == "stream" else (
                    value if set(data) == {"text/plain"} else None)
            if value is not None:
                out.append(value if isinstance(value, str) else "".join(value))
    return out


@needs_docs
def test_every_notebook_is_a_page_with_its_saved_outputs(site):
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 7
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    home = (site / "index.html").read_text(encoding="utf-8")
    for path in notebooks:
        notebook = _notebook(path)
        assert f"notebooks/{path.name}" in nav, f"{path.name} is not in the navigation"
        assert f'href="notebooks/{path.stem}/"' in home, path.name
        html = (site / "notebooks" / path.stem / "index.html").read_text(encoding="utf-8")
        # every saved figure is on the page, as saved (base64 of the PNG, line breaks aside)
        figures = _outputs(notebook, "image/png")
        assert figures, f"{path.name} has no figure"
        images = re.findall(r'<img [^>]*src="data:image/png;base64,([^"]+)"', html)
        assert len(images) == len(figures), path.name
        assert [png.replace("\n", "") for png in figures] == images, path.name
        # the first line of every output shown as text is on the page, and so is every table
        for text in _outputs(notebook, "text/plain"):
            first = text.strip().splitlines()[0] if text.strip() else ""
            assert html_lib.escape(first, quote=False)[:80] in html, (path.name, first)
        tables = _outputs(notebook, "text/html")
        assert html.count("<table") >= sum(t.count("<table") for t in tables), path.name
        # the markdown's title is the page's title, and the notebook itself is downloadable
        title = next(c for c in notebook["cells"] if c["cell_type"] == "markdown")
        heading = "".join(title["source"]).splitlines()[0].lstrip("# ").strip()
        assert re.search(r"<h1[^>]*>" + re.escape(html_lib.escape(heading, quote=False)), html)
        assert (site / "notebooks" / path.stem / path.name).read_bytes() == path.read_bytes()


@needs_docs
def test_the_notebook_hook_refuses_a_notebook_saved_without_its_outputs(tmp_path):
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import notebooks as hook
    finally:
        sys.path.pop(0)
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import Files

    ran = {"cell_type": "code", "execution_count": 1, "source": "1", "outputs": []}
    never = {"cell_type": "code", "execution_count": None, "source": "2", "outputs": []}
    failed = {"cell_type": "code", "execution_count": 3, "source": "1/0",
              "outputs": [{"output_type": "error", "ename": "ZeroDivisionError"}]}
    text = {"cell_type": "markdown", "source": "# t"}
    assert hook.unexecuted_cells({"cells": [text, ran]}) == []
    assert hook.unexecuted_cells({"cells": [text, ran, never, failed]}) == [
        "code cell 1: never run (no execution count)", "code cell 2: ended in an error"]

    (tmp_path / "notebooks").mkdir()
    config = types.SimpleNamespace(config_file_path=str(tmp_path / "mkdocs.yml"),
                                   site_dir=str(tmp_path / "site"), use_directory_urls=True)
    (tmp_path / "notebooks" / "good.ipynb").write_text(json.dumps({"cells": [text, ran]}))
    files = hook.on_files(Files([]), config)
    assert [f.src_uri for f in files] == ["notebooks/good.ipynb"]
    assert files.src_uris["notebooks/good.ipynb"].abs_src_path == str(
        tmp_path / "notebooks" / "good.ipynb")
    (tmp_path / "notebooks" / "bad.ipynb").write_text(json.dumps({"cells": [text, never]}))
    with pytest.raises(PluginError, match=r"notebooks/bad.ipynb is not saved executed.*code "
                                          r"cell 0: never run"):
        hook.on_files(Files([]), config)


def test_the_docs_extra_is_pinned():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]
    pinned = {re.split(r"==", line)[0].strip().lower().replace("_", "-")
              for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
              if "==" in line and not line.startswith("#")}
    names = [re.split(r"[<>=!~;\[ ]", r)[0].lower().replace("_", "-") for r in extras["docs"]]
    assert "mkdocs-jupyter" in names
    assert not [n for n in names if n not in pinned], "pin the docs extra in constraints.txt"


# ---------------------------------------------------------------------- the site in a browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
BROWSER_MISSING = [name for name, found in (
    ("selenium", importlib.util.find_spec("selenium") is not None),
    ("chromium", CHROMIUM is not None), ("chromedriver", CHROMEDRIVER is not None)) if not found]
needs_browser = pytest.mark.skipif(
    bool(BROWSER_MISSING) and not os.environ.get("TORCHSTREAM_REQUIRE_BROWSER"),
    reason=f"no headless browser: {', '.join(BROWSER_MISSING)} not installed")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser(site):
    """(driver, base URL): headless Chromium on the built site, served over HTTP on a free
    port (the search runs in a web worker that fetches the index, which needs HTTP)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        driver.quit()
        server.shutdown()


def _errors(driver) -> list[str]:
    """The browser console's errors since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@needs_docs
@needs_browser
def test_the_home_page_renders_in_a_browser(browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver, base = browser
    driver.get(base)
    heading = WebDriverWait(driver, 30).until(ec.visibility_of_element_located((By.TAG_NAME, "h1")))
    assert heading.text.strip() and heading.size["height"] > 0
    assert driver.title.endswith("torchstream")
    # Material's script ran: it marks the page as having JavaScript and builds the navigation
    assert "js" in driver.find_element(By.TAG_NAME, "html").get_attribute("class").split()
    sections = {e.get_attribute("textContent").strip()
                for e in driver.find_elements(By.CSS_SELECTOR, ".md-nav__item--section > label")}
    assert {"User guide", "Notebooks", "API reference"} <= sections, sections
    # the stylesheet applied: the header is the theme's coloured bar at the top
    header = driver.find_element(By.CSS_SELECTOR, "header.md-header")
    assert header.is_displayed() and header.location["y"] == 0 and header.size["height"] > 30
    assert driver.execute_script(
        "return getComputedStyle(arguments[0]).backgroundColor", header) != "rgba(0, 0, 0, 0)"
    assert not _errors(driver)


@needs_docs
@needs_browser
def test_the_search_finds_incremental_pfi_and_its_page_shows_the_signature(browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver, base = browser
    driver.get(base)
    wait = WebDriverWait(driver, 30)
    # the header's search box (at this width it is in the header; a click opens the results)
    box = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "input.md-search__input")))
    box.click()
    box.send_keys("IncrementalPFI")
    # a result links to the class's entry on the API page (the search adds ?h=<query>)
    anchor = "#torchstream.explain.IncrementalPFI"
    hit = wait.until(ec.visibility_of_element_located((
        By.CSS_SELECTOR,
        f'.md-search-result__list a[href*="/reference/explain/"][href$="{anchor}"]')))
    assert "IncrementalPFI" in hit.text
    hit.click()

    wait.until(lambda d: "/reference/explain/" in d.current_url
               and d.current_url.endswith(anchor))
    entry = wait.until(ec.presence_of_element_located(
        (By.ID, "torchstream.explain.IncrementalPFI")))
    assert "IncrementalPFI" in entry.text
    # the signature block right after the heading, laid out and visible on the page
    signature = entry.find_element(By.XPATH, "following::div[contains(@class, 'doc-signature')]")
    assert signature.is_displayed() and signature.size["height"] > 20
    text = " ".join(signature.text.split())
    assert re.match(r"IncrementalPFI\( model_fn: .*\)$", text), text
    for parameter in ("loss", "n_features", "alpha: float = 0.001", "storage_size: int = 100",
                      "feature_groups", "compile: bool = False"):
        assert parameter in text, (parameter, text)
    assert not _errors(driver)


@needs_docs
@needs_browser
def test_a_notebook_page_shows_its_figures(browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver, base = browser
    driver.get(base + "notebooks/01_quickstart/")
    WebDriverWait(driver, 30).until(ec.presence_of_element_located((By.TAG_NAME, "h1")))
    figures = _outputs(_notebook(ROOT / "notebooks" / "01_quickstart.ipynb"), "image/png")
    images = driver.find_elements(By.CSS_SELECTOR, "img[src^='data:image/png']")
    assert len(images) == len(figures)
    for image in images:  # decoded by the browser: a real picture, not a broken icon
        assert driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth",
                                     image) > 100
    assert not _errors(driver)
