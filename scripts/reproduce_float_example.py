"""Run the reproduction ``torchstream.reproductions.float_example`` (options: ``--help``), as
``python -m torchstream.reproductions.float_example`` does."""

from torchstream.reproductions.float_example import main

if __name__ == "__main__":
    main()
