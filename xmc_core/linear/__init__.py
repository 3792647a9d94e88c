"""Linear XMC models: label tree, per-level rankers, beam search (XR-Linear)."""
