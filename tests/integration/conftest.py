"""Fixtures shared by the integration modules (the Spark session lives in spark_session)."""

from .spark_session import spark

__all__ = ["spark"]
