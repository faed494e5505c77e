"""A dependency-free progress bar for long loops: `for i in progress(range(n), "train"):`."""
import sys
import time


class progress:
    def __init__(self, iterable, desc="", total=None, width=28, stream=None):
        self.iterable = iterable
        self.desc = desc
        self.total = total if total is not None else len(iterable)
        self.width = width
        self.stream = stream or sys.stderr
        self.info = ""
        self.start = None
        self._line_open = False  # a terminal line drawn and not yet ended

    def set(self, **info):
        """Show key=value pairs (loss=..., tok/s=...) after the bar."""
        self.info = "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in info.items())

    def write(self, line):
        """Print a line without garbling the bar (the bar is redrawn on the next update)."""
        if self.stream.isatty():
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._line_open = False
        print(line, flush=True)

    def close(self):
        """End the bar's line when the loop stops early, so that what follows (an error
        message) starts on a line of its own."""
        if self._line_open:
            self.stream.write("\n")
            self.stream.flush()
            self._line_open = False

    def _draw(self, n):
        frac = n / self.total if self.total else 1.0
        filled = int(self.width * frac)
        elapsed = time.perf_counter() - self.start
        eta = elapsed / n * (self.total - n) if n else 0.0
        bar = "#" * filled + "-" * (self.width - filled)
        line = f"{self.desc} [{bar}] {n}/{self.total} {elapsed:5.1f}s eta {eta:5.1f}s  {self.info}"
        if self.stream.isatty():
            self.stream.write(f"\r{line}\033[K" + ("\n" if n >= self.total else ""))
            self._line_open = n < self.total
        elif n >= self.total:  # not a terminal (CI logs): only the final state
            self.stream.write(line + "\n")
        self.stream.flush()

    def __iter__(self):
        self.start = time.perf_counter()
        last = 0.0
        n = 0
        for item in self.iterable:
            yield item
            n += 1
            now = time.perf_counter()
            if now - last > 0.1 or n == self.total:
                self._draw(n)
                last = now
