import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from hypothesis import settings

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("deep", max_examples=1500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def held_seals(monkeypatch):
    """(entered, release): a seal on the server's seal thread waits until `release` is set, and
    `entered` tells that one began; seals anywhere else (the loop, recovery) are not held."""
    from windowstore.store.window import Window

    entered, release = threading.Event(), threading.Event()
    seal_cut = Window.seal_cut

    def held_seal(self, cut):
        if threading.current_thread().name.startswith("windowstore-seal") and not release.is_set():
            entered.set()
            release.wait(10)
        return seal_cut(self, cut)
    monkeypatch.setattr(Window, "seal_cut", held_seal)
    yield entered, release
    release.set()
