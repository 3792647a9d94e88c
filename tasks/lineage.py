"""The Prefect side of an MLflow training run's lineage: the tags naming the Prefect flow run a
run was tracked from (id, name, UI URL; the subflow run when tracked from one). The data side
(dataset inputs, the version's description) is ``xmc_core.serving.run_lineage``; the Prefect
side (the report, the flow run's state message) names the MLflow run.
"""

from __future__ import annotations

from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.runtime import flow_run as current_flow_run
from prefect.utilities.urls import url_for


def flow_run_links() -> dict[str, str]:
    """MLflow tags naming the Prefect flow run being tracked: ``prefect.flow_run_id``,
    ``prefect.flow_run_name`` and ``prefect.flow_run_url`` (when the UI's address is known)
    of the top-level flow run, ``prefect.subflow_run_id`` when the current flow run is a
    subflow of it. ``{}`` outside a flow run."""
    current = current_flow_run.get_id()
    if not current:
        return {}
    root = str(current_flow_run.root_flow_run_id or current)
    if root == str(current):
        name = str(current_flow_run.get_name())
    else:
        with get_client(sync_client=True) as client:
            name = client.read_flow_run(UUID(root)).name
    tags = {"prefect.flow_run_id": root, "prefect.flow_run_name": name}
    url = url_for("flow-run", obj_id=root)
    if url:
        tags["prefect.flow_run_url"] = url
    if root != str(current):
        tags["prefect.subflow_run_id"] = str(current)
    return tags
