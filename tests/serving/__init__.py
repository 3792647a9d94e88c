"""Tests of packaging (MLflow pyfunc, registry URIs) and serving (HTTP)."""
