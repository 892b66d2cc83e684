"""Run the reproduction ``torchstream.reproductions.erics`` (options: ``--help``), as
``python -m torchstream.reproductions.erics`` does."""

from torchstream.reproductions.erics import main

if __name__ == "__main__":
    main()
