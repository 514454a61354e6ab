"""Group configs as orbit.go stores them: the fixtures in tests/pcgroups/fixtures/ were written
by hand from orbit's struct tags (docs/PCGROUPS-WIRE.md section 2): compact JSON in field
declaration order, Go omitempty, nil slices as null, and Go's HTML escaping of '>'."""

from __future__ import annotations

import inspect
import pathlib

import pytest

import jetstream
from pcgroups import (
    CorruptGroupConfigError,
    ElasticConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConfig,
)
from pcgroups.wire import (
    decode_elastic_config,
    decode_static_config,
    encode_elastic_config,
    encode_static_config,
)

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


STATIC_CASES = [
    # CreateStatic(js, "orders", "g", 4, []string{"orders.>"}, []string{"m1", "m2"}, nil)
    (
        "static_balanced.json",
        StaticConfig(max_members=4, filters=("orders.>",), members=("m1", "m2")),
    ),
    # CreateStatic(js, "orders", "g", 3, nil, nil, mappings a:[0 2] b:[1])
    (
        "static_mapped.json",
        StaticConfig(
            max_members=3,
            member_mappings=(MemberMapping("a", (0, 2)), MemberMapping("b", (1,))),
        ),
    ),
]

ELASTIC_CASES = [
    # CreateElastic(js, "orders", "g", 6, [{"orders.*.*", [2]}], 1000, 0) + AddMembers("m1")
    (
        "elastic_members.json",
        ElasticConfig(
            max_members=6,
            partitioning_filters=(PartitioningFilter("orders.*.*", (2,)),),
            max_buffered_msgs=1000,
            members=("m1",),
        ),
    ),
    # CreateElastic(js, "orders", "g", 2, nil, 0, 0): nil filters are written as null
    ("elastic_null_filters.json", ElasticConfig(max_members=2, partitioning_filters=None)),
    # PartitioningFilter{Filter: "events.>"} (nil wildcards -> null), 1 MiB limit, mappings
    (
        "elastic_mapped.json",
        ElasticConfig(
            max_members=3,
            partitioning_filters=(PartitioningFilter("events.>", None),),
            max_buffered_bytes=1048576,
            member_mappings=(MemberMapping("x", (2,)), MemberMapping("y", (0, 1))),
        ),
    ),
]


@pytest.mark.parametrize(("name", "config"), STATIC_CASES)
def test_static_fixtures_decode_and_encode_byte_for_byte(name: str, config: StaticConfig) -> None:
    assert decode_static_config(fixture(name)) == config
    assert encode_static_config(config) == fixture(name)


@pytest.mark.parametrize(("name", "config"), ELASTIC_CASES)
def test_elastic_fixtures_decode_and_encode_byte_for_byte(name: str, config: ElasticConfig) -> None:
    assert decode_elastic_config(fixture(name)) == config
    assert encode_elastic_config(config) == fixture(name)


def test_go_html_escapes_are_written_and_both_forms_are_read() -> None:
    config = StaticConfig(max_members=1, filters=("a.>", "<&>"), members=("m\u2028",))
    encoded = encode_static_config(config)
    assert encoded == (
        b'{"max_members":1,"filters":["a.\\u003e","\\u003c\\u0026\\u003e"],"members":["m\\u2028"]}'
    )
    assert decode_static_config(encoded) == config
    assert decode_static_config(b'{"max_members":1,"filters":["a.>"]}').filters == ("a.>",)


def test_null_and_empty_filters_stay_distinct_through_a_rewrite() -> None:
    # orbit compares partitioning_filters with reflect.DeepEqual: null -> [] stops Go members.
    empty = decode_elastic_config(b'{"max_members":2,"partitioning_filters":[]}')
    assert empty.partitioning_filters == ()
    assert b'"partitioning_filters":[]' in encode_elastic_config(empty)
    null = decode_elastic_config(b'{"max_members":2,"partitioning_filters":null}')
    assert null.partitioning_filters is None
    assert b'"partitioning_filters":null' in encode_elastic_config(null)
    wildcards = b'{"filter":"a.*","partitioning_wildcards":[]}'
    doc = b'{"max_members":2,"partitioning_filters":[' + wildcards + b"]}"
    assert encode_elastic_config(decode_elastic_config(doc)) == doc


def test_empty_optional_fields_are_omitted_like_go_omitempty() -> None:
    assert encode_static_config(StaticConfig(max_members=2)) == b'{"max_members":2}'
    config = ElasticConfig(max_members=2, partitioning_filters=(), members=())
    assert encode_elastic_config(config) == b'{"max_members":2,"partitioning_filters":[]}'


def test_decoding_reads_what_go_reads() -> None:
    # missing fields are zero values, null lists are empty, unknown fields are ignored
    config = decode_static_config(b'{"members":null,"later_field":{"x":1}}')
    assert config == StaticConfig(max_members=0)
    elastic = decode_elastic_config(
        b'{"max_members":3,"member_mappings":[{"member":"a","partitions":null}]}'
    )
    assert elastic.member_mappings == (MemberMapping("a", ()),)
    assert elastic.partitioning_filters is None


@pytest.mark.parametrize(
    "data",
    [b"", b"not json", b"[]", b'{"max_members":"4"}', b'{"members":[1]}', b'{"filters":"a"}'],
)
def test_undecodable_configs_raise_a_typed_error(data: bytes) -> None:
    with pytest.raises(CorruptGroupConfigError) as info:
        decode_static_config(data)
    assert isinstance(info.value, jetstream.JetStreamError)
    with pytest.raises(CorruptGroupConfigError):
        decode_elastic_config(data.replace(b"filters", b"partitioning_filters"))


def test_lists_given_by_users_are_stored_as_tuples() -> None:
    mapping = MemberMapping("a", [0, 1])  # type: ignore[arg-type]
    assert mapping == MemberMapping("a", (0, 1))
    pf = PartitioningFilter("a.*", [1])  # type: ignore[arg-type]
    assert pf.partitioning_wildcards == (1,)
    config = ElasticConfig(max_members=2, partitioning_filters=[pf], members=["m"])  # type: ignore[arg-type]
    assert config.partitioning_filters == (pf,)
    assert config.members == ("m",)
    hash(config)


def test_the_package_exports_its_public_names_and_nothing_imports_it() -> None:
    import subprocess
    import sys

    import pcgroups

    # A submodule is an attribute once anything imported it (pcgroups.sync by its tests):
    # public only if exported (pcgroups.wire).
    public = {
        name
        for name, value in vars(pcgroups).items()
        if not name.startswith("_")
        and name != "annotations"
        and (name in pcgroups.__all__ or not inspect.ismodule(value))
    }
    assert set(pcgroups.__all__) == public
    assert pcgroups.StaticConfig.__module__ == "pcgroups"
    code = "import jetstream, kvstore, objstore, sys; print('pcgroups' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
