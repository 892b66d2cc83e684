"""MkDocs hook: the API reference, written from the source tree at every build.

One page per public subpackage of ``torchstream`` (``reference/<name>.md``) and one for the
package's own modules (``reference/torchstream.md``). A page renders, with mkdocstrings, the
names its package exports (``__all__``), then a section for every public module below it (its
docstring, and the public names it defines that no package above it exports), so each public
class, function and constant is rendered once, under the path users import it from. Private
modules (a ``_`` in the path) are left out. The "API reference" section of the
navigation in ``mkdocs.yml`` orders the pages; a subpackage it does not name yet is added at its
end (the guide's pages have no such help: one missing from the navigation fails the build).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import griffe
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PACKAGE = "torchstream"


def _public(obj: griffe.Object | griffe.Alias) -> bool:
    return not any(part.startswith("_") for part in obj.path.split(".")[1:])


def _is_package(module: griffe.Module) -> bool:
    return module.is_package or module.is_subpackage


def _modules(package: griffe.Module) -> list[griffe.Module]:
    """The public modules below ``package``, depth first, by name."""
    out = []
    for name in sorted(package.modules):
        module = package.modules[name]
        if not _public(module):
            continue
        out.append(module)
        if _is_package(module):
            out.extend(_modules(module))
    return out


def _target(member: griffe.Object | griffe.Alias) -> str:
    return member.final_target.path if isinstance(member, griffe.Alias) else member.path


def _exports(package: griffe.Module, covered: set[str]) -> list[str]:
    """The names of ``package.__all__`` whose objects no package above renders; adds them."""
    names = []
    for name in package.exports or ():
        member = package.members.get(name)
        if member is None or _target(member) in covered:
            continue
        names.append(name)
        covered.add(_target(member))
    return names


def _defined(module: griffe.Module, covered: set[str]) -> list[str]:
    """The public names a module defines (or takes from a private module) that are not rendered
    elsewhere; adds them."""
    names = []
    for name, member in module.members.items():
        if name.startswith("_") or not member.is_public or member.is_module:
            continue
        if isinstance(member, griffe.Alias):
            try:
                target = member.final_target
            except griffe.AliasResolutionError:
                continue  # another package's object
            if _public(target) or not target.path.startswith(PACKAGE + "."):
                continue  # rendered where it is defined, or not ours
        if _target(member) in covered:
            continue
        names.append(name)
        covered.add(_target(member))
    return names


def _block(path: str, members: list[str] | bool, heading: bool) -> str:
    options = {
        "members": members if members else False,
        "show_root_heading": heading,
        "show_root_full_path": True,
        "show_submodules": False,
        "heading_level": 2,
    }
    lines = [f"::: {path}", "    options:"]
    lines += [f"      {key}: {_yaml(value)}" for key, value in options.items()]
    return "\n".join(lines) + "\n"


def _yaml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def page(package: griffe.Module, root: bool = False) -> str:
    """The Markdown of the reference page of ``package`` (``root``: the top-level package,
    whose own modules only; its subpackages have pages of their own)."""
    covered: set[str] = set()
    exports = ["__version__"] if root else _exports(package, covered)
    parts = [f"# `{package.path}`\n", _block(package.path, exports, heading=False)]
    modules = [m for m in package.modules.values()
               if not _is_package(m) and _public(m)] if root \
        else _modules(package)
    for module in sorted(modules, key=lambda m: m.path) if root else modules:
        members = _exports(module, covered) if _is_package(module) else []
        members += _defined(module, covered)
        parts.append(_block(module.path, members, heading=True))
    return "\n".join(parts)


def pages(source_root: Path) -> dict[str, str]:
    """``{reference/<name>.md: Markdown}`` for the package at ``source_root``."""
    package = griffe.load(PACKAGE, search_paths=[str(source_root)], resolve_aliases=True,
                          resolve_external=False)
    assert isinstance(package, griffe.Module)
    out = {f"reference/{PACKAGE}.md": page(package, root=True)}
    for name, sub in sorted(package.modules.items()):
        if _is_package(sub) and _public(sub):
            out[f"reference/{name}.md"] = page(sub)
    return out


REFERENCE = "API reference"
_pages: dict[str, str] = {}


def on_config(config: MkDocsConfig, **kwargs: Any) -> MkDocsConfig:
    _pages.clear()
    _pages.update(pages(Path(config.config_file_path).parent))
    section = next((item[REFERENCE] for item in config.nav or []
                    if isinstance(item, dict) and REFERENCE in item), None)
    if section is None:
        raise ValueError(f"mkdocs.yml: the navigation has no {REFERENCE!r} section")
    listed = {uri for item in section for uri in item.values()}
    for uri in _pages:
        if uri not in listed:
            section.append({f"{PACKAGE}.{Path(uri).stem}": uri})
    return config


def on_files(files: Files, config: MkDocsConfig, **kwargs: Any) -> Files:
    for uri, content in _pages.items():
        files.append(File.generated(config, uri, content=content))
    return files
