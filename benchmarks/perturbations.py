"""Planted errors and faithful rewrites of BBC summaries: the robustness set of the grounding check.

    from perturbations import perturbed_articles
    cases = perturbed_articles(side="eval", articles=300, seed=0)   # one Case per article

Each article's summary is its first three reference sentences. From it, deterministically (``seed``):

- faithful rewrites, which people would still call consistent: ``synonyms`` (content words replaced by a synonym
  from a fixed table: "said" -> "stated", "firm" -> "company"), ``reorder`` (clauses moved: a fronted phrase to the
  end, "X, he said." to "He said X.", the two halves of "A, and B" swapped; where no sentence allows one, two
  sentences swapped);
- planted errors, which people would not: ``number`` (one number changed to one the article lacks), ``name`` (a
  name replaced by a name from another article), ``negation`` (a "not" after an auxiliary verb), ``inserted`` (a
  sentence of another article of the same category added).

Articles are split in two by a hash of their normalised body (duplicates fall on one side), and the synonym table
in two by a hash of each entry: ``side="train"`` (what ``scripts/train_grounding.py`` may learn from) and
``side="eval"`` (what ``bench_robustness.py`` reports on) share no article and no synonym.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bbc_news_summary.jsonl"
REWRITES = ("synonyms", "reorder")
ERRORS = ("number", "name", "negation", "inserted")

# Word -> synonym, lower case (only words written in lower case are replaced). Hand-written for news prose; each
# entry goes to one side by its hash.
SYNONYMS = {
    "said": "stated", "says": "states", "told": "informed", "announced": "declared", "added": "remarked",
    "firm": "company", "firms": "companies", "company": "firm", "companies": "firms", "business": "enterprise",
    "rise": "increase", "rose": "climbed", "rising": "climbing", "rises": "increases", "fell": "dropped",
    "fall": "drop", "falls": "drops", "falling": "dropping", "cut": "reduced", "cuts": "reductions",
    "big": "large", "biggest": "largest", "huge": "enormous", "small": "little", "large": "sizeable",
    "buy": "purchase", "bought": "purchased", "sell": "offload", "sold": "offloaded", "selling": "offloading",
    "help": "assist", "helped": "assisted", "helping": "assisting", "start": "begin", "started": "began",
    "begin": "start", "began": "started", "end": "finish", "ended": "finished", "expected": "anticipated",
    "expects": "anticipates", "expect": "anticipate", "believe": "think", "believes": "thinks", "think": "believe",
    "thinks": "believes", "show": "reveal", "showed": "revealed", "shows": "reveals", "shown": "revealed",
    "important": "significant", "major": "leading", "key": "crucial", "main": "principal", "top": "leading",
    "quickly": "rapidly", "fast": "rapid", "recent": "latest", "recently": "lately", "currently": "presently",
    "almost": "nearly", "about": "around", "nearly": "almost", "around": "about", "however": "nevertheless",
    "also": "additionally", "but": "yet", "because": "as", "although": "though", "while": "whilst",
    "government": "administration", "minister": "secretary", "officials": "authorities", "chief": "head",
    "boss": "chief", "bosses": "chiefs", "workers": "employees", "staff": "employees", "jobs": "posts",
    "people": "individuals", "customers": "clients", "fans": "supporters", "players": "athletes",
    "film": "movie", "films": "movies", "movie": "film", "music": "songs", "song": "track", "songs": "tracks",
    "award": "prize", "awards": "prizes", "win": "triumph", "won": "clinched", "beat": "defeated",
    "match": "game", "game": "match", "team": "side", "season": "campaign", "coach": "manager",
    "phone": "handset", "phones": "handsets", "users": "customers", "computer": "PC", "online": "on the internet",
    "software": "programs", "technology": "tech", "website": "site", "internet": "net",
    "country": "nation", "countries": "nations", "world": "globe", "global": "worldwide", "national": "nationwide",
    "plan": "scheme", "plans": "proposals", "proposal": "plan", "rules": "regulations", "law": "legislation",
    "deal": "agreement", "deals": "agreements", "agreement": "deal", "talks": "negotiations", "case": "matter",
    "money": "funds", "cash": "money", "price": "cost", "prices": "costs", "costs": "expenses", "profit": "earnings",
    "profits": "earnings", "sales": "revenues", "shares": "stocks", "market": "sector", "markets": "sectors",
    "growth": "expansion", "rate": "level", "rates": "levels", "tax": "levy",
    "report": "study", "reports": "studies", "survey": "poll", "figures": "data", "statement": "announcement",
    "problem": "issue", "problems": "issues", "issue": "matter", "concerns": "worries", "fears": "worries",
    "hit": "struck", "hits": "strikes", "attack": "assault", "warned": "cautioned", "warns": "cautions",
    "claimed": "asserted", "claims": "assertions", "denied": "rejected", "criticised": "condemned",
    "called": "urged", "urged": "called on", "asked": "requested", "wants": "wishes", "want": "wish",
    "needs": "requires", "need": "require", "make": "produce", "made": "produced", "makes": "produces",
    "get": "obtain", "got": "obtained", "give": "provide", "gave": "provided", "given": "provided",
    "take": "accept", "took": "accepted", "taken": "accepted", "keep": "retain", "kept": "retained",
    "lead": "head", "led": "headed",
    "move": "step", "moves": "steps", "change": "shift", "changes": "shifts", "allow": "permit", "allowed": "permitted",
    "try": "attempt", "tried": "attempted", "use": "employ", "used": "employed", "using": "employing",
    "build": "construct", "built": "constructed", "create": "form", "created": "formed", "launch": "introduce",
    "launched": "introduced", "release": "issue", "released": "issued", "chance": "opportunity", "aim": "goal",
    "first": "initial", "final": "last", "next": "following", "last": "previous", "former": "ex", "new": "fresh",
    "strong": "robust", "weak": "feeble", "good": "fine", "bad": "poor", "high": "elevated", "low": "reduced",
    "likely": "probable", "possible": "feasible", "difficult": "hard", "hard": "difficult", "easy": "simple",
}

_FRONTED = re.compile(r"^(In|On|At|During|After|Before|Last|Earlier|Since|By|Until|Over|Under|From|Within)\b([^,]{2,40}),\s+(.+?)([.!?])$")
_SAID_AFTER = re.compile(r"^(.{20,}?),\s+((?:he|she|they|it|[A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*){0,3})\s+(?:said|says|added|told \w+))([.!?])$")
_AND = re.compile(r"^(?!(?:But|And|Or|Yet)\b)([^,]{15,}),\s+and\s+((?:the|a|an|its|his|her|their|it|he|she|they|this|there|[A-Z])\b[^,]{15,})([.!?])$")
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)?)(?![\w])|(?<=[£$€])(\d+(?:[.,]\d+)?)")
_AUXILIARY = re.compile(r"\b(is|was|are|were|will|would|has|have|had|can|could|should|may|might|must)\b(?!\s+(?:not|n't|no|never)\b)")
_NAME = re.compile(r"(?<=[a-z,;:]\s)([A-Z][a-z]{2,})\b")
_STOP_CAPITALS = {"The", "This", "That", "These", "Those", "But", "And", "Mr", "Mrs", "Ms", "Dr", "It", "He", "She", "They", "We", "In", "On", "At"}
_LOWERED = {"The", "This", "That", "These", "Those", "It", "A", "An", "Its", "His", "Her", "Their", "There", "Some", "Many", "Even", "He", "She", "They", "We"}


@dataclass
class Case:
    """One article: its source text, the original summary, and each rewrite and error that could be made."""

    id: str
    category: str
    source: str
    summary: str
    rewrites: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def _hash_side(text: str) -> str:
    return "train" if int(hashlib.sha256(text.encode()).hexdigest(), 16) % 2 == 0 else "eval"


def synonyms(side: str) -> dict[str, str]:
    """The half of the synonym table for ``side``."""
    return {word: synonym for word, synonym in SYNONYMS.items() if _hash_side(f"synonym:{word}") == side}


def _sentences(summary: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", summary) if s.strip()]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    """The text with its first word in lower case if it is a function word ("The", "It"), else as it is."""
    return text[:1].lower() + text[1:] if text.split(" ", 1)[0] in _LOWERED else text


def synonym_rewrite(summary: str, table: dict[str, str], rng: random.Random, share: float = 0.6) -> str | None:
    """Replace ``share`` of the words the table knows by their synonym; None when it knows none."""
    words = list(re.finditer(r"(?<![\w'-])[a-z]+(?![\w'-])", summary))  # lower case only: "New York" stays
    known = [m for m in words if m.group() in table]
    if not known:
        return None
    chosen = rng.sample(known, max(1, round(share * len(known))))
    text, offset = summary, 0
    for m in sorted(chosen, key=lambda m: m.start()):
        synonym = table[m.group()]
        start, end = m.start() + offset, m.end() + offset
        text = text[:start] + synonym + text[end:]
        offset += len(synonym) - len(m.group())
    return text


def _reorder_sentence(sentence: str) -> str | None:
    if m := _SAID_AFTER.match(sentence):
        body, speaker, stop = m.groups()
        if body.startswith('"') and body.endswith('"'):  # a whole quotation: reported instead
            body = body[1:-1]
        if body.count('"') % 2:
            return None
        return f"{_capital(speaker)} that {_lower_first(body)}{stop}"
    if m := _FRONTED.match(sentence):
        word, rest, clause, stop = m.groups()
        return f"{_capital(clause)} {word.lower()}{rest}{stop}"
    if m := _AND.match(sentence):
        first, second, stop = m.groups()
        return f"{_capital(second)}, and {_lower_first(first)}{stop}"
    return None


def reorder_rewrite(summary: str) -> str | None:
    """Clauses moved within sentences; where none can be, the first two sentences swapped."""
    sentences = _sentences(summary)
    moved = [_reorder_sentence(s) for s in sentences]
    if any(moved):
        return " ".join(m or s for m, s in zip(moved, sentences))
    if len(sentences) >= 2:
        return " ".join([sentences[1], sentences[0], *sentences[2:]])
    return None


def number_error(summary: str, source: str, rng: random.Random) -> str | None:
    """One number changed to one the source does not hold."""
    found = [m for m in _NUMBER.finditer(summary)]
    rng.shuffle(found)
    for m in found:
        group = 1 if m.group(1) else 2
        old = m.group(group)
        digits = [i for i, c in enumerate(old) if c.isdigit()]
        for _ in range(10):
            position = rng.choice(digits)
            new_digit = str((int(old[position]) + rng.randint(1, 8)) % 10)
            if position == 0 and new_digit == "0":
                continue
            new = old[:position] + new_digit + old[position + 1:]
            if not re.search(rf"(?<![\d.,]){re.escape(new)}(?![\d])", source):
                return summary[: m.start(group)] + new + summary[m.end(group):]
    return None


def _names(text: str) -> set[str]:
    return {n for n in _NAME.findall(text) if n not in _STOP_CAPITALS}


def name_error(summary: str, source: str, pool: list[str], rng: random.Random) -> str | None:
    """A name in the summary (a capitalised word within a sentence, also in the source) replaced by another article's."""
    here = sorted(n for n in _names(summary) if n in source)
    candidates = [n for n in pool if n not in source]
    if not here or not candidates:
        return None
    old, new = rng.choice(here), rng.choice(candidates)
    return re.sub(rf"\b{old}\b", new, summary)


