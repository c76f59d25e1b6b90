"""Singular and plural of English tag names."""

from __future__ import annotations

import pytest

from ctxstore.prompt.renderers.inflect import plural, singular

# (singular, plural) pairs that must convert both ways.
PAIRS = [
    # regular
    ("hint", "hints"),
    ("item", "items"),
    ("term", "terms"),
    ("guardrail", "guardrails"),
    ("example", "examples"),
    ("rule", "rules"),
    ("step", "steps"),
    ("day", "days"),
    ("key", "keys"),
    ("photo", "photos"),
    ("curve", "curves"),
    ("chief", "chiefs"),
    ("case", "cases"),
    ("response", "responses"),
    ("use", "uses"),
    ("database", "databases"),
    ("idea", "ideas"),
    ("persona", "personas"),
    ("api", "apis"),
    ("cpu", "cpus"),
    ("id", "ids"),
    # consonant + y
    ("category", "categories"),
    ("query", "queries"),
    ("analogy", "analogies"),
    ("glossary", "glossaries"),
    ("identity", "identities"),
    # sibilants
    ("box", "boxes"),
    ("index", "indexes"),
    ("match", "matches"),
    ("wish", "wishes"),
    ("class", "classes"),
    ("address", "addresses"),
    ("process", "processes"),
    ("buzz", "buzzes"),
    ("status", "statuses"),
    ("bus", "buses"),
    ("alias", "aliases"),
    ("bias", "biases"),
    ("cache", "caches"),
    ("niche", "niches"),
    # -sis
    ("analysis", "analyses"),
    ("base", "bases"),
    ("thesis", "theses"),
    # irregular
    ("person", "people"),
    ("child", "children"),
    ("criterion", "criteria"),
    ("leaf", "leaves"),
    ("knife", "knives"),
    ("hero", "heroes"),
    ("potato", "potatoes"),
    ("quiz", "quizzes"),
    ("axis", "axes"),
    ("matrix", "matrices"),
    ("movie", "movies"),
    ("tie", "ties"),
]


@pytest.mark.parametrize(("one", "many"), PAIRS)
def test_plural(one: str, many: str) -> None:
    assert plural(one) == many


@pytest.mark.parametrize(("one", "many"), PAIRS)
def test_singular(one: str, many: str) -> None:
    assert singular(many) == one


@pytest.mark.parametrize(("one", "many"), PAIRS)
def test_both_are_idempotent(one: str, many: str) -> None:
    assert plural(many) == many
    assert singular(one) == one


@pytest.mark.parametrize("word", ["data", "metadata", "information", "news", "series", "sheep"])
def test_uncountable_words_do_not_change(word: str) -> None:
    assert plural(word) == word
    assert singular(word) == word


def test_sis_words_take_ses() -> None:
    # "bases" reads as the plural of "base" (knowledge_bases), so only this direction holds.
    assert plural("basis") == "bases"
    assert plural("crisis") == "crises"


def test_second_plural_forms_have_a_singular() -> None:
    assert singular("indices") == "index"
    assert singular("appendices") == "appendix"


@pytest.mark.parametrize(
    ("name", "many"),
    [
        ("style_guide", "style_guides"),
        ("styleGuide", "styleGuides"),
        ("user-query", "user-queries"),
        ("date format", "date formats"),
        ("Hint", "Hints"),
        ("HINT", "HINTS"),
        ("Person", "People"),
        ("userAPIKey", "userAPIKeys"),
        ("API", "APIS"),
    ],
)
def test_only_the_last_word_is_inflected_and_its_case_kept(name: str, many: str) -> None:
    assert plural(name) == many
    assert singular(many) == name


def test_acronym_plurals_lose_only_their_s() -> None:
    assert singular("APIs") == "API"
    assert singular("userIDs") == "userID"
    assert plural("APIs") == "APIs"


@pytest.mark.parametrize("name", ["level1", "名前", "x_", ""])
def test_names_not_ending_in_an_english_word_are_unchanged(name: str) -> None:
    assert plural(name) == name
    assert singular(name) == name
