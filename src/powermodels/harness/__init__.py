"""Measurement: kernels, background sampler, protocols, campaigns. Never fits models."""
