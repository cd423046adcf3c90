"""The path tables at the top of ARCHITECTURE.md name code that exists.

Each backticked ``file.py:Name`` or ``file.py:Class.method`` is looked up in the source
(a bare ``file.py`` is taken beside the previous one); a bare ``name`` after it is a
function of the same class or module, as the tables write ``A.run`` → ``_fire``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import salon

SRC = Path(salon.__file__).parent
DOC = SRC.parent.parent / "docs" / "ARCHITECTURE.md"
REF = re.compile(r"`([\w/]+\.py):([\w.]+)`|`(\w+)`")


def _definitions(path: Path) -> set[str]:
    """``name`` and ``Class.name`` for what the file defines."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}.{item.name}")
    return names


def _table_rows() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Three paths at a glance", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and ".py:" in line]


def _missing(row: str) -> list[str]:
    missing: list[str] = []
    place: Path | None = None
    owner = ""
    for match in REF.finditer(row.split(" | ", 1)[1]):
        file, name, bare = match.groups()
        if file is not None:
            place = (place.parent / file) if "/" not in file and place else SRC / file
            owner = name if "." not in name and name[0].isupper() else name.rpartition(".")[0]
            wanted = name
        elif place is not None and bare is not None and not bare[0].isupper():
            wanted = f"{owner}.{bare}" if owner else bare
        else:
            continue
        if not place.is_file() or wanted not in _definitions(place):
            missing.append(f"{place.relative_to(SRC) if place.is_file() else place}:{wanted}")
    return missing


def test_the_path_tables_name_code_that_exists() -> None:
    rows = _table_rows()
    assert len(rows) >= 20
    assert [m for row in rows for m in _missing(row)] == []


def test_a_name_that_does_not_exist_is_found() -> None:
    assert _missing("| x | `agent/dispatch.py:Agent.submit` → `_no_such_step` |") == [
        "agent/dispatch.py:Agent._no_such_step"
    ]
