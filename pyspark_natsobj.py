"""Spark auto-registration shim for the ``natsobj`` format (see ``pyspark_natskv``)."""

from objstore.spark import ObjectsDataSource as DefaultSource

__all__ = ["DefaultSource"]
