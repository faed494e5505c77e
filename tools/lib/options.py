"""The command-line options that more than one program in tools/ declares, meaning the same
thing in each (train.py, train_mlp.py): one definition, added to the program's own parser."""


def add_device(ap):
    """--device: where the model and data live, a tinytensor device string."""
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)")


def add_seed(ap, seeds):
    """--seed: the one seed of a run's randomness; `seeds` says what it draws, for the help."""
    ap.add_argument("--seed", type=int, default=0, help=f"seed for {seeds} (default: %(default)s)")
