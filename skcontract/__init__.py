"""skcontract: tensor contractions scheduled with Stream-K on NVIDIA GPUs."""
