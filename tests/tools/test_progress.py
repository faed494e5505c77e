"""The progress bar on a terminal: a loop that stops early leaves no half-drawn line."""
import io

from tinytensor.tools.lib.progress import progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_close_ends_the_bar_line_of_a_loop_stopped_early():
    term = Terminal()
    bar = progress(range(5), "train", stream=term)
    for i in bar:
        if i == 2:
            break
    assert not term.getvalue().endswith("\n")  # the bar is mid-line
    bar.close()
    assert term.getvalue().endswith("\n")
    bar.close()  # twice: nothing more
    assert term.getvalue().count("\n") == 1


def test_close_after_a_finished_loop_adds_nothing():
    term = Terminal()
    bar = progress(range(3), "train", stream=term)
    for _ in bar:
        pass
    before = term.getvalue()
    bar.close()
    assert before.endswith("\n") and term.getvalue() == before
