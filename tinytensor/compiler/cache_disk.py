"""Compiled shared objects, cached on disk by a hash of what went into them.

The key is the C source, the flags, the header it includes and which compiler binary ran
(its resolved path, size and mtime: cheap to read, and a compiler upgrade changes it), so
a new process that generates the same source loads the .so without running the compiler.
Directory: $TINYTENSOR_CACHE_DIR, else ~/.cache/tinytensor/compiler.

Loading an object runs its code (constructors included), and its name is a predictable
hash, so the cache is only as safe as the directory: anyone who can write there can
plant code that this process runs. Hence:
- every level this module creates is mode 0700 (whatever the umask);
- a directory not owned by this user, writable by group or others, or under a parent
  that others can write without the sticky bit (they could swap it) is not used: a
  private one is, with a warning naming both (the check pip and ccache make);
- the compiler runs in a fresh 0700 directory (mkdtemp) inside the checked one, so no
  header or file planted next to the source is picked up (the C backend also includes
  tt_math.h by absolute path);
- each entry ends with a record (magic, body size, SHA-256 of the body) written with the
  body and fsync'ed before the entry is renamed into place; an entry whose record does
  not match, that is not a regular file of this user, or that the loader rejects is
  rebuilt, never loaded (a truncated or garbage object would otherwise break every later
  process). The ELF loader ignores bytes past the sections, so the record can trail.
- temp files and build directories older than STALE (a killed compile's) are swept
  once per process.

Two processes compiling the same source at once are safe: each compiles in its own
directory and `os.replace`s the result into place, which is atomic, so a reader sees
either no file or a complete one (both writers produce equivalent objects; the last one
wins).
"""
import atexit
import contextlib
import ctypes
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import warnings

ENV = "TINYTENSOR_CACHE_DIR"
STALE = 3600          # seconds after which a temp file or build directory is a dead compile's
MAGIC = b"TTCACHE1"   # starts an entry's trailing record: MAGIC, body size (8 bytes LE), SHA-256
RECORD = len(MAGIC) + 8 + 32

_loaded = {}          # path -> CDLL, so one process loads each object once
compiles = 0          # compiler invocations in this process (tests and explain read it)
_swept = set()        # directories swept in this process
_warned = set()       # (directory, reason) already warned about
_private = []         # this process's own directory, when no shared one could be used
_cupy_lock = threading.RLock()


class CompilerNotFound(RuntimeError):
    pass


class CompileError(RuntimeError):
    """The C compiler rejected a source (its output is in the message)."""


class CacheDirError(RuntimeError):
    """The configured cache directory cannot be created or used."""


def default_dir():
    return os.path.join(os.path.expanduser("~"), ".cache", "tinytensor", "compiler")


def cache_dir():
    """The checked directory objects are kept in: $TINYTENSOR_CACHE_DIR, else the default;
    a private fallback (with a warning) when that one is unsafe, or when the default
    cannot be created. A $TINYTENSOR_CACHE_DIR that cannot be created is a CacheDirError
    naming it (the user asked for that directory)."""
    configured = os.environ.get(ENV)
    path = os.path.abspath(configured or default_dir())
    try:
        _make_private(path)
    except OSError as e:
        why = f"{e.strerror or e}{f': {e.filename}' if e.filename else ''}"
        if configured:
            raise CacheDirError(
                f"tinytensor.compiler: cannot use the compile cache directory {path!r} that "
                f"${ENV} names ({why}). Point ${ENV} at a directory you can write, or unset "
                f"it to use {default_dir()!r}.") from None
        return _fallback(path, f"it cannot be created ({why})")
    problem = unsafe(path)
    if problem:
        return _fallback(path, problem)
    _sweep(path)
    return path


def _make_private(path):
    """Create `path` and any missing parent, each with mode 0700."""
    missing = []
    p = path
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            if not os.path.isdir(p):
                raise
            continue   # another process made it: unsafe() judges it
        os.chmod(p, 0o700)   # mkdir's mode is masked by the umask (0700 & ~umask): exact now


