"""The long consumer-group trials (``groups_long``), deselected unless asked for."""

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long consumer-group trials run only when asked for (``-m groups_long``): deselected
    otherwise, whatever other ``-m`` expression is given."""
    if "groups_long" in (config.getoption("markexpr") or ""):
        return
    long = [item for item in items if item.get_closest_marker("groups_long")]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if not item.get_closest_marker("groups_long")]
