"""Population-based training's decisions (Jaderberg et al. 2017, "Population Based
Training of Neural Networks"): initial hyper-parameters, exploit and explore.

Pure functions of the population's scores and a seeded generator, so any process that
makes a generation's decision (again, after a crash) makes the same one.

- **initial**: a range is spread over the population (member ``i`` at quantile
  ``(k + 0.5) / N`` of the range, log-scaled for log ranges, ``k`` a seeded permutation
  per parameter so two parameters are not correlated); a list is dealt round-robin.
- **exploit** (truncation selection): the bottom ``quantile`` of the members by score take
  the checkpoint and hyper-parameters of a member drawn from the top ``quantile``, unless
  they score as well as it (a tie, e.g. every member at the maximum return, gains nothing).
- **explore**: each of the copied hyper-parameters is resampled from its space with
  probability ``resample_probability``, else multiplied by 0.8 or 1.2 (clipped to a
  range; a list value moves to a neighbouring element).
"""
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from alf.studies.search_space import Param


def member_rng(seed: int, generation: int, member: int = -1) -> np.random.Generator:
    """The generator of one decision (the same in every process); generation -1: the
    initial values (``member``: the parameter's index then)."""
    return np.random.default_rng([seed, generation + 1, member + 1])


def initial_hparams(params: Sequence[Param], population: int, seed: int) -> List[Dict[str, str]]:
    """Member ``i``'s starting gin values (see the module docstring)."""
    members: List[Dict[str, str]] = [{} for _ in range(population)]
    for j, p in enumerate(params):
        order = member_rng(seed, -1, j).permutation(population)
        for i in range(population):
            if p.is_list:
                value = p.choices[i % len(p.choices)]
            else:
                value = _at_quantile(p, (order[i] + 0.5) / population)
            members[i][p.name] = p.gin_text(value)
    return members


def _at_quantile(p: Param, q: float):
    if p.kind in ("loguniform", "logint"):
        value = math.exp(math.log(p.low) + q * (math.log(p.high) - math.log(p.low)))
    else:
        value = p.low + q * (p.high - p.low)
    return round(value) if "int" in p.kind else value


def sample(p: Param, rng: np.random.Generator):
    """A fresh value from ``p``'s space."""
    if p.is_list:
        return p.choices[int(rng.integers(len(p.choices)))]
    return _at_quantile(p, float(rng.random()))


def perturb(p: Param, text: str, rng: np.random.Generator, resample_probability: float,
            factors: Sequence[float] = (0.8, 1.2)) -> str:
    """``text`` (a member's gin value of ``p``) explored: resampled, or scaled by a factor
    (a list value: moved to a neighbour)."""
    if rng.random() < resample_probability:
        return p.gin_text(sample(p, rng))
    if p.is_list:
        i = p.choices.index(text) if text in p.choices else 0
        step = -1 if rng.random() < 0.5 else 1
        return p.choices[min(len(p.choices) - 1, max(0, i + step))]
    value = float(text) * float(factors[int(rng.integers(len(factors)))])
    value = min(p.high, max(p.low, value))
    return p.gin_text(round(value) if "int" in p.kind else value)


@dataclass
class Decision:
    """What member ``member`` does next.

    Attributes:
        member: its index.
        parent: the member whose checkpoint it continues from (itself when kept).
        hparams: its gin values for the next segment.
        event: ``kept``, or ``exploit m<j> + explore`` (said in the log and the lineage).
    """
    member: int
    parent: int
    hparams: Dict[str, str]
    event: str


def decide(scores: Sequence[Optional[float]], hparams: Sequence[Dict[str, str]],
           params: Sequence[Param], rng: np.random.Generator, quantile: float,
           resample_probability: float, exploit: bool = True) -> List[Decision]:
    """One generation's decisions from the members' scores (None: the segment failed, it
    ranks last) and current hyper-parameters."""
    n = len(scores)
    keyed = [(-math.inf if s is None else s, i) for i, s in enumerate(scores)]
    ranked = [i for _, i in sorted(keyed, key=lambda t: (-t[0], t[1]))]  # best first
    cut = max(1, int(math.floor(n * quantile))) if exploit and n > 1 else 0
    top = [i for i in ranked[:cut] if scores[i] is not None]  # a failed member is no parent
    bottom = set(ranked[n - cut:]) if cut and top else set()
    by_name = {p.name: p for p in params}
    decisions = []
    for i in range(n):
        if i not in bottom:
            decisions.append(Decision(i, i, dict(hparams[i]), "kept"))
            continue
        parent = int(top[int(rng.integers(len(top)))])
        if scores[i] is not None and scores[i] >= scores[parent]:  # a tie (e.g. all at the
            decisions.append(Decision(i, i, dict(hparams[i]), "kept"))  # maximum): no gain
            continue
        explored = {name: perturb(by_name[name], text, rng, resample_probability)
                    for name, text in hparams[parent].items()}
        decisions.append(Decision(i, parent, explored, f"exploit m{parent} + explore"))
    return decisions
