"""Compiled shared objects, cached on disk by a hash of what went into them.

The key is the C source, the flags, the header it includes and which compiler binary ran
(its resolved path, size and mtime: cheap to read, and a compiler upgrade changes it), so
a new process that generates the same source loads the .so without running the compiler.
Directory: $TINYTENSOR_CACHE_DIR, else ~/.cache/tinytensor/compiler.

Two processes compiling the same source at once are safe: each compiles into its own
temporary file and `os.replace`s it into place, which is atomic, so a reader sees either
no file or a complete one (both writers produce equivalent objects; the last one wins).
"""
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

_loaded = {}          # path -> CDLL, so one process loads each object once
compiles = 0          # compiler invocations in this process (tests and explain read it)


class CompilerNotFound(RuntimeError):
    pass


def cache_dir():
    d = os.environ.get("TINYTENSOR_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tinytensor", "compiler")
    os.makedirs(d, exist_ok=True)
    return d


def find_compiler():
    """The C compiler to run: $CC if set, else `cc` on PATH, else a clear error."""
    name = os.environ.get("CC") or "cc"
    path = shutil.which(name)
    if path is None:
        raise CompilerNotFound(
            f"tinytensor.compiler: the C backend needs a C compiler, and {name!r} is not on "
            f"PATH ({os.environ.get('PATH', '')!r}). Install one (Debian/Ubuntu: "
            "`apt-get install gcc`, or `apt-get install build-essential`; Fedora: "
            "`dnf install gcc`; macOS: `xcode-select --install`), set $CC to its path, or "
            "use backend='numpy'.")
    return path


def key(source, flags, compiler, extra=""):
    st = os.stat(os.path.realpath(compiler))
    ident = f"{os.path.realpath(compiler)}|{st.st_size}|{st.st_mtime_ns}"
    h = hashlib.sha256()
    for part in (source, " ".join(flags), ident, extra):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def load(source, flags, include_dir=None, extra=""):
    """A ctypes.CDLL for `source` compiled with `flags`, from the disk cache when present."""
    compiler = find_compiler()
    path = os.path.join(cache_dir(), f"tt_{key(source, flags, compiler, extra)}.so")
    lib = _loaded.get(path)
    if lib is not None:
        return lib
    if not os.path.exists(path):
        _compile(compiler, source, flags, include_dir, path)
    lib = _loaded[path] = ctypes.CDLL(path)
    return lib


def _compile(compiler, source, flags, include_dir, path):
    global compiles
    d = os.path.dirname(path)
    fd, tmp_so = tempfile.mkstemp(suffix=".so.tmp", dir=d)
    os.close(fd)
    src = tmp_so[:-len(".so.tmp")] + ".c"
    try:
        with open(src, "w") as f:
            f.write(source)
        cmd = [compiler, *flags, *(["-I", include_dir] if include_dir else []), "-o", tmp_so, src]
        compiles += 1
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"tinytensor.compiler: the C compiler failed ({' '.join(cmd)}):\n"
                               f"{res.stderr.strip()}\n(source kept in {src})")
        os.replace(tmp_so, path)
        os.remove(src)
    finally:
        if os.path.exists(tmp_so):
            os.remove(tmp_so)
