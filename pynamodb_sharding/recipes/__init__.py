"""Recipes: complete designs built on the library's models (see each module's docs page)."""

__all__: list[str] = []
