"""``--describe`` and ``--list_configurables`` know the configurables of the user's own
modules that the ``--conf`` file imports (issue 18, item 5: ``--describe MyAlgorithm``
answered "unknown configurable ... Did you mean: ReinforceAlgorithm?" even with
``--conf=my.gin``).

One real command in a subprocess, checked for exit status, output and what it wrote.
"""
import os
import textwrap

MY_ALG = textwrap.dedent('''
    """A user's module next to their gin file."""
    import alf
    from alf.algorithms.ppo_algorithm import PPOAlgorithm


    @alf.configurable
    class MyAlgorithm(PPOAlgorithm):
        """My own PPO variant.

        Args:
            my_knob: how much of my idea to use.
            **kwargs: see :class:`PPOAlgorithm`.
        """

        def __init__(self, *args, my_knob: float = 0.25, **kwargs):
            super().__init__(*args, **kwargs)
            self.my_knob = my_knob
''')


def _files(directory):
    return sorted(n for n in os.listdir(directory) if n != "__pycache__")


def test_describe_and_list_a_configurable_imported_by_the_conf(alf_cli, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_alg.py").write_text(MY_ALG)
    alf_cli.write_gin(project, "import my_alg\ninclude 'ppo_cart_pole.gin'\n"
                      "TrainerConfig.algorithm_ctor = @MyAlgorithm\nMyAlgorithm.my_knob = 0.5\n",
                      "my.gin")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = alf_cli.run("alf.bin.train", ["--conf", str(project / "my.gin"),
                                         "--describe", "MyAlgorithm",
                                         "--describe", "MyAlgorithm.my_knob",
                                         "--list_configurables"], elsewhere)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\nMyAlgorithm  (class my_alg.MyAlgorithm)\n  My own PPO variant." in out, out
    assert "  my_knob = 0.5  (default: 0.25)" in out  # the conf's value, the default
    assert "MyAlgorithm.my_knob = 0.5  (default: 0.25)  how much of my idea to use." in out
    assert "\nmy_alg:\n  MyAlgorithm " in out  # listed under its own module
    assert "unknown configurable" not in proc.stderr
    assert os.listdir(elsewhere) == [] and _files(project) == ["my.gin", "my_alg.py"]
