"""A Spark driver in a process of its own, for the test that SIGKILLs one mid micro-batch:
``python -m tests.spark.stream_sink_driver '<json>'`` runs ``start_query`` into
``natskv_hooked`` (or, with ``"format": "natsobj_hooked"``, object_sink_trials' query into
it) with the options in the JSON (``inputs``, ``checkpoint``, ``options``, and ``master``,
``local[2]`` unless given: ``local[2,3]`` retries a failed task) until the query
ends (then it creates the file ``done`` names, if given) or the process is killed."""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main() -> None:
    args = json.loads(sys.argv[1])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from tests.spark import object_sink_trials, stream_sink_trials
    from tests.spark.spark_session import submit_args

    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", submit_args())

    trials: Any = (
        object_sink_trials if args.get("format") == "natsobj_hooked" else stream_sink_trials
    )

    spark = (
        SparkSession.builder.master(args.get("master", "local[2]"))
        .appName("jetstore-driver-kill")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "512m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(trials.HookedSource)
    fmt = trials.HookedSource.name()
    query = trials.start_query(spark, args["inputs"], args["checkpoint"], fmt, **args["options"])
    query.awaitTermination()
    if "done" in args:  # the query ended (a test without a kill waits for this)
        open(args["done"], "w").close()
    spark.stop()


if __name__ == "__main__":
    main()
