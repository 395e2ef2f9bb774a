"""Each module's ``__all__`` lists exactly its public names.

Public = a function or class defined in the module whose name has no leading
underscore; ``__all__`` must name all of them and nothing that does not exist.
A package ``__init__`` curates: its names must exist and be importable.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

PACKAGES = ("ledger", "collector", "dashboard")


def _modules():
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        yield package_name
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            if ".pages" in info.name or info.name.endswith(("app", "__main__")):
                continue  # Streamlit scripts run top to bottom; they export nothing
            yield info.name


@pytest.mark.parametrize("module_name", sorted(set(_modules())))
def test_all_lists_exactly_the_public_names(module_name):
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module_name} has no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{module_name}.__all__ names what does not exist: {missing}"
    assert len(exported) == len(set(exported)), f"{module_name}.__all__ has duplicates"
    if module_name in PACKAGES or (module_name.count(".") == 1 and hasattr(module, "__path__")):
        return
    defined = {
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == module_name
    }
    unlisted = sorted(defined - set(exported))
    assert not unlisted, f"{module_name} defines public names missing from __all__: {unlisted}"
