"""Known-answer tests for alf.utils.value_ops (numbers worked out by hand in comments)."""
import math
import random

import pytest
import torch

from alf.data_structures import StepType
from alf.utils import value_ops

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
GAMMA, LAMBDA = 0.9, 0.8  # gamma * lambda = 0.72


def col(*xs, dtype=torch.float32):
    """A [T, 1] tensor."""
    return torch.tensor(xs, dtype=dtype).unsqueeze(1)


def close(actual, expected):
    expected = torch.as_tensor(expected, dtype=actual.dtype)
    torch.testing.assert_close(actual, expected.reshape(actual.shape), atol=1e-5, rtol=1e-5)


# ---- three single-column episodes ------------------------------------------------
# (rewards, values, step_types, discounts)
NO_BOUNDARY = (col(0., 1., 2., 3.), col(0.5, 1.0, 1.5, 2.0), col(F, M, M, M, dtype=torch.int32),
               col(1., 1., 1., 1.))
# step 2 terminates (LAST, discount 0); step 3 starts a new episode.
TERMINATION = (col(0., 1., 2., 0., 4.), col(1., 1.5, 3., 4., 5.),
               col(F, M, L, F, M, dtype=torch.int32), col(1., 1., 0., 1., 1.))
# step 2 is truncated (LAST, discount 1): bootstrap from values[2].
TRUNCATION = (TERMINATION[0], TERMINATION[1], TERMINATION[2], col(1., 1., 1., 1., 1.))

