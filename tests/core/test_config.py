"""Model aliases from triforge.toml, environment overrides, clear errors."""

from __future__ import annotations

import pytest

from triforge.core.config import load_settings, resolve_model
from triforge.core.errors import ConfigError

TOML = """
default_model = "coder"
[models.coder]
model = "Qwen/Qwen2.5-Coder-32B-Instruct"
base_url = "http://127.0.0.1:8000/v1"
api_key_env = "VLLM_KEY"
native_tools = false
price_in_per_mtok = 0.5
"""


def test_alias_from_cwd_file(tmp_path, monkeypatch):
    (tmp_path / "triforge.toml").write_text(TOML)
    monkeypatch.chdir(tmp_path)
    name, cfg = resolve_model(None)
    assert name == "coder" and cfg.model.startswith("Qwen/") and cfg.native_tools is False
    assert cfg.cost_usd(2_000_000, 0) == 1.0


def test_cwd_overrides_user_file_and_env_overrides_both(tmp_path, monkeypatch):
    user = tmp_path / "cfg" / "triforge"
    user.mkdir(parents=True)
    (user / "triforge.toml").write_text(TOML + '\n[models.other]\nmodel = "o"\nbase_url = "http://127.0.0.1:1/v1"\n')
    work = tmp_path / "work"
    work.mkdir()
    (work / "triforge.toml").write_text('[models.coder]\nmodel = "small"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.chdir(work)
    s = load_settings()
    assert s.models["coder"].model == "small" and s.models["coder"].base_url == "http://127.0.0.1:8000/v1"
    monkeypatch.setenv("TRIFORGE_MODEL", "other")
    monkeypatch.setenv("TRIFORGE_BASE_URL", "http://127.0.0.1:9999/v1")
    name, cfg = resolve_model(None)
    assert name == "other" and cfg.base_url == "http://127.0.0.1:9999/v1"


def test_raw_model_name_with_base_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name, cfg = resolve_model("llama3", base_url="http://127.0.0.1:11434/v1", api_key_env="K")
    assert (name, cfg.model, cfg.api_key_env) == ("llama3", "llama3", "K")


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("default_model = [", "not valid TOML"),
        ('[models.x]\nbase_url = "http://h/v1"\n', r"models\.x\.model: Field required"),
        ('[models.x]\nmodel = "m"\ntimeout_s = -1\n', r"models\.x\.timeout_s"),
        ('[models.x]\nmodel = "m"\nwat = 1\n', r"models\.x\.wat: unknown key; known keys: model, base_url"),
        # a misspelt key is named (with the key meant), not what the misspelling left missing
        ('[models.x]\nmodell = "m"\n', r"models\.x\.modell: unknown key \(did you mean 'model'\?\)"),
        ('[models.x]\nmodel = "m"\nmax_concurency = 2\n', r"did you mean 'max_concurrency'"),
        ('defualt_model = "x"\n', r"defualt_model: unknown key \(did you mean 'default_model'\?\)"),
        ('cache = "sometimes"\n', "cache"),
    ],
)
def test_malformed_config_is_one_clear_line(tmp_path, monkeypatch, toml, message):
    (tmp_path / "triforge.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=message) as e:
        load_settings()
    assert "\n" not in str(e.value)


def test_unknown_alias_and_missing_model(tmp_path, monkeypatch):
    (tmp_path / "triforge.toml").write_text(TOML)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"unknown model alias 'gpt' \(known: coder[;)]"):
        resolve_model("gpt")
    (tmp_path / "triforge.toml").write_text("")
    with pytest.raises(ConfigError, match="no model given"):
        resolve_model(None)
