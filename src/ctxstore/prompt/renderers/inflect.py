"""Singular and plural of English tag names.

Renderers need both directions: a list under ``steps`` renders one ``<step>`` per item, and
with ``group_fragments`` a run of ``hint`` fragments is wrapped in ``<hints>``. Names are
identifiers more often than prose (``style_guide``, ``styleGuide``, ``apis``), so only the last
word is inflected and its case is kept: ``styleGuide`` -> ``styleGuides``, ``HINT`` -> ``HINTS``;
an acronym plural only loses its ``s`` (``APIs`` -> ``API``).

The rules are a small table, not a dictionary of English: regular endings, a list of irregular
nouns, uncountable nouns that stay as they are, and the singular words ending in ``s`` (``status``,
``alias``, ``analysis``) that must not lose it. Both functions are idempotent: ``plural`` leaves a
plural word alone and ``singular`` a singular one. A name that does not end in an ASCII letter
(``level1``, ``名前``) is returned unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["plural", "singular"]

#: Nouns with one form for both numbers.
_UNCOUNTABLE = frozenset(
    {
        "advice",
        "aircraft",
        "analytics",
        "chaos",
        "data",
        "deer",
        "economics",
        "equipment",
        "ethics",
        "evidence",
        "feedback",
        "firmware",
        "fish",
        "furniture",
        "guidance",
        "hardware",
        "information",
        "knowledge",
        "mathematics",
        "media",
        "metadata",
        "middleware",
        "moose",
        "music",
        "news",
        "physics",
        "politics",
        "progress",
        "research",
        "series",
        "sheep",
        "software",
        "species",
        "staff",
        "traffic",
    }
)

#: Singular -> plural, for nouns the endings below would get wrong.
_IRREGULAR = {
    "alumnus": "alumni",
    "analysis": "analyses",
    "axis": "axes",
    "cactus": "cacti",
    "calf": "calves",
    "child": "children",
    "cookie": "cookies",
    "crisis": "crises",
    "criterion": "criteria",
    "datum": "data",
    "diagnosis": "diagnoses",
    "echo": "echoes",
    "elf": "elves",
    "foot": "feet",
    "fungus": "fungi",
    "goose": "geese",
    "half": "halves",
    "hero": "heroes",
    "hypothesis": "hypotheses",
    "knife": "knives",
    "leaf": "leaves",
    "life": "lives",
    "loaf": "loaves",
    "man": "men",
    "matrix": "matrices",
    "mouse": "mice",
    "movie": "movies",
    "nucleus": "nuclei",
    "ox": "oxen",
    "parenthesis": "parentheses",
    "person": "people",
    "phenomenon": "phenomena",
    "potato": "potatoes",
    "quiz": "quizzes",
    "radius": "radii",
    "self": "selves",
    "shelf": "shelves",
    "stimulus": "stimuli",
    "synopsis": "synopses",
    "synthesis": "syntheses",
    "thesis": "theses",
    "thief": "thieves",
    "lie": "lies",
    "pie": "pies",
    "tie": "ties",
    "tomato": "tomatoes",
    "tooth": "teeth",
    "veto": "vetoes",
    "vertex": "vertices",
    "wife": "wives",
    "wolf": "wolves",
    "woman": "women",
    "zombie": "zombies",
}

#: Plural -> singular: the reverse of the irregular table, plus plurals with a second singular.
_IRREGULAR_SINGULAR = {plural: singular for singular, plural in _IRREGULAR.items()} | {
    "indices": "index",
    "appendices": "appendix",
}

#: Singular words ending in ``us``, ``is``, ``as`` or ``os``; any other such word is taken as a
#: plural (``cpus``, ``apis``, ``ideas``, ``photos``).
_SINGULAR_WITH_S = frozenset(
    {
        # -us
        "abacus",
        "apparatus",
        "bonus",
        "bus",
        "campus",
        "census",
        "chorus",
        "circus",
        "consensus",
        "corpus",
        "focus",
        "genius",
        "hiatus",
        "minus",
        "nexus",
        "octopus",
        "onus",
        "opus",
        "plus",
        "prospectus",
        "status",
        "surplus",
        "syllabus",
        "thesaurus",
        "virus",
        "walrus",
        # -is
        "aegis",
        "chassis",
        "iris",
        "metropolis",
        "pelvis",
        "tennis",
        "trellis",
        # -as
        "alias",
        "atlas",
        "bias",
        "canvas",
        "gas",
        "pancreas",
        # -os
        "cosmos",
        "ethos",
        "kudos",
        "pathos",
        "thermos",
    }
)

#: Words ending in ``che`` whose plural ``-ches`` must not lose the ``e`` (unlike ``matches``).
_CHE_WORDS = frozenset(
    {"ache", "avalanche", "cache", "cliche", "headache", "moustache", "mustache", "niche"}
)

# The last English word of a name: a capitalized or lowercase word, or an all-caps run.
_LAST_WORD = re.compile(r"(?:[A-Z]?[a-z]+|[A-Z]+)$")
# An acronym with a plural ``s`` (``APIs``, ``userIDs``): the ``s`` is the whole inflection.
_ACRONYM_PLURAL = re.compile(r"[A-Z]{2,}s$")
_CONSONANT_Y = re.compile(r"[^aeiou]y$")


def plural(name: str) -> str:
    """The plural of ``name``'s last word: ``hint`` -> ``hints``, ``category`` -> ``categories``."""
    if _ACRONYM_PLURAL.search(name):
        return name
    return _inflect(name, _plural_word)


def singular(name: str) -> str:
    """The singular of ``name``'s last word: ``items`` -> ``item``, ``queries`` -> ``query``."""
    if _ACRONYM_PLURAL.search(name):
        return name[:-1]
    return _inflect(name, _singular_word)


def _inflect(name: str, rule: Callable[[str], str]) -> str:
    match = _LAST_WORD.search(name)
    if match is None:
        return name
    word = match.group()
    inflected = rule(word.lower())
    if len(word) > 1 and word.isupper():
        inflected = inflected.upper()
    elif word[0].isupper():
        inflected = inflected[0].upper() + inflected[1:]
    return name[: match.start()] + inflected


def _plural_word(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word in _UNCOUNTABLE or _singular_word(word) != word:
        return word  # already plural
    if word.endswith("sis"):
        return word[:-2] + "es"
    if _CONSONANT_Y.search(word):
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def _singular_word(word: str) -> str:
    if word in _UNCOUNTABLE or word in _IRREGULAR or word in _SINGULAR_WITH_S:
        return word
    if word in _IRREGULAR_SINGULAR:
        return _IRREGULAR_SINGULAR[word]
    if not word.endswith("s") or word.endswith(("ss", "sis", "itis")) or len(word) < 3:
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("es"):
        return _singular_es(word)
    return word[:-1]


def _singular_es(word: str) -> str:
    """Words ending in ``es``: drop ``es`` after a sibilant (``boxes``), else only the ``s``."""
    stem = word[:-2]
    drop_es = (
        stem.endswith(("ss", "sh", "x", "zz"))
        or (stem.endswith("ch") and stem + "e" not in _CHE_WORDS)
        or stem in _SINGULAR_WITH_S
    )
    return stem if drop_es else word[:-1]
