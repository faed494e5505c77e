# Command-line overrides for train.py / sample.py, run with exec() in the script's globals:
#   python train.py config/small.py --batch_size=8 --compile=False
# A bare argument names a config file to exec; --key=value overrides one global, the value
# read as a Python literal when it is one (so types follow the defaults), else as a string.
import sys
from ast import literal_eval

for arg in sys.argv[1:]:
    if not arg.startswith('--'):
        print(f"reading overrides from {arg}")
        with open(arg) as f:
            exec(f.read())
        continue
    key, _, val = arg[2:].partition('=')
    if key not in globals():
        raise ValueError(f"unknown config key: {key}")
    try:
        val = literal_eval(val)
    except (SyntaxError, ValueError):
        pass
    if type(val) is not type(globals()[key]):
        raise TypeError(f"--{key}={val!r}: expected a {type(globals()[key]).__name__}")
    print(f"override: {key} = {val!r}")
    globals()[key] = val
