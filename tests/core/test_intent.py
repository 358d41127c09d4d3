"""core/intent.py: the intent's flags, one table."""

from __future__ import annotations

import pytest

from courtly.config import INTENTS
from courtly.core.intent import Intent, IntentProfile, profile_of


def test_the_config_and_the_core_know_the_same_intents():
    assert tuple(Intent) == INTENTS


@pytest.mark.parametrize("intent, recrawls, discovers, guesses_sitemap, watch_list", [
    ("archive", False, True, False, False),
    ("search", True, True, True, False),
    ("monitor", True, False, False, True),
])
def test_each_intent_resolves_to_its_flags(intent, recrawls, discovers, guesses_sitemap, watch_list):
    p = profile_of(intent)
    assert p == IntentProfile(Intent(intent), recrawls, discovers, guesses_sitemap, watch_list)
    assert profile_of(Intent(intent)) is p   # one value per intent


def test_an_unknown_intent_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown intent 'mirror' \(known: archive, search, monitor\)"):
        profile_of("mirror")
