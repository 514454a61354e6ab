"""jetstream's public surface is the library's, not its test suite's: the harnesses live in
``jetstream.testing``, Spark/CLI helpers and bucket rules stay private, and the names the
package exports are few enough to read."""

from __future__ import annotations

import pytest

import jetstream
import jetstream.testing

HELPERS = {
    "run_sync",
    "ConnectionOptions",
    "CONNECTION_OPTIONS",
    "bool_option",
    "int_option",
    "str_option",
    "check_options",
    "ColumnError",
    "validate_bucket_name",
    "check_stream_limits",
    "MAX_BUCKET_NAME",
}
HARNESSES = {"EmbeddedCluster", "find_server_binary", "lease_port", "Link"}
MOVED_ERRORS = {
    "KeyNotFoundError",
    "BucketNotFoundError",
    "ObjectNotFoundError",
    "UploadFailedError",
}


def test_jetstream_exports_a_short_list_and_none_of_the_helpers() -> None:
    exported = set(jetstream.__all__)
    assert len(jetstream.__all__) <= 89  # 120 before the harnesses and helpers left
    assert not exported & (HELPERS | HARNESSES)


def test_the_harnesses_are_public_in_jetstream_testing() -> None:
    assert set(jetstream.testing.__all__) >= HARNESSES | {"EmbeddedServer"}
    assert jetstream.testing.EmbeddedServer is jetstream.EmbeddedServer  # the demo keeps it


@pytest.mark.parametrize("name", sorted(MOVED_ERRORS))
def test_kv_and_object_errors_are_only_where_they_are_defined(name: str) -> None:
    with pytest.raises(AttributeError):
        getattr(jetstream, name)
