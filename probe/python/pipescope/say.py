"""pipescope.say — the hook's one way to speak: a line on stderr, never an
exception into the job.  Its own module so that every other one (core,
host, the adapters) can use it without importing each other."""

import sys


def say(msg):
    """One line on stderr, never an exception."""
    try:
        sys.stderr.write(f"pipescope: {msg}\n")
        sys.stderr.flush()
    except Exception:
        pass