CASES = {
    # G3 = V3 = 2; G2 = 3 + .9*2 = 4.8; G1 = 2 + .9*4.8 = 6.32; G0 = 1 + .9*6.32 = 6.688
    # one-step: 1 + .9*1 = 1.9, 2 + .9*1.5 = 3.35, 3 + .9*2 = 4.8
    # deltas 1.4, 2.35, 3.3; A2 = 3.3, A1 = 2.35 + .72*3.3 = 4.726, A0 = 1.4 + .72*4.726 = 4.80272
    "no_boundary": (NO_BOUNDARY, [6.688, 6.32, 4.8], [1.9, 3.35, 4.8], [4.80272, 4.726, 3.3]),
    # G4 = 5; G3 = 4 + .9*5 = 8.5; G2 = V2 = 3 (LAST); G1 = 2 + .9*0*3 = 2; G0 = 1 + .9*2 = 2.8
    # one-step: 1 + .9*1.5 = 2.35, 2 + 0 = 2, V2 = 3, 4 + .9*5 = 8.5
    # deltas 1.35, 0.5, 0 (cut), 4.5; A1 = .5 + .72*0*A2 = .5; A0 = 1.35 + .72*.5 = 1.71
    "termination": (TERMINATION, [2.8, 2., 3., 8.5], [2.35, 2., 3., 8.5], [1.71, 0.5, 0., 4.5]),
    # G2 = V2 = 3; G1 = 2 + .9*3 = 4.7; G0 = 1 + .9*4.7 = 5.23; G3 = 8.5 (value of the
    # FIRST step 3 never flows into step 2).
    # deltas 1.35, 4.7 - 1.5 = 3.2, 0, 4.5; A0 = 1.35 + .72*3.2 = 3.654
    "truncation": (TRUNCATION, [5.23, 4.7, 3., 8.5], [2.35, 4.7, 3., 8.5], [3.654, 3.2, 0., 4.5]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_known_answers(name):
    (r, v, st, d), ret, one_step, adv = CASES[name]
    close(value_ops.discounted_return(r, v, st, d, GAMMA), ret)
    close(value_ops.one_step_discounted_return(r, v, st, d, GAMMA), one_step)
    close(value_ops.generalized_advantage_estimation(r, v, st, d, GAMMA, LAMBDA), adv)
    close(value_ops.td_lambda_return(r, v, st, d, GAMMA, LAMBDA),
          torch.tensor(adv) + v[:-1, 0])


def test_batch_with_different_boundaries_per_column():
    r0, v0, st0, d0 = TERMINATION
    # column 1: truncation at step 3 (LAST, d=1), then FIRST with a large value 7.
    r1, v1 = col(0., 1., 1., 1., 0.), col(2., 2., 2., 2., 7.)
    st1, d1 = col(M, M, M, L, F, dtype=torch.int32), col(1., 1., 1., 1., 1.)
    r, v, st, d = (torch.cat(p, 1) for p in ((r0, r1), (v0, v1), (st0, st1), (d0, d1)))
    # col 1: G3 = V3 = 2; G2 = 1 + .9*2 = 2.8; G1 = 1 + .9*2.8 = 3.52; G0 = 1 + .9*3.52 = 4.168
    close(value_ops.discounted_return(r, v, st, d, GAMMA),
          [[2.8, 4.168], [2., 3.52], [3., 2.8], [8.5, 2.]])
    # col 1 one-step: 1 + .9*2 = 2.8 (x3), LAST -> V3 = 2
    close(value_ops.one_step_discounted_return(r, v, st, d, GAMMA),
          [[2.35, 2.8], [2., 2.8], [3., 2.8], [8.5, 2.]])
    # col 1 deltas .8, .8, .8, 0: A2 = .8, A1 = .8 + .72*.8 = 1.376, A0 = .8 + .72*1.376 = 1.79072
    close(value_ops.generalized_advantage_estimation(r, v, st, d, GAMMA, LAMBDA),
          [[1.71, 1.79072], [0.5, 1.376], [0., 0.8], [4.5, 0.]])
    # col 0 n=2 (see test_n_step_return); col 1: 1 + .9 + .81*2 = 3.52 (x2), 1 + .9*2 = 2.8, V3 = 2
    close(value_ops.n_step_return(r, v, st, d, 2, GAMMA),
          [[2.8, 3.52], [2., 3.52], [3., 2.8], [8.5, 2.]])
    # per-column gamma as a [B] tensor: column 1 with gamma 0 gives one-step r[t+1] (V3 at LAST)
    close(value_ops.discounted_return(r, v, st, d, torch.tensor([GAMMA, 0.])),
          [[2.8, 1.], [2., 1.], [3., 1.], [8.5, 2.]])


# ---- a plain-python reference, for random episodes ------------------------------
def ref_gae(r, v, st, d, gamma, lam):
    T, B = r.shape
    out = [[0.0] * B for _ in range(T - 1)]
    for b in range(B):
        adv = 0.0
        for t in reversed(range(T - 1)):
            if st[t, b] == L:
                adv = 0.0
            else:
                delta = r[t + 1, b] + gamma * d[t + 1, b] * v[t + 1, b] - v[t, b]
                adv = delta + gamma * lam * d[t + 1, b] * adv
            out[t][b] = float(adv)
    return torch.tensor(out)


def random_episodes(T=40, B=3, seed=0):
    rng = random.Random(seed)
    st, d = torch.full((T, B), M, dtype=torch.int32), torch.ones(T, B)
    for b in range(B):
        st[0, b] = F
        for t in range(1, T):
            if st[t - 1, b] == L:
                st[t, b] = F
            elif rng.random() < 0.15:
                st[t, b] = L
                d[t, b] = float(rng.random() < 0.5)
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(T, B, generator=g) * (st != F)
    v = torch.randn(T, B, generator=g)
    return r, v, st, d


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_gae_matches_reference_on_random_episodes(lam):
    r, v, st, d = random_episodes()
    close(value_ops.generalized_advantage_estimation(r, v, st, d, 0.97, lam),
          ref_gae(r.double(), v.double(), st, d.double(), 0.97, lam))


@pytest.mark.parametrize("seed", [0, 1])
def test_lambda_edge_values(seed):
    r, v, st, d = random_episodes(seed=seed)
    ret = value_ops.discounted_return(r, v, st, d, 0.97)
    one = value_ops.one_step_discounted_return(r, v, st, d, 0.97)
    close(value_ops.generalized_advantage_estimation(r, v, st, d, 0.97, 1.0), ret - v[:-1])
    close(value_ops.generalized_advantage_estimation(r, v, st, d, 0.97, 0.0), one - v[:-1])
    close(value_ops.td_lambda_return(r, v, st, d, 0.97, 1.0), ret)
    # gamma = 0: returns are just the next reward (values at LAST steps)
    close(value_ops.discounted_return(r, v, st, d, 0.0),
          torch.where(st[:-1] == L, v[:-1], r[1:]))


def test_n_step_return():
    r, v, st, d = NO_BOUNDARY
    # 1 + .9*2 + .81*1.5 = 4.015; 2 + .9*3 + .81*2 = 6.32; 3 + .9*2 = 4.8 (end of unroll)
    close(value_ops.n_step_return(r, v, st, d, 2, GAMMA), [4.015, 6.32, 4.8])
    # termination: 1 + .9*2 + .81*0*V2 = 2.8; 2 + .9*0*V2 = 2 (stops at LAST); V2; 4 + .9*5
    r, v, st, d = TERMINATION
    close(value_ops.n_step_return(r, v, st, d, 2, GAMMA), [2.8, 2., 3., 8.5])
    rr, vv, sst, dd = random_episodes(seed=3)
    close(value_ops.n_step_return(rr, vv, sst, dd, 1, 0.97),
          value_ops.one_step_discounted_return(rr, vv, sst, dd, 0.97))
    close(value_ops.n_step_return(rr, vv, sst, dd, 100, 0.97),
          value_ops.discounted_return(rr, vv, sst, dd, 0.97))


def test_vtrace_known_answer_and_clipping():
    r, v = col(0., 1., 2.), col(1., 2., 3.)
    st, d = col(F, M, M, dtype=torch.int32), col(1., 1., 1.)
    log_rhos = torch.log(col(2.0, 0.5, 1.0))
    # gamma .5, clipped: rho0 = c0 = 1, rho1 = c1 = .5
    # delta0 = 1*(1 + .5*2 - 1) = 1; delta1 = .5*(2 + .5*3 - 2) = .75
    # vs1 = 2 + .75 = 2.75; vs0 = 1 + 1 + .5*1*.75 = 2.375
    # pg0 = 1*(1 + .5*2.75 - 1) = 1.375; pg1 = .5*(2 + .5*3 - 2) = .75
    out = value_ops.vtrace(r, v, st, d, log_rhos, gamma=0.5)
    close(out.vs, [2.375, 2.75])
    close(out.pg_advantages, [1.375, 0.75])
    # unclipped: rho0 = c0 = 2: delta0 = 2; vs0 = 1 + 2 + .5*2*.75 = 3.75; pg0 = 2*1.375 = 2.75
    out = value_ops.vtrace(r, v, st, d, log_rhos, gamma=0.5, clip_rho_threshold=None,
                           clip_c_threshold=None, clip_pg_rho_threshold=None)
    close(out.vs, [3.75, 2.75])
    close(out.pg_advantages, [2.75, 0.75])


@pytest.mark.parametrize("lam", [0.9, 1.0])
def test_vtrace_on_policy_equals_td_lambda(lam):
    r, v, st, d = random_episodes(seed=5)
    out = value_ops.vtrace(r, v, st, d, torch.zeros_like(r), gamma=0.97, td_lambda=lam)
    close(out.vs, value_ops.td_lambda_return(r, v, st, d, 0.97, lam))
    if lam == 1.0:
        close(out.pg_advantages, value_ops.generalized_advantage_estimation(r, v, st, d, 0.97, 1.0))


def test_batch_major_multidim_and_no_grad():
    r, v, st, d = random_episodes(T=12, B=2, seed=7)
    v.requires_grad_(True)
    tm = value_ops.generalized_advantage_estimation(r, v, st, d, 0.9, 0.7)
    assert tm.shape == (11, 2) and not tm.requires_grad
    bm = value_ops.generalized_advantage_estimation(r.t(), v.t(), st.t(), d.t(), 0.9, 0.7,
                                                    time_major=False)
    close(bm, tm.t())
    ret = value_ops.td_lambda_return(r.t(), v.t(), st.t(), d.t(), 0.9, 0.7, time_major=False)
    close(ret, (tm + v[:-1]).t().detach())
    # multi-dimensional rewards [T, B, k]: each of the k columns is independent
    r3, v3 = torch.stack([r, 2 * r], -1), torch.stack([v, -v], -1).detach()
    out = value_ops.discounted_return(r3, v3, st, d, 0.9)
    close(out[..., 1], value_ops.discounted_return(2 * r, -v.detach(), st, d, 0.9))
