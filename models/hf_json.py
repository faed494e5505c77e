"""The one reader for the JSON files of a HuggingFace directory (config.json,
tokenizer_config.json, special_tokens_map.json, modules.json, 1_Pooling/config.json,
sentence_bert_config.json): whatever is wrong with such a file, a ConfigError names the
file and, for a value, the field.

json.load alone lets through a file's own faults as JSONDecodeError, TypeError or
AttributeError far from the file (`"pad_token": 5`, a modules.json that is an object), and
nesting a few thousand levels deep as RecursionError (the parser recurses once per level):
the depth is measured first, without recursion (nn.checkpoint's counter), and the file
refused past MAX_DEPTH. No file of a HuggingFace directory nests more than a few levels.
"""
import json
import os

from tinytensor.nn.checkpoint import _depth

MAX_DEPTH = 64
MAX_BYTES = 64 << 20  # a tokenizer_config.json with every added token is a few MB at most
_KINDS = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
          int: "number", float: "number"}


class ConfigError(ValueError):
    """A JSON file of a HuggingFace directory (config.json, tokenizer_config.json, ...) is
    malformed, or config.json does not describe the checkpoint's tensors; the message names
    the files and the fields."""


def kind(value):
    """The JSON kind of a parsed value: object, array, string, number, boolean, null."""
    return _KINDS.get(type(value), type(value).__name__)


def short(value, n=60):
    """A value as JSON for a message, clipped to `n` characters."""
    try:
        text = json.dumps(value)
    except ValueError:  # an integer too long to print (int->str limit)
        text = f"<an integer of {value.bit_length()} bits>" if isinstance(value, int) else repr(value)
    return text if len(text) <= n else text[:n - 3] + "..."


def read_json(path, who, expect=dict):
    """The parsed JSON of `path`, which must hold an `expect` (dict or list); None if there
    is no such file. Raises ConfigError naming `who` (the caller, "from_hf") and the file."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size > MAX_BYTES:  # (read(n) would allocate n bytes)
                raise ConfigError(f"{who}: {path} is larger than {MAX_BYTES >> 20} MB, more than "
                                  "such a file holds")
            raw = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise ConfigError(f"{who}: cannot read {path} ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{who}: {path} is not UTF-8 text (byte 0x{raw[e.start]:02x} at "
                          f"offset {e.start})") from None
    depth = _depth(text)
    if depth > MAX_DEPTH:
        raise ConfigError(f"{who}: {path} nests {depth} levels deep, at most {MAX_DEPTH} are "
                          "allowed")
    try:
        value = json.loads(text)
    except ValueError as e:  # JSONDecodeError, or a number past the int->str limit
        raise ConfigError(f"{who}: {path} is not valid JSON ({e})") from None
    if not isinstance(value, expect):
        raise ConfigError(f"{who}: {path} holds a JSON {kind(value)}, not an {_KINDS[expect]}")
    return value


def problem(who, path, field, value, must):
    """The ConfigError for field `field` of `path` holding `value`, which `must` be ..."""
    return ConfigError(f"{who}: {path}: {field}={short(value)} must be {must}")


def optional_int(config, field, who, path, minimum=1):
    """config[field] if it is an integer >= minimum, None if absent or null."""
    value = config.get(field)
    if value is None:
        return None
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= minimum):
        raise problem(who, path, field, value, f"an integer >= {minimum} or null")
    return value
