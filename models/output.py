"""The object models return: attribute access like HF's ModelOutput (`out.logits`, `out.loss`)."""


class ModelOutput(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"model output has no field {name!r}; fields: {list(self)}") from None
