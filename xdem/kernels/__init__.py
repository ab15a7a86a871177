"""Plain numpy kernels shared by several methods (each works on one chunk)."""
