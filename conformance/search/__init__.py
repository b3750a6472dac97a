"""Search: generated scenarios at scale (fuzz, shrink driving, explore, zoo hunting)."""
