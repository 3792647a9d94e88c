"""The application: the ``xmc`` command line, its commands and batch prediction."""
