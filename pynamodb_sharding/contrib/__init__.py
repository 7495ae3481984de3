"""Integrations with web frameworks; each needs its framework installed (an extra)."""
