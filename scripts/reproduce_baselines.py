"""Run the reproduction ``torchstream.reproductions.baselines`` (options: ``--help``), as
``python -m torchstream.reproductions.baselines`` does."""

from torchstream.reproductions.baselines import main

if __name__ == "__main__":
    main()
