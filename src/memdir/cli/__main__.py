"""``python -m memdir.cli``: the same as the ``memdir`` command."""

from memdir.cli.main import main

main()
