"""The MLflow model registry, inside ``serving`` (the one package that imports mlflow): its
store, the promotion gate and the gate's evaluation, rollback and reconciliation."""
