"""Dependencies point one way: ``ledger`` below everything, the dashboard never reaching into the receiver.

Read from the source (every ``import`` statement, including those inside
functions, and every ``importlib.import_module("...")`` with a literal name),
so an import that only runs on one code path is caught too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# (package whose files are checked, module prefixes they must not import, the one exception allowed)
RULES = [
    ("ledger", ("collector", "dashboard"), ()),
    ("collector", ("dashboard",), ()),
    ("dashboard", ("collector",), ("collector.client",)),  # the dashboard reads through the one client only
]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in a file, relative ones resolved."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(package: str, forbidden: tuple[str, ...], allowed: tuple[str, ...]) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in imported_modules(path):
            if any(_matches(module, f) for f in forbidden) and not any(_matches(module, a) for a in allowed):
                out.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return out


@pytest.mark.parametrize(("package", "forbidden", "allowed"), RULES, ids=[r[0] for r in RULES])
def test_imports_point_one_way(package, forbidden, allowed):
    assert violations(package, forbidden, allowed) == []


def test_the_check_sees_imports_inside_functions_and_by_name(tmp_path, monkeypatch):
    """The rule above would pass vacuously if the scan missed these forms."""
    source = (
        "import importlib\n"
        "def later():\n"
        "    from collector.receiver.app import CollectorServer\n"
        "    from .. import receiver\n"
        "    importlib.import_module('collector.receiver.writer')\n"
    )
    fake = tmp_path / "dashboard" / "views"
    fake.mkdir(parents=True)
    (fake / "page.py").write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = violations("dashboard", ("collector",), ("collector.client",))
    assert found == [
        "dashboard/views/page.py:3 imports collector.receiver.app",
        "dashboard/views/page.py:3 imports collector.receiver.app.CollectorServer",
        "dashboard/views/page.py:5 imports collector.receiver.writer",
    ]
