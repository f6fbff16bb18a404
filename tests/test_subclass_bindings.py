"""Gin bindings of a configurable subclass that forwards ``**kwargs`` (the
``ClippedDqn`` pattern of docs/writing_an_algorithm.md): a typo in a subclass binding is
one ConfigError at parse time naming the subclass, file, line and the closest name among
its own and its parent's parameters (it used to be ``DqnAlgorithm.__init__() got an
unexpected keyword argument`` when the algorithm was built); a parent binding that the
subclass drops by taking the parameter itself is refused with the line to write (it was
silently ignored); parent bindings of forwarded parameters reach the subclass."""
import torch
import pytest

import alf
from alf import config as alf_config
from alf.algorithms.dqn_algorithm import DqnAlgorithm
from alf.errors import ConfigError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

OBS = TensorSpec((3,))
DISCRETE = BoundedTensorSpec((), torch.int64, 0, 2)


@alf.configurable
class SbClippedDqn(DqnAlgorithm):
    """The docs' pattern: its own parameter, the rest forwarded."""

    def __init__(self, *args, v_max: float = 100.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.v_max = v_max


@alf.configurable
class SbOverridingDqn(DqnAlgorithm):
    """Takes gamma and n_step itself (a different default) and passes them on."""

    def __init__(self, *args, gamma: float = 0.9, n_step: int = 1, **kwargs):
        super().__init__(*args, gamma=gamma, n_step=n_step, **kwargs)


@alf.configurable
class SbNoInitDqn(DqnAlgorithm):
    """Defines no __init__ (only overrides methods)."""


def _parse(tmp_path, body: str):
    conf = tmp_path / "exp.gin"
    conf.write_text("# the experiment\ninclude 'dqn_cart_pole.gin'\n" + body)
    alf_config.parse_config(str(conf))
    return conf


@pytest.mark.parametrize("line, close", [("SbClippedDqn.v_maxx = 5.0", "v_max"),
                                         ("SbClippedDqn.gammaa = 0.9", "gamma")])
def test_typo_in_a_kwargs_subclass_binding(clean_gin, tmp_path, line, close):
    with pytest.raises(ConfigError) as e:
        _parse(tmp_path, line + "\nTrainerConfig.algorithm_ctor = @SbClippedDqn\n")
    msg = str(e.value)
    assert "\n" not in msg
    assert "exp.gin, line 3" in msg
    assert line.split(" =")[0] in msg and "DqnAlgorithm" in msg
    assert f"Did you mean: {close}" in msg


def test_forwarded_value_is_checked_against_the_parents_hint(clean_gin, tmp_path):
    with pytest.raises(ConfigError, match=r"SbClippedDqn.gamma = 1.5 is out of range"):
        _parse(tmp_path, "SbClippedDqn.gamma = 1.5\n")
    with pytest.raises(ConfigError, match=r"SbClippedDqn.n_step = 'x' is a string"):
        _parse(tmp_path, "SbClippedDqn.n_step = 'x'\n")


def test_parent_bindings_reach_a_forwarding_subclass(clean_gin, tmp_path):
    _parse(tmp_path, "TrainerConfig.algorithm_ctor = @SbClippedDqn\nSbClippedDqn.v_max = 5.0\n"
                     "DqnAlgorithm.gamma = 0.95\n")
    alg = SbClippedDqn(OBS, DISCRETE)
    assert (alg._gamma, alg._n_step, alg.v_max) == (0.95, 3, 5.0)  # n_step = 3 from the include
    # the subclass's own binding wins over the parent's
    _parse(tmp_path, "TrainerConfig.algorithm_ctor = @SbClippedDqn\nSbClippedDqn.gamma = 0.5\n")
    assert SbClippedDqn(OBS, DISCRETE)._gamma == 0.5
    _parse(tmp_path, "TrainerConfig.algorithm_ctor = @SbNoInitDqn\n")
    assert SbNoInitDqn(OBS, DISCRETE)._n_step == 3


def test_parent_binding_the_subclass_drops_is_refused(clean_gin, tmp_path):
    with pytest.raises(ConfigError) as e:
        _parse(tmp_path, "TrainerConfig.algorithm_ctor = @SbOverridingDqn\n")
    msg = str(e.value)
    assert "\n" not in msg
    assert "dqn_cart_pole.gin, line" in msg and "DqnAlgorithm.gamma is bound there" in msg
    assert "DqnAlgorithm.n_step at " in msg and "SbOverridingDqn is what runs" in msg
    assert "bind SbOverridingDqn.gamma = 0.99, SbOverridingDqn.n_step = 3" in msg
    # binding the subclass's own parameters settles it (to any value)
    _parse(tmp_path, "TrainerConfig.algorithm_ctor = @SbOverridingDqn\n"
                     "SbOverridingDqn.gamma = 0.9\nSbOverridingDqn.n_step = 3\n")
    alg = SbOverridingDqn(OBS, DISCRETE)
    assert (alg._gamma, alg._n_step) == (0.9, 3)


def test_no_complaint_when_the_parent_is_what_runs(clean_gin, tmp_path):
    _parse(tmp_path, "")  # @DqnAlgorithm runs: its bindings are its own
    _parse(tmp_path, "SbOverridingDqn.gamma = 0.5\n")  # bound but not referenced: not run


USER_MODULE = '''
import alf
from alf.algorithms.dqn_algorithm import DqnAlgorithm


@alf.configurable
class ClippedDqn(DqnAlgorithm):
    def __init__(self, *args, v_max: float = 100.0, **kwargs):
        super().__init__(*args, **kwargs)
        self._v_max = v_max
'''


def test_cli_typo_in_a_user_subclass(alf_cli, tmp_path):
    (tmp_path / "clipped_dqn.py").write_text(USER_MODULE)
    (tmp_path / "my.gin").write_text("import clipped_dqn\ninclude 'dqn_cart_pole.gin'\n"
                                     "ClippedDqn.v_maxx = 5.0\n"
                                     "TrainerConfig.algorithm_ctor = @ClippedDqn\n")
    r = alf_cli.run("alf.bin.train", ["--conf", "my.gin", "--root_dir", "runs/x"], tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert "my.gin, line 3" in lines[0] and "'ClippedDqn'" in lines[0]
    assert "ClippedDqn.v_maxx" in lines[0] and "Did you mean: v_max?" in lines[0]
    assert not (tmp_path / "runs").exists()
