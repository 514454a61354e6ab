"""The public surface: __all__ lists exactly the public names, and optional extras stay out."""

from __future__ import annotations

import subprocess
import sys

import pytest

import jetstream
import kvstore
import objstore


@pytest.mark.parametrize("module", [jetstream, kvstore, objstore])
def test_all_lists_the_public_names(module: object) -> None:
    exported = set(module.__all__)  # type: ignore[attr-defined]
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
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
