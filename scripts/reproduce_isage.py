"""Run the reproduction ``torchstream.reproductions.isage`` (options: ``--help``), as
``python -m torchstream.reproductions.isage`` does."""

from torchstream.reproductions.isage import main

if __name__ == "__main__":
    main()
