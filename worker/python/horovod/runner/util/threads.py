"""Background threads, as Horovod's runner starts them."""

import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Starts target(*args) in a new thread and returns the thread.

    Arguments:
        target: the function to run.
        args: its positional arguments (a tuple or list).
        name: the thread's name, or None for Python's default.
        daemon: whether the thread may be left running at exit (default).
        silent: if True, an exception raised by target ends the thread
            without being reported.
    """
    if not isinstance(args, (tuple, list)):
        raise ValueError("args must be a tuple or a list, not %s"
                         % type(args).__name__)

    def run():
        try:
            target(*args)
        except Exception:  # noqa: BLE001 (the caller asked for silence)
            if not silent:
                raise

    thread = threading.Thread(target=run, name=name, daemon=daemon)
    thread.start()
    return thread
