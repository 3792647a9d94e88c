"""Featurization: word n-gram tokenizer, TF-IDF, label index and PIFA / label-text features."""
