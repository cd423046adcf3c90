"""The shape of the source: no import cycles, no very long files, no classes doing too much.

Imports are read from the source as written (those under ``TYPE_CHECKING`` and inside
functions count too), so a cycle cannot hide behind a lazy import.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import grimp

import salon

SRC = Path(salon.__file__).parent
MAX_FILE_LINES = 600
MAX_CLASS_METHODS = 35

# What breaks a rule and why it must: ARCHITECTURE.md ("Size") says. An entry that no
# longer applies fails the test, so the lists only shrink.
LONG_FILES: set[str] = set()
CYCLES: list[list[str]] = []
BIG_CLASSES = {
    "salon.platforms.irc.client.Client",
}


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = []
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work.append((root, iter(sorted(graph.find_modules_directly_imported_by(root)))))
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    imported = graph.find_modules_directly_imported_by(target)
                    work.append((target, iter(sorted(imported))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("salon", cache_dir=None)
    assert sorted(_cycles(graph)) == CYCLES


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_no_source_file_is_too_long() -> None:
    long = {
        path.relative_to(SRC).as_posix()
        for path in _sources()
        if path.read_text(encoding="utf-8").count("\n") > MAX_FILE_LINES
    }
    assert long == LONG_FILES


def _salon_modules() -> Iterator[str]:
    yield "salon"
    for info in pkgutil.walk_packages(salon.__path__, "salon."):
        if not info.name.endswith(".__main__"):  # importing it runs the command
            yield info.name


def _method_count(cls: type) -> int:
    """Functions the class defines, with those of its Salon bases written for it alone
    (mixins: a base with no other subclass is part of the class)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        own = klass is cls
        mixin = klass.__module__.startswith("salon.") and klass.__subclasses__() == [cls]
        if not (own or mixin):
            continue
        for name, value in vars(klass).items():
            if inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod)):
                names.add(name)
    return len(names)


def test_no_class_has_too_many_methods() -> None:
    big: set[str] = set()
    for name in _salon_modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # an optional extra (the local model) may be missing
            if "llama_cpp" not in str(exc):
                raise
            continue
        for cls_name, cls in vars(module).items():
            own = inspect.isclass(cls) and cls.__module__ == name
            if own and _method_count(cls) > MAX_CLASS_METHODS:
                big.add(f"{name}.{cls_name}")
    assert big == BIG_CLASSES
