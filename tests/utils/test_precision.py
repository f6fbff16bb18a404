"""Mixed precision (alf/utils/precision.py): bf16 autocast inside network calls only, fp32
outputs at the outermost network's boundary, nothing changed where no dtype is active."""
import pytest
import torch

from alf.errors import ConfigError
from alf.networks.actor_distribution_networks import (ActorDistributionNetwork,
                                                      ActorDistributionRNNNetwork)
from alf.networks.encoding_networks import EncodingNetwork
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils import precision

OBS = TensorSpec((8,))
DISCRETE = BoundedTensorSpec((), dtype=torch.int64, minimum=0, maximum=3)
CONTINUOUS = BoundedTensorSpec((2,), minimum=-1.0, maximum=1.0)


def _autocast_recorder(net):
    """Forward hooks on every submodule: (module name, autocast on?, autocast dtype)."""
    seen = []
    for name, m in net.named_modules():
        m.register_forward_hook(lambda mod, i, o, n=name: seen.append(
            (n, torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))))
    return seen


def test_no_active_dtype_is_a_plain_call_bit_for_bit():
    torch.manual_seed(0)
    net = EncodingNetwork(OBS, fc_layer_params=(16, 16))
    x = torch.randn(5, 8)
    ref, _ = torch.nn.Module.__call__(net, x)
    seen = _autocast_recorder(net)
    with precision.autocast_networks(None):
        out, _ = net(x)
    assert torch.equal(out, ref) and out.dtype == torch.float32
    assert seen and not any(on for _, on, _ in seen)


def test_bf16_computes_inside_the_network_and_returns_fp32():
    torch.manual_seed(0)
    net = EncodingNetwork(OBS, fc_layer_params=(16, 16))
    x = torch.randn(64, 8)
    ref, _ = net(x)
    seen = _autocast_recorder(net)
    with precision.autocast_networks(torch.bfloat16):
        out, _ = net(x)
    assert out.dtype == torch.float32
    # every layer ran under a bf16 autocast, nested calls included
    assert seen and all(on and dtype == torch.bfloat16 for _, on, dtype in seen)
    assert not torch.equal(out, ref)  # bf16 matmuls: ~3 significant digits
    torch.testing.assert_close(out, ref, rtol=0.05, atol=0.05)
    assert precision.active_dtype() is None  # the context is left as it was


def test_distributions_are_built_from_fp32_parameters(clean_gin):
    torch.manual_seed(0)
    x = torch.randn(32, 8)
    for spec in (DISCRETE, CONTINUOUS):
        net = ActorDistributionNetwork(OBS, spec, fc_layer_params=(16,))
        with precision.autocast_networks(torch.bfloat16):
            dist, _ = net(x)
            action = dist.sample()
            log_prob = dist.log_prob(action)
        params = [dist.logits] if spec is DISCRETE else [dist.mean, dist.stddev]
        assert all(p.dtype == torch.float32 for p in params), spec
        assert log_prob.dtype == torch.float32 and log_prob.shape == (32,)


def test_a_recurrent_network_returns_an_fp32_state(clean_gin):
    net = ActorDistributionRNNNetwork(OBS, DISCRETE, input_fc_layer_params=(16,),
                                      lstm_hidden_size=8)
    state = net.get_initial_state(4)
    with precision.autocast_networks(torch.bfloat16):
        for _ in range(3):
            dist, state = net(torch.randn(4, 8), state)
    leaves = [s for s in torch.utils._pytree.tree_leaves(state)]
    assert leaves and all(s.dtype == torch.float32 and s.shape == (4, 8) for s in leaves)
    assert dist.logits.dtype == torch.float32


def test_gradients_reach_fp32_master_weights():
    torch.manual_seed(0)
    net = EncodingNetwork(OBS, fc_layer_params=(16,), last_layer_size=1)
    with precision.autocast_networks(torch.bfloat16):
        out, _ = net(torch.randn(16, 8))
    out.pow(2).mean().backward()
    grads = [p.grad for p in net.parameters()]
    assert all(g is not None and g.dtype == torch.float32 and g.abs().sum() > 0 for g in grads)
    assert all(p.dtype == torch.float32 for p in net.parameters())


def test_resolve_names_the_field_and_the_choices():
    assert precision.resolve("train_precision", "fp32", "cpu") is None
    assert precision.resolve("train_precision", "bf16", "cpu") is torch.bfloat16
    with pytest.raises(ConfigError, match=r"TrainerConfig.act_precision='fp16'.*'fp32', 'bf16', "
                                          r"'auto'"):
        precision.resolve("act_precision", "fp16", "cpu")


def test_auto_follows_the_cpus_bf16_units(monkeypatch):
    monkeypatch.setattr(precision, "cpu_bf16_units", lambda: "AMX-BF16")
    assert precision.resolve("train_precision", "auto", "cpu") is torch.bfloat16
    assert precision.describe("auto", "fp32", "cpu") == \
        "training bf16 (autocast, auto; AMX-BF16), acting fp32"
    monkeypatch.setattr(precision, "cpu_bf16_units", lambda: None)
    assert precision.resolve("train_precision", "auto", "cpu") is None
    assert precision.describe("auto", "bf16", "cpu") == (
        "training fp32 (auto: no bf16 units on cpu), "
        "acting bf16 (autocast; no bf16 units: emulated, slower than fp32)")


