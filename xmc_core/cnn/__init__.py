"""XML-CNN (Liu et al. 2017): word vocabulary, initial embeddings, the network, its training
loop, and the saved parts (the CNN as an encoder, its output layer as a flat ranker)."""
