"""``python -m pytest_slam.cli``: the ``slam`` command without its console script."""

from pytest_slam.cli import main

raise SystemExit(main())
