"""Code generation: c.py (C source -> the system C compiler -> ctypes)."""
