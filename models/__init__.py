"""models: the Transformer family (to come; see the issues)."""
