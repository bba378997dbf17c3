"""Characterise and correct the built-in power sensor (Yang et al.; FinGraV)."""
