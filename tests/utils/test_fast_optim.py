"""FastAdam and clip_grad_norm_: the same numbers as torch's, hooks and checkpoints intact."""
import io

import pytest
import torch

from alf.utils.fast_optim import FastAdam, clip_grad_norm_


def _net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _train(net, opt, steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(5, 3, generator=g)
        for p in net.parameters():
            p.grad = None
        net(x).square().sum().backward()
        opt.step()


def test_fast_adam_matches_torch_fused_adam_bit_for_bit():
    a, b = _net(), _net()
    fast = FastAdam(a.parameters(), lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1)
    ref = torch.optim.Adam(b.parameters(), lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1,
                           fused=True)
    _train(a, fast, 7)
    _train(b, ref, 7)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    sf, sr = fast.state_dict()["state"], ref.state_dict()["state"]
    for i in sr:
        assert sf[i]["step"].shape == () and float(sf[i]["step"]) == 7.0
        assert torch.equal(sf[i]["exp_avg"], sr[i]["exp_avg"])
        assert torch.equal(sf[i]["exp_avg_sq"], sr[i]["exp_avg_sq"])


def test_fast_adam_checkpoint_round_trip_continues_identically():
    a, b = _net(), _net()
    opt_a = FastAdam(a.parameters(), lr=1e-2)
    _train(a, opt_a, 3)
    buf = io.BytesIO()
    torch.save({"net": a.state_dict(), "opt": opt_a.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf)
    b.load_state_dict(saved["net"])
    opt_b = FastAdam(b.parameters(), lr=1e-2)
    opt_b.load_state_dict(saved["opt"])
    _train(a, opt_a, 4, seed=5)
    _train(b, opt_b, 4, seed=5)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    assert all(float(s["step"]) == 7.0 for s in opt_b.state_dict()["state"].values())


def test_fast_adam_runs_step_hooks_once_per_step():
    net = _net()
    opt = FastAdam(net.parameters(), lr=1e-2)
    calls = []
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", args)))
    post = opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", args)))
    _train(net, opt, 2)
    assert calls == [("pre", (opt,)), ("post", (opt,))] * 2
    pre.remove()
    post.remove()
    _train(net, opt, 1)
    assert len(calls) == 4
    assert float(opt.state_dict()["state"][0]["step"]) == 3.0


def test_fast_adam_falls_back_for_amsgrad_and_closures():
    a, b = _net(), _net()
    fast = FastAdam(a.parameters(), lr=1e-2, amsgrad=True)
    ref = torch.optim.Adam(b.parameters(), lr=1e-2, amsgrad=True, fused=True)
    _train(a, fast, 3)
    _train(b, ref, 3)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    x = torch.ones(2, 3)

    def closure():
        for p in a.parameters():
            p.grad = None
        loss = a(x).sum()
        loss.backward()
        return loss

    assert isinstance(fast.step(closure), torch.Tensor)


@pytest.mark.parametrize("scale", [1e-3, 1e3])
def test_clip_grad_norm_matches_torch(scale):
    a, b = _net(), _net()
    x = torch.randn(4, 3)
    for net in (a, b):
        (net(x).sum() * scale).backward()
    total = clip_grad_norm_(list(a.parameters()), 1.0)
    ref = torch.nn.utils.clip_grad_norm_(list(b.parameters()), 1.0)
    assert total.item() == pytest.approx(ref.item(), rel=1e-6)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-6, atol=0)
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in a.parameters()]))
    if scale > 1:
        assert norm.item() == pytest.approx(1.0, rel=1e-5)  # clipped to max_norm
    else:
        assert norm.item() == pytest.approx(total.item(), rel=1e-6)  # left as it was
