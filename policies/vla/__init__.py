"""Language-conditioned policies (VLA): docs/vla.md."""