def test_cpu_bf16_units_reads_the_cpu_flags(monkeypatch, tmp_path):
    import builtins
    real_open = builtins.open
    for flags, expected in (("fpu avx512f avx512_bf16 amx_bf16", "AMX-BF16"),
                            ("fpu avx512f avx512_bf16", "AVX-512 BF16"),
                            ("fpu avx2", None)):
        cpuinfo = tmp_path / "cpuinfo"
        cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        monkeypatch.setattr(builtins, "open", lambda p, *a, **k: real_open(
            cpuinfo if p == "/proc/cpuinfo" else p, *a, **k))
        assert precision.cpu_bf16_units() == expected


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_network_autocasts_on_its_own_device():
    torch.manual_seed(0)
    net = ActorDistributionNetwork(OBS, DISCRETE, fc_layer_params=(32,)).to("cuda")
    seen = []
    for name, m in net.named_modules():
        m.register_forward_hook(lambda mod, i, o, n=name: seen.append(
            (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"))))
    x = torch.randn(64, 8, device="cuda")
    with precision.autocast_networks(torch.bfloat16):
        dist, _ = net(x)
        log_prob = dist.log_prob(dist.sample())
    assert seen and all(on and dtype == torch.bfloat16 for on, dtype in seen)
    assert dist.logits.dtype == torch.float32 and log_prob.dtype == torch.float32
    assert precision.resolve("train_precision", "auto", "cuda") is (
        torch.bfloat16 if torch.cuda.is_bf16_supported() else None)


def test_output_layers_keep_fp32_resolution():
    """A value near 100 in bf16 moves in steps of 0.5: the output layer runs in fp32, so
    256 inputs give (nearly) 256 distinct values, as in fp32."""
    from alf.networks.value_networks import ValueNetwork
    torch.manual_seed(0)
    net = ValueNetwork(OBS, fc_layer_params=(16,))
    with torch.no_grad():
        net._encoder._last_layer.bias.fill_(100.0)
    x = torch.randn(256, 8)
    ref, _ = net(x)
    with precision.autocast_networks(torch.bfloat16):
        out, _ = net(x)
    assert out.dtype == torch.float32
    assert out.unique().numel() > 250 and ref.unique().numel() > 250
    assert out.bfloat16().float().unique().numel() < 20  # what a bf16 head would give
    torch.testing.assert_close(out, ref, rtol=0, atol=0.05)


def test_fp64_outputs_are_left_as_they_are():
    x = torch.ones(2, dtype=torch.float64)
    assert precision.to_fp32((x, torch.ones(2, dtype=torch.bfloat16)))[0] is x


def test_the_log_line_names_where_acting_runs(monkeypatch):
    monkeypatch.setattr(precision, "cpu_bf16_units", lambda: None)
    assert precision.describe("fp32", "auto", "cpu", act_device="cpu") == \
        "training fp32, acting fp32 (auto: no bf16 units on cpu)"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert precision.describe("bf16", "auto", "cuda", act_device="cpu") == (
        "training bf16 (autocast; no bf16 units: emulated, slower than fp32), "
        "acting on cpu fp32 (auto: no bf16 units on cpu)")


def test_kept_weight_casts_act_bit_for_bit_and_cast_once_per_version():
    """keep_weight_casts reuses autocast's bf16 weight copies across network calls: the
    same outputs as casting at every call, bit for bit; drop_weight_casts makes the next
    call see weights changed in place; outside the networks nothing autocasts."""
    torch.manual_seed(0)
    net = ActorDistributionNetwork(OBS, DISCRETE, fc_layer_params=(64, 64))
    xs = [torch.randn(8, 8) for _ in range(3)]
    with torch.no_grad(), precision.autocast_networks(torch.bfloat16):
        fresh = [net(x)[0].logits for x in xs]
        with precision.keep_weight_casts(torch.bfloat16):
            assert not torch.is_autocast_enabled("cpu")  # fp32 outside the networks
            kept = [net(x)[0].logits for x in xs]
            for p in net.parameters():
                p.add_(torch.randn_like(p))  # new weights loaded in place
            stale = net(xs[0])[0].logits
            precision.drop_weight_casts()
            renewed = net(xs[0])[0].logits
        flipped = net(xs[0])[0].logits  # casting at every call, new weights
    for a, b in zip(fresh, kept):
        assert torch.equal(a, b)
    # without the drop the hidden layers still computed with the old weights' copies
    assert not torch.equal(stale, flipped)
    assert torch.equal(renewed, flipped)


def test_kept_weight_casts_do_nothing_in_fp32():
    torch.manual_seed(0)
    net = EncodingNetwork(OBS, fc_layer_params=(16,))
    x = torch.randn(4, 8)
    ref, _ = net(x)
    with precision.keep_weight_casts(None):
        assert torch.autocast_increment_nesting() == 1  # no region was entered
        torch.autocast_decrement_nesting()
        out, _ = net(x)
    assert torch.equal(out, ref)
