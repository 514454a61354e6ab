"""PySpark helpers for object stores: ``upload_objects`` (executors upload, a DataFrame of
outcomes comes back) and the ``natsobj`` format that lists a store's objects and, as a
streaming sink, stores one object per row exactly once. Needs the ``spark`` extra
(``pip install 'jetstore[spark]'``).

::

    from objstore.spark import upload_objects, register
    results = upload_objects(
        files_df, "artifacts", servers=url, path_col="path", allowed_root="/data/in"
    )
    register(spark)
    spark.read.format("natsobj").option("servers", url).load("artifacts")
    (files.writeStream.format("natsobj").option("servers", url)      # name + data or path
       .option("checkpointLocation", ckpt).start("artifacts"))       # each object once

``natsobj`` options (names are case-insensitive; an unknown option is refused with the list of
known ones): the connection options of ``natskv`` (``servers``, ``connectTimeout``,
``connectAttempts``, ``requestTimeout``, ``retryDeadline``, credentials), ``store`` (or the
load path), ``limit`` (at most this many rows, 0 = all) and ``includeDeleted`` (false: also
list deleted objects). ``writeStream``: ``nameColumn``, ``dataColumn``, ``pathColumn``
(``name``, ``data``, ``path``), ``chunkSize``, ``concurrency``, ``allowedRoot``, ``keyFile``,
``onBadRow`` (``fail``/``skip``). Each object's meta record carries its task's tag
(``Jetstore-Write: <queryId>/<batchId>/<partition>``) and is written only over the record
read before, so a replayed or racing attempt finds the tag and stores nothing again;
docs/SPARK.md states the guarantee and its limits.
"""

from __future__ import annotations

from typing import Any

try:
    import pyarrow  # noqa: F401  (the spark extra: checked here, used by the uploads)
    from pyspark.sql.datasource import DataSource  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra check
    raise ImportError(
        "objstore.spark needs PySpark >= 4.2, pyarrow and pandas: pip install 'jetstore[spark]'"
    ) from exc

from jetstream._errors import SparkWorkerPythonError
from jetstream._options import activate_spark_session
from jetstream._spark_python import check_worker_python, prefer_driver_python

from ._list import LIST_SCHEMA, ObjectsDataSource
from ._upload import RESULT_SCHEMA, upload_objects

__all__ = [
    "LIST_SCHEMA",
    "RESULT_SCHEMA",
    "ObjectsDataSource",
    "SparkWorkerPythonError",
    "register",
    "upload_objects",
]

prefer_driver_python()  # before the session: its Python workers then run this interpreter


def register(spark: Any) -> None:
    """Register the ``natsobj`` format with a SparkSession (idempotent), and make ``spark`` the
    calling thread's active session: call it in each thread that uses the format (see
    :func:`kvstore.spark.register`).

    Raises:
        SparkWorkerPythonError: ``spark`` is a local session whose Python workers run an
            interpreter that cannot import objstore (the message names the fix).
    """
    check_worker_python(spark, "objstore")
    spark.dataSource.register(ObjectsDataSource)
    activate_spark_session(spark)
