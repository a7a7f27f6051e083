"""The operation table: AWS operation name to the function that serves it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from hyperpod_scheduler.emulator import model_ops_clusters as clusters
from hyperpod_scheduler.emulator import model_ops_events as events
from hyperpod_scheduler.emulator import model_ops_nodes as nodes
from hyperpod_scheduler.emulator import model_ops_plans as plans
from hyperpod_scheduler.emulator import model_ops_software as software
from hyperpod_scheduler.emulator.model_lookup import find_cluster
from hyperpod_scheduler.emulator.model_world import World

__all__ = ["MUTATING", "OPERATIONS", "Operation", "find_cluster"]

Operation = Callable[[World, datetime, dict[str, Any], str, str], dict[str, Any]]

OPERATIONS: dict[str, Operation] = {
    "CreateCluster": clusters.create_cluster,
    "DescribeCluster": clusters.describe_cluster,
    "ListClusters": clusters.list_clusters,
    "UpdateCluster": clusters.update_cluster,
    "DeleteCluster": clusters.delete_cluster,
    "UpdateClusterSoftware": software.update_cluster_software,
    "ListClusterNodes": nodes.list_cluster_nodes,
    "DescribeClusterNode": nodes.describe_cluster_node,
    "BatchAddClusterNodes": nodes.batch_add_cluster_nodes,
    "BatchDeleteClusterNodes": nodes.batch_delete_cluster_nodes,
    "ListClusterEvents": events.list_cluster_events,
    "DescribeClusterEvent": events.describe_cluster_event,
    "ListClusterOperations": events.list_cluster_operations,
    "DescribeClusterOperation": events.describe_cluster_operation,
    "DescribeTrainingPlan": plans.describe_training_plan,
    "ListTrainingPlans": plans.list_training_plans,
    "ListTags": events.list_tags,
    "AddTags": events.add_tags,
    "DeleteTags": events.delete_tags,
}
MUTATING = frozenset(
    {
        "CreateCluster",
        "UpdateCluster",
        "UpdateClusterSoftware",
        "DeleteCluster",
        "BatchAddClusterNodes",
        "BatchDeleteClusterNodes",
        "AddTags",
        "DeleteTags",
    }
)
