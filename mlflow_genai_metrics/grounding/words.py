"""Small, local text handling for the grounding check: sentences, tokens, Porter stems, numbers, names.

Nothing is downloaded: sentences are split as ``text.split_sentences`` splits them (a rule), tokens by one regular
expression, stems by NLTK's ``PorterStemmer`` (code, no data package), read for 21.7k common words from a shipped
table of its own stems (``porter-stems-v1.json.gz``: NLTK's rules cost ~35 us a word). Every word's analysis is
memoised, so a corpus pays for each distinct word once.
"""

from __future__ import annotations

import gzip
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import threading
import unicodedata
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

# Numbers keep their separators ("1,000", "3.5"); words keep an inner apostrophe ("didn't", "o'neill"). Words are
# tried first (most tokens are words); the alternatives start with different characters, so the order changes nothing.
_TOKEN = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*|\d+(?:[.,]\d+)*|%|[$\u00a3\u20ac]")
# The same on ASCII text (a third faster), written for the search to skip to where a token can start: its first
# character from one class, the rest by that character's kind, the repeats possessive (no alternative ever needs a
# character given back), the same matches a fifth faster than ``[A-Za-z]+(?:'[A-Za-z]+)*|[0-9]+(?:[.,][0-9]+)*|%|\$``.
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9%$](?:(?<=[A-Za-z])[A-Za-z]*+(?:'[A-Za-z]++)*+|(?<=[0-9])[0-9]*+(?:[.,][0-9]++)*+|(?<=[%$]))")
# Marks with no width that split a word in two when left in it (decomposed accents are composed first, NFC): the
# soft hyphen, zero-width space and joiners, direction marks and embeddings, the word joiner, the byte-order mark.
# A summary in decomposed form scored 0.018 against 0.278 composed ("names the source lacks: Mu, Zu").
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
# ``text.split_sentences``'s breaks (white space after ., ! or ?, or after one of them and a closing quote or
# bracket), found from the punctuation instead of looking behind every space: the same sentences, four times faster.
_BREAK = re.compile(r"([.!?][\"'\u201d\u2019)\]]?)\s+")
# Function words: never counted as content, so support is about what a sentence says, not how.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here hers
    herself him himself his how i if in into is it its itself just me more most my myself now of off on once only
    or other our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves s t d ll re ve m said says say
    told according one mr mrs ms dr also us via per cent percent may might must shall upon""".split()
)
NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor without cannot n't didn't doesn't don't isn't wasn't weren't "
    "aren't won't wouldn't couldn't shouldn't hasn't haven't hadn't can't ain't fail failed fails unable".split()
)
_NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "dozen": 12, "half": 0.5,
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10, "twice": 2, "double": 2, "triple": 3,
}
_SCALES = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "millions": 1e6, "bn": 1e9,
           "billion": 1e9, "billions": 1e9, "tn": 1e12, "trillion": 1e12}
_DATE_WORDS = frozenset(
    "january february march april may june july august september october november december jan feb mar apr jun jul "
    "aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday yesterday today tomorrow "
    "tonight weekend morning afternoon evening night spring summer autumn winter".split()
)


STEM_TABLE = Path(__file__).resolve().with_name("porter-stems-v1.json.gz")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The Porter stem of a lowercase word (memoised): NLTK's, read from the shipped table of NLTK's stems of
    21.7k common English words (``scripts/build_stem_table.py``) where it has the word, else computed by NLTK."""
    found = _stem_table().get(word)
    return found if found is not None else _stemmer().stem(word)


@lru_cache(maxsize=1)
def _stem_table() -> dict[str, str]:
    """word -> NLTK's Porter stem, for the words of ``STEM_TABLE`` (read once per process, about 10 ms)."""
    table = json.loads(gzip.decompress(STEM_TABLE.read_bytes()))
    return {**{word: word for word in table["same"]}, **table["stems"]}


@lru_cache(maxsize=1)
def _stemmer():
    return porter_class(lean=threading.active_count() == 1 and "nltk" not in sys.modules)()


def porter_class(*, lean: bool = False) -> type:
    """NLTK's ``PorterStemmer``. ``lean``: its module loaded without running ``nltk/__init__.py``, which imports
    NLTK's collocations, metrics and scipy.stats (2 s of CPU, the grounding worker's whole start-up, 2 ms a row of a
    1,000-row run): the packages ``nltk`` and ``nltk.stem`` stand in bare while ``nltk.stem.porter`` and what it
    imports load, then every ``nltk`` module is taken out of ``sys.modules`` again, so a later ``import nltk`` loads
    the real package. Only where no other thread could import ``nltk`` meanwhile (``_stemmer`` asks for it in a
    process of one thread); anything unexpected falls back to the plain import. The same class, the same stems."""
    if lean:
        try:
            root = importlib.util.find_spec("nltk").submodule_search_locations[0]
            for name, where in (("nltk", root), ("nltk.stem", os.path.join(root, "stem"))):
                bare = importlib.machinery.ModuleSpec(name, None, is_package=True)
                bare.submodule_search_locations = [where]
                sys.modules[name] = importlib.util.module_from_spec(bare)
            return importlib.import_module("nltk.stem.porter").PorterStemmer
        except Exception:  # noqa: BLE001 - another NLTK's layout: the plain import below
            pass
        finally:
            for name in [name for name in sys.modules if name == "nltk" or name.startswith("nltk.")]:
                del sys.modules[name]
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer


INFORMATIVE = frozenset({"content", "date", "number"})  # the kinds of token that say something to check


@dataclass(slots=True, eq=False)  # compared by identity: "None in tokens" stays a C-level scan
class Token:
    """A token as the features read it. Shared by every text that has its word (``_KNOWN``): never changed after it
    is made (not frozen only because a frozen dataclass takes three times as long to make, once per new word)."""

    text: str  # as written
    lower: str
    key: str  # what is compared: a Porter stem, or a number's canonical value
    kind: str  # "content", "date", "number", "neg" (any negation word), "stop" or "symbol"
    capitalised: bool
    # Derived from the fields above once, for the loops over every token of a text: one test of an attribute each.
    info: str | None = field(init=False)  # the key of an informative token (``INFORMATIVE``), else None
    name: str | None = field(init=False)  # the key of a content word written capitalised, else None

    def __post_init__(self) -> None:
        self.info = self.key if self.kind in INFORMATIVE else None
        self.name = self.key if self.capitalised and self.kind == "content" else None


class Sentence(NamedTuple):  # made for every sentence of every text: a tuple takes two thirds of a frozen dataclass's time
    text: str
    tokens: tuple[Token, ...]


@lru_cache(maxsize=300_000)
def _word(lower: str) -> tuple[str, str]:
    """(key, kind) of a lowercase word token."""
    if lower in _NUMBER_WORDS:
        return _canonical(Decimal(str(_NUMBER_WORDS[lower]))), "number"
    if lower.replace("\u2019", "'") in NEGATIONS:
        return "not", "neg"
    if lower in STOPWORDS or lower in _SCALES:
        return lower, "stop"
    return stem(lower), "date" if lower in _DATE_WORDS else "content"


# Opposites an edit can swap, as "word/opposite" pairs.
_ANTONYM_PAIRS = [tuple(pair.split("/")) for pair in """increase/decrease rise/fall raise/cut up/down gain/loss
win/lose won/lost more/less higher/lower above/below before/after accept/reject approve/reject open/close start/end
begin/finish buy/sell male/female first/last positive/negative larger/smaller large/small big/small longer/shorter
long/short major/minor early/late earlier/later allow/ban agree/disagree include/exclude including/excluding
success/failure profit/loss strong/weak add/remove increase/reduce grow/shrink best/worst better/worse
maximum/minimum majority/minority young/old import/export guilty/innocent alive/dead legal/illegal true/false
support/oppose private/public same/different easy/difficult cheap/expensive rich/poor north/south east/west
husband/wife son/daughter father/mother brother/sister man/woman men/women boy/girl over/under inside/outside
always/never all/none most/least many/few increased/decreased increasing/decreasing rising/falling lowest/highest
enable/prevent agreed/refused accepted/rejected won/defeated high/low rise/decline growth/decline improve/worsen
improved/worsened strengthen/weaken expand/contract hire/fire join/leave joined/left arrive/depart pass/fail
passed/failed like/dislike love/hate happy/sad confirm/deny confirmed/denied remember/forget send/receive
sent/received give/take gave/took borrow/lend lead/follow top/bottom front/back enter/exit online/offline
upgrade/downgrade overestimate/underestimate outperform/underperform upside/downside upward/downward
bullish/bearish surplus/deficit asset/liability input/output fewer/more slower/faster slow/fast weaker/stronger
smaller/bigger reduced/increased raised/lowered rose/fell gained/lost victory/defeat sooner/later stop/start
internal/external domestic/foreign buyer/seller employer/employee teacher/student parent/child modern/ancient
future/past next/previous hot/cold wet/dry dark/light heavy/light full/empty safe/dangerous certain/uncertain
correct/incorrect right/wrong accurate/inaccurate similar/different everyone/nobody everything/nothing often/rarely
optimistic/pessimistic successful/unsuccessful open/closed internal/external ahead/behind""".split()]
_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non", "mis")
_STRIPPED_PREFIXES = ("un", "dis", "non", "il", "ir")  # "in", "im", "mis" begin too many plain words


_OPPOSITES: dict[str, set[str]] = {}
for _a, _b in _ANTONYM_PAIRS:
    _OPPOSITES.setdefault(_a, set()).add(_b)
    _OPPOSITES.setdefault(_b, set()).add(_a)


@lru_cache(maxsize=100_000)
def opposites(lower: str) -> frozenset[str]:
    """Lowercase words that say the opposite of a lowercase word: listed antonyms and prefixed negatives
    ("likely" / "unlikely"), compared as written (no stemming: it is checked for every unmatched word)."""
    found = set(_OPPOSITES.get(lower, ()))
    found.update(prefix + lower for prefix in _PREFIXES)
    found.update(lower[len(p):] for p in _STRIPPED_PREFIXES if lower.startswith(p) and len(lower) - len(p) >= 4)
    return frozenset(found)


def _canonical(value: Decimal) -> str:
    """A number's key: its exact value, written plainly ("5m" and "5,000,000" are "5000000"). Six significant digits
    read 8,336,815 and 8,336,817 as one number, and every number past a float's range as the same infinity."""
    return format(value.normalize(), "f")


_KNOWN: dict[str, Token] = {}  # word as written -> its token; a plain dict is the fastest memo here
_NUMBERS: dict[tuple[str, float], Token] = {}  # (number as written, scale of the word after it) -> its token
_KNOWN_LIMIT = 500_000


def _word_token(word: str) -> Token:
    """The token of a word or symbol as written (numbers are read in context by ``_tokens``)."""
    if not word[0].isalpha():
        return Token(word, word.lower(), word, "symbol", False)
    lower = word.lower()
    if "'" in lower or "\u2019" in lower:
        # a possessive or contraction tail ("council's") is the word itself, unless the whole is a negation, a
        # function word, a number word or a date word (``_word``'s order; known without stemming the whole word)
        if (lower in _NUMBER_WORDS or lower.replace("\u2019", "'") in NEGATIONS or lower in STOPWORDS
                or lower in _SCALES or lower in _DATE_WORDS):
            key, kind = _word(lower)
        else:
            key, kind = _word(re.split(r"['\u2019]", lower, maxsplit=1)[0])
    else:
        key, kind = _word(lower)
    return Token(word, lower, key, kind, word[0].isupper())


def _tokens(text: str) -> list[Token]:
    if not text.isascii():  # one word whatever its Unicode form, and whatever invisible marks sit inside it
        text = _INVISIBLE.sub("", unicodedata.normalize("NFC", text))
    raw = (_ASCII_TOKEN if text.isascii() else _TOKEN).findall(text)
    tokens = list(map(_KNOWN.get, raw))  # most words were seen before: one C-level pass
    index = -1
    for _ in range(tokens.count(None)):  # the others, found by C-level scans
        index = tokens.index(None, index + 1)
        word = raw[index]
        if word[0].isdigit():  # memoised with its scale: its value depends on the word after it
            scale = _SCALES.get(raw[index + 1].lower(), 1.0) if index + 1 < len(raw) else 1.0
            tokens[index] = _NUMBERS.get((word, scale)) or _number(word, scale)
            continue
        token = _KNOWN.get(word)  # (made already where the word came earlier in this text)
        if token is None:
            if len(_KNOWN) > _KNOWN_LIMIT:
                _KNOWN.clear()
            token = _KNOWN[word] = _word_token(word)
        tokens[index] = token
    return tokens


def _number(word: str, scale: float) -> Token:
    """A number read with the scale the word after it gives (``_SCALES``): "5m" and "5 million" are both 5000000."""
    try:
        token = Token(word, word, _canonical(Decimal(word.replace(",", "")) * int(scale)), "number", False)
    except InvalidOperation:  # "1.2.3" and the like: not one number
        token = Token(word, word, word, "symbol", False)
    if len(_NUMBERS) > _KNOWN_LIMIT:
        _NUMBERS.clear()
    _NUMBERS[word, scale] = token
    return token


def split_sentences(text: str) -> list[str]:
    """``text.split_sentences``: line breaks, then ``.``, ``!`` or ``?`` (and a closing quote) before a space."""
    sentences = []
    for line in text.split("\n"):
        parts = _BREAK.split(line)  # piece, its closing punctuation, piece, ..., last piece
        parts.append("")
        for piece, end in zip(parts[::2], parts[1::2]):
            sentence = (piece + end).strip()
            if sentence:
                sentences.append(sentence)
    return sentences


def analyse_sentences(text: str, known: dict[str, Sentence] | None = None) -> list[Sentence]:
    """The text's sentences, each with its tokens (a sentence's tokens depend on its text alone: one found in
    ``known``, e.g. a summary's sentence copied from its source, is taken from there)."""
    if known:
        return [known.get(sentence) or Sentence(sentence, tuple(_tokens(sentence))) for sentence in split_sentences(text)]
    return [Sentence(sentence, tuple(_tokens(sentence))) for sentence in split_sentences(text)]
