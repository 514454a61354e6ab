"""The public surface: __all__ lists exactly the public names, and optional extras stay out."""

from __future__ import annotations
import __future__

import contextlib
import inspect
import pathlib
import pydoc
import subprocess
import sys
import types
import typing

import pytest

import jetstore
import jetstream
import kvstore
import objstore
import pcgroups
import pcgroups.wire

PACKAGES = [jetstream, kvstore, objstore, pcgroups, pcgroups.wire, jetstore]


@pytest.mark.parametrize("module", PACKAGES, ids=lambda module: module.__name__)
def test_all_lists_the_public_names(module: object) -> None:
    exported = set(module.__all__)  # type: ignore[attr-defined]
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, __future__._Feature)  # from __future__ import annotations
        and (not isinstance(value, type(sys)) or name in exported)  # public submodules
    }
    assert exported == public


def test_reprs_show_the_public_module() -> None:
    assert kvstore.Bucket.__module__ == "kvstore"
    assert repr(kvstore.Op.EXPIRED) == "<Op.EXPIRED: 'EXPIRED'>"


def test_importing_the_packages_does_not_import_pyspark() -> None:
    code = "import jetstream, kvstore, objstore, sys; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("module", ["kvstore.spark", "objstore.spark"])
def test_a_missing_spark_extra_says_how_to_install_it(module: str) -> None:
    code = f"import sys; sys.modules['pyspark'] = None; import {module}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0
    assert "pip install 'jetstore[spark]'" in out.stderr


def _public_objects() -> list[tuple[str, object]]:
    return [
        (f"{module.__name__}.{name}", getattr(module, name))
        for module in PACKAGES
        for name in module.__all__
        if inspect.isclass(getattr(module, name)) or inspect.isfunction(getattr(module, name))
    ]


@pytest.mark.parametrize("module", PACKAGES, ids=lambda module: module.__name__)
def test_every_exported_name_exists_and_nothing_private_leaks(module: types.ModuleType) -> None:
    assert module.__doc__, f"{module.__name__} has no docstring"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{module.__name__}.__all__ names what it lacks: {missing}"
    private = [name for name in module.__all__ if name.startswith("_")]
    assert not private, f"{module.__name__}.__all__ exports private names: {private}"
    modules = [
        name
        for name in module.__all__
        if isinstance(getattr(module, name), types.ModuleType)
        and any(part.startswith("_") for part in getattr(module, name).__name__.split("."))
    ]
    assert not modules, f"{module.__name__} exports private modules: {modules}"


@pytest.mark.parametrize(
    ("name", "obj"),
    [pytest.param(name, obj, id=name) for name, obj in _public_objects()],
)
def test_every_public_class_and_function_has_a_docstring(name: str, obj: object) -> None:
    """Its own docstring, not one inherited from a base class."""
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else inspect.getdoc(obj)
    assert doc, f"{name} has no docstring"


@pytest.mark.parametrize(
    ("name", "obj"),
    [pytest.param(name, obj, id=name) for name, obj in _public_objects()],
)
def test_every_public_name_is_introspectable(name: str, obj: object) -> None:
    """help(), inspect.signature() and get_type_hints() work (they raised NameError for
    kvstore.Entry: its annotations were evaluated in the package namespace)."""
    assert name.rpartition(".")[2] in pydoc.render_doc(obj, renderer=pydoc.plaintext)
    with contextlib.suppress(ValueError):  # some builtins-backed classes have no signature
        inspect.signature(obj)  # type: ignore[arg-type]
    if inspect.isclass(obj):
        typing.get_type_hints(obj)


ENDLESS = {"objstore.ObjectStore.watch", "kvstore.Election.observe"}
"""Async iterators that never end by themselves: nothing to await."""


def _async_iterators() -> dict[str, str]:
    """Every public function and method of the packages, by name, whose declared result is an
    async iterator, and that result as written."""
    found: dict[str, str] = {}
    for name, obj in _public_objects():
        members = vars(obj).items() if inspect.isclass(obj) else [("", obj)]
        for member, function in members:
            if not inspect.isfunction(function) or member.startswith("_"):
                continue
            result = str(inspect.get_annotations(function).get("return"))
            if result.startswith(("AsyncIterator[", "AsyncGenerator[", "AsyncListing[")):
                found[f"{name}.{member}".rstrip(".")] = result
    return found


def test_every_listing_can_be_awaited_for_a_list() -> None:
    """``await kvstore.list_buckets(js)`` raised TypeError: every finite listing (names,
    keys, revisions, objects, a fetch, a watch's snapshot) is an AsyncListing."""
    listings = _async_iterators()
    assert {"kvstore.list_buckets", "objstore.ObjectStore.list", "pcgroups.list_static"} <= set(
        listings
    )
    bare = {name for name, result in listings.items() if not result.startswith("AsyncListing[")}
    assert bare == ENDLESS


def test_type_checkers_follow_the_install(tmp_path: pathlib.Path) -> None:
    """The README's editable install is one mypy can read (a meta-path finder is not)."""
    user_code = tmp_path / "user.py"
    user_code.write_text(
        "import kvstore\n"
        "def revision(entry: kvstore.Entry) -> str:\n"
        "    return entry.revision\n"  # int, not str: mypy must see the real type
    )
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--python-executable", sys.executable,
         str(user_code)],
        capture_output=True, text=True, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert 'Incompatible return value type (got "int", expected "str")' in out.stdout, out.stdout
