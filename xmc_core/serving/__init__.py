"""Packaging and serving of trained models: the MLflow pyfunc wrapper, model resolution
(a folder or an MLflow URI -> a local ``XmcModel`` folder) and the HTTP server.

The submodules import mlflow (and fastapi) only where they need it; importing this package
imports nothing heavy.
"""
