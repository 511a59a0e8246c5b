"""What a study says: tune.json, the progress lines, the best point as a profile, the Pareto
plot."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ...errors import UsageError
from ...hw.board import Board
from ...hw.fs import Root
from ...report.digits import plus_minus_pct
from ...tune_documents import ClosestDoc, TrialDoc, TuneDoc
from ...units import format_hz
from ...work_units import DEFAULT_UNIT, efficiency_label, rate_label
from ..constraint import Constraint
from .choice import (
    _pooled,
    _usable,
    choose_best,
    feasible,
    metrics_problem,
    settings_problem,
    trial_problem,
    why_best,
)
from .options import COMMAND_MODEL, P99_BATCHES, TuneRequest

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import FrozenTrial


def study_doc(study: Study, req: TuneRequest, space: Dict[str, List[int]],
              simulated: bool, unit: str = DEFAULT_UNIT,
              space_size: Optional[int] = None) -> TuneDoc:
    trials = study.get_trials(deepcopy=False)
    problems = {t.number: trial_problem(t, space) for t in trials}
    usable = _usable(trials, space)
    best = choose_best(usable, req.objectives[0], req.constraints)
    front = [t for t in (study.best_trials if len(req.objectives) > 1 else [best] if best else [])
             if feasible(t) and problems.get(t.number) is None]

    def trial_doc(t: FrozenTrial) -> TrialDoc:
        problem = problems.get(t.number)
        reasons = t.user_attrs.get("reasons", [])
        metrics = t.user_attrs.get("metrics")
        return {"number": t.number, "state": t.state.name, "board": t.user_attrs.get("board"),
                "readings": t.user_attrs.get("readings", 1),
                "confirms": bool(t.user_attrs.get("confirms")),
                "edge": bool(t.user_attrs.get("edge")),
                "model": bool(t.user_attrs.get("model")),
                "batches": t.user_attrs.get("batches"),
                "settings": t.user_attrs.get("settings"),
                "metrics": None if metrics_problem(metrics) else metrics,
                "valid": t.user_attrs.get("valid"),
                "feasible": feasible(t) and problem is None,
                "reasons": (list(reasons) if isinstance(reasons, list) else [])
                + ([f"not a point of this board: {problem}"] if problem else [])
                + [str(t.user_attrs[k]) for k in ("inferred", "not_run")
                   if k in t.user_attrs],
                "constraint_violations": t.user_attrs.get("constraints"),
                "result": t.user_attrs.get("result")}

    return {"schema": "jetbench.tune/1", "simulated": simulated, "study": study.study_name,
            "objectives": list(req.objectives), "constraints": [str(c) for c in req.constraints],
            "knobs": list(req.knobs), "budget": req.budget, "unit": unit,
            "space": {k: list(v) for k, v in space.items()},
            "trials": [trial_doc(t) for t in trials],
            "best": trial_doc(best) if best else None,
            "pareto": [trial_doc(t) for t in front],
            "why": why_best(usable, req.objectives[0], efficiency_label(unit), best,
                            req.constraints, space_size) if best else None,
            "closest": None if best else _closest(usable, req.constraints, trial_doc),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _closest(trials: Sequence[FrozenTrial], constraints: Sequence[Constraint],
             trial_doc: Callable[[FrozenTrial], TrialDoc]) -> Optional[ClosestDoc]:
    """The valid point whose constraints were missed by the least (each miss relative to its
    limit, summed; a point read more than once by its readings' mean, with the uncertainty
    choose_best judged it by), and by how much it missed each: what to relax, or how far to
    go."""
    def misses(metrics: Dict[str, Optional[float]]) -> List[float]:
        return [max(0.0, c.violation(metrics)) / (abs(c.value) or 1.0) for c in constraints]

    ran = [p for p in _pooled(trials, constraints).values()
           if constraints and all(t.user_attrs.get("valid") is True for t in p.trials)]
    if not ran:
        return None
    point = min(ran, key=lambda p: (sum(misses(p.metrics)), p.trials[-1].number))
    near, metrics = point.trials[-1], point.metrics
    missed = []
    for c, miss in zip(constraints, misses(metrics)):
        if miss <= 0:
            continue
        got, pct = metrics.get(c.name), metrics.get(f"{c.name}_uncertainty_pct")
        if not isinstance(got, (int, float)):
            missed.append(f"{c}: not measured")
            continue
        plain = max(0.0, c.violation({c.name: got})) / (abs(c.value) or 1.0)  # by value alone
        side = "under" if c.op == ">=" else "over"
        missed.append(f"{c.name} {got:.3g}: {plain:.0%} {side} {c.op}{c.value:g}" if plain > 0
                      else f"{c.name} {got:.3g} +- {pct:.2g}%: {c.op}{c.value:g} only within "
                      "its uncertainty")
    return {"trial": trial_doc(near), "missed": missed}


def thin_p99_note(timed: Sequence[Optional[float]], req: TuneRequest) -> str:
    """A line where the study's p99 latency (a constraint or objective) rests on fewer than
    P99_BATCHES timed iterations a trial (their median), with how much longer a window gives
    that many; '' otherwise. (A p99 of n < 299 readings has no distribution-free bound: 0.99^n
    > 0.05; of a dozen it is nearly their maximum, which the next reading may well pass.)"""
    if not req.p99_matters:
        return ""
    known = sorted(n for n in timed if n)
    if not known or known[len(known) // 2] >= P99_BATCHES:
        return ""
    n = int(known[len(known) // 2])
    again = f" (the points read again on at least {P99_BATCHES})" if req.confirm_trials else ""
    return (f"tune: latency_p99_ms rests on about {n} timed batches a trial{again}: the 99th "
            "percentile of fewer is near their maximum, so a point near the limit can read "
            "over it when measured again; a window "
            f"{-(-P99_BATCHES // max(1, n))}x as long (--duration) gives about {P99_BATCHES}")


def closest_text(doc: TuneDoc) -> str:
    """'closest: trial 7 (settings): images_per_s 64.1: 36% under >=100', or ''."""
    closest = doc.get("closest")
    if not closest:
        return ""
    t = closest["trial"]
    settings = t.get("settings")
    where = f" ({_settings_text(settings)})" if settings else ""
    return f"closest: trial {t.get('number', -1) + 1}{where}: {'; '.join(closest['missed'])}"


def _best_line(study: Study, req: TuneRequest, space: Dict[str, List[int]],
               unit: str = DEFAULT_UNIT) -> Tuple[str, int]:
    """The best point of the finished trials, said as the progress says a point, and its
    trial's number ('' and -1 while none is usable)."""
    best = choose_best(_usable(study.get_trials(deepcopy=False), space), req.objectives[0],
                       req.constraints)
    if best is None:
        return "", -1
    attrs = best.user_attrs
    return (f"{_metrics_text(attrs['metrics'], unit)} at {_settings_text(attrs['settings'])}",
            best.number)


