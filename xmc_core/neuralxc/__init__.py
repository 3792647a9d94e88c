"""NeuralXC (Srinivasan, Rao, Agarwal): an input autoencoder, a label autoencoder and a regressor
between their codes (the network, its training loop, and the saved ranker)."""
