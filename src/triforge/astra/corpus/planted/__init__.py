"""Planted variants of every task by family (faults to reject, rewrites to pass, hacks to flag); `variants` collects them."""
