"""What a user runs end to end: calibrate (natural DVFS, recordings), DVFS features and predictor.

Each workflow is a library function with parameters; ``powermodels.commands`` are thin CLI
wrappers over them and ``benchmarks/`` only measure and compare.
"""
