"""``python -m torchstream.cli``: the ``torchstream`` command."""

from torchstream.cli import main

raise SystemExit(main())