def unsafe(path):
    """Why `path` could hold code someone else planted, or None when only this user (or
    root) can write there."""
    if not hasattr(os, "geteuid"):
        return None   # no POSIX owners to check (Windows)
    uid = os.geteuid()
    st = os.stat(path)
    if st.st_uid != uid:
        return f"it is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & 0o022:
        return f"group or others can write to it (mode {stat.S_IMODE(st.st_mode):o})"
    p = os.path.realpath(path)
    while True:
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent
        st = os.stat(p)
        if st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX:
            return (f"its parent {p} is writable by others without the sticky bit (mode "
                    f"{stat.S_IMODE(st.st_mode):o}), so anyone can replace it")


def _fallback(rejected, why):
    """A private directory to use instead of `rejected`, and one warning saying so."""
    uid = os.geteuid() if hasattr(os, "geteuid") else "user"
    candidates = [default_dir(), os.path.join(tempfile.gettempdir(), f"tinytensor-{uid}", "compiler")]
    chosen = None
    for c in candidates + _private:
        c = os.path.abspath(c)
        if c == rejected:
            continue
        try:
            _make_private(c)
            if unsafe(c) is None:
                chosen = c
                break
        except OSError:
            continue
    if chosen is None:   # nowhere shared is safe: this process's own, removed at exit
        chosen = tempfile.mkdtemp(prefix="tinytensor-compiler-")
        _private.append(chosen)
        atexit.register(shutil.rmtree, chosen, True)
    if (rejected, why) not in _warned:
        _warned.add((rejected, why))
        warnings.warn(
            f"tinytensor.compiler: not using the compile cache directory {rejected!r}: {why}. "
            f"Code found there would be loaded and run, so it must be writable by this user "
            f"alone. Using {chosen!r} instead. To use it, make it yours with mode 700 "
            f"(`chmod 700 {rejected}`), or set ${ENV} to a directory only you can write.",
            RuntimeWarning, stacklevel=3)
    _sweep(chosen)
    return chosen


def _sweep(d):
    """Remove what a killed compile left in `d` (once per process per directory)."""
    if d in _swept:
        return
    _swept.add(d)
    cutoff = time.time() - STALE
    for folder, cupy in ((d, False), (os.path.join(d, "cuda"), True)):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            n = e.name
            if not (n.startswith("build-") or n.endswith(".tmp") or
                    (n.startswith("tt_") and n.endswith(".c")) or (cupy and n.startswith("tmp"))):
                continue
            try:
                if e.stat(follow_symlinks=False).st_mtime >= cutoff:
                    continue   # maybe another process's compile in progress
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.remove(e.path)
            except OSError:
                pass


def find_compiler():
    """The C compiler to run: $CC if set, else `cc` on PATH, else a clear error."""
    name = os.environ.get("CC") or "cc"
    path = shutil.which(name)
    if path is None:
        raise CompilerNotFound(
            f"tinytensor.compiler: the C backend needs a C compiler, and {name!r} is not on "
            f"PATH ({os.environ.get('PATH', '')!r}). {INSTALL}, set $CC to its path, or "
            "use backend='numpy'.")
    return path


INSTALL = ("Install one (Debian/Ubuntu: `apt-get install gcc`, or `apt-get install "
           "build-essential`; Fedora: `dnf install gcc`; macOS: `xcode-select --install`)")


def key(source, flags, compiler, extra=""):
    st = os.stat(os.path.realpath(compiler))
    ident = f"{os.path.realpath(compiler)}|{st.st_size}|{st.st_mtime_ns}"
    h = hashlib.sha256()
    for part in (source, " ".join(flags), ident, extra):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def load(source, flags, include_dir=None, extra=""):
    """A ctypes.CDLL for `source` compiled with `flags`, from the disk cache when a
    verified entry is there, else compiled (and cached)."""
    compiler = find_compiler()
    path = os.path.join(cache_dir(), f"tt_{key(source, flags, compiler, extra)}.so")
    lib = _loaded.get(path)
    if lib is not None:
        return lib
    if verified(path):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            lib = None   # intact but not loadable here (another machine's): rebuilt
    if lib is None:
        _compile(compiler, source, flags, include_dir, path)
        lib = ctypes.CDLL(path)
    _loaded[path] = lib
    return lib


