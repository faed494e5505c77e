"""nn: modules, layers, losses, optimizers (to come; see the issues)."""
