"""The orbit.go ``pcgroups`` wire format, for tools that read or write groups without running a
member: where configs are stored (buckets and keys), their JSON, the names of the consumers
and work-queue streams, and how keys map to partitions and partitions to members. Members and
the admin calls in :mod:`pcgroups` use these; see ``docs/PCGROUPS-WIRE.md``::

    from pcgroups import wire
    wire.config_key("orders", "g")                       # 'orders.g' in wire.STATIC_BUCKET
    wire.static_member_filters(config, "m1")             # ('0.>', '1.>')
"""

from ._assign import (
    PRIORITY_GROUP,
    balanced_assignment,
    config_key,
    elastic_member_filters,
    elastic_stream_config,
    elastic_stream_name,
    elastic_transforms,
    hash_partition,
    member_partitions,
    static_consumer_name,
    static_member_filters,
    transform_destination,
    validate_elastic_config,
    validate_static_config,
)
from ._models import (
    ELASTIC_BUCKET,
    STATIC_BUCKET,
    decode_elastic_config,
    decode_static_config,
    encode_elastic_config,
    encode_static_config,
)
from ._watch_group import bucket_group_filter

__all__ = [
    "ELASTIC_BUCKET",
    "PRIORITY_GROUP",
    "STATIC_BUCKET",
    "balanced_assignment",
    "bucket_group_filter",
    "config_key",
    "decode_elastic_config",
    "decode_static_config",
    "elastic_member_filters",
    "elastic_stream_config",
    "elastic_stream_name",
    "elastic_transforms",
    "encode_elastic_config",
    "encode_static_config",
    "hash_partition",
    "member_partitions",
    "static_consumer_name",
    "static_member_filters",
    "transform_destination",
    "validate_elastic_config",
    "validate_static_config",
]
