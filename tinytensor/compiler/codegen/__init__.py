"""Code generation: c.py (C source -> the system C compiler -> ctypes) and cuda.py (CUDA C ->
CuPy RawModule); both run the instructions they do not generate through the interpreter."""
