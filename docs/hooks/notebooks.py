"""MkDocs hook: the notebooks of ``notebooks/`` as pages of the site, with their saved outputs.

The notebooks live at the repository's root (where JupyterLab opens them and the test suite runs
them), not in ``docs/``; this hook adds each ``notebooks/*.ipynb`` to the site's files before the
mkdocs-jupyter plugin turns ``.ipynb`` files into pages. The site shows the outputs saved in the
notebook (nothing is executed at build time, so the build stays fast and needs no data set); a
notebook with a code cell that was never run, or that ended in an error, fails the build, naming
the notebook and the cell. Every notebook needs an entry in the navigation (``mkdocs.yml``): the
strict build fails on one that has none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

FOLDER = "notebooks"


def unexecuted_cells(notebook: dict[str, Any]) -> list[str]:
    """What keeps a notebook from being shown as saved: each code cell (counted from 0) that
    has no execution count or has an error output, as ``"code cell N: why"``."""
    problems = []
    code = [cell for cell in notebook.get("cells", []) if cell.get("cell_type") == "code"]
    for i, cell in enumerate(code):
        if cell.get("execution_count") is None:
            problems.append(f"code cell {i}: never run (no execution count)")
        elif any(out.get("output_type") == "error" for out in cell.get("outputs", [])):
            problems.append(f"code cell {i}: ended in an error")
    return problems


@event_priority(50)  # before mkdocs-jupyter's on_files (priority 0) wraps the .ipynb files
def on_files(files: Files, config: MkDocsConfig, **kwargs: Any) -> Files:
    root = Path(config.config_file_path).parent
    for path in sorted((root / FOLDER).glob("*.ipynb")):
        problems = unexecuted_cells(json.loads(path.read_text(encoding="utf-8")))
        if problems:
            raise PluginError(
                f"{FOLDER}/{path.name} is not saved executed, so the site would show it without "
                f"its outputs: {'; '.join(problems)}. Run it top to bottom in Jupyter and save.")
        files.append(File(f"{FOLDER}/{path.name}", src_dir=str(root), dest_dir=config.site_dir,
                          use_directory_urls=config.use_directory_urls))
    return files
