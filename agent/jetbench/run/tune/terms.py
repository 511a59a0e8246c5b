"""What a study means, fixed when it is created: the board it tunes (its model, L4T release and
power mode: the board's fingerprint), its objectives and constraints, the workload (the
networks, or the command line), and its search space in Hz (the board's tables within the
power mode's caps, the EMC rates as probed once). A later `tune` on the same study (a resume,
or another board of a fleet) must ask the same thing; a difference is refused with what
differs, never mixed into the study silently. `--mix-boards` lets boards of one model whose
L4T release or power mode differ share a study (their tables must still match); each trial
records its board's fingerprint either way. The terms live in the study (Optuna's user
attributes), so they travel with a shared storage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, TypedDict

from ...errors import UsageError

if TYPE_CHECKING:
    from optuna import Study

TERMS_ATTR = "terms"  # the study's user attribute holding them


class _Terms(TypedDict):
    board: str  # the board model: clocks are its tables' (a fleet shares one model)
    objectives: List[str]
    constraints: List[str]
    knobs: List[str]
    models: List[str]
    precisions: List[str]
    batches: List[int]
    tables: Dict[str, List[int]]  # the space as the tables and caps give it (before a probe)
    space: Dict[str, List[int]]  # what trials choose from (the EMC rates as probed)


class StudyTerms(_Terms, total=False):
    # (studies made before these were kept have none: nothing to compare)
    workload: str  # the --cmd line ('' for networks: `models` names them)
    l4t: str  # the L4T release ('' where none)
    power_mode: str  # the nvpmodel mode, id and name ('' where none)


FINGERPRINT = ("board", "l4t", "power_mode", "workload")  # what each trial records
MIXABLE = ("l4t", "power_mode")  # what --mix-boards lets differ


_SAID = {"board": "board model", "objectives": "--objective", "constraints": "--constraint",
         "knobs": "--knobs", "models": "--model", "precisions": "--precision",
         "batches": "--batch", "tables": "the clock tables within the power mode's caps",
         "workload": "--cmd", "l4t": "L4T release", "power_mode": "power mode"}


def stored_terms(study: Study) -> Optional[StudyTerms]:
    """The terms the study was created with (None: a new study, or one from before terms were
    kept)."""
    terms = study.user_attrs.get(TERMS_ATTR)
    if not isinstance(terms, dict):
        return None
    try:
        out: StudyTerms = {
            "board": str(terms["board"]), "objectives": _strs(terms["objectives"]),
            "constraints": _strs(terms["constraints"]), "knobs": _strs(terms["knobs"]),
            "models": _strs(terms["models"]), "precisions": _strs(terms["precisions"]),
            "batches": [int(b) for b in terms["batches"]],
            "tables": _clocks(terms["tables"]), "space": _clocks(terms["space"])}
        for key in ("workload", "l4t", "power_mode"):
            if key in terms:
                out[key] = str(terms[key])
        return out
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"study {study.study_name!r}: its stored terms are not jetbench's",
                         hint="give tune another --out (or --study NAME) for a new study"
                         ) from None


def _strs(value: object) -> List[str]:
    if not isinstance(value, list):
        raise TypeError(value)
    return [str(v) for v in value]


def _clocks(value: object) -> Dict[str, List[int]]:
    if not isinstance(value, dict):
        raise TypeError(value)
    return {str(k): [int(hz) for hz in v] for k, v in value.items()}


def differences(stored: Mapping[str, object], asked: Mapping[str, object],
                ignore: Sequence[str] = ()) -> List[str]:
    """Each term the study and this run disagree on, said as `what: study's (asked: this)`."""
    out = []
    for key, said in _SAID.items():
        if key in stored and key not in ignore and stored[key] != asked.get(key):
            out.append(f"{said}: {_text(stored[key])} (asked now: {_text(asked.get(key))})")
    return out


def _text(value: object) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k} {len(v) if isinstance(v, list) else v} value(s)"
                         for k, v in value.items()) or "none"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def check_same(study: Study, asked: StudyTerms, shared: bool, mix_boards: bool = False
               ) -> Optional[StudyTerms]:
    """The study's terms when it has them and they are the ones asked (with `mix_boards`, the
    L4T release and power mode may differ); UsageError listing what differs otherwise (a new
    --out or --study starts a new study)."""
    stored = stored_terms(study)
    if stored is None:
        return None
    wrong = differences(stored, asked, MIXABLE if mix_boards else ())
    if wrong:
        where = "--study NAME" if shared else "another --out (or --study NAME)"
        board_only = all(w.startswith(tuple(_SAID[k] for k in MIXABLE)) for w in wrong)
        raise UsageError(f"study {study.study_name!r} was made for other terms: "
                         + "; ".join(wrong),
                         hint=f"a study means one question: run tune with its terms to go on, "
                              f"or give {where} for a new study"
                              + ("; or --mix-boards to let boards of one model with another "
                                 "L4T release or power mode share it" if board_only else ""))
    return stored


def fingerprint(terms: Mapping[str, object]) -> Dict[str, str]:
    """What a trial records of the board that ran it (from this run's asked terms)."""
    return {k: str(terms.get(k, "")) for k in FINGERPRINT}


def terms_of(board: str, objectives: Sequence[str], constraints: Sequence[object],
             knobs: Sequence[str], models: Sequence[str], precisions: Sequence[str],
             batches: Sequence[int], tables: Mapping[str, Sequence[int]], workload: str = "",
             l4t: str = "", power_mode: str = "") -> StudyTerms:
    return {"board": board, "objectives": list(objectives),
            "constraints": [str(c) for c in constraints], "knobs": list(knobs),
            "models": list(models), "precisions": list(precisions),
            "batches": [int(b) for b in batches],
            "tables": {k: [int(v) for v in vs] for k, vs in tables.items()}, "space": {},
            "workload": workload, "l4t": l4t, "power_mode": power_mode}
