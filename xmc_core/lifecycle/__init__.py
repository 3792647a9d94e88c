"""The lifecycle of a trained model as stages of the graph: evaluation on the train split,
diagnostics, MLflow tracking (with the registration), the gated promotion, the run report and
batch prediction. ``xmc train --track`` runs them in-process, the flows as cached tasks."""
