"""What every model config here shares: config.json in and out, derived fields, overrides.

The configs are dataclasses whose field names are HuggingFace's config.json keys. A field
listed in `_DERIVED` may be None, meaning "follow the other fields" (LLaMA's head_dim is
hidden_size // num_attention_heads unless set); the config remembers which fields it filled
in, so overriding the fields they follow recomputes them, while a value the caller chose stays.
"""
import dataclasses
import numbers


class ModelConfig:
    _DERIVED = {}  # field -> rule(config) giving its value when the field is None

    def __post_init__(self):
        self._derived = set()
        for name, rule in self._DERIVED.items():
            if getattr(self, name) is None:
                setattr(self, name, rule(self))
                self._derived.add(name)

    @classmethod
    def from_dict(cls, d):
        """The config for a config.json dict; keys that are not fields are ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def to_dict(self):
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def model_config(model, config_class, config, overrides):
    """The model's own config: `config` (default: config_class()) with `overrides`, built
    anew through the dataclass constructor (dataclasses.replace), so derived fields follow the
    overrides and the caller's object is never changed."""
    base = config_class if config is None else type(config)
    known = {f.name for f in dataclasses.fields(base)}
    unknown = [k for k in overrides if k not in known]
    if unknown:
        raise TypeError(f"{model}: {', '.join(map(repr, unknown))} "
                        f"{'is not a field' if len(unknown) == 1 else 'are not fields'} "
                        f"of {base.__name__}")
    if config is None:
        return config_class(**overrides)
    rederive = {name: None for name in getattr(config, "_derived", ()) if name not in overrides}
    return dataclasses.replace(config, **rederive, **overrides)


def check_pad_token_id(model, config, *vocab_fields):
    """pad_token_id becomes the padding_idx of the token embeddings sized by `vocab_fields`:
    None, or a row of each (negative counts from the end, as torch's padding_idx)."""
    pad = config.pad_token_id
    if pad is None:
        return
    for field in vocab_fields:
        V = getattr(config, field)
        if not (isinstance(pad, numbers.Integral) and not isinstance(pad, bool) and -V <= pad < V):
            raise ValueError(f"{model}: pad_token_id={pad!r} is not a row of the token embedding "
                             f"({field}={V}); it must be None or an int in [{-V}, {V})")
