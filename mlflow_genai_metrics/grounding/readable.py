"""Which texts the grounding check can read: English, in the Latin script. Others get a reason, never a number.

The check's features (stems, names, function words, negations) and its word vectors are English; on Chinese text
every summary scored about 0.04, faithful or not. ``unreadable(text)`` says why a text cannot be read, cheaply (one
regular expression over the characters, and the share of English function words among the first words):

- most of its letters are in another script: ``"written mostly in Chinese or Japanese ideographs (CJK), not the
  Latin script the check reads"``;
- its letters are Latin, but among its words written in lower case (at least 15 of them) function words of other
  languages ("le", "und", "los") outnumber English ones ("the", "of") and make a tenth of them: a language the check
  was not built for. Names (a team list) and a repeated phrase are read as English;
- it holds no content word, number or date, only function words ("It is.", "The the of."): there is nothing to
  hold against the source, and every share of the features was 1 of nothing: such summaries scored 0.57-0.58 and
  were called grounded, above faithful one-sentence summaries (``NOTHING_TO_CHECK``, found from the features'
  tokens by ``scoring``; a claim like that has no ``lexical_support``).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from .words import STOPWORDS

_LETTER = re.compile(r"[^\W\d_]")
# a letter outside Basic Latin, Latin-1, Latin Extended-A/B and Latin Extended Additional
_OTHER_SCRIPT = re.compile(r"[^\W\d_\x00-\u024f\u1e00-\u1eff]")
# words written in lower case (names and headings aside): not after a letter, digit, _ or ' (``\b`` and no '), the
# repeats possessive (nothing is ever given back): a tenth faster than the same rule as one look-behind
_WORD = re.compile(r"\b(?<!')[a-z]++(?:'[a-z]++)?+")
_ASCII_WORD = re.compile(_WORD.pattern, re.ASCII)  # the same on ASCII text (\w differs only beyond it), faster
_SCRIPTS = {
    "CJK": "Chinese or Japanese ideographs (CJK)",
    "HANGUL": "Korean (Hangul)", "ARABIC": "Arabic", "HEBREW": "Hebrew", "CYRILLIC": "Cyrillic", "GREEK": "Greek",
    "DEVANAGARI": "Devanagari", "THAI": "Thai",
}
# The rule's version, recorded in the model file (which refuses another): a changed rule changes which rows get a
# number, so it must change the model's tag, and with it the run signature and the cache's keys.
RULE = "readable:v2"  # v2: a text with nothing to check (``NOTHING_TO_CHECK``)
NOTHING_TO_CHECK = "not checked: the {text} has no content word, number or date, only function words: nothing to hold against the source"
LANGUAGE_WORDS = 15  # fewer lower-case words than this are not tested for language
# Function words of French, German, Spanish, Italian, Portuguese and Dutch that are not English words.
FOREIGN = frozenset(
    """le la les des du et est une un que qui dans pour pas sur avec ce cette sont aux mais ou leur
    der das und ist nicht ein eine mit den von zu sich auf dem des ich wir sie auch wird werden
    el los las y por con para una del al lo como pero se su sus muy
    il che di della gli nel non sono anche
    em um uma os ao dos das com pelo
    het een van niet zijn wordt ook""".split()
)


def _script(letters: list[str]) -> str:
    names = Counter(unicodedata.name(c, "UNKNOWN").split()[0] for c in letters[:500])
    if (names["HIRAGANA"] + names["KATAKANA"]) * 10 >= sum(names.values()):  # kanji among kana: Japanese
        return "Japanese (kanji and kana)"
    script = names.most_common(1)[0][0]
    return _SCRIPTS.get(script, f"{script.title()} script")


def unreadable(text: str) -> str | None:
    """Why the check cannot read ``text``, or None when it can (English in the Latin script, or no letters)."""
    # (a text whose characters all come before U+0250, as one with a pound sign, has no letter of another script)
    other = [] if text.isascii() or max(text) < "\u0250" else _OTHER_SCRIPT.findall(text)
    if other:
        letters = len(_LETTER.findall(text))
        if len(other) * 2 > letters:
            return f"written mostly in {_script(other)}, not the Latin script the check reads"
    start = text[:3000]
    words = (_ASCII_WORD if start.isascii() else _WORD).findall(start)
    if len(words) >= LANGUAGE_WORDS:
        foreign = sum(map(FOREIGN.__contains__, words))
        english = sum(map(STOPWORDS.__contains__, words)) if foreign * 10 >= len(words) else foreign
        if foreign > english and foreign * 10 >= len(words):  # a list of names or a repeated phrase is neither
            return (f"not English: {foreign} of its {len(words)} lower-case words are function words of other "
                    f"languages ('{min(w for w in words if w in FOREIGN)}'), {english} English ones")
    return None


def pairs_unreadable(sources: list[str] | tuple[str, ...], summaries: list[str] | tuple[str, ...],
                     read: Iterable[str] = ()) -> list[str | None]:
    """Why each (source, summary) pair cannot be checked, naming which text; None where both can be read. A source
    shared by many pairs is read once; those in ``read`` were found readable before and are not read again."""
    seen: dict[str, str | None] = dict.fromkeys(read)
    reasons = []
    for source, summary in zip(sources, summaries):
        if source not in seen:
            seen[source] = unreadable(source)
        why, name = (unreadable(summary), "summary")
        if why is None:
            why, name = seen[source], "source"
        reasons.append(None if why is None else f"not checked: the {name} is {why}")
    return reasons
