"""The gate attempts against one champion, kept as tags on its model version, so that a candidate gated again and
again cannot pass by luck (``docs/metrics.md``, "Registry gate"): the k-th attempt decides at alpha / 2^k, all of them
together under the champion's alpha.

On the version: ``mgm.gate.attempts.<k>`` (``.<k>.<run id>`` for gates that decided beside another), one record per
attempt that spent a test; ``mgm.gate.attempts``, their number, for people to read; ``mgm.gate.alpha``, fixed by the
first gate that compared rows with it; and ``mgm.gate.deciding.<run id>`` while a gate decides.
"""

from __future__ import annotations

import contextlib
import re
import time

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

ATTEMPTS_TAG = "mgm.gate.attempts"
ALPHA_TAG = "mgm.gate.alpha"  # fixed by the first gate that showed an outcome: no later one decides at a looser level
# Two gates at once each count the other's claim, so neither decides as the first attempt (both once did, and one's
# record was lost): attempts are counted from the claims and the records, never from the count.
DECIDING_TAG = "mgm.gate.deciding"
STALE_CLAIM_S = 3600.0  # a gate records its outcome seconds after its claim: one an hour old was killed before it could
RECORD = re.compile(rf"^{re.escape(ATTEMPTS_TAG)}\.\d+(?:\.\w+)?$")


def recorded(seen: dict[str, str]) -> int:
    """The attempts recorded among a version's tags ``seen``."""
    return sum(1 for key in seen if RECORD.match(key))


def release(client: MlflowClient, name: str, version: str, run_id: str) -> None:
    """This run's gate has decided (or failed): its claim goes."""
    client.delete_model_version_tag(name, version, f"{DECIDING_TAG}.{run_id}")


def record(client: MlflowClient, name: str, version: str, attempt: int, run_id: str, *, beside: bool, text: str) -> None:
    """Record attempt ``attempt`` of ``run_id`` (``beside``: decided beside another gate, so under a key of its own)
    and show the count."""
    client.set_model_version_tag(name, version, f"{ATTEMPTS_TAG}.{attempt}" + (f".{run_id}" if beside else ""), text)
    show_attempts(client, name, version)


def set_first(client: MlflowClient, name: str, version: str, key: str, value: str) -> bool:
    """Set a tag of the champion's version; False when another gate created it at the same moment (MLflow's SQL
    store reads, then inserts: two gates at once once failed here with a UNIQUE constraint)."""
    try:
        client.set_model_version_tag(name, version, key, value)
    except MlflowException as error:
        if "UNIQUE constraint" not in str(error) and "IntegrityError" not in str(error):
            raise
        return False
    return True


def claim(client: MlflowClient, name: str, version: str, run_id: str) -> None:
    """Say on the champion's version that this run's gate is deciding against it, and since when (read by ``deciding``)."""
    client.set_model_version_tag(name, version, f"{DECIDING_TAG}.{run_id}", f"deciding since {time.time():.0f}")


def deciding(client: MlflowClient, name: str, version: str, seen: dict[str, str], messages: list[str]) -> int:
    """The gates deciding against the champion now, this one included. A claim older than ``STALE_CLAIM_S`` is a gate
    killed before it recorded an outcome (it shows none before its record): nobody saw a decision, so it is no
    attempt; it is removed and said, instead of making every later gate pay a level more. A claim whose time cannot
    be read (written by an older version) is counted."""
    now, live = time.time(), 0
    for key, value in seen.items():
        if not key.startswith(f"{DECIDING_TAG}."):
            continue
        since = re.fullmatch(r"deciding since (\d+)", value)
        age = now - int(since[1]) if since else 0.0
        if age < STALE_CLAIM_S:
            live += 1
            continue
        with contextlib.suppress(MlflowException):  # another gate removed it a moment before
            client.delete_model_version_tag(name, version, key)
        messages.append(f"the gate of run {key.removeprefix(DECIDING_TAG + '.')} began deciding against champion version "
                        f"{version} {age / 3600:.1f} h ago and never recorded an outcome (it was stopped): "
                        "not counted as an attempt, its claim removed")
    return live


def show_attempts(client: MlflowClient, name: str, version: str) -> None:
    """Set ``ATTEMPTS_TAG`` (for people to read; no rule reads it) to the records on the champion's version, after
    this gate's own. Of two gates at once, one could read one record, the other write two, then the first write its
    stale one: so each reads again after it writes and sets it again until it reads its own count. The last writer
    has read every record (each gate wrote its record before its first count), so the tag ends right."""
    while True:
        seen = client.get_model_version(name, version).tags
        count = str(recorded(seen))
        if seen.get(ATTEMPTS_TAG) == count:
            return
        if not set_first(client, name, version, ATTEMPTS_TAG, count):  # created by the other gate a moment ago
            client.set_model_version_tag(name, version, ATTEMPTS_TAG, count)


def family_alpha(client: MlflowClient, name: str, version: str, fixed: str | None, asked: float, messages: list[str]) -> tuple[float, float]:
    """(the alpha this attempt's level is a share of, the champion's ``ALPHA_TAG``; ``fixed``: its value as just read,
    None before any gate set it): the tag is set here by the first attempt that compares rows with it (``asked``); a
    later attempt asking a looser one is held to it (a stricter one is taken). Without it, a gate that said "too few pairs to test" or "not significantly better" could be asked again at a
    looser confidence until the candidate passes."""
    if fixed is None:
        if set_first(client, name, version, ALPHA_TAG, f"{asked:g}"):
            return asked, asked
        fixed = client.get_model_version(name, version).tags[ALPHA_TAG]  # another gate set it a moment before
    if float(f"{asked:g}") > float(fixed):  # as the tag holds it: 1 - 0.95 is 0.050000000000000044, no looser than 0.05
        messages.append(f"confidence {1 - asked:g} asked, but the attempts against champion version {version} share "
                        f"alpha = {fixed} (its {ALPHA_TAG}, fixed by the first gate that compared rows with it): a retry at a "
                        f"looser level would let a candidate tried until it passes through, so {fixed} holds")
    return min(asked, float(fixed)), float(fixed)
