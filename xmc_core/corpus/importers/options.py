"""The options every importer takes (:class:`IngestOptions`); in a module of its own so that the
importers can name it without importing the package that dispatches to them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from xmc_core.corpus.schema import Policies
from xmc_core.corpus.writer import DEFAULT_ROWS_PER_GROUP


class IngestOptions(BaseModel):
    """How to read the input and what to do with bad documents.

    ``id_column``/``text_column``/``labels_column`` name the fields of tabular formats (a missing
    or None id column gives generated ids ``"{split}-{row:08d}"``); ``group_column`` the field of
    each document's group (:mod:`xmc_core.corpus.schema`; absent from the training split or None:
    the corpus is not grouped); ``label_sep`` splits labels given as one string;
    ``rows_per_group`` is the Parquet row group size, i.e. the partition size of featurization;
    ``overwrite`` replaces an existing destination once the new one is complete.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    policies: Policies = Policies()
    id_column: str | None = "doc_id"
    group_column: str | None = "group"
    text_column: str = "text"
    labels_column: str = "labels"
    label_sep: str = Field(default=",", min_length=1)
    rows_per_group: int = Field(default=DEFAULT_ROWS_PER_GROUP, gt=0)
    overwrite: bool = False
