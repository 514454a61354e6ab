"""Which Python Spark's workers run: the driver's own unless the user (or a launcher) chose
one, and a typed error on the driver, naming the fix, for a local session already running
workers that cannot import the library. The job that proves it end to end, the venv off
PATH: tests/docs/test_spark_job_with_the_venv_off_path.py."""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the 'spark' extra")

import kvstore.spark
import objstore.spark
from jetstream._spark_python import default_worker_python


def test_the_workers_get_the_driver_interpreter_unless_one_was_chosen() -> None:
    environ: dict[str, str] = {}
    default_worker_python(environ, session_started=False)
    assert environ == {"PYSPARK_PYTHON": sys.executable}
    for chosen in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT"):
        environ = {chosen: "theirs"}
        default_worker_python(environ, session_started=False)
        assert environ == {chosen: "theirs"}, chosen
    environ = {}
    default_worker_python(environ, session_started=True)  # too late: register() checks
    assert environ == {}


@pytest.mark.spark
@pytest.mark.parametrize(
    ("python", "problem"),
    [
        ("no-such-python-here", "is not found"),
        (sys.base_prefix + "/bin/python3", "cannot import"),  # the venv's base: no pyarrow
    ],
)
def test_a_session_whose_workers_cannot_import_the_library_is_refused_on_the_driver(
    spark: Any, python: str, problem: str
) -> None:
    """Was DATA_SOURCE_NOT_FOUND, or ``No module named 'kvstore'`` in a Java trace, at the
    first job."""
    context = spark.sparkContext
    ours = context.pythonExec
    context.pythonExec = python  # what a session created before the import would run
    try:
        for register in (kvstore.spark.register, objstore.spark.register):
            with pytest.raises(kvstore.spark.SparkWorkerPythonError) as caught:
                register(spark)
            (line,) = str(caught.value).splitlines()
            assert f"run {python!r}, which {problem}" in line
            assert f"set PYSPARK_PYTHON={sys.executable} before creating the SparkSession" in line
        df = spark.createDataFrame([("a", b"1")], "name string, data binary")
        with pytest.raises(objstore.spark.SparkWorkerPythonError):
            objstore.spark.upload_objects(df, "st", servers="nats://127.0.0.1:1", data_col="data")
    finally:
        context.pythonExec = ours
