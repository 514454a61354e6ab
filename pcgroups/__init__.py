"""pcgroups: partitioned consumer groups, wire-compatible with orbit.go's ``pcgroups``.

Every message of one key goes to one member of a group at a time, so members consume in
parallel while each key stays in order. Group configs live in the KV buckets
``static-consumer-groups`` and ``elastic-consumer-groups`` under ``<stream>.<group>``, as the
JSON orbit.go writes (see ``docs/PCGROUPS-WIRE.md``), so Go and Python members share groups
and orbit's ``cg`` tool manages groups created here::

    config = pcgroups.StaticConfig(max_members=4, members=("m1", "m2"))
    pcgroups.wire.static_member_filters(config, "m1")   # ('0.>', '1.>')

``pcgroups.wire`` holds the wire format itself (config JSON, names, partitioning).
"""

from jetstream._public import show_as as _show_as

from . import wire
from ._consume import consume_elastic, consume_static
from ._elastic import (
    add_members,
    create_elastic,
    delete_elastic,
    delete_member_mappings,
    delete_members,
    elastic_config,
    elastic_partition_filters,
    list_elastic,
    set_member_mappings,
)
from ._errors import (
    CorruptGroupConfigError,
    GroupConfigChangedError,
    GroupConfigMismatchError,
    GroupDeletedError,
    GroupExistsError,
    GroupNotFoundError,
    InvalidGroupConfigError,
    InvalidGroupNameError,
    InvalidMemberConfigError,
    InvalidMemberMappingError,
    InvalidPartitioningFilterError,
    MemberConsumerRefusedError,
    MemberNotFoundError,
)
from ._filter_limits import MAX_MEMBER_FILTERS
from ._group_member import GroupMember
from ._key_change import KeyChange, origin_revision
from ._kind import DEFAULT_ACK_WAIT
from ._members import (
    elastic_active_members,
    elastic_step_down,
    static_active_members,
    static_step_down,
)
from ._message import GroupMessage
from ._models import (
    ElasticConfig,
    MemberMapping,
    PartitioningFilter,
    StaticConfig,
)
from ._static import create_static, delete_static, list_static, static_config
from ._status import GroupStatus, PartitionStatus, elastic_status, static_status
from ._watch_group import (
    BucketGroupWatch,
    create_bucket_group,
    delete_bucket_group,
    watch_group,
)

__all__ = [
    "DEFAULT_ACK_WAIT",
    "MAX_MEMBER_FILTERS",
    "BucketGroupWatch",
    "CorruptGroupConfigError",
    "ElasticConfig",
    "GroupConfigChangedError",
    "GroupConfigMismatchError",
    "GroupDeletedError",
    "GroupExistsError",
    "GroupMember",
    "GroupMessage",
    "GroupNotFoundError",
    "GroupStatus",
    "InvalidGroupConfigError",
    "InvalidGroupNameError",
    "InvalidMemberConfigError",
    "InvalidMemberMappingError",
    "InvalidPartitioningFilterError",
    "KeyChange",
    "MemberConsumerRefusedError",
    "MemberMapping",
    "MemberNotFoundError",
    "PartitionStatus",
    "PartitioningFilter",
    "StaticConfig",
    "add_members",
    "consume_elastic",
    "consume_static",
    "create_bucket_group",
    "create_elastic",
    "create_static",
    "delete_bucket_group",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "delete_static",
    "elastic_active_members",
    "elastic_config",
    "elastic_partition_filters",
    "elastic_status",
    "elastic_step_down",
    "list_elastic",
    "list_static",
    "origin_revision",
    "set_member_mappings",
    "static_active_members",
    "static_config",
    "static_status",
    "static_step_down",
    "watch_group",
    "wire",
]

_show_as(
    __name__,
    ElasticConfig,
    GroupStatus,
    MemberMapping,
    PartitionStatus,
    PartitioningFilter,
    StaticConfig,
)
