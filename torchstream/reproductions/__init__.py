"""Reproductions of published results, one module per paper.

Each module ``torchstream.reproductions.<name>`` has ``DATA`` (the shared data files it reads),
``reproduce(quick: bool) -> list[Comparison]`` and ``main()``; run one with
``torchstream reproduce <name>`` or ``python -m torchstream.reproductions.<name>``
(:mod:`torchstream.cli.reproduce` finds them with ``pkgutil``, so they work from an installed
package).
"""
