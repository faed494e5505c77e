"""The primitive ops, grouped by family. Each op is a `Function` (forward on arrays,
backward in tinytensor ops) plus a thin function users call."""
