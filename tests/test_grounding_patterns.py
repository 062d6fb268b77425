"""The grounding check's regular expressions written for speed find what their plain forms find: the tokens of ASCII
text (``words._ASCII_TOKEN``) and the lower-case words the readability test counts (``readable._WORD``)."""

from __future__ import annotations

import random
import re

from mlflow_genai_metrics.grounding import readable, words

PLAIN_ASCII_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[0-9]+(?:[.,][0-9]+)*|%|\$")
PLAIN_WORD = r"(?<![\w'])[a-z]+(?:'[a-z]+)?"


def _texts(count: int, letters: str) -> list[str]:
    rng = random.Random(7)
    return ["".join(rng.choice(letters) for _ in range(rng.randrange(30))) for _ in range(count)]


def test_ascii_tokens_are_those_of_the_plain_pattern_and_of_the_unicode_one():
    for text in _texts(60_000, "ab'Z9.,%$ -_\n"):
        assert words._ASCII_TOKEN.findall(text) == PLAIN_ASCII_TOKEN.findall(text) == words._TOKEN.findall(text), text


def test_lower_case_words_are_those_of_the_plain_pattern():
    plain, plain_ascii = re.compile(PLAIN_WORD), re.compile(PLAIN_WORD, re.ASCII)
    for text in _texts(60_000, "ab'_1 -A\u00e9\u2019.,Z\n\u00a0x%$\u00a3\u0663\u4e00"):
        assert readable._WORD.findall(text) == plain.findall(text), text
        if text.isascii():
            assert readable._ASCII_WORD.findall(text) == plain_ascii.findall(text), text
