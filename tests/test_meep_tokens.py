"""The words a MEEP agent clicks: a frozen tokenizer whose tokens map back to the user's text."""

from __future__ import annotations

import pytest

from turkflow.protocols.meep.tokens import span_text, tokenize, words

MESSAGES = [
    "I want to go to Bluebird Coffee on Venice Boulevard.",
    "Is it the one across from Joe's Diner on 5th St.?",
    "donuts please!!  at 10:30, maybe 3.5 miles — isn't that far?",
    "  caf\u00e9 Pearl\tTea  ",
    "",
]


@pytest.mark.parametrize("text", MESSAGES)
def test_every_visible_character_is_in_one_token_and_only_whitespace_lies_between(text):
    tokens = tokenize(text)
    rebuilt, at = [], 0
    for n, token in enumerate(tokens):
        assert token.index == n and text[token.start:token.end] == token.text
        assert text[at:token.start].strip() == ""
        rebuilt.append(text[at:token.end])
        at = token.end
    assert "".join(rebuilt) + text[at:] == text and text[at:].strip() == ""


def test_words_keep_apostrophes_numbers_keep_their_separators_punctuation_stands_alone():
    texts = [t.text for t in tokenize("Joe's Diner on 5th St. at 10:30, isn't it 3.5 mi?")]
    assert texts == ["Joe's", "Diner", "on", "5th", "St", ".", "at", "10:30", ",", "isn't", "it", "3.5", "mi",
                     "?"]


def test_tokenizing_is_the_same_every_time():
    assert tokenize(MESSAGES[1]) == tokenize(MESSAGES[1])


def test_adjacent_clicked_words_read_as_the_user_wrote_them_others_are_joined_by_spaces():
    text = "Joe's Diner on 5th St. please"
    tokens = tokenize(text)
    assert span_text(text, tokens[3:6]) == "5th St."
    assert span_text(text, [tokens[0], tokens[1], tokens[3]]) == "Joe's Diner 5th"
    assert span_text(text, [tokens[4], tokens[3]]) == "St 5th"  # click order, not text order
    assert span_text(text, []) == ""


def test_query_words_are_lowercased_without_punctuation():
    assert words("Bluebird Coffee, Venice Blvd.") == ["bluebird", "coffee", "venice", "blvd"]
