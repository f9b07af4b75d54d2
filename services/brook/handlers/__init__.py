"""One module per API family; HANDLERS maps API keys to them and defines what is advertised."""

from __future__ import annotations

from brook.protocol.versions import ApiKey, advertised

from .acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from .api_versions import make_api_versions_handler
from .configs import handle_alter_configs, handle_describe_configs, handle_incremental_alter_configs
from .consumer_groups import handle_consumer_group_describe, handle_consumer_group_heartbeat
from .context import Body, Handler
from .delete_records import handle_delete_records
from .elect_leaders import handle_elect_leaders
from .fetch import handle_fetch
from .groups import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_sync_group,
)
from .leader_epochs import handle_offset_for_leader_epoch
from .list_offsets import handle_list_offsets
from .log_dirs import handle_describe_log_dirs
from .metadata import handle_describe_cluster, handle_metadata
from .offsets import handle_offset_commit, handle_offset_delete, handle_offset_fetch
from .produce import handle_produce
from .producer_ids import handle_init_producer_id
from .quotas import handle_alter_client_quotas, handle_describe_client_quotas
from .reassignments import handle_alter_partition_reassignments, handle_list_partition_reassignments
from .sasl import handle_sasl_authenticate, handle_sasl_handshake
from .scram import handle_alter_user_scram_credentials, handle_describe_user_scram_credentials
from .share_fetch import handle_share_acknowledge, handle_share_fetch
from .share_groups import handle_share_group_describe, handle_share_group_heartbeat
from .share_offsets import (
    handle_alter_share_group_offsets,
    handle_delete_share_group_offsets,
    handle_describe_share_group_offsets,
)
from .share_state import (
    handle_delete_share_group_state,
    handle_initialize_share_group_state,
    handle_read_share_group_state_summary,
)
from .topics import handle_create_partitions, handle_create_topics, handle_delete_topics
from .transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_producers,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
    handle_txn_offset_commit,
    handle_write_txn_markers,
)

HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
    ApiKey.SHARE_GROUP_HEARTBEAT: handle_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: handle_share_group_describe,
    ApiKey.SHARE_FETCH: handle_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: handle_share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: handle_describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: handle_alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: handle_delete_share_group_offsets,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: handle_read_share_group_state_summary,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: handle_initialize_share_group_state,
    ApiKey.DELETE_SHARE_GROUP_STATE: handle_delete_share_group_state,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
}
ADVERTISED: dict[int, tuple[int, int]] = advertised([*HANDLERS, ApiKey.API_VERSIONS])
HANDLERS[ApiKey.API_VERSIONS] = make_api_versions_handler(ADVERTISED)

__all__ = ["ADVERTISED", "HANDLERS", "Body", "Handler"]