def _best_news(best: Tuple[str, int], shown: List[str], trial: int) -> str:
    """What a trial's progress line says of the best point so far: nothing while it is the one
    already named (a line per trial repeating it ran to 206 characters), '; the best so far'
    when it is this trial, else '; best so far now ...'."""
    text, number = best
    if not text or text == shown[0]:
        return ""
    shown[0] = text
    return "; the best so far" if number == trial else f"; best so far now {text}"


def unit_labels(unit: str) -> Tuple[str, str]:
    """The rate's and the per-joule figure's labels for what a trial counts, as measure,
    sweep and report name them: ('img/s', 'img/s/W'), ('tokens/s', 'tokens/J')."""
    return rate_label(unit), efficiency_label(unit)


# each figure of a trial and the metric holding its uncertainty (choice.metrics_of)
FIGURES = (("images_per_s", "images_per_s_uncertainty_pct"),
           ("power_w", "power_w_uncertainty_pct"),
           ("images_per_j", "images_per_j_uncertainty_pct"))


def figure_text(m: Mapping[str, object], name: str) -> str:
    """A trial's figure with its uncertainty, digits from it as measure prints them
    ('5.71 +- 0.29', '56.7 +- unknown'); '?' where it was not measured."""
    value = m.get(name)
    if not isinstance(value, (int, float)):
        return "?"
    pct = m.get(dict(FIGURES).get(name, ""))
    return plus_minus_pct(float(value), float(pct) if isinstance(pct, (int, float)) else None)


def _settings_text(s: Mapping[str, object]) -> str:
    """'sim:alexnet fp32 b1 gpu 384 MHz'; a command's point by its clocks alone (it has no
    precision or batch of jetbench's)."""
    clocks = " ".join(f"{k[:-3]} {format_hz(v)}" for k, v in s.items()
                      if k.endswith("_hz") and isinstance(v, int))
    what = str(s.get("model")) if s.get("model") == COMMAND_MODEL else \
        f"{s.get('model')} {s.get('precision')} b{s.get('batch')}"
    return what + (f" {clocks}" if clocks else "")


