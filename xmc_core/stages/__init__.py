"""The stage graph (one declaration of every family's DAG), its keys and its artifact store."""
