"""A small fictional multi-hop question set and abstract corpus (see README.md)."""