def _metrics_text(m: Mapping[str, object], unit: str = DEFAULT_UNIT) -> str:
    """'56.7 +- 0.3 img/s, 5.71 +- 0.29 W, 9.9 +- 0.5 img/s/W'."""
    labels = (*unit_labels(unit)[:1], "W", unit_labels(unit)[1])
    return ", ".join(f"{figure_text(m, name)} {label}"
                     for (name, _), label in zip(FIGURES, labels))


def profile_text(doc: TuneDoc, board: Board, name: str, caps: Sequence[str] = ()) -> str:
    """The best point as a profile `apply` and the daemon take, saying what chose it. Its
    settings are checked against this board's space again and written by a TOML writer."""
    from ...profiles.profile_file import pinned_clocks_table, profile_toml

    best = doc.get("best") or {}
    s = best.get("settings") or {}
    problem = settings_problem(s, doc.get("space", {})) or \
        metrics_problem(best.get("metrics"))
    if problem:
        raise UsageError(f"the best trial's point cannot be a profile: {problem}",
                         hint="the study was edited, or holds another board's trials: "
                              "no profile written")
    table = pinned_clocks_table(
        f"tuned by jetbench tune for {s['model']} {s['precision']} batch {s['batch']}",
        board.family, s.get("cpu_hz"), s.get("gpu_hz"), s.get("emc_hz"))
    mode = getattr(board, "power_mode", None)
    if mode is not None:  # where it was found: `apply` in another mode says so
        table["context"] = {"power_mode": mode.text, "power_mode_id": mode.id,
                            **({"caps": list(caps)} if caps else {})}
    return profile_toml(table, [
        f"Written by `jetbench tune` on {doc['created']}: the best point of study "
        f"{doc['study']!r}",
        f"workload: {s['model']} {s['precision']} batch {s['batch']}; objective: "
        f"{', '.join(doc['objectives'])}; constraints: {', '.join(doc['constraints']) or 'none'}",
        f"measured: {_metrics_text(best.get('metrics') or {}, doc.get('unit', DEFAULT_UNIT))}"
        + (" (SIMULATED board)" if doc["simulated"] else "")])


def save_profile(root: Root, board: Board, doc: TuneDoc, name: str) -> Path:
    from ...ownership.wire import PROFILE_NAME
    from ...profiles.profile_file import write_profile_file

    if not PROFILE_NAME.match(name):
        raise UsageError(f"--save-profile {name!r}: letters, digits, '.', '_' and '-' only")
    if doc.get("best") is None:
        closest = closest_text(doc)
        raise UsageError("no trial met the constraints with a valid result: no profile written"
                         + (f"; {closest}" if closest else ""),
                         hint="relax a --constraint, or raise --budget")
    return write_profile_file(root.base, name, profile_text(doc, board, name,
                                                            mode_caps_text(root, board)))


def mode_caps_text(root: Root, board: Board) -> List[str]:
    """The power mode's caps that bound a search ('gpu 800 MHz', 'cpu4-5 offline'), as the mode
    set them (the journal's originals win)."""
    from ...profiles.targets import mode_caps_now

    if getattr(board, "power_mode", None) is None:  # no nvpmodel: no caps
        return []
    caps = mode_caps_now(root, board)
    if caps is None:
        return []
    out = [f"cpu {p.rsplit('/', 1)[-1]} {format_hz(hz)}" for p, hz in caps.cpu_max_hz.items()]
    if caps.gpu_max_hz is not None:
        out.append(f"gpu {format_hz(caps.gpu_max_hz)}")
    if caps.emc_max_hz is not None:
        out.append(f"emc {format_hz(caps.emc_max_hz)}")
    out += [f"{f.split('/')[-2]} offline" for f in caps.offline]
    return out


def pareto_plot(doc: TuneDoc, path: Path) -> Optional[Path]:
    """report/plots.py's Pareto plot of the study, with the constraints on its two axes."""
    from ...report.pareto_plot import plot_pareto

    limits = []
    for text in doc.get("constraints", []):
        try:  # (as tune.json keeps them: by the figures' keys, images_per_s for any unit)
            c = Constraint.parse(text)
        except UsageError:
            continue
        if c.name in ("images_per_s", "images_per_j"):
            limits.append((c.name, c.value, text))
    return plot_pareto(doc, path, limits)