def verified(path):
    """Whether `path` is a regular file of this user, writable by no one else, whose
    trailing record matches its body (size and SHA-256)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o022 or (
                hasattr(os, "geteuid") and st.st_uid != os.geteuid()):
            return False
        data = f.read()
    n = len(data) - RECORD
    tail = data[n:] if n > 0 else b""
    return (n > 0 and tail[:len(MAGIC)] == MAGIC
            and int.from_bytes(tail[len(MAGIC):len(MAGIC) + 8], "little") == n
            and hashlib.sha256(memoryview(data)[:n]).digest() == tail[len(MAGIC) + 8:])


def _compile(compiler, source, flags, include_dir, path):
    global compiles
    d = os.path.dirname(path)
    name = os.path.basename(path)[:-len(".so")]
    build = tempfile.mkdtemp(prefix="build-", dir=d)   # 0700, a fresh name: nothing planted
    src = os.path.join(build, name + ".c")
    done = False
    try:
        with open(src, "w") as f:
            f.write(source)
        # relative names in the build directory: the object does not depend on its path
        cmd = [compiler, *flags, *(["-I", include_dir] if include_dir else []),
               "-o", name + ".so", name + ".c"]
        compiles += 1
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=build)
        if res.returncode != 0:
            raise CompileError(f"tinytensor.compiler: the C compiler failed ({' '.join(cmd)}, "
                               f"in {build}):\n{res.stderr.strip()}\n(source kept in {src} "
                               f"for {STALE // 3600} hour)")
        with open(os.path.join(build, name + ".so"), "rb") as f:
            _publish(f.read(), path)
        done = True
    finally:
        if done:
            shutil.rmtree(build, ignore_errors=True)


def _publish(body, path):
    """Write `body` and its record to a temp file, fsync it, rename it to `path`."""
    record = MAGIC + len(body).to_bytes(8, "little") + hashlib.sha256(body).digest()
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tt_", suffix=".tmp", dir=d)   # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.write(record)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    with contextlib.suppress(OSError):   # the rename itself durable (where directories open)
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


@contextlib.contextmanager
def cupy_cache():
    """CuPy's kernel cache (CUPY_CACHE_DIR, read at each compile) under the same rules
    while the CUDA backend compiles: the user's CUPY_CACHE_DIR when it is safe, else (and
    when unset: CuPy's default is made without a mode) `cuda/` in this cache directory.
    CuPy checks its own entries' MD5, so a truncated one is recompiled."""
    chosen = os.environ.get("CUPY_CACHE_DIR")
    if chosen:
        try:
            _make_private(os.path.abspath(chosen))
            problem = unsafe(chosen)
        except OSError as e:
            problem = f"it cannot be created ({e.strerror or e})"
        if problem:
            mine = os.path.join(cache_dir(), "cuda")
            if (chosen, problem) not in _warned:
                _warned.add((chosen, problem))
                warnings.warn(f"tinytensor.compiler: not using CUPY_CACHE_DIR={chosen!r} for "
                              f"the CUDA backend's kernels: {problem}. Using {mine!r} instead.",
                              RuntimeWarning, stacklevel=3)
            chosen = None
    if not chosen:
        chosen = os.path.join(cache_dir(), "cuda")
        _make_private(chosen)
    with _cupy_lock:
        saved = os.environ.get("CUPY_CACHE_DIR")
        os.environ["CUPY_CACHE_DIR"] = chosen
        try:
            yield chosen
        finally:
            if saved is None:
                os.environ.pop("CUPY_CACHE_DIR", None)
            else:
                os.environ["CUPY_CACHE_DIR"] = saved
