"""Run the reproduction ``torchstream.reproductions.ipdp`` (options: ``--help``), as
``python -m torchstream.reproductions.ipdp`` does."""

from torchstream.reproductions.ipdp import main

if __name__ == "__main__":
    main()
