"""Run the reproduction ``torchstream.reproductions.dmt`` (options: ``--help``), as
``python -m torchstream.reproductions.dmt`` does."""

from torchstream.reproductions.dmt import main

if __name__ == "__main__":
    main()