def negation_error(summary: str, rng: random.Random) -> str | None:
    """"not" after one auxiliary verb of a sentence with no negation."""
    sentences = _sentences(summary)
    order = list(range(len(sentences)))
    rng.shuffle(order)
    for index in order:
        sentence = sentences[index]
        if re.search(r"\b(not|n't|never|no)\b", sentence):
            continue
        if m := _AUXILIARY.search(sentence):
            sentences[index] = sentence[: m.end()] + " not" + sentence[m.end():]
            return " ".join(sentences)
    return None


def inserted_error(summary: str, other_sentence: str, rng: random.Random) -> str:
    """A sentence of another article put among the summary's."""
    sentences = _sentences(summary)
    sentences.insert(rng.randint(1, len(sentences)), other_sentence)
    return " ".join(sentences)


def _articles() -> list[dict]:
    import json

    seen, articles = set(), []
    with DATA.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            key = " ".join(record["body"].split())
            if key in seen or len(record["reference_summary_sentences"]) < 3:
                continue
            seen.add(key)
            articles.append({**record, "side": _hash_side(key)})
    return articles


def perturbed_articles(side: str, articles: int | None = None, seed: int = 0) -> list[Case]:
    """Cases for ``articles`` articles of ``side`` (all of them when None), chosen and perturbed with ``seed``."""
    if side not in ("train", "eval"):
        raise ValueError(f"side is 'train' or 'eval', not {side!r}")
    everything = _articles()
    mine = [a for a in everything if a["side"] == side]
    rng = random.Random(f"{seed}:{side}")
    rng.shuffle(mine)
    chosen = mine if articles is None else mine[:articles]
    table = synonyms(side)
    names = sorted({n for a in mine for n in _names(a["body"])})
    by_category: dict[str, list[str]] = {}
    for a in mine:
        by_category.setdefault(a["category"], []).extend(a["reference_summary_sentences"][3:6])
    cases = []
    for article in chosen:
        source = article["text"]
        summary = " ".join(s.strip() for s in article["reference_summary_sentences"][:3])
        local = random.Random(f"{seed}:{article['id']}")
        case = Case(article["id"], article["category"], source, summary)
        for kind, text in (("synonyms", synonym_rewrite(summary, table, local)), ("reorder", reorder_rewrite(summary))):
            if text and text != summary:
                case.rewrites[kind] = text
        others = [s for s in by_category[article["category"]] if s.strip() and s.strip()[:40] not in source]
        made = {
            "number": number_error(summary, source, local),
            "name": name_error(summary, source, names, local),
            "negation": negation_error(summary, local),
            "inserted": inserted_error(summary, local.choice(others), local) if others else None,
        }
        case.errors = {kind: text for kind, text in made.items() if text and text != summary}
        cases.append(case)
    return cases


def labelled_rows(cases: list[Case]) -> Iterator[tuple[str, str, str, int]]:
    """(case id + kind, source, summary, label): 1 for the original and its rewrites, 0 for its errors."""
    for case in cases:
        yield f"{case.id}/original", case.source, case.summary, 1
        for kind, text in case.rewrites.items():
            yield f"{case.id}/{kind}", case.source, text, 1
        for kind, text in case.errors.items():
            yield f"{case.id}/{kind}", case.source, text, 0
