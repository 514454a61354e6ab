"""``python -m jetstore``: the same as the ``jetstore`` command."""

from ._app import main

if __name__ == "__main__":
    main()
