"""The base of every config section (:mod:`xmc_core.config`, and each family's own)."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """Base of every config section: frozen, no unknown keys, stable fingerprint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON of the values."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()
