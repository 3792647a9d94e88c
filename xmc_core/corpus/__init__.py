"""Corpora: the dataset format, validating importers and the synthetic default corpus."""

from xmc_core.corpus.reader import Corpus, PartitionRef
from xmc_core.corpus.schema import Manifest, Policies
from xmc_core.corpus.writer import DatasetWriter

__all__ = ["Corpus", "DatasetWriter", "Manifest", "PartitionRef", "Policies"]
