"""Run the reproduction ``torchstream.reproductions.fires`` (options: ``--help``), as
``python -m torchstream.reproductions.fires`` does."""

from torchstream.reproductions.fires import main

if __name__ == "__main__":
    main()
