import pytest

from collectors.config import Config, ConfigError


def test_defaults_without_file():
    config = Config.load(None, {})
    assert config.interval == 10 and config.flush == 10 and config.nvml == "auto"
    assert config.queue == "ingest" and config.spool_max_bytes == 268435456
    assert Config.load("/dev/null", {}) == config


def test_file_then_environment(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('cluster = "prod"\ninterval = 1\nflush = 30\nnvml = "none"\n')
    config = Config.load(str(path), {"CLUSTERUI_FLUSH": "60", "CLUSTERUI_NODE": "n1"})
    assert (config.cluster, config.interval, config.flush, config.nvml, config.node) == (
        "prod", 1, 60, "none", "n1")  # fmt: skip


def test_collector_table(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[collector]\nqueue = "ingest2"\n')
    assert Config.load(str(path), {}).queue == "ingest2"


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({"CLUSTERUI_INTERVAL": "abc"}, "interval"),
        ({"CLUSTERUI_INTERVAL": "0"}, "interval"),
        ({"CLUSTERUI_INTERVAL": "3601"}, "interval"),
        ({"CLUSTERUI_INTERVAL": "20", "CLUSTERUI_FLUSH": "10"}, "flush"),
        ({"CLUSTERUI_NVML": "cuda"}, "nvml"),
        ({"CLUSTERUI_SPOOL_MAX_BYTES": "-5"}, "spool_max_bytes"),
        ({"CLUSTERUI_BROKER_URL": "localhost"}, "broker_url"),
        ({"CLUSTERUI_BROKER_URL": "amqp://guest@rabbit//"}, "broker_url"),
        ({"CLUSTERUI_CLUSTER": " "}, "cluster"),
        ({"CLUSTERUI_SIM_SEED": "1.5"}, "sim_seed"),
    ],
)
def test_bad_values_name_the_key(env, key):
    with pytest.raises(ConfigError) as err:
        Config.load(None, env)
    assert str(err.value).startswith(f"{key}:")


def test_bad_file_values(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("interval = true\n")
    with pytest.raises(ConfigError, match="^interval: "):
        Config.load(str(path), {})
    path.write_text("intervall = 5\n")
    with pytest.raises(ConfigError, match="^intervall: unknown"):
        Config.load(str(path), {})
    path.write_text("interval = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        Config.load(str(path), {})
    with pytest.raises(ConfigError, match="cannot read"):
        Config.load(str(tmp_path / "missing.toml"), {})


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        Config.load(None, {}).interval = 5
