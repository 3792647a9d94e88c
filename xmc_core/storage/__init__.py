"""Storage: atomic writes, checksummed artifact folders, fingerprints, the work-dir layout."""
