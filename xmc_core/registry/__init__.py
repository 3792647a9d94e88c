"""The MLflow model registry: its store, the promotion gate and its evaluation, rollback and
reconciliation (with ``serving``, the only packages that import mlflow)."""
