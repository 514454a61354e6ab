"""``python -m jetstore``: the same as the ``jetstore`` command."""

from jetstore import main

if __name__ == "__main__":
    main()
