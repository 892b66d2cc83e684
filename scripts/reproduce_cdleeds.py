"""Run the reproduction ``torchstream.reproductions.cdleeds`` (options: ``--help``), as
``python -m torchstream.reproductions.cdleeds`` does."""

from torchstream.reproductions.cdleeds import main

if __name__ == "__main__":
    main()
