"""DeepXML / Astec: a TF-IDF-weighted bag of embeddings, a surrogate task over meta-labels,
ANN shortlists over label vectors and a shortlist classifier (:mod:`xmc_core.families.astec`)."""
