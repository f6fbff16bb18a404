"""A binding nothing uses (wrong class name, overridden parameter) is reported after iteration 1."""
from alf import config as alf_config


def test_unused_binding_is_reported(make_trainer, tmp_path, capsys):
    trainer = make_trainer(tmp_path / "run", params=[
        "ActorDistributionRNNNetwork.lstm_hidden_size = 3",  # this experiment builds no RNN
        "TrainerConfig.num_iterations = 1"], quiet=False)
    trainer.run()
    err = capsys.readouterr().err
    assert "gin bindings never used" in err
    assert "ActorDistributionRNNNetwork.lstm_hidden_size" in err
    # the used ones are not listed
    assert "ActorDistributionNetwork.fc_layer_params" not in err.split("never used")[1].splitlines()[0]


def test_no_warning_when_everything_is_used(make_trainer, tmp_path, capsys):
    trainer = make_trainer(tmp_path / "run", params=["TrainerConfig.num_iterations = 1"],
                           quiet=False)
    trainer.run()
    assert alf_config.unused_bindings() == []
    assert "never used" not in capsys.readouterr().err


def test_a_binding_read_inside_a_scope_is_used(clean_gin):
    # issue 39 item 5: `ActorDistributionNetwork.fc_layer_params` read by a network that a
    # scoped `p/pretrained` builds was listed as "never used" (gin logs the call under
    # the scope "p", the binding is unscoped)
    import gin
    from alf.utils.schedules import LinearSchedule
    alf_config.parse_config(conf_params=["LinearSchedule.start = 1.0",
                                         "LinearSchedule.end = 0.0",
                                         "p/LinearSchedule.end = 0.5"])
    with gin.config_scope("p"):
        schedule = LinearSchedule()
    assert schedule(1.0) == 0.5
    # start came from the unscoped binding; the scoped end won over the unscoped one
    assert alf_config.unused_bindings() == ["LinearSchedule.end"]
