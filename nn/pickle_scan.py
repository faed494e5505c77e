"""Check a pickle's opcode stream before unpickling it: what a hostile `data.pkl` could do to
the unpickler itself, found by reading the opcodes (pickletools.genops) without building
any object, in one iterative pass.

- Nesting. The unpickler builds a tuple nested 200,000 deep from 400 KB without recursing,
  but hashing it as a dict key (SETITEMS) recurses in C and kills the process with SIGSEGV;
  printing or comparing it recurses too (RecursionError). The scan follows the pickle
  machine's stack and memo with, for each object, how deeply it nests, and refuses the
  stream past MAX_DEPTH. A state dict nests about 6 deep (dict > tensor > its arguments >
  size tuple > int), so MAX_DEPTH leaves ample room for torch's `_metadata` and any
  reasonable pickler. A list or dict mutated after another container took it is not
  re-counted; only lists, dicts and sets can be, and none of them can be hashed, so what
  they can still cause is a RecursionError, which the loader reports like any other.
- Integers outside int64 (a tensor's sizes, offsets and element counts are int64 in torch):
  a 10,000-digit one cannot even be put in an error message (int->str limit) and a product
  of many of them burns CPU.
- Memo indices out of sequence: `LONG_BINPUT 4294967295` makes the C unpickler grow its
  memo table to 2**33 slots and write every one (64 GB). Python's pickler numbers memo
  entries 0, 1, 2, ...; the scan refuses an index beyond the next one.
"""
import io
import pickletools

MAX_DEPTH = 32
_INT64 = 1 << 63
_INT_OPS = {"INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4"}
_PUT_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}
_GET_OPS = {"GET", "BINGET", "LONG_BINGET"}
# ops that add to the container beneath their arguments: it keeps its place on the stack
_MUTATE_OPS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}


def scan(data):
    """None if the pickle `data` is safe to unpickle as far as its shape goes, else what is
    wrong, with the byte position."""
    stack, marks, memo = [], [], {}  # stack: each object's nesting depth; marks: stack heights
    try:
        for op, arg, pos in pickletools.genops(io.BytesIO(data)):
            name = op.name
            if name in _INT_OPS and not isinstance(arg, bool) and not -_INT64 <= arg < _INT64:
                return f"byte {pos}: an integer of {arg.bit_length()} bits, outside int64"
            if name == "MARK":
                if len(marks) >= MAX_DEPTH:
                    return f"byte {pos}: marks nest more than {MAX_DEPTH} deep"
                marks.append(len(stack))
                continue
            if name in _PUT_OPS or name == "MEMOIZE":
                index = len(memo) if name == "MEMOIZE" else arg
                if not stack or index > len(memo):
                    return f"byte {pos}: {name} {index} out of sequence (memo holds {len(memo)})"
                memo[index] = stack[-1]
                continue
            if name in _GET_OPS:
                if arg not in memo:
                    return f"byte {pos}: {name} {arg} of a memo entry never stored"
                stack.append(memo[arg])
                continue
            if name == "DUP":
                if not stack:
                    return f"byte {pos}: DUP of an empty stack"
                stack.append(stack[-1])
                continue
            if name == "POP" and marks and len(stack) == marks[-1]:
                marks.pop()  # as the unpickler does: protocol 0 pops a MARK this way
                continue
            problem = _apply(op, stack, marks)
            if problem:
                return f"byte {pos}: {name} {problem}"
            if stack and stack[-1] > MAX_DEPTH:
                return f"byte {pos}: {name} builds an object nested more than {MAX_DEPTH} deep"
    except Exception as e:  # noqa: BLE001 -- genops on a broken stream: its own error is the news
        return f"the opcode stream is malformed ({type(e).__name__}: {_clip(str(e))})"
    return None


def _apply(op, stack, marks):
    """Pop `op`'s arguments off `stack` and push its results' depths; a problem or None."""
    before = op.stack_before
    items = []
    if pickletools.markobject in before:
        if not marks:
            return "needs a MARK that was never pushed"
        fence = marks.pop()
        items, stack[fence:] = stack[fence:], []
        below = before.index(pickletools.markobject)
    else:
        below = len(before)
    floor = marks[-1] if marks else 0  # what the unpickler sees above the current mark
    if len(stack) - floor < below:
        return "pops more than the stack holds"
    popped = stack[len(stack) - below:] if below else []
    del stack[len(stack) - below:]
    if op.name in _MUTATE_OPS:
        container, added = popped[0], popped[1:] + items
        stack.append(max(container, 1 + max(added, default=0)))
        return None
    depth = 1 + max(popped + items, default=0)
    stack.extend([depth] * len(op.stack_after))
    return None


def _clip(text, n=120):
    return text if len(text) <= n else text[:n - 3] + "..."
