"""The 1d, 2d and 3d classes of one layer, made from a base class written once.

torch.nn spells out Conv1d/Conv2d/Conv3d (and MaxPool*, AvgPool*, ...) as three classes that
differ only in the number of spatial dims; here each base reads `self.n` and this makes the
three subclasses, each a real class of the caller's module (its name, qualname and module as
if written out there, so repr, pickling and `type(m).__name__` in messages read as before)."""

SPATIAL = {1: "L", 2: "H, W", 3: "D, H, W"}


def per_dim(base, stem, dims=(1, 2, 3), doc=None):
    """[stem1d, stem2d, stem3d] (or the dims asked for): subclasses of base setting n.

    doc, if given, is formatted with name, n, spatial ("H, W") and spatial_out
    ("H_out, W_out") into each class's docstring."""
    out = []
    for n in dims:
        name = f"{stem}{n}d"
        attrs = {"n": n, "__module__": base.__module__, "__qualname__": name}
        if doc is not None:
            attrs["__doc__"] = doc.format(
                name=name, n=n, spatial=SPATIAL[n],
                spatial_out=", ".join(f"{s}_out" for s in SPATIAL[n].split(", ")))
        out.append(type(base)(name, (base,), attrs))
    return out
