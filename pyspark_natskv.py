"""Spark auto-registration shim: makes ``spark.read.format("natskv")`` work without a
``register()`` call (Spark imports every installed ``pyspark_*`` module's ``DefaultSource``)."""

from kvstore.spark import KVDataSource as DefaultSource

__all__ = ["DefaultSource"]
