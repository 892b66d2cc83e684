"""Run the reproduction ``torchstream.reproductions.ipfi`` (options: ``--help``), as
``python -m torchstream.reproductions.ipfi`` does."""

from torchstream.reproductions.ipfi import main

if __name__ == "__main__":
    main()
